"""Pieces for one fixed-period loop thread: real-time setup here, the pacer (hil.runtime.pacer) and the
cycle statistics (hil.runtime.cycle_stats).

The loop itself lives elsewhere and does, once per cycle::

    lateness = pacer.wait()        # sleep, then spin, until the next absolute deadline
    ...                            # I/O and the plant step, timed by the caller
    stats.record(lateness, compute_ns, io_ns, total_ns)

Measured on a 2-core VM (docs/performance.md): SCHED_FIFO + gc frozen/disabled + the hybrid
sleep-then-spin wait hold 1 kHz with p99.9 lateness below 50 us. A pure busy-wait under
SCHED_FIFO is worse than sleeping: RT throttling (`sched_rt_runtime_us`) stops it for about
50 ms per second. Spinning also holds the GIL, so keep other Python threads out of the
process that runs the loop.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import os
import resource
from collections.abc import Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from config_schema import UserError
from hil.runtime.cycle_stats import HIST_EDGES_NS, SERIES, CycleStats
from hil.runtime.pacer import OverrunHalt, Pacer
from hil.runtime.sysguard import SettingGuard

# the pacer and the cycle statistics have modules of their own; their names stay importable from here
__all__ = ["Feature", "RealtimeReport", "RealtimeSetup", "apply_realtime", "system_info",
           "OverrunHalt", "Pacer", "CycleStats", "SERIES", "HIST_EDGES_NS"]

MCL_CURRENT = 1  # <sys/mman.h> values on x86 and arm Linux
MCL_FUTURE = 2
GC_MODES = ("freeze", "disable", "keep")
# CPUs that unbound kernel workqueues may run on (hex mask). Their workers deliver pty and tty
# input (tty_flip_buffer_push queues on system_unbound_wq) at ordinary priority; on the loop's
# CPU the loop preempts a worker that holds the tty's locks, then blocks on those locks in
# read()/FIONREAD while the CFS scheduler runs the firmware before the worker.
WORKQUEUE_CPUMASK = "/sys/devices/virtual/workqueue/cpumask"
# RT throttling: SCHED_FIFO tasks may run sched_rt_runtime_us of every sched_rt_period_us (950000 of
# 1000000 by default), then the kernel stops them for the rest. A loop that never sleeps (10 kHz: the
# period is shorter than the pacer's spin) is stopped 50 ms every second: 500 periods without a sensor
# frame. -1 lifts the limit (RealtimeSetup's lift_rt_throttling).
RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"


# --------------------------------------------------------------------------- real-time setup

@dataclass(frozen=True)
class Feature:
    """One real-time feature: whether it is active, and what was done or why it failed."""
    name: str
    active: bool
    detail: str


@dataclass
class RealtimeReport:
    """Outcome of RealtimeSetup.apply(): the features plus scheduler-relevant system facts."""
    features: list[Feature]
    system: dict[str, Any]
    setup: RealtimeSetup | None = field(default=None, repr=False, compare=False)

    def __getitem__(self, name: str) -> Feature:
        return next(f for f in self.features if f.name == name)

    def restore(self) -> None:
        """Undo the setup that produced this report."""
        if self.setup is not None:
            self.setup.restore()

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for a log header."""
        return {"features": {f.name: {"active": f.active, "detail": f.detail}
                             for f in self.features},
                "system": dict(self.system)}

    def format(self) -> str:
        """Start-up block, one line per feature and per system fact."""
        lines = ["real-time setup:"]
        lines += [f"  {f.name:<11} {'on ' if f.active else 'off'}  {f.detail}"
                  for f in self.features]
        lines.append(f"  rt throttle {_throttle_text(self.system)}")
        lines.append(f"  clocksource {self.system['clocksource']}, kernel "
                     f"{self.system['kernel']}, {self.system['cpus']} CPUs, "
                     f"euid {self.system['euid']}")
        return "\n".join(lines)

    __str__ = format


def _throttle_text(system: dict[str, Any]) -> str:
    runtime, period = system["sched_rt_runtime_us"], system["sched_rt_period_us"]
    if runtime is None or period is None:
        return "unknown"
    if runtime < 0:
        return "off (sched_rt_runtime_us=-1)"
    return (f"{runtime} us per {period} us ({100 * runtime / period:.0f} % for RT tasks; "
            "a pure spin loop gets throttled)")


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _read_int(path: str) -> int | None:
    text = _read(path)
    return int(text) if text is not None else None


