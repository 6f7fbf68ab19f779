"""Per-cycle cost of the emulator's loop in two or more checkouts, side by side (regressions
between versions): for each checkout, in its own process and in turn (--rounds), ELLA with the
checkout's own preset and `serial_frame` map behind an in-memory link in afap mode, a firmware
answering the holding torque between cycles, `Emulator.step_once` timed by its own clock.

With --kernel, the rows of `hil bench kernel` instead (ELLA forward dynamics and 1 ms step in numba
and from Python (the step "step" of the checkout's bench_ella, "plan step" its integrator plan's where that is
not RK4 with one substep), the rigid chains against pin.aba, `hil simulate` of ELLA for 10 s from the shell):
each checkout's own tools.bench_kernel measures its own kernels, all with one timer defined here
(CPU time, median of --repeats), so the checkouts are compared like for like, in turn.

    python -m tools.bench_checkouts PATH_A PATH_B [--cycles 20000] [--rounds 2] [--json]
    python -m tools.bench_checkouts PATH_A PATH_B --kernel [--rounds 3] [--repeats 15] [--json]
    (e.g. PATH_A a `git worktree add /tmp/prev REV` of an earlier version, PATH_B this checkout)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

WARMUP_CYCLES = 1000

# Runs inside the checkout's own interpreter path: only APIs every version of the emulator has, found
# in the flat hil/ of early versions or in its layer folders.
_CHILD = r"""
import importlib, json, os, sys
from collections import deque
import numpy as np

def module(*names):
    # the first of names this checkout's folders hold (an installed copy of another version must not answer)
    for name in names:
        path = name.replace(".", "/")
        if os.path.isfile(path + ".py") or os.path.isfile(path + "/__init__.py"):
            return importlib.import_module(name)
    raise ModuleNotFoundError(names[-1])

LinkCounters = module("firmware_bridge.links.base", "firmware_bridge.link").LinkCounters
BusMap = module("firmware_bridge.wire.messages", "firmware_bridge.messages").BusMap
signals = module("firmware_bridge.wire.signals", "firmware_bridge.signals")
CommandInput, SensorOutput = signals.CommandInput, signals.SensorOutput
SensorInput = module("firmware_bridge.firmware.endpoint", "firmware_bridge.wire.signals",
                     "firmware_bridge.signals").SensorInput

load_model = module("hil.config", "hil.model.config").load_model
Plant = module("hil.plant", "hil.dynamics.plant").Plant
SERIES = module("hil.realtime", "hil.runtime.realtime").SERIES
loop = module("hil.runtime.loop", "hil.runtime")
Emulator, RuntimeOptions = loop.Emulator, loop.RuntimeOptions

class End:
    def __init__(self):
        self.name, self.counters, self.inbox, self.peer = "memory", LinkCounters(), deque(), None
    def send(self, frame):
        self.peer.inbox.append(frame)
        return True
    def recv(self):
        return self.inbox.popleft() if self.inbox else None
    def close(self):
        pass

warmup, cycles = int(sys.argv[1]), int(sys.argv[2])
bus = BusMap.load("configs/bus/serial_frame.toml")
plant = Plant(load_model("configs/ella.toml"))
plant.equilibrium_eta()
names = plant.layout.joint_names
here, there = End(), End()
here.peer, there.peer = there, here
emu = Emulator(plant, here, CommandInput(bus, names), SensorOutput(bus, names),
               RuntimeOptions(mode="afap", realtime=False, stats_capacity=warmup + cycles))
codec, sensors = bus.codec("cmd_torque"), SensorInput(bus, names)
hold, counter = [*np.round(emu.hold_tau / 0.02) * 0.02, 0], 0
for _ in range(warmup + cycles):
    while (frame := there.recv()) is not None:
        sensors.feed(frame)
    there.send(codec.encode(hold, counter=counter))
    counter = codec.next_counter(counter)
    emu.step_once()
data = dict(zip(SERIES, emu.stats.retained()[:, warmup:] / 1e3))
print(json.dumps({s: {"p50": float(np.percentile(data[s], 50)), "p99": float(np.percentile(data[s], 99))}
                  for s in ("compute", "total")}))
"""


# The kernel rows: the checkout's tools.bench_kernel (bench_ella, bench_pinocchio) run with this timer.
_KERNEL_CHILD = r"""
import gc, json, statistics, sys, time
from tools import bench_kernel as b

class Timer:
    def __init__(self, repeats, target_s):
        self.repeats, self.target_ns = repeats, target_s * 1e9
    def __call__(self, run, reset=None, max_n=10**7):
        n = 1
        while True:
            if reset: reset()
            t0 = time.thread_time_ns(); run(n); dt = time.thread_time_ns() - t0
            if dt >= 0.1 * self.target_ns or n >= max_n: break
            n = min(max_n, n * 4)
        n = int(min(max_n, max(1, n * self.target_ns / max(dt, 1))))
        per_call, ok = [], True
        gc.disable()
        for _ in range(self.repeats):
            if reset: reset()
            t0 = time.thread_time_ns(); ok &= bool(run(n)); per_call.append((time.thread_time_ns() - t0) / n)
        gc.enable()
        return {"us": statistics.median(per_call) / 1e3, "min_us": min(per_call) / 1e3,
                "max_us": max(per_call) / 1e3, "calls": n, "repeats": self.repeats, "ok": ok}

