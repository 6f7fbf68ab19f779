"""Between named bus signals and the arrays the emulator and the firmware compute with.

Signal names (see configs/bus/*.toml): commands `tau_<joint>` [N m, link side] with a
rolling counter; sensors: any channel of hil.devices.sensors.SensorSuite by its name (`enc_<joint>`
[counts], `vel_<joint>` [motor counts/s], `imu_ax..imu_az` [m/s^2], `imu_gx..imu_gz` [rad/s],
`index_<joint>`, `abs_<joint>`, `strain_<name>`, `torque_<joint>`, `cur_<joint>`), `status`
(StatusFlag bits) and `cycle`.
Every rejected frame is counted by kind (firmware_bridge.wire.messages.REJECTION_KINDS), never raised.
A writer's `exclude` names message ids another component produces (CANopen SYNC, heartbeats).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from config_schema import MISSING, ConfigError, suggest

from firmware_bridge.links.base import Frame
from .codec import representable
from .messages import REJECTION_KINDS, BusMap, Codec, DecodeError, EncodeError, counter_delta

IMU_SIGNALS = ("imu_ax", "imu_ay", "imu_az", "imu_gx", "imu_gy", "imu_gz")


def _slots(bus: BusMap, direction: str, names: list[str]) -> list[tuple[Codec, int]]:
    """(codec, index) of each named signal among the messages of one direction; a ConfigError
    naming the map for a signal no message carries."""
    out = []
    for name in names:
        hits = [(c, c.index(name)) for c in bus.messages(direction) if name in c.signal_names]
        if not hits:
            carried = [n for c in bus.messages(direction) for n in c.signal_names]
            raise ConfigError(bus.source, None, name, "", message=(
                f"{bus.source}: no {direction} message carries signal {name!r}{suggest(name, carried)}; "
                f"the arm needs {', '.join(names)}; the map's {direction} signals: {', '.join(carried) or 'none'}"))
        out.append(hits[0])
    return out


def _unknown_signals(bus: BusMap, codecs, known: set[str], what: str) -> None:
    """A ConfigError naming the first signal of `codecs` that is not in `known` (nor a counter)."""
    for c in codecs:
        for s in c.spec.signals:
            if s.name not in known and s.name != c.spec.counter:
                raise ConfigError(bus.source, f"message[{c.name}].signal[{s.name}].name", s.name,
                                  f"expected {what}{suggest(s.name, known)}")


class CounterCheck:
    """Rolling-counter check per message, by the rules of AUTOSAR E2E Profile 1 (E2E_P01Check; the
    CRC is checked before, and a frame that fails it never reaches this check):

    * a counter 1..``counter_max_delta`` steps after the last accepted one is taken (OK; the
      steps beyond one are frames lost on the way, counted in ``lost``);
    * a repeated counter (REPEATED) or a larger jump, a stale or replayed frame (WRONGSEQUENCE),
      is rejected and leaves the expected counter where it was, so the genuine frame after a
      stale one is taken;
    * a sender that restarted its counter, or lost more than ``counter_max_delta`` frames in a
      row, is followed once SYNC_FRAMES of its frames have arrived in order (each one step after
      the previous rejected one) with no accepted frame between them: the counter moves to the
      new sequence then, with the second frame after the jump (counted in ``resyncs``; how many
      frames were lost is unknown, so none are counted in ``lost``). Profile 1 with
      SyncCounterInit = 1 re-anchors so too; a replay of two consecutive old frames costs one
      stale frame taken and one genuine frame rejected.

    Profile 5's check (E2E_P05Check) instead adopts every counter that passes the CRC, so one
    stale frame would make the next genuine one a WRONGSEQUENCE too. An 8-bit counter with
    counter_max_delta d takes a frame replayed exactly 256 k - 1 .. 256 k - d frames later: a
    counter window cannot tell those from fresh ones."""

    SYNC_FRAMES = 2

    def __init__(self) -> None:
        self.last: dict[int, int] = {}
        self.rejected_runs: dict[int, tuple[int, int]] = {}    # message -> (last rejected counter, run length)
        self.lost = 0
        self.resyncs = 0

    def accept(self, codec: Codec, received: float) -> bool:
        if codec.counter_index is None:
            return True
        key = id(codec)
        value = int(received)
        previous = self.last.get(key)
        if previous is None:
            self.last[key] = value
            return True
        delta = counter_delta(previous, value, codec.counter_bits)
        if 1 <= delta <= codec.counter_max_delta:
            self.last[key] = value
            self.lost += delta - 1
            self.rejected_runs.pop(key, None)
            return True
        last_rejected, run = self.rejected_runs.get(key, (None, 0))
        in_order = last_rejected is not None and counter_delta(last_rejected, value, codec.counter_bits) == 1
        run = run + 1 if in_order else 1
        if run >= self.SYNC_FRAMES:
            self.last[key] = value
            self.resyncs += 1
            self.rejected_runs.pop(key, None)
            return True
        self.rejected_runs[key] = (value, run)
        return False


class FrameReader:
    """Decodes the frames of one direction into per-message value arrays, counting rejections."""

    def __init__(self, bus: BusMap, direction: str):
        self.bus = bus
        self.direction = direction
        self.values = {id(c): np.zeros(len(c.signal_names)) for c in bus.messages(direction)}
        self.rejected: Counter = Counter({k: 0 for k in REJECTION_KINDS})
        self.accepted = 0
        self.ignored = 0            # frames of the other direction (e.g. own frames on a shared bus)
        self.counters = CounterCheck()
        self.rejected_total = 0

    def codec_for(self, frame: Frame) -> Codec | None:
        """The codec of this direction for `frame`; None for an unknown id (a rejection) or a frame of the
        other direction (ignored), both counted."""
        codec = self.bus.by_id(frame.arbitration_id, frame.is_extended_id)
        if codec is None:
            self.reject("unknown_id")
        elif codec.direction != self.direction:
            self.ignored += 1
        else:
            return codec
        return None

    def read(self, frame: Frame) -> Codec | None:
        """The codec whose values were updated by `frame`, or None if it was rejected or foreign."""
        codec = self.codec_for(frame)
        if codec is None:
            return None
        try:
            values = codec.decode(frame)
        except DecodeError as exc:
            self.reject(exc.kind)
            return None
        return codec if self.take(codec, values) else None

    def take(self, codec: Codec, values) -> bool:
        """Decoded `values` of `codec` past the rolling-counter check: kept and counted (else a rejection)."""
        if not self.counters.accept(codec, values[codec.counter_index] if codec.counter_index is not None else 0):
            self.reject("counter")
            return False
        self.values[id(codec)][:] = values
        self.accepted += 1
        return True

    def reject(self, kind: str) -> None:
        self.rejected[kind] += 1
        self.rejected_total += 1

    def stats(self) -> dict:
        return {"accepted": self.accepted, "ignored": self.ignored, "lost": self.counters.lost,
                "resyncs": self.counters.resyncs, "rejected": dict(self.rejected)}


class FrameWriter:
    """Encodes value arrays into the due frames of one direction, with rolling counters.

    Values beyond a signal's range saturate at its limit, as a real sensor or drive
    interface does, and are counted in `saturated`; a frame with a NaN in an integer signal is not
    sent, counted in `refused`."""

    def __init__(self, bus: BusMap, direction: str, exclude: frozenset[int] | set[int] | tuple = ()):
        self.codecs = tuple(c for c in bus.messages(direction) if c.arbitration_id not in exclude)
        self.values = {id(c): np.zeros(len(c.signal_names)) for c in self.codecs}
        self.counter = {id(c): 0 for c in self.codecs}
        self.lo = {id(c): np.array([s.minimum for s in c.spec.signals]) for c in self.codecs}
        self.hi = {id(c): np.array([s.maximum for s in c.spec.signals]) for c in self.codecs}
        self.saturated = 0
        self.refused = 0

    def frames(self, cycle: int) -> list[Frame]:
        out = []
        for c in self.codecs:
            if c.is_due(cycle):
                n = self.counter[id(c)]
                v = self.values[id(c)]
                lo, hi = self.lo[id(c)], self.hi[id(c)]
                if np.any(v < lo) or np.any(v > hi):
                    self.saturated += 1
                    np.clip(v, lo, hi, out=v)
                try:
                    out.append(c.encode(v, counter=n if c.counter_index is not None else None))
                except EncodeError:     # NaN in an integer signal: the frame is withheld, counted
                    self.refused += 1
                    continue
                self.counter[id(c)] = c.next_counter(n) if c.counter_index is not None else 0
        return out


class CommandInput:
    """Plant side: torque commands from the firmware (one valid frame refreshes the watchdog)."""

    def __init__(self, bus: BusMap, joint_names: list[str]):
        self.reader = FrameReader(bus, "to_plant")
        self.slots = _slots(bus, "to_plant", [f"tau_{j}" for j in joint_names])
        torques = [c for c in bus.messages("to_plant") if any(n.startswith("tau_") for n in c.signal_names)]
        _unknown_signals(bus, torques, {f"tau_{j}" for j in joint_names}, "a joint's torque command tau_<joint>")
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
        self._channels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def _slots(self, names: set[str]) -> list[tuple[np.ndarray, int]]:
        """(value array, index) of every written signal named in `names` (not a message's counter:
        the writer puts the rolling counter there, so a cycle beyond its range saturates nothing)."""
        return [(self.writer.values[id(c)], i) for c in self.writer.codecs
                for i, n in enumerate(c.signal_names) if n in names and i != c.counter_index]

    def bind(self, channel_names: list[str]) -> None:
        """Build the slots: per message, the signal positions and the channels that fill them."""
        index = {n: i for i, n in enumerate(channel_names)}
        _unknown_signals(self.bus, self.writer.codecs, set(channel_names) | {"status", "cycle"},
                         "a sensor channel of the arm, status or cycle")
        if not any(n in index for c in self.writer.codecs for n in c.signal_names):
            raise ConfigError(self.bus.source, "message", None, "", message=(
                f"{self.bus.source}: no to_firmware message carries a sensor channel of the arm "
                f"({', '.join(channel_names[:6])}, ...): the firmware would get no measurement"))
        self._channels = []
        for c in self.writer.codecs:
            pairs = [(i, index[n]) for i, n in enumerate(c.signal_names) if n in index]
            if pairs:
                sig, ch = (np.array(p, np.int64) for p in zip(*pairs))
                self._channels.append((self.writer.values[id(c)], sig, ch))

    def frames(self, cycle: int, measured: np.ndarray, status: int) -> list[Frame]:
        """The frames due in `cycle`, carrying `measured` (indexed like the bound channel names)."""
        for values, sig, ch in self._channels:
            values[sig] = measured[ch]
        for values, i in self.status:
            values[i] = status
        for values, i in self.cycle:
            values[i] = cycle
        return self.writer.frames(cycle)


class SensorInput:
    """Firmware side: the latest encoder counts, IMU values, status and cycle."""

    def __init__(self, bus: BusMap, joint_names: list[str]):
        self.reader = FrameReader(bus, "to_firmware")
        self.enc = _slots(bus, "to_firmware", [f"enc_{j}" for j in joint_names])
        self.counts = np.zeros(len(joint_names), np.int64)
        self.vel = np.zeros(len(joint_names))          # motor counts/s, where the map carries vel_<joint>
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
        self.gyro = np.zeros(3)
        self._gyro_slots = [(k, c, c.index(n)) for k, n in enumerate(IMU_SIGNALS[3:])
                            for c in bus.messages("to_firmware") if n in c.signal_names]
        # the counts of one cycle may be split over several frames (compact_classic: enc_a, enc_b),
        # sent in bus-map order: the cycle is complete with the last of them
        self._last_encoder = [id(c) for c in bus.messages("to_firmware") if id(c) in self.encoder_codecs][-1]
        self._seen_encoders: set[int] = set()

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
    """Firmware side: torques into the command frame(s)."""

    def __init__(self, bus: BusMap, joint_names: list[str], exclude: frozenset[int] | set[int] | tuple = ()):
        self.writer = FrameWriter(bus, "to_plant", exclude)
        slots = _slots(bus, "to_plant", [f"tau_{j}" for j in joint_names])
        self.slots = [(id(c), i) for c, i in slots]
        # the largest |torque| [N m] each joint's command signal carries
        self.limit = np.array([min(-c.spec.signals[i].minimum, c.spec.signals[i].maximum) for c, i in slots])

    def frames(self, tau: np.ndarray, cycle: int = 0) -> list[Frame]:
        for k, (key, i) in enumerate(self.slots):
            self.writer.values[key][i] = tau[k]
        return self.writer.frames(cycle)
