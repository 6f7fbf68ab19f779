"""Why did the loop miss a deadline? A kernel trace of the loop's CPU during a closed-loop run.

Traces scheduler and interrupt events of one CPU (ftrace: sched_switch, sched_wakeup,
irq_handler_entry, softirq_entry, and the local timer where the kernel has it) while
`hil run` drives ELLA over a serial pty with the reference firmware (both pinned to that CPU,
SCHED_FIFO), or while a bare pacer runs alone on it (--bare). Then it lists:

* gaps: stretches with no event at all on the CPU, not even a timer interrupt. A healthy kernel
  takes the tick or the loop's hrtimer well within a millisecond, so a gap of several ms means the
  virtual CPU itself was not running (the hypervisor ran something else);
* waits: the loop thread runnable (woken or preempted) but not running for longer than --gap-ms;
* the run's overruns and worst wake-up lateness.

Needs root and tracefs (mounted here if it is not; the trace settings are restored).

    python -m tools.trace_stalls [--duration 40] [--cpu 0] [--bare] [--gap-ms 1.5] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACEFS = Path("/sys/kernel/tracing")
EVENTS = ("sched:sched_switch", "sched:sched_wakeup", "irq:irq_handler_entry", "irq:softirq_entry",
          "irq_vectors:local_timer_entry")
SETTINGS = ("tracing_on", "tracing_cpumask", "buffer_size_kb", "set_event")
EDGE_S = (2.0, 1.0)         # start-up and shutdown left out of the analysis [s]
SILENT_MS = 2.0             # the loop sleeps and wakes once per 1 ms period: two periods without any event on
                            # its CPU (not even its timer) mean the CPU itself was not running

_EVENT = re.compile(r"\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[\d+\]\s+\S+\s+(?P<t>\d+\.\d+): (?P<name>\w+): ?(?P<rest>.*)")
_SWITCH = re.compile(r"prev_comm=.* prev_pid=(?P<prev>\d+) .*prev_state=(?P<state>\S+) ==> next_comm=.* "
                     r"next_pid=(?P<next>\d+)")
_WAKEUP = re.compile(r"pid=(?P<pid>\d+)")

BARE_PACER = r"""
import json, sys
from hil.runtime.pacer import Pacer
from hil.runtime.realtime import RealtimeSetup
setup = RealtimeSetup(80, int(sys.argv[1]))
setup.apply()
pacer, late = Pacer(1e-3), []
try:
    for _ in range(int(float(sys.argv[2]) * 1000)):
        late.append(pacer.wait())
finally:
    setup.restore()
