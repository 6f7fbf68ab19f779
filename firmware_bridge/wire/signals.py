"""The emulator's end of a bus map: torque commands in (CommandInput), sensor frames out (SensorOutput).

Signal names (see configs/bus/*.toml): commands `tau_<joint>` [N m, link side] with a
rolling counter; sensors: any channel of hil.devices.sensors.SensorSuite by its name (`enc_<joint>`
[counts], `vel_<joint>` [motor counts/s], `imu_ax..imu_az` [m/s^2], `imu_gx..imu_gz` [rad/s],
`index_<joint>`, `abs_<joint>`, `strain_<name>`, `torque_<joint>`, `cur_<joint>`), `status`
(StatusFlag bits) and `cycle`.
Every rejected frame is counted by kind (firmware_bridge.wire.messages.REJECTION_KINDS), never raised.
A writer's `exclude` names message ids another component produces (CANopen SYNC, heartbeats).

The firmware's end (SensorInput, CommandOutput) is firmware_bridge.firmware.endpoint; the frame
reader and writer both ends share (FrameReader, FrameWriter, CounterCheck) are
firmware_bridge.wire.frame_io. Their names still import from here, for one release, with a
DeprecationWarning.
"""
from __future__ import annotations

import importlib
import warnings

import numpy as np

from config_schema import MISSING, ConfigError

from firmware_bridge.links.base import Frame
from .codec import representable
from .frame_io import FrameReader, FrameWriter, signal_slots, unknown_signals
from .messages import BusMap

MOVED = {"SensorInput": "firmware_bridge.firmware.endpoint", "CommandOutput": "firmware_bridge.firmware.endpoint",
         "CounterCheck": "firmware_bridge.wire.frame_io", "IMU_SIGNALS": "firmware_bridge.wire.frame_io"}


def __getattr__(name: str):
    if name in MOVED:
        warnings.warn(f"{__name__}.{name} moved to {MOVED[name]}.{name}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CommandInput:
    """Plant side: torque commands from the firmware (one valid frame refreshes the watchdog)."""

    def __init__(self, bus: BusMap, joint_names: list[str]):
        self.reader = FrameReader(bus, "to_plant")
        self.slots = signal_slots(bus, "to_plant", [f"tau_{j}" for j in joint_names])
        torques = [c for c in bus.messages("to_plant") if any(n.startswith("tau_") for n in c.signal_names)]
        unknown_signals(bus, torques, {f"tau_{j}" for j in joint_names}, "a joint's torque command tau_<joint>")
        for c, i in self.slots:
            sig = c.spec.signals[i]
            if sig.is_float and (sig.minimum, sig.maximum) == representable(sig):
                raise ConfigError(bus.source, f"message[{c.name}].signal[{sig.name}].max", MISSING,
                                  f"expected a range (min and max in {sig.unit or 'N m'}) for a float torque command: "
                                  "without one any magnitude, 3e38 N m included, is a valid command")
        self.tau = np.zeros(len(joint_names))
        self.arrival_s = 0.0                # receive time (time.monotonic) of the last accepted command

    def feed(self, frame: Frame) -> bool:
        codec = self.reader.read(frame)
        if codec is None:
            return False
        self.arrival_s = frame.timestamp
        vals = self.reader.values[id(codec)]
        for k, (c, i) in enumerate(self.slots):
            if c is codec:
                self.tau[k] = vals[i]
        return True

    def counters(self) -> dict:
        return self.reader.stats()


class SensorOutput:
    """Plant side: the sensor channels, status and cycle into the sensor frames.

    ``bind(channel_names)`` (once, at start-up) maps every to_firmware signal named like a
    sensor channel (hil.devices.sensors.SensorSuite.channel_names) to that channel; ``frames()`` then
    copies the measured array into the due frames through these index slots. A signal that is no
    channel, status, cycle or the message's counter is refused (ConfigError naming it: it would
    always read 0), and so is a map without any channel. `joint_names` is taken as by the other
    plant-side endpoints; the sensor channels carry their joints in their names."""

    def __init__(self, bus: BusMap, joint_names: list[str], exclude: frozenset[int] | set[int] | tuple = ()):
        self.bus = bus
        self.writer = FrameWriter(bus, "to_firmware", exclude)
        self.status = self._slots({"status"})
        self.cycle = self._slots({"cycle"})
        self._channels: list[tuple[list, list[tuple[int, int]]]] = []

    def _slots(self, names: set[str]) -> list[tuple[list, int]]:
        """(value array, index) of every written signal named in `names` (not a message's counter:
        the writer puts the rolling counter there, so a cycle beyond its range saturates nothing)."""
        return [(self.writer.values[id(c)], i) for c in self.writer.codecs
                for i, n in enumerate(c.signal_names) if n in names and i != c.counter_index]

    def bind(self, channel_names: list[str]) -> None:
        """Build the slots: per message, the signal positions and the channels that fill them."""
        index = {n: i for i, n in enumerate(channel_names)}
        unknown_signals(self.bus, self.writer.codecs, set(channel_names) | {"status", "cycle"},
                         "a sensor channel of the arm, status or cycle")
        if not any(n in index for c in self.writer.codecs for n in c.signal_names):
            raise ConfigError(self.bus.source, "message", None, "", message=(
                f"{self.bus.source}: no to_firmware message carries a sensor channel of the arm "
                f"({', '.join(channel_names[:6])}, ...): the firmware would get no measurement"))
        self._channels = []
        for c in self.writer.codecs:
            pairs = [(i, index[n]) for i, n in enumerate(c.signal_names) if n in index]
            if pairs:
                self._channels.append((self.writer.values[id(c)], pairs))

    def frames(self, cycle: int, measured: np.ndarray, status: int) -> list[Frame]:
        """The frames due in `cycle`, carrying `measured` (indexed like the bound channel names)."""
        for values, pairs in self._channels:
            for i, k in pairs:
                values[i] = float(measured[k])
        for values, i in self.status:
            values[i] = status
        for values, i in self.cycle:
            values[i] = cycle
        return self.writer.frames(cycle)
