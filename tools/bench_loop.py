"""Closed-loop benchmark: the emulator and the reference firmware in two processes at 1 kHz.

For each link and each real-time setting it runs `hil run ... --spawn-firmware --json`
and prints, side by side: wake-up lateness, compute, I/O and total cycle time
(p50/p99/p99.9/max), overruns, and the command-to-sensor latency seen by the firmware
(its command sent -> the next sensor frame, computed with that command, received). Both processes are pinned to the
same CPU when --cpu is given (crossing CPUs adds about 20 us each way on this machine).

    python -m tools.bench_loop [--duration 60] [--links pty,udp,slcan] [--cpu 0] [--json]
    hil bench loop ...   |   hil latency ...
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINKS = {
    "pty": ("configs/bus/serial_frame.toml", ["--link", "pty"]),
    "udp": ("configs/bus/compact_fd.toml", ["--link", "canfd:udp_loopback:{channel}"]),
    "slcan": ("configs/bus/compact_classic.toml", ["--link", "slcan-pty"]),
}


def run_once(link: str, duration: float, realtime: bool, cpu: int | None) -> dict:
    bus, link_args = LINKS[link]
    link_args = [a.format(channel=f"bench{os.getpid()}") for a in link_args]
    cmd = [sys.executable, "-m", "hil", "run", "configs/ella.toml", "--bus", bus, *link_args, "--spawn-firmware",
           "--duration", str(duration), "--json"]
    if not realtime:
        cmd.append("--no-realtime")
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=duration * 3 + 120)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def host() -> dict:
    def read(path: str) -> str:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return "?"
    cpu = next((l.split(":", 1)[1].strip() for l in read("/proc/cpuinfo").splitlines() if l.startswith("model name")),
               platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "rt_runtime_us": read("/proc/sys/kernel/sched_rt_runtime_us"),
            "clocksource": read("/sys/devices/system/clocksource/clocksource0/current_clocksource")}


def row(name: str, s: dict) -> str:
    if "error" in s:
        return f"{name:28s} failed: {s['error']}"
    t, lat = s["timing"], (s.get("firmware") or {}).get("command_to_sensor_us", {})
    rt = s.get("realtime") or {}
    feats = "+".join(n for n, f in rt.get("features", {}).items() if f["active"]) or "none"
    return (f"{name:28s} {feats:28s} late p99 {t['lateness']['p99']:7.1f} p99.9 {t['lateness']['p99.9']:7.1f} "
            f"max {t['lateness']['max']:8.1f} | compute p50 {t['compute']['p50']:6.1f} p99 {t['compute']['p99']:6.1f} "
            f"| total p99.9 {t['total']['p99.9']:7.1f} | overruns {s['pacer']['overruns']:4d} "
            f"| cmd->sensor p50 {lat.get('p50', float('nan')):7.1f} p99 {lat.get('p99', float('nan')):7.1f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hil bench loop", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of closed loop per run (default 60)")
    p.add_argument("--links", default="pty", help=f"comma list of {', '.join(LINKS)} (default pty)")
    p.add_argument("--cpu", type=int, default=0, help="pin both processes to this CPU (default 0; -1: no pinning)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    cpu = None if args.cpu < 0 else args.cpu
    report = {"host": host(), "duration_s": args.duration, "cpu": cpu, "runs": {}}
    for link in args.links.split(","):
        for realtime in (True, False):
            name = f"{link} {'realtime' if realtime else 'no-rt'}"
            report["runs"][name] = run_once(link, args.duration, realtime, cpu)
    if args.json:
        print(json.dumps(report))
        return 0
    h = report["host"]
    print(f"host: {h['cpu']}, {h['cores']} cores, kernel {h['kernel']}, rt_runtime_us {h['rt_runtime_us']}, "
          f"clocksource {h['clocksource']}; both processes on CPU {cpu}; {args.duration:g} s per run; times in us")
    for name, s in report["runs"].items():
        print(row(name, s))
    return 0


if __name__ == "__main__":
    sys.exit(main())
