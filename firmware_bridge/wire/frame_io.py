"""The frames of one direction of a bus map, in and out, in plain Python (no numpy): a reader that
decodes them into per-message value lists, counting every rejection by kind
(firmware_bridge.wire.codec.REJECTION_KINDS) and checking rolling counters, and a writer that
encodes value lists into the frames due in a cycle. Both ends use them: the emulator's
(firmware_bridge.wire.signals) and the firmware's (firmware_bridge.firmware).
"""
from __future__ import annotations

from collections import Counter

from config_schema import ConfigError, suggest
from firmware_bridge.links.base import Frame
from .messages import REJECTION_KINDS, BusMap, Codec, DecodeError, EncodeError, counter_delta

IMU_SIGNALS = ("imu_ax", "imu_ay", "imu_az", "imu_gx", "imu_gy", "imu_gz")


def signal_slots(bus: BusMap, direction: str, names: list[str]) -> list[tuple[Codec, int]]:
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


def unknown_signals(bus: BusMap, codecs, known: set[str], what: str) -> None:
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
        self.values = {id(c): [0.0] * len(c.signal_names) for c in bus.messages(direction)}
        self._decoded = {id(c): [0.0] * len(c.signal_names) for c in bus.messages(direction)}
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
            values = codec.decode(frame, self._decoded[id(codec)])
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
        self.values = {id(c): [0.0] * len(c.signal_names) for c in self.codecs}
        self.counter = {id(c): 0 for c in self.codecs}
        self.lo = {id(c): [s.minimum for s in c.spec.signals] for c in self.codecs}
        self.hi = {id(c): [s.maximum for s in c.spec.signals] for c in self.codecs}
        self.saturated = 0
        self.refused = 0

    def frames(self, cycle: int) -> list[Frame]:
        out = []
        for c in self.codecs:
            if c.is_due(cycle):
                n = self.counter[id(c)]
                v = self.values[id(c)]
                lo, hi = self.lo[id(c)], self.hi[id(c)]
                if _saturate(v, lo, hi):
                    self.saturated += 1
                try:
                    out.append(c.encode(v, counter=n if c.counter_index is not None else None))
                except EncodeError:     # NaN in an integer signal: the frame is withheld, counted
                    self.refused += 1
                    continue
                self.counter[id(c)] = c.next_counter(n) if c.counter_index is not None else 0
        return out


def _saturate(values, lo, hi) -> bool:
    """Clip `values` in place to [lo, hi] element by element; True if any was beyond (NaN is not)."""
    beyond = False
    for i, v in enumerate(values):
        if v < lo[i]:
            values[i], beyond = lo[i], True
        elif v > hi[i]:
            values[i], beyond = hi[i], True
    return beyond
