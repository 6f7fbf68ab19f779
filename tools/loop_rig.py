"""The in-process rig of the loop benchmarks: ELLA at rest behind an in-memory link, a firmware on the
other end answering the holding torque between the emulator's cycles (tools.bench_loop --inprocess,
tools.bench_live, tools.bench_xcp).

Model sets: "before" ideal sensors and ideal torque drives, no faults; "models" the preset's sensor
and drive models; "faulted" the same under the benchmark's fault load (OVERHEAD).
"""
from __future__ import annotations

from collections import deque
from pathlib import Path

import numpy as np

from firmware_bridge.firmware.endpoint import SensorInput
from firmware_bridge.links.base import LinkCounters
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.devices.drives import DriveBank
from hil.dynamics.plant import Plant
from hil.faults.scenario import load_scenario
from hil.model.sensor_specs import default_sensors
from hil.runtime.loop import Emulator, RuntimeOptions

ROOT = Path(__file__).resolve().parent.parent
ARM = "configs/ella.toml"
SERIAL_BUS = "configs/bus/serial_frame.toml"
OVERHEAD = "configs/scenarios/overhead.toml"
WARMUP_CYCLES = 1000        # cycles run before timing (first calls, caches, branch predictors)


class MemoryEnd:
    """One end of an in-memory link pair (the Link protocol without I/O)."""

    def __init__(self, name: str):
        self.name = name
        self.counters = LinkCounters()
        self.inbox: deque = deque()
        self.peer: MemoryEnd | None = None

    def send(self, frame) -> bool:
        self.counters.tx_frames += 1
        self.peer.inbox.append(frame)
        return True

    def recv(self):
        return self.inbox.popleft() if self.inbox else None

    def close(self) -> None:
        pass


class HoldingFirmware:
    """Decodes every sensor frame and answers with the holding torque (between the emulator's cycles)."""

    def __init__(self, bus, link: MemoryEnd, names: list[str], hold: np.ndarray):
        self.link = link
        self.sensors = SensorInput(bus, names)
        self.codec = bus.codec("cmd_torque")
        self.values = [*hold, 0]
        self.counter = 0

    def answer(self) -> None:
        while (frame := self.link.recv()) is not None:
            self.sensors.feed(frame)
        self.link.send(self.codec.encode(self.values, counter=self.counter))
        self.counter = self.codec.next_counter(self.counter)


def holding_emulator(model, bus, models: str, capacity: int):
    """ELLA at rest behind an in-memory link with a model set ("before", "models", "faulted"); with the
    firmware on the other end."""
    ideal = models == "before"
    plant = Plant(model)
    plant.equilibrium_eta()
    names = plant.layout.joint_names
    here, there = MemoryEnd("emulator"), MemoryEnd("firmware")
    here.peer, there.peer = there, here
    emu = Emulator(plant, here, CommandInput(bus, names), SensorOutput(bus, names),
                   RuntimeOptions(mode="afap", realtime=False, stats_capacity=capacity),
                   scenario=load_scenario(ROOT / OVERHEAD) if models == "faulted" else None,
                   drives=DriveBank(plant, [None] * len(names)) if ideal else None,
                   sensors=default_sensors(model) if ideal else None)
    hold = np.round(emu.hold_tau / 0.02) * 0.02          # on the command signals' 0.02 N m grid
    return emu, HoldingFirmware(bus, there, names, hold)
