"""The emulator as the runtime tests drive it: one factory, and the firmware played by the test."""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import BusMap, DecodeError, crc8_sae_j1850
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from firmware_bridge.firmware.endpoint import SensorInput
from hil.devices.drives import DriveBank
from hil.dynamics.plant import Plant
from hil.faults.scenario import Scenario
from hil.model import spec as md
from hil.runtime.launch import versions
from hil.runtime.loop import Emulator, RuntimeOptions

ARM = Path(__file__).resolve().parent.parent / "configs" / "ella.toml"
DT = 1e-3
CPR = 16384                               # counts per motor revolution of ELLA's encoders
TORQUE_LSB = 0.02                         # N m per LSB of the maps' int16 torque signals


def make_emulator(model: md.Model, bus: BusMap, link, *, ideal_drives: bool = False, scenario: Scenario | None = None,
                  **options) -> Emulator:
    """ELLA (or `model`) at its gravity equilibrium behind `link`, in afap mode starting at once: with the
    preset's drives and sensors, or ideal torque drives (the applied torque is then exactly the command);
    `options` override RuntimeOptions. The holding torque is ``emu.hold_tau``."""
    plant = Plant(model)
    plant.equilibrium_eta()
    names = plant.layout.joint_names
    opts = RuntimeOptions(**{"mode": "afap", "realtime": False, "start": "immediately", **options})
    header = {"config": str(ARM), "bus": bus.source, "link": link.name, "mode": opts.mode, "versions": versions()}
    return Emulator(plant, link, CommandInput(bus, names), SensorOutput(bus, names), opts, header, scenario=scenario,
                    drives=DriveBank(plant, [None] * len(names)) if ideal_drives else None)


class FakeFirmware:
    """The controller side: command frames with its own rolling counter, and every sensor frame it receives
    decoded by its SensorInput (rejections counted, as a firmware's decoder would)."""

    def __init__(self, bus: BusMap, link, emu: Emulator):
        self.bus = bus
        self.link = link
        self.cmd = bus.codec("cmd_torque")
        self.counter = 0
        self.input = SensorInput(bus, emu.plant.layout.joint_names)
        self.gear = np.array([b.joint.gear_ratio for b in emu.plant.asm.model.bodies])
        self.hold = np.round(emu.hold_tau / TORQUE_LSB) * TORQUE_LSB          # the holding torque, on the bus grid
        self.status_ids = {c.arbitration_id for c in bus.messages("to_firmware") if "status" in c.signal_names}

    def command(self, tau) -> Frame:
        """The firmware's next command frame (advances its counter)."""
        frame = self.cmd.encode([*tau, 0], counter=self.counter)
        self.counter = self.cmd.next_counter(self.counter)
        return frame

    def send(self, tau) -> None:
        self.link.send(self.command(tau))

    def injected(self, tau, check_range: bool = True) -> Frame:
        """A frame with the counter the emulator expects next (does not advance the firmware's)."""
        return self.cmd.encode([*tau, 0], counter=self.counter, check_range=check_range)

    def with_crc(self, payload: bytes) -> bytes:
        """compact_classic: the payload bytes 0..6 followed by their CRC-8 in byte 7."""
        k = self.cmd.crc_byte
        return payload[:k] + bytes((crc8_sae_j1850(payload),)) + payload[k:]

    def take_sensor_frames(self) -> list[Frame]:
        """Every frame that arrived, fed to the decoder."""
        frames = []
        while (f := self.link.recv()) is not None:
            self.input.feed(f)
            frames.append(f)
        return frames

    def statuses(self, frames) -> list[int]:
        """The status word of every frame that carries one."""
        out = []
        for f in frames:
            if f.arbitration_id in self.status_ids:
                codec = self.bus.by_id(f.arbitration_id)
                out.append(int(codec.decode(f)[codec.index("status")]))
        return out

    def receive(self) -> list[dict]:
        """Every frame that arrived: {"id", "frame", "accepted", and the signal values of an accepted frame}."""
        out = []
        while (frame := self.link.recv()) is not None:
            before = self.input.reader.accepted
            self.input.feed(frame)
            entry = {"id": frame.arbitration_id, "frame": frame, "accepted": self.input.reader.accepted > before}
            if entry["accepted"]:
                codec = self.bus.by_id(frame.arbitration_id)
                entry.update(zip(codec.signal_names, self.input.reader.values[id(codec)]))
            out.append(entry)
        return out

    def cycles_in(self, received: list[dict]) -> list[int]:
        """The cycle counter of every received sensor frame that still decodes (counter checks aside)."""
        sensors = self.bus.codec("sensors")
        out = []
        for entry in received:
            try:
                out.append(int(sensors.decode(entry["frame"])[sensors.index("cycle")]))
            except DecodeError:
                pass
        return out

    def angles(self) -> np.ndarray:
        """Joint angles [rad] from the last encoder counts received."""
        return np.asarray(self.input.counts) * 2 * math.pi / (CPR * self.gear)

    def answer(self, frame: Frame, law: Callable[[float], np.ndarray]) -> list[Frame]:
        """A firmware that computes once per sensor frame: the command `law(t)` for a frame that completed a
        cycle (t: the emulator time it carries), nothing for any other frame."""
        if not self.input.feed(frame):
            return []
        return [self.command(law(self.input.cycle * DT))]
