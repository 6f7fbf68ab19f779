"""Why a cycle overran: the emulator's own compute or I/O, a late wake-up, or a host stall (the
machine itself was not running the process).

Evidence, all cheap. The loop thread's own CPU time and context switches over the late stretch
(getrusage(RUSAGE_THREAD), sampled as each wait begins): a thread that computed shows CPU time
beside its wall time; one that slept, waited for a lock or was preempted by another task shows a
context switch; one that was never switched out yet got less than half the wall time as CPU time
was not run by the machine (the hypervisor's steal time and interrupt time are not the thread's
CPU time). A loop that sleeps in its waits (1 kHz) has a context switch in every stretch, so for it
a heartbeat thread adds the evidence: it does nothing but sleep HEARTBEAT_S and note when it woke
(started from the loop thread, so it shares its CPU and scheduling class); a gap of more than GAP_S
between two of its wake-ups means that nothing of the process ran for that long. A loop that
never sleeps (10 kHz: the period is shorter than the pacer's spin) leaves a heartbeat on its CPU no
turn, so none is started there: the loop's own switches tell.

An overrun (the pacer found the previous cycle's deadline passed) is attributed to

* ``host_stall``: the loop thread used less than half of the stretch's wall time as CPU time, and
  it was not switched out in the stretch or a heartbeat gap overlaps it: the machine was stopped
  (a hypervisor that ran other work, SIGSTOP, a suspended VM);
* ``compute`` or ``io``: the previous cycle's work itself took longer than the period, by the
  larger of its two parts;
* ``late_wakeup``: the work fit in the period and the process was running, but the loop woke
  late (another task or an interrupt on its CPU, timer slack, a lock another thread held).
"""
from __future__ import annotations

import resource
import threading
import time

import numpy as np

HEARTBEAT_S = 1e-3
GAP_S = 4e-3            # a heartbeat later than this (sleep + the other threads' turns): nothing ran
GAPS_KEPT = 4096        # the latest gaps kept (start, end); more are counted
CAUSES = ("host_stall", "compute", "io", "late_wakeup")


class Heartbeat:
    """A thread that wakes every HEARTBEAT_S and keeps the gaps longer than GAP_S (monotonic ns)."""

    def __init__(self) -> None:
        self.gaps = np.zeros((GAPS_KEPT, 2), np.int64)
        self.count = 0
        self.max_gap_ns = 0
        self.last_ns = time.monotonic_ns()      # its latest wake-up
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="hil-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _beat(self) -> None:
        gap_ns = round(GAP_S * 1e9)
        self.last_ns = last = time.monotonic_ns()
        while not self._stop.wait(HEARTBEAT_S):
            now = time.monotonic_ns()
            if now - last > gap_ns:
                self.gaps[self.count % GAPS_KEPT] = last, now
                self.count += 1
                self.max_gap_ns = max(self.max_gap_ns, now - last)
            self.last_ns = last = now

    def overlaps(self, start_ns: int, end_ns: int) -> bool:
        """Whether a gap overlaps [start_ns, end_ns]: a kept one, or the one still open at end_ns (after
        a stop both threads wake, and the loop may look before the heartbeat has noted its gap)."""
        kept = self.gaps[:min(self.count, GAPS_KEPT)]
        if np.any((kept[:, 0] < end_ns) & (kept[:, 1] > start_ns)):
            return True
        return start_ns < end_ns and end_ns - self.last_ns > GAP_S * 1e9

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(1.0)


def thread_usage() -> resource.struct_rusage:
    """The calling thread's CPU time and context switches so far (one system call, no conversion)."""
    return resource.getrusage(resource.RUSAGE_THREAD)


def usage_between(before: resource.struct_rusage, after: resource.struct_rusage) -> tuple[int, int]:
    """(CPU time [ns], context switches) of a thread between two thread_usage() samples."""
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return round(cpu_s * 1e9), (after.ru_nvcsw + after.ru_nivcsw) - (before.ru_nvcsw + before.ru_nivcsw)


class OverrunCauses:
    """Counts overruns by cause (CAUSES), from the stretch's times, the loop thread's usage and the heartbeat."""

    def __init__(self, period_s: float, heartbeat: Heartbeat | None):
        self.period_ns = round(period_s * 1e9)
        self.heartbeat = heartbeat
        self.counts = dict.fromkeys(CAUSES, 0)

    def attribute(self, start_ns: int, now_ns: int, cpu_ns: int, compute_ns: int, io_ns: int,
                  switches: int | None = None) -> str:
        """The cause of an overrun found at now_ns over the stretch since start_ns, in which the loop
        thread used cpu_ns of CPU time and was switched out `switches` times (None: not known); the
        previous cycle's work took compute_ns + io_ns of wall time."""
        not_running = cpu_ns < 0.5 * (now_ns - start_ns)
        stalled = switches == 0 or (self.heartbeat is not None and self.heartbeat.overlaps(start_ns, now_ns))
        if not_running and stalled:
            cause = "host_stall"
        elif compute_ns + io_ns > self.period_ns:
            cause = "compute" if compute_ns >= io_ns else "io"
        else:
            cause = "late_wakeup"
        self.counts[cause] += 1
        return cause

    def summary(self) -> dict:
        hb = self.heartbeat
        return {**self.counts, "heartbeat": hb is not None, "heartbeat_gaps": 0 if hb is None else hb.count,
                "max_heartbeat_gap_us": 0.0 if hb is None else hb.max_gap_ns * 1e-3}