print(json.dumps({"pacer": pacer.counters(), "max_lateness_us": max(late) / 1e3}))
"""


# ----------------------------------------------------------------------------- tracefs
class Tracer:
    """Event tracing of one CPU; restores every setting it changed, and unmounts what it mounted."""

    def __init__(self, cpu: int):
        self.cpu = cpu
        self.mounted = False
        self.saved: dict[str, str] = {}

    def __enter__(self) -> Tracer:
        if not (TRACEFS / "trace").exists():
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], check=True)
            self.mounted = True
        self.saved = {name: (TRACEFS / name).read_text() for name in SETTINGS}
        available = set((TRACEFS / "available_events").read_text().split())
        self._write("tracing_on", "0")
        self._write("trace", "")
        self._write("tracing_cpumask", format(1 << self.cpu, "x"))
        self._write("buffer_size_kb", "32768")
        self._write("set_event", " ".join(e for e in EVENTS if e in available))
        self._write("tracing_on", "1")
        return self

    def stop(self) -> str:
        self._write("tracing_on", "0")
        return (TRACEFS / "trace").read_text()

    def __exit__(self, *exc: object) -> None:
        self._write("tracing_on", "0")
        self._write("trace", "")
        saved = {name: text.split() for name, text in self.saved.items()}
        self._write("set_event", " ".join(saved["set_event"]))
        self._write("tracing_cpumask", saved["tracing_cpumask"][0])
        self._write("buffer_size_kb", saved["buffer_size_kb"][0])
        self._write("tracing_on", saved["tracing_on"][0])
        if self.mounted:
            subprocess.run(["umount", str(TRACEFS)], check=False)

    @staticmethod
    def _write(name: str, text: str) -> None:
        (TRACEFS / name).write_text(text)


# ----------------------------------------------------------------------------- analysis
def parse(text: str) -> list[tuple[float, str, str, str]]:
    """(time [s], event name, "task-pid", details) of every event line."""
    out = []
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _EVENT.match(line)
        if m:
            out.append((float(m["t"]), m["name"], f"{m['task']}-{m['pid']}", m["rest"]))
    return out


def loop_pid(events: list, priority_text: str = "prev_prio=19") -> str | None:
    """The pid of the SCHED_FIFO 80 thread (kernel priority 99 - 80 = 19) that switched most often."""
    counts: dict[str, int] = {}
    for _, name, _, rest in events:
        if name == "sched_switch" and priority_text in rest:
            m = _SWITCH.search(rest)
            if m:
                counts[m["prev"]] = counts.get(m["prev"], 0) + 1
    return max(counts, key=counts.get) if counts else None


def analyse(events: list, gap_s: float) -> dict:
    """Event-free gaps on the CPU, and waits of the loop thread while runnable, longer than gap_s,
    away from the start-up and shutdown edges."""
    if not events:
        return {"events": 0, "gaps": [], "waits": []}
    t0, t1 = events[0][0] + EDGE_S[0], events[-1][0] - EDGE_S[1]
    pid = loop_pid(events)
    gaps, waits, runnable_since = [], [], None
    for (ta, *_), (tb, name, task, rest) in zip(events, events[1:]):
        if t0 < tb < t1 and tb - ta > gap_s:
            gaps.append({"at_s": round(ta - events[0][0], 6), "ms": round((tb - ta) * 1e3, 3),
                         "then": f"{task} {name} {rest}"[:120]})
        if pid is None:
            continue
        if name == "sched_wakeup" and (m := _WAKEUP.search(rest)) and m["pid"] == pid:
            runnable_since = tb
        elif name == "sched_switch" and (m := _SWITCH.search(rest)):
            if m["next"] == pid:
                if runnable_since is not None and t0 < tb < t1 and tb - runnable_since > gap_s:
                    waits.append({"at_s": round(runnable_since - events[0][0], 6),
                                  "ms": round((tb - runnable_since) * 1e3, 3)})
                runnable_since = None
            elif m["prev"] == pid and m["state"].startswith("R"):
                runnable_since = tb
    return {"events": len(events), "loop_pid": pid, "gaps": gaps, "waits": waits}


# ----------------------------------------------------------------------------- runs
def run_emulator(duration: float, cpu: int) -> dict:
    cmd = [sys.executable, "-m", "hil", "run", "configs/ella.toml", "--bus", "configs/bus/serial_frame.toml",
           "--link", "pty", "--spawn-firmware", "--duration", str(duration), "--cpu", str(cpu), "--json"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=duration * 3 + 120)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]}
    s = json.loads(out.stdout.strip().splitlines()[-1])
    return {"pacer": s["pacer"], **{f"max_{k}_us": s["timing"][k]["max"] for k in ("lateness", "compute", "io", "total")}}


def run_bare(duration: float, cpu: int) -> dict:
    out = subprocess.run([sys.executable, "-c", BARE_PACER, str(cpu), str(duration)], cwd=ROOT, capture_output=True,
                         text=True, timeout=duration * 3 + 60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.trace_stalls", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=40.0, help="seconds of run (default 40)")
    p.add_argument("--cpu", type=int, default=0, help="the loop's CPU, traced (default 0)")
    p.add_argument("--bare", action="store_true", help="a bare pacer alone on the CPU instead of the closed loop")
    p.add_argument("--gap-ms", type=float, default=1.5, help="report gaps and waits longer than this (default 1.5)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        print("tracing needs root", file=sys.stderr)
        return 2
    with Tracer(args.cpu) as tracer:
        run = (run_bare if args.bare else run_emulator)(args.duration, args.cpu)
        text = tracer.stop()
    with tempfile.NamedTemporaryFile("w", suffix=".trace", delete=False) as f:
        f.write(text)
    report = {"run": run, "trace": f.name, **analyse(parse(text), args.gap_ms * 1e-3)}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{'bare pacer' if args.bare else 'closed loop over a pty'} on CPU {args.cpu}, {args.duration:g} s: {run}")
    print(f"trace: {report['events']} events on CPU {args.cpu} ({f.name}); loop thread pid {report.get('loop_pid')}")
    print(f"gaps with no event at all on the CPU > {args.gap_ms} ms: {len(report['gaps'])}")
    for g in report["gaps"]:
        print(f"  at {g['at_s']:10.6f} s  {g['ms']:7.3f} ms, then {g['then']}")
    print(f"waits of the runnable loop thread > {args.gap_ms} ms: {len(report['waits'])}")
    for w in report["waits"]:
        print(f"  at {w['at_s']:10.6f} s  {w['ms']:7.3f} ms")
    silent = [g for g in report["gaps"] if g["ms"] > SILENT_MS]
    if silent:
        print(f"{len(silent)} stretches of more than two 1 ms periods without any event on the CPU, not even the "
              "loop's timer: the virtual CPU was not running")
    return 0


if __name__ == "__main__":
    sys.exit(main())
