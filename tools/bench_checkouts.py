"""Per-cycle cost of the emulator's loop in two or more checkouts, side by side (regressions
between versions): for each checkout, in its own process and in turn (--rounds), ELLA with the
checkout's own preset and `serial_frame` map behind an in-memory link in afap mode, a firmware
answering the holding torque between cycles, `Emulator.step_once` timed by its own clock.

    python -m tools.bench_checkouts PATH_A PATH_B [--cycles 20000] [--rounds 2] [--json]
    (e.g. PATH_A a `git worktree add /tmp/prev REV` of an earlier version, PATH_B this checkout)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

WARMUP_CYCLES = 1000

# Runs inside the checkout's own interpreter path: only APIs every version of the emulator has, found
# in the flat hil/ of early versions or in its layer folders.
_CHILD = r"""
import importlib, json, sys
from collections import deque
import numpy as np
from firmware_bridge.link import LinkCounters
from firmware_bridge.messages import BusMap
from firmware_bridge.signals import CommandInput, SensorInput, SensorOutput

def module(*names):
    for name in names:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError(names[-1])

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
    args = p.parse_args(argv)
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