def system_info() -> dict[str, Any]:
    """RT throttling, clocksource, kernel, CPU count and effective uid."""
    return {
        "sched_rt_runtime_us": _read_int("/proc/sys/kernel/sched_rt_runtime_us"),
        "sched_rt_period_us": _read_int("/proc/sys/kernel/sched_rt_period_us"),
        "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "kernel": os.uname().release,
        "cpus": os.cpu_count(),
        "euid": os.geteuid(),
    }


def _attempt(name: str, action: Callable[[], str]) -> Feature:
    """Run one feature's action; a refusal becomes an inactive Feature, never an exception."""
    try:
        return Feature(name, True, action())
    except Exception as exc:  # noqa: BLE001 - every failure is reported, none is fatal
        return Feature(name, False, f"{type(exc).__name__}: {exc}")


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


class RealtimeSetup:
    """Real-time settings for the loop thread, each tried independently.

    The scheduler and the affinity apply to the *calling thread* (pid 0 on Linux), so call
    apply() and restore() from the loop thread. Memory locking and gc are process-wide.
    gc_mode: "freeze" (collect, freeze, disable), "disable" (collect, disable) or "keep".
    `priority=None`, `cpu=None`, `lock_memory=False` or `gc_mode="keep"` skip that feature.
    `move_kworkers` (with a pinned `cpu`): unbound kernel workqueue workers run only on the other
    CPUs during the run (system-wide, root only; restored by restore(), and by a guardian process,
    hil.runtime.sysguard, if this process dies first, SIGKILL included). `workqueue_mask`: the file
    of that setting (default WORKQUEUE_CPUMASK). `lift_rt_throttling` (opt-in: `hil run
    --lift-rt-throttling`; with a pinned `cpu` and another CPU left to the system): RT throttling off
    during the run (`rt_runtime`, default RT_RUNTIME, set to -1; system-wide, root only; restored and
    guarded the same way). It spares a loop that never sleeps the 50 ms stop every second, but the
    pinned CPU's own kernel threads (softirqs, per-CPU work) then wait until the run ends.
    """

    def __init__(self, priority: int | None = 80, cpu: int | Iterable[int] | None = None,
                 lock_memory: bool = True, gc_mode: str = "freeze", move_kworkers: bool = True,
                 workqueue_mask: str | None = None, lift_rt_throttling: bool = False,
                 rt_runtime: str | None = None) -> None:
        if gc_mode not in GC_MODES:
            raise UserError(f"gc_mode must be one of {GC_MODES}, not {gc_mode!r}")
        self.priority = priority
        self.cpus = None if cpu is None else ({cpu} if isinstance(cpu, int) else set(cpu))
        self.lock_memory = lock_memory
        self.gc_mode = gc_mode
        self.move_kworkers = move_kworkers
        self.workqueue_mask = workqueue_mask or WORKQUEUE_CPUMASK
        self.lift_rt_throttling = lift_rt_throttling
        self.rt_runtime = rt_runtime or RT_RUNTIME
        self._changed: dict[str, tuple[str, SettingGuard]] = {}    # system setting -> (old value, its guardian)
        self._saved_sched: tuple[int, int] | None = None
        self._saved_affinity: set[int] | None = None
        self._locked = False
        self._saved_gc: tuple[bool, bool] | None = None  # (was enabled, froze)

    def apply(self) -> RealtimeReport:
        """Try every requested feature; never raises for a refused one."""
        features = [
            self._maybe("sched_fifo", self.priority is not None, self._set_fifo),
            self._maybe("affinity", self.cpus is not None, self._set_affinity),
            self._maybe("mlockall", self.lock_memory, self._lock_memory),
            self._maybe("gc", self.gc_mode != "keep", self._set_gc),
            self._maybe("kworkers", self.move_kworkers and self.cpus is not None, self._move_kworkers),
            self._maybe("rt_throttling_lifted", self.lift_rt_throttling and self.cpus is not None,
                        self._lift_throttling),
        ]
        return RealtimeReport(features, system_info(), self)

    @staticmethod
    def _maybe(name: str, requested: bool, action: Callable[[], str]) -> Feature:
        return _attempt(name, action) if requested else Feature(name, False, "not requested")

    def _set_fifo(self) -> str:
        saved = (os.sched_getscheduler(0), os.sched_getparam(0).sched_priority)
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))
        self._saved_sched = saved
        return f"SCHED_FIFO priority {self.priority}"

    def _set_affinity(self) -> str:
        saved = os.sched_getaffinity(0)
        os.sched_setaffinity(0, self.cpus)
        self._saved_affinity = saved
        return f"CPUs {sorted(self.cpus)}"

    def _lock_memory(self) -> str:
        if _libc().mlockall(MCL_CURRENT | MCL_FUTURE) != 0:
            err = ctypes.get_errno()
            soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
            raise OSError(err, f"{os.strerror(err)} (RLIMIT_MEMLOCK soft limit {soft} B; "
                               "needs CAP_IPC_LOCK or a larger ulimit -l)")
        self._locked = True
        return "MCL_CURRENT|MCL_FUTURE"

    def _set_gc(self) -> str:
        self._saved_gc = (gc.isenabled(), self.gc_mode == "freeze")
        collected = gc.collect()
        if self.gc_mode == "freeze":
            gc.freeze()
        gc.disable()
        return f"collected {collected}, frozen {gc.get_freeze_count()} objects, disabled"

    def _other_cpus(self) -> set[int]:
        """The CPUs besides the loop's pinned ones (RuntimeError when none is left)."""
        others = set(range(os.cpu_count() or 1)) - self.cpus
        if not others:
            raise RuntimeError("no CPU left besides the loop's")
        return others

    def _change_setting(self, path: str, value: str) -> str | None:
        """Write `value` to the system-wide setting `path`, guarded by a guardian process until restore()
        (hil.runtime.sysguard); returns the old value, None when it already held `value`."""
        saved = _read(path)
        if saved is None:
            raise OSError(f"{path} not readable")
        if saved == value:
            return None
        guard = SettingGuard(path, saved)
        try:
            _write(path, value)
        except OSError:
            guard.release()
            raise
        self._changed[path] = (saved, guard)
        return saved

    def _move_kworkers(self) -> str:
        others = self._other_cpus()
        saved = self._change_setting(self.workqueue_mask, format(sum(1 << c for c in others), "x"))
        if saved is None:
            return f"unbound workqueues already on CPUs {sorted(others)}"
        return (f"unbound workqueues on CPUs {sorted(others)} (was mask {saved}; guardian pid "
                f"{self._changed[self.workqueue_mask][1].pid})")

    def _lift_throttling(self) -> str:
        self._other_cpus()
        saved = self._change_setting(self.rt_runtime, "-1")
        if saved is None:
            return "already lifted (sched_rt_runtime_us -1)"
        return f"lifted: sched_rt_runtime_us -1 (was {saved}; guardian pid {self._changed[self.rt_runtime][1].pid})"

    def place_process(self, pid: int, name: str) -> Feature:
        """Keep a helper process (the log writer) off the loop's pinned CPU, where the SCHED_FIFO loop
        would leave it no turn; it stays in the normal class. Call after apply(); never raises."""
        if self.cpus is None:
            return Feature(name, False, "not requested (no pinned CPU)")
        return _attempt(name, lambda: self._place_process(pid))

    def _place_process(self, pid: int) -> str:
        others = self._other_cpus()
        os.sched_setaffinity(pid, others)
        return f"pid {pid} on CPUs {sorted(others)}"

    def restore(self) -> None:
        """Undo what apply() changed (scheduler, affinity, memory lock, gc, kworkers, RT throttling);
        never raises."""
        for path, (saved, guard) in reversed(self._changed.items()):
            with suppress(OSError):
                _write(path, saved)
                guard.release()             # restored: the guardian exits without writing
        self._changed.clear()
        if self._saved_sched is not None:
            policy, priority = self._saved_sched
            with suppress(OSError):
                os.sched_setscheduler(0, policy, os.sched_param(priority))
            self._saved_sched = None
        if self._saved_affinity is not None:
            with suppress(OSError):
                os.sched_setaffinity(0, self._saved_affinity)
            self._saved_affinity = None
        if self._locked:
            _libc().munlockall()
            self._locked = False
        if self._saved_gc is not None:
            was_enabled, froze = self._saved_gc
            if froze:
                gc.unfreeze()
            if was_enabled:
                gc.enable()
            self._saved_gc = None

    def __enter__(self) -> RealtimeReport:
        return self.apply()

    def __exit__(self, *exc: object) -> None:
        self.restore()


def apply_realtime(priority: int | None = 80, cpu: int | Iterable[int] | None = None,
                   lock_memory: bool = True, gc_mode: str = "freeze", move_kworkers: bool = True) -> RealtimeReport:
    """RealtimeSetup(...).apply(); undo with report.restore()."""
    return RealtimeSetup(priority, cpu, lock_memory, gc_mode, move_kworkers).apply()
