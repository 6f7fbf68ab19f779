"""A firmware's end of a bus map, in plain Python (no numpy, no numba): sensor frames in
(SensorInput), torque commands out (CommandOutput), and for a CANopen map the NMT master that
enables the drives and produces SYNC (firmware_bridge.canopen.master), all in one FirmwareWire.
CRCs, rolling counters (the E2E checks of firmware_bridge.wire.frame_io.CounterCheck), scaling and
ranges are those of the emulator's own codecs (firmware_bridge.wire.codec).
"""
from __future__ import annotations

from collections.abc import Sequence

from config_schema import UserError
from firmware_bridge.canopen.cob_ids import is_canopen
from firmware_bridge.canopen.master import CanopenMaster
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.frame_io import IMU_SIGNALS, FrameReader, FrameWriter, signal_slots
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.shipped import resolve


class SensorInput:
    """The latest encoder counts [motor counts], motor velocities [counts/s], gyro rates [rad/s],
    status word (StatusFlag bits) and cycle, as Python lists and ints; ``value(name)`` reads any
    other sensor signal of the map by name."""

    def __init__(self, bus: BusMap, joint_names: Sequence[str]):
        self.reader = FrameReader(bus, "to_firmware")
        self.enc = signal_slots(bus, "to_firmware", [f"enc_{j}" for j in joint_names])
        self.counts = [0] * len(joint_names)
        self.vel = [0.0] * len(joint_names)            # motor counts/s, where the map carries vel_<joint>
        self._vel_slots = [(k, c, c.index(f"vel_{j}")) for k, j in enumerate(joint_names)
                           for c in bus.messages("to_firmware") if f"vel_{j}" in c.signal_names]
        self.cycle = -1                     # the emulator's cycle counter, unwrapped
        self.status = 0
        # a rolling counter advances once per frame: in a message sent every N > 1 cycles (compact_classic's
        # IMU frames) the "cycle" counter counts its own frames, so take the cycle from every-cycle messages
        cycle_codecs = [c for c in bus.messages("to_firmware") if "cycle" in c.signal_names]
        every_cycle = [c for c in cycle_codecs if c.rate_divider == 1]
        self._cycle_slots = [(c, c.index("cycle")) for c in every_cycle or cycle_codecs]
        self._cycle_raw = None
        self._status_slots = [(c, c.index("status")) for c in bus.messages("to_firmware")
                              if "status" in c.signal_names]
        self.encoder_codecs = {id(c) for c, _ in self.enc}
        self.gyro = [0.0] * 3
        self._gyro_slots = [(k, c, c.index(n)) for k, n in enumerate(IMU_SIGNALS[3:])
                            for c in bus.messages("to_firmware") if n in c.signal_names]
        # the counts of one cycle may be split over several frames (compact_classic: enc_a, enc_b),
        # sent in bus-map order: the cycle is complete with the last of them
        self._last_encoder = [id(c) for c in bus.messages("to_firmware") if id(c) in self.encoder_codecs][-1]
        self._seen_encoders: set[int] = set()

    def value(self, signal: str) -> float:
        """The latest value of a to_firmware signal (``imu_az``, ``strain_root``, ``cur_elbow``, ...)
        in its unit; KeyError naming the map's signals for a name it does not carry."""
        bus = self.reader.bus
        hits = [c for c in bus.messages("to_firmware") if signal in c.signal_index]
        if not hits:
            names = sorted({n for c in bus.messages("to_firmware") for n in c.signal_names})
            raise KeyError(f"{bus.source}: no to_firmware signal {signal!r}; signals: {', '.join(names)}")
        return self.reader.values[id(hits[0])][hits[0].index(signal)]

    def _unwrap_cycle(self, raw: int, bits: int) -> None:
        if self._cycle_raw is None:
            self.cycle = raw
        else:
            self.cycle += (raw - self._cycle_raw) % (1 << bits)
        self._cycle_raw = raw

    def feed(self, frame: Frame) -> bool:
        """True when the frame completed a cycle's encoder counts (the firmware's cue to compute):
        with the counts split over several frames, on the last one, and only if the others of
        the cycle arrived too (a cycle with a lost encoder frame is not computed on)."""
        codec = self.reader.read(frame)
        if codec is None:
            return False
        vals = self.reader.values[id(codec)]
        for c, i in self._cycle_slots:
            if c is codec:
                self._unwrap_cycle(int(vals[i]), c.spec.signals[i].length_bits)
        for c, i in self._status_slots:
            if c is codec:
                self.status = int(vals[i])
        for k, (c, i) in enumerate(self.enc):
            if c is codec:
                self.counts[k] = int(vals[i])
        for k, c, i in self._gyro_slots:
            if c is codec:
                self.gyro[k] = vals[i]
        for k, c, i in self._vel_slots:
            if c is codec:
                self.vel[k] = vals[i]
        if id(codec) not in self.encoder_codecs:
            return False
        self._seen_encoders.add(id(codec))
        if id(codec) != self._last_encoder:
            return False
        complete = len(self._seen_encoders) == len(self.encoder_codecs)
        self._seen_encoders.clear()
        return complete


class CommandOutput:
    """Joint torques [N m, link side] into the command frame(s) due in a cycle, with their CRCs and
    rolling counters; a torque beyond its signal's range saturates at the limit (``limit``: the
    largest |torque| each joint's signal carries), counted in ``writer.saturated``."""

    def __init__(self, bus: BusMap, joint_names: Sequence[str], exclude: frozenset[int] | set[int] | tuple = ()):
        self.writer = FrameWriter(bus, "to_plant", exclude)
        slots = signal_slots(bus, "to_plant", [f"tau_{j}" for j in joint_names])
        self.slots = [(id(c), i) for c, i in slots]
        self.limit = [min(-c.spec.signals[i].minimum, c.spec.signals[i].maximum) for c, i in slots]

    def frames(self, tau: Sequence[float], cycle: int = 0) -> list[Frame]:
        for k, (key, i) in enumerate(self.slots):
            self.writer.values[key][i] = float(tau[k])
        return self.writer.frames(cycle)


def load_map(bus: BusMap | str) -> BusMap:
    """`bus` itself, or the map of that file or shipped name (``compact_fd``, ``serial_frame``, ...)."""
    return bus if isinstance(bus, BusMap) else BusMap.load(resolve(bus))


def map_joints(bus: BusMap) -> list[str]:
    """The joints whose torques the map commands (``tau_<joint>`` to_plant signals), in map order."""
    names = [n[4:] for c in bus.messages("to_plant") for n in c.signal_names if n.startswith("tau_")]
    if not names:
        raise UserError(f"{bus.source}: no to_plant message carries a torque command tau_<joint>")
    return names


class FirmwareWire:
    """Everything a firmware needs of one bus map: ``sensors`` (a SensorInput), ``commands`` (a
    CommandOutput) and, for a CANopen map, ``master`` (else None).

    `bus`: a BusMap, a map file or a shipped map's name; `joint_names`: the joints in the order the
    firmware computes them (default: the map's ``tau_<joint>`` order)."""

    def __init__(self, bus: BusMap | str, joint_names: Sequence[str] | None = None):
        self.bus = load_map(bus)
        self.joint_names = list(joint_names) if joint_names else map_joints(self.bus)
        self.master = CanopenMaster(self.bus, self.joint_names) if is_canopen(self.bus) else None
        self.sensors = SensorInput(self.bus, self.joint_names)
        self.commands = CommandOutput(self.bus, self.joint_names, self.master.own_ids if self.master else ())