timer = Timer(int(sys.argv[1]), 0.01)
e = b.bench_ella(timer, b.DEFAULT_CONFIG)
p = b.bench_pinocchio(timer, (3, 7, 30))
rows = {"fd kernel": e["timings"]["aba_kernel"], "fd Python": e["timings"]["aba_python"],
        "step kernel": e["timings"]["step_kernel"], "step Python": e["timings"]["step_python"]}
for key, row in (("plan_step_kernel", "plan step kernel"), ("plan_step_python", "plan step Python")):
    if key in e["timings"]:
        rows[row] = e["timings"][key]
for r in p.get("chains", []):
    rows[f"chain {r['joints']} kernel / pin.aba"] = {"us": r["ours_kernel_us"] / r["pinocchio_us"]}
    rows[f"chain {r['joints']} Python / pin.aba"] = {"us": r["ours_python_us"] / r["pinocchio_us"]}
    rows[f"chain {r['joints']} pin.aba us"] = {"us": r["pinocchio_us"]}
print(json.dumps(rows))
"""


def measure_kernel(checkout: Path, repeats: int) -> dict:
    """The kernel rows of one checkout (median per-call us; ratios for the Pinocchio rows), and
    `hil simulate` of its ELLA preset for 10 s: wall and CPU time of the child, in s."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-c", _KERNEL_CHILD, str(repeats)], cwd=checkout, env=env,
                         capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]}
    rows = {name: r["us"] for name, r in json.loads(out.stdout.strip().splitlines()[-1]).items()}
    cmd = [sys.executable, "-m", "hil", "simulate", "configs/ella.toml", "--duration", "10"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    sim = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, timeout=600)
    rows["simulate 10 s wall s"] = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rows["simulate 10 s CPU s"] = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if sim.returncode != 0:
        return {"error": (sim.stderr.strip().splitlines() or [f"exit {sim.returncode}"])[-1]}
    return rows


def kernel_table(runs: list[tuple[str, dict]]) -> list[str]:
    """Per row and checkout: the median over rounds [fastest - slowest]."""
    names = list(dict.fromkeys(name for name, _ in runs))
    by = {name: [r for n, r in runs if n == name and "error" not in r] for name in names}
    rows = list(dict.fromkeys(key for rs in by.values() for r in rs for key in r))
    lines = [f"  {'':34}" + "".join(f"{Path(n).name or n:>26}" for n in names)]
    for row in rows:
        cells = []
        for n in names:
            v = [r[row] for r in by[n] if row in r]
            cells.append(f"{statistics.median(v):.3g} [{min(v):.3g}-{max(v):.3g}]" if v else "-")
        lines.append(f"  {row:34}" + "".join(f"{c:>26}" for c in cells))
    errors = [f"  {n}: failed: {r['error']}" for n, r in runs if "error" in r]
    return lines + errors


def measure(checkout: Path, cycles: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(WARMUP_CYCLES), str(cycles)], cwd=checkout, env=env,
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench_checkouts", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkouts", nargs="+", type=Path, help="checkout folders, the first one the reference")
    p.add_argument("--cycles", type=int, default=20000, help="timed cycles per run (default 20000)")
    p.add_argument("--rounds", type=int, default=2, help="runs per checkout, taken in turn (default 2)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--kernel", action="store_true", help="the rows of hil bench kernel instead of the loop")
    p.add_argument("--repeats", type=int, default=15, help="--kernel: timed repeats per row (default 15)")
    args = p.parse_args(argv)
    if args.kernel:
        runs = [(str(c), measure_kernel(c.resolve(), args.repeats)) for _ in range(args.rounds) for c in args.checkouts]
        if args.json:
            print(json.dumps({"repeats": args.repeats, "runs": runs}))
            return 0
        print(f"hil bench kernel rows, each checkout in turn, {args.rounds} round(s); per-call us (CPU time, median "
              f"of {args.repeats}) unless named; median over rounds [fastest-slowest]")
        print("\n".join(kernel_table(runs)))
        return 0
    runs = [(str(c), measure(c.resolve(), args.cycles)) for _ in range(args.rounds) for c in args.checkouts]
    if args.json:
        print(json.dumps({"cycles": args.cycles, "runs": runs}))
        return 0
    print(f"Emulator.step_once, ELLA, serial_frame, in-memory link, afap, {args.cycles} cycles per run; us")
    for name, r in runs:
        print(f"  {name:40s} " + (f"failed: {r['error']}" if "error" in r else
                                  " | ".join(f"{s} p50 {r[s]['p50']:6.1f} p99 {r[s]['p99']:6.1f}"
                                             for s in ("compute", "total"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
