"""Soak: a long real-time closed loop, the memory of both processes over it, and its overruns by cause.

Runs `hil run ella --bus MAP --link pty --spawn-firmware --duration D --json` (real time; extra
`hil run` options after `--`), samples the resident memory (VmRSS) of the emulator and of the
firmware process every `--every` seconds, and prints: memory at the start (the first sample after
the ready line), once settled, at the end and the largest, per process; the run's overruns and their causes
(`overrun_causes`: host stalls, compute, I/O, late wake-ups), wake-up lateness, the firmware's
command age, rows the log writer dropped and watchdog trips. Growth of the memory over a soak is
a leak; the tool reports it, it judges nothing.

    python -m tools.soak [--duration 600] [--bus serial_frame] [--every 1] [--json] [-- HIL RUN OPTIONS]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTLED_S = 5.0           # the loop runs and its memory is locked in by then (or 5 % of a long soak)


def rss_kib(pid: int) -> int | None:
    """The resident set of a process [KiB], None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def sample(pid: int, every_s: float, stop: threading.Event, out: dict) -> None:
    """Append (t, emulator KiB, firmware KiB) every `every_s` until `stop` (the firmware: the child)."""
    t0 = time.monotonic()
    while not stop.wait(every_s):
        kids = children(pid)
        out["samples"].append((time.monotonic() - t0, rss_kib(pid), rss_kib(kids[0]) if kids else None))


def memory(samples: list[tuple], column: int, settled_s: float) -> dict:
    """First, settled (the first sample from `settled_s` on: with mlockall the loop's start-up faults in
    every mapping), last and largest resident set, and the growth from settled to the end (a leak)."""
    values = [(s[0], s[column]) for s in samples if s[column] is not None]
    if not values:
        return {"start_kib": None, "settled_kib": None, "end_kib": None, "max_kib": None, "growth_kib": None}
    settled = next((v for t, v in values if t >= settled_s), values[-1][1])
    return {"start_kib": values[0][1], "settled_kib": settled, "end_kib": values[-1][1],
            "max_kib": max(v for _, v in values), "growth_kib": values[-1][1] - settled}


def soak(duration_s: float, bus: str, every_s: float, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "hil", "run", "ella", "--bus", bus, "--link", "pty", "--spawn-firmware",
           "--duration", f"{duration_s:g}", "--json", *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    got: dict = {"samples": []}
    stop = threading.Event()
    for line in proc.stdout:
        if line.startswith("ready "):
            break
    sampler = threading.Thread(target=sample, args=(proc.pid, every_s, stop, got), daemon=True)
    sampler.start()
    out = proc.stdout.read()
    proc.wait()
    stop.set()
    sampler.join()
    summary = json.loads(out.strip().splitlines()[-1])
    samples = [s for s in got["samples"] if s[2] is not None] or got["samples"]    # while the firmware runs
    settled = max(SETTLED_S, 0.05 * duration_s)
    return {"command": " ".join(cmd), "exit_status": proc.returncode, "cycles": summary["cycles"],
            "failed": summary.get("failed"), "run_failures": summary.get("run_failures"),
            "firmware_cycles": (summary.get("firmware") or {}).get("cycles"),
            "firmware_fault": (summary.get("firmware") or {}).get("fault"),
            "emulator_memory": memory(samples, 1, settled), "firmware_memory": memory(samples, 2, settled),
            "overruns": summary["pacer"]["overruns"], "overrun_causes": summary["overrun_causes"],
            "lateness_us": summary["timing"]["lateness"], "cmd_age_us": summary["firmware_timing"]["cmd_age_us"],
            "log_dropped": summary["log_dropped"], "watchdog_trips": summary["watchdog"]["trips"],
            "realtime": {k: v["active"] for k, v in ((summary["realtime"] or {}).get("features") or {}).items()}}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="python -m tools.soak", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=600.0, help="seconds of real time (default 600)")
    p.add_argument("--bus", default="serial_frame")
    p.add_argument("--every", type=float, default=1.0, help="memory sample interval [s] (default 1)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    r = soak(args.duration, args.bus, args.every, extra)
    if args.json:
        print(json.dumps(r, indent=1))
        return 0
    print(f"{r['command']}\n  exit status {r['exit_status']}, {r['cycles']} cycles (the firmware's "
          f"{r['firmware_cycles']}); failed: {r['failed']}; run failures: {r['run_failures']}; "
          f"the firmware's own fault: {r['firmware_fault']}; "
          f"real-time features: "
          + (", ".join(k for k, on in r["realtime"].items() if on) or "none"))
    for who in ("emulator", "firmware"):
        m = r[f"{who}_memory"]
        print(f"  {who:9s} RSS start {m['start_kib']} KiB, settled {m['settled_kib']} KiB, end {m['end_kib']} KiB "
              f"(growth {m['growth_kib']} KiB), max {m['max_kib']} KiB")
    lat = r["lateness_us"]
    print(f"  overruns {r['overruns']}: {r['overrun_causes']}\n  lateness p50 {lat['p50']:.1f} p99 {lat['p99']:.1f} "
          f"p99.9 {lat['p99.9']:.1f} max {lat['max']:.1f} us; command age {r['cmd_age_us']}\n"
          f"  log rows dropped {r['log_dropped']}, watchdog trips {r['watchdog_trips']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
