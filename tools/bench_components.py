"""What each model stage of the emulator's cycle costs on its own (ELLA preset, us per call, best of
--repeat runs of --number calls): the drive bank's update (brakes open, brakes holding, and the
rare cycle in which a brake stops a moving joint), the sensor stage (plant step and SensorSuite.sample minus the
plant step alone), the fault engine's per-cycle hooks (idle, and with three signal faults
active), the codecs of the command and sensor frames, and the CANopen drive nodes' protocol work
in a cycle of configs/bus/canopen_cst.toml (SYNC and three RPDOs in, the TPDOs out; object
dictionary, SDO server, CiA 402 state machine and PDO mapping idle) against the same frames through
the map's own decoder, and an SDO request answered.

    python -m tools.bench_components [--number 20000] [--repeat 5] [--json]
    hil bench components ...
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "configs" / "ella.toml"
BUS = ROOT / "configs" / "bus" / "serial_frame.toml"


def best_us(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Best mean time of `number` calls over `repeat` runs [us]."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def interleaved_best_us(fns: dict[str, Callable[[], object]], number: int, repeat: int) -> dict[str, float]:
    """best_us of each function, their runs taken in turn [us]."""
    runs: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            runs[name].append(timeit.timeit(fn, number=number))
    return {name: min(t) / number * 1e6 for name, t in runs.items()}


def _at_rest():
    from hil.model.config import load_model
    from hil.dynamics.plant import Plant
    plant = Plant(load_model(ARM))
    plant.equilibrium_eta()
    return plant


def drives(number: int, repeat: int) -> dict:
    from hil.devices.drives import DriveBank
    plant = _at_rest()
    bank = DriveBank(plant)
    cmd = plant.tau[:3].copy()
    out = {"update, brakes open": best_us(lambda: bank.update(cmd), number, repeat)}
    for k in range(3):
        bank.set_brake(k, True)
    bank.update(cmd)
    out["update, brakes holding"] = best_us(lambda: bank.update(cmd), number, repeat)
    out["update stopping a moving joint"] = _brake_stop_us(plant, bank, cmd, max(number // 100, 50))
    return out


def _brake_stop_us(plant, bank, cmd: np.ndarray, n: int) -> float:
    """The cycle in which the pitch brake stops the pitch joint turning at 0.05 rad/s (below its stick
    speed): median over n cycles, each from the same state."""
    for k in range(3):
        bank.set_brake(k, False)
    pos, vel = plant.pos.copy(), plant.vel.copy()
    vel[1] = 0.05
    times = []
    for _ in range(n):
        bank.set_brake(1, False)
        plant.pos[:], plant.vel[:] = pos, vel
        bank.set_brake(1, True)
        t0 = time.perf_counter_ns()
        bank.update(cmd)
        times.append(time.perf_counter_ns() - t0)
        assert bank.brake_held[1], "the brake did not stop the joint"
    return float(np.median(times)) * 1e-3


def sensors(number: int, repeat: int) -> dict:
    from hil.devices.sensors import SensorSuite
    plant = _at_rest()
    suite = SensorSuite(plant)
    tau = plant.tau[:3].copy()
    plant_only = best_us(lambda: plant.step(tau), number, repeat)

    def step_and_sense() -> None:
        plant.step(tau)
        suite.sample()
    whole = best_us(step_and_sense, number, repeat)
    return {"plant step and sensor sampling": whole, "plant step (with the sensors' output stations)": plant_only,
            f"sensor stage ({len(suite.channel_names)} channels)": whole - plant_only}


def faults(number: int, repeat: int) -> dict:
    from firmware_bridge.wire.messages import BusMap
    from hil.faults.engine import FaultEngine, bus_encoding
    from hil.faults.spec import Fault
    from hil.devices.sensors import SensorSuite
    plant = _at_rest()
    suite = SensorSuite(plant)
    engine = FaultEngine(suite.channel_names, dt_s=plant.dt, seed=1, encoding=bus_encoding(BusMap.load(BUS)))
    m, t = suite.measured, suite.truth
    cycle = [0]

    def hooks() -> None:
        engine.begin_cycle(cycle[0], cycle[0] * 1e-3)
        engine.apply_signals(m, t)
        cycle[0] += 1
    out = {"begin_cycle + apply_signals, idle": best_us(hooks, number, repeat)}
    for fault in (Fault("bias", "offset", "imu_ax", {"offset_m_s2": 0.1}),
                  Fault("noise", "noise", "imu_gz", {"sigma_rad_s": 0.01}),
                  Fault("stuck", "stuck", "cur_elbow")):
        engine.inject(fault)
    hooks()
    assert len(engine.active()) == 3
    out["the same, 3 signal faults active"] = best_us(hooks, number, repeat)
    return out


def codecs(number: int, repeat: int) -> dict:
    from firmware_bridge.wire.messages import BusMap
    from firmware_bridge.wire.signals import SensorOutput
    from hil.devices.sensors import SensorSuite
    bus = BusMap.load(BUS)
    plant = _at_rest()
    suite = SensorSuite(plant)
    out = SensorOutput(bus, plant.layout.joint_names)
    out.bind(suite.channel_names)
    cmd = bus.codec("cmd_torque")
    values = np.array([1.0, 2.0, 3.0, 0.0])
    frame = cmd.encode(values, counter=1)
    return {"command frame encode": best_us(lambda: cmd.encode(values, counter=1), number, repeat),
            "command frame decode": best_us(lambda: cmd.decode(frame), number, repeat),
            "sensor frames from the channels": best_us(lambda: out.frames(0, suite.measured, 1), number, repeat)}


def canopen(number: int, repeat: int) -> dict:
    from firmware_bridge.canopen.network import DriveNodes
    from firmware_bridge.canopen.sdo_server import expedited_download, upload_request
    from firmware_bridge.links.base import Frame
    from firmware_bridge.wire.messages import NMT_START, BusMap, nmt_frame, sync_frame
    from firmware_bridge.wire.signals import CommandInput
    bus = BusMap.load(ROOT / "configs" / "bus" / "canopen_cst.toml")
    names = ["base_yaw", "shoulder_pitch", "elbow"]
    nodes = DriveNodes(bus, names, 0.0, clock=lambda: 0.0)
    nodes.heartbeats()
    for n in (1, 2, 3):
        for cw in (0x06, 0x07, 0x0F):
            nodes.receive(Frame(0x600 + n, expedited_download(0x6040, 0, cw.to_bytes(2, "little"))))
    nodes.receive(nmt_frame(NMT_START))
    nodes.heartbeats()
    assert not nodes.any_safe
    sync = sync_frame()
    rpdos = [bus.codec(f"rpdo1_{j}").encode([10.0]) for j in names]
    tpdos = [bus.codec(f"tpdo1_{j}").encode([1000.0, 20.0]) for j in names] + [bus.codec("tpdo1_imu").encode([0.0] * 3)]
    map_decoder = CommandInput(bus, names)

    def cycle(commands) -> None:
        nodes.receive(sync)
        for f in rpdos:
            if not nodes.receive(f):
                commands.feed(f)
        nodes.transmit(lambda k: tpdos)
    # in turn, so that a load on the machine meets both alike
    out = interleaved_best_us({"cycle: SYNC, 3 RPDOs, 4 TPDOs, nodes idle": lambda: cycle(nodes.commands),
                               "the same, RPDOs through the map's decoder": lambda: cycle(map_decoder)},
                              number, repeat)
    assert nodes.commands.tau[0] == 10.0 and nodes.c["tpdos_sent"] > 0
    read = Frame(0x601, upload_request(0x6041, 0))
    out["SDO upload of the statusword answered"] = best_us(lambda: (nodes.receive(read), nodes.heartbeats()),
                                                            number, repeat)
    return out


SECTIONS = {"drives": drives, "sensors": sensors, "faults": faults, "codecs": codecs, "canopen": canopen}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hil bench components", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--number", type=int, default=20000, help="calls per run (default 20000)")
    p.add_argument("--repeat", type=int, default=5, help="runs, the best counts (default 5)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    report = {name: section(args.number, args.repeat) for name, section in SECTIONS.items()}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"ELLA preset, us per call, best of {args.repeat} x {args.number} calls")
    for name, rows in report.items():
        print(f"{name}:")
        for what, us in rows.items():
            print(f"  {what:40s} {us:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
