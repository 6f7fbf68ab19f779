"""Bus message maps: which signal sits where in which frame, compiled into fast codecs.

A bus map (``configs/bus/<name>.toml``) is shared by the emulator (plant side) and the
reference firmware (controller side)::

    bus = BusMap.load("configs/bus/compact_classic.toml")
    cmd = bus.codec("cmd_torque")
    frame = cmd.encode([1.5, -20.0, 0.3, 0], counter=cycle)      # values in signal order
    codec, values = bus.decode(frame)                            # raises DecodeError(kind)

Schema (every key is checked; unknown keys are errors)::

    [bus]      kind = "can" | "canfd" | "serial", bitrate_bps (serial: baud, 8N1),
               data_bitrate_bps (canfd only, >= bitrate_bps), cycle_s > 0 (nominal 0.001)
    [[message]]
               name, id (CAN id; serial: the packet's id byte), direction = "to_plant"
               (commands) | "to_firmware" (sensors/status), dlc (CAN/CAN FD payload bytes:
               0..8, FD also 12..64) or length_bytes (serial, 1..255), extended_id (CAN,
               default false), rate_divider (send when cycle % N == rate_offset; default 1;
               0 = on event only), rate_offset (default 0), counter (name of the rolling-counter
               signal: unsigned, scale 1, offset 0, wraps at 2**length_bits), crc_byte (byte
               that holds the CRC-8 SAE J1850 of all other payload bytes)
      [[message.signal]]
               name, type (int8..int32, uint8..uint32, float32, bool), start_bit,
               length_bits (default: the type's width; at most that width; float32: 32),
               byte_order = "little" (default; start_bit = LSB, bit 8*byte + bit_in_byte) |
               "big" (Motorola as in DBC: start_bit = MSB in the same numbering),
               scale (physical per LSB, default 1), offset (default 0), unit,
               min / max (physical range, default: all the raw type can represent)

physical = raw * scale + offset. Encoding refuses values outside [min, max] and NaN in integer
signals (a float32 signal carries NaN, for fault injection);
decoding rejects frames with the wrong length, a bad CRC, NaN or out-of-range values, and
(when asked) an unexpected counter. A signal name is unique on a bus, except counters, which
may repeat (e.g. ``cycle`` in every sensor frame). Errors in a map raise
:class:`hil.model.config.ConfigError` naming file, key, value and the expected unit.

``python -m firmware_bridge.messages MAP.toml ...`` prints each map's layout and bus load.
"""
from __future__ import annotations

import argparse
import math
import re
import struct
import sys
from dataclasses import dataclass
from enum import IntFlag
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from firmware_bridge.framing import MAX_PAYLOAD, max_encoded_size
from firmware_bridge.link import Frame
from hil.model.config import ConfigError, parse_toml

KINDS = ("can", "canfd", "serial")
DIRECTIONS = ("to_plant", "to_firmware")
REJECTION_KINDS = ("unknown_id", "length", "crc", "counter", "range", "nan")
FD_LENGTHS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64)
BYTE_ORDERS = ("little", "big")
# type -> (width in bits, signed); float32 and bool are special-cased by name
TYPES = {"int8": (8, True), "int16": (16, True), "int32": (32, True),
         "uint8": (8, False), "uint16": (16, False), "uint32": (32, False),
         "float32": (32, True), "bool": (1, False)}
_F32_MAX = 3.4028234663852886e38
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")

_BUS_KEYS = ("kind", "bitrate_bps", "data_bitrate_bps", "cycle_s")
_MESSAGE_KEYS = ("name", "id", "direction", "dlc", "length_bytes", "extended_id", "rate_divider",
                 "rate_offset", "counter", "crc_byte", "signal")
_SIGNAL_KEYS = ("name", "type", "start_bit", "length_bits", "byte_order", "scale", "offset",
                "unit", "min", "max")


class StatusFlag(IntFlag):
    """Bits of the ``status`` sensor signal (plant -> firmware)."""

    RUNNING = 0x01           # plant integrating in real time
    FAULT_ACTIVE = 0x02      # an injected fault is active
    TORQUE_LIMITED = 0x04    # a commanded torque was clipped to the joint's limit
    OVERRUN = 0x08           # the previous cycle missed its deadline
    COMMAND_TIMEOUT = 0x10   # no valid command frame within the timeout; torques held at 0
    COMMAND_REJECTED = 0x20  # the last command frame was rejected (length, CRC, counter, range)


# ----------------------------------------------------------------------------- errors
class MessageError(ValueError):
    """A frame or value refused by a codec; ``kind`` says why (see REJECTION_KINDS)."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


class DecodeError(MessageError):
    """A received frame rejected: kind in unknown_id, length, crc, counter, range, nan."""


class EncodeError(MessageError):
    """Values refused by ``Codec.encode``: kind in length, range, nan."""


# ----------------------------------------------------------------------------- CRC, counters
def _crc8_table(poly: int = 0x1D) -> tuple[int, ...]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = ((c << 1) ^ poly) & 0xFF if c & 0x80 else (c << 1) & 0xFF
        table.append(c)
    return tuple(table)


_CRC8 = _crc8_table()


def crc8_sae_j1850(data: bytes) -> int:
    """CRC-8 SAE J1850 (poly 0x1D, init 0xFF, not reflected, xorout 0xFF; check 0x4B)."""
    crc = 0xFF
    for b in data:
        crc = _CRC8[crc ^ b]
    return crc ^ 0xFF


def counter_next(value: int, bits: int) -> int:
    """The rolling counter value that follows ``value`` (wraps at 2**bits)."""
    return (value + 1) & ((1 << bits) - 1)


def counter_delta(previous: int, current: int, bits: int) -> int:
    """Steps from ``previous`` to ``current`` modulo 2**bits: 1 in order, 0 repeated, >1 lost."""
    return (current - previous) & ((1 << bits) - 1)


# ----------------------------------------------------------------------------- specs
@dataclass(frozen=True, slots=True)
class SignalSpec:
    """One validated signal; ``shift``/``mask`` place its raw bits in the frame integer
    (little-endian integer of the payload, or big-endian for ``byte_order = "big"``)."""

    name: str
    type: str
    start_bit: int
    length_bits: int
    byte_order: str
    scale: float
    offset: float
    unit: str
    minimum: float
    maximum: float
    shift: int
    frame_mask: int    # the signal's bits in little-endian payload-integer coordinates

    @property
    def signed(self) -> bool:
        return TYPES[self.type][1]

    @property
    def is_float(self) -> bool:
        return self.type == "float32"


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """One validated message of a bus map."""

    name: str
    arbitration_id: int
    direction: str
    length: int
    extended_id: bool
    rate_divider: int
    rate_offset: int
    counter: str | None
    crc_byte: int | None
    signals: tuple[SignalSpec, ...]


# ----------------------------------------------------------------------------- codec
def _raw_range(sig: SignalSpec) -> tuple[float, float]:
    """Smallest and largest raw value of the signal's type and length."""
    if sig.is_float:
        return -_F32_MAX, _F32_MAX
    if sig.signed:
        return -(1 << (sig.length_bits - 1)), (1 << (sig.length_bits - 1)) - 1
    return 0, (1 << sig.length_bits) - 1


def _representable(sig: SignalSpec) -> tuple[float, float]:
    """Physical range the raw type can carry."""
    lo, hi = (r * sig.scale + sig.offset for r in _raw_range(sig))
    return min(lo, hi), max(lo, hi)


def _raw_of(sig: SignalSpec, phys: float) -> float:
    """Raw value the encoder produces for ``phys`` (float32: rounded to single precision)."""
    x = (phys - sig.offset) / sig.scale
    return _F32.unpack(_F32.pack(x))[0] if sig.is_float else round(x)


class Codec:
    """Encoder/decoder of one message, with per-signal placement precomputed as tuples."""

    def __init__(self, spec: MessageSpec, is_fd: bool):
        self.spec = spec
        self.name = spec.name
        self.arbitration_id = spec.arbitration_id
        self.is_extended_id = spec.extended_id
        self.is_fd = is_fd
        self.direction = spec.direction
        self.length = spec.length
        self.rate_divider = spec.rate_divider
        self.rate_offset = spec.rate_offset
        self.crc_byte = spec.crc_byte
        self.signal_names = tuple(s.name for s in spec.signals)
        self.units = tuple(s.unit for s in spec.signals)
        self._index = {n: i for i, n in enumerate(self.signal_names)}
        self.counter_index = None if spec.counter is None else self._index[spec.counter]
        self.counter_bits = 0 if spec.counter is None else spec.signals[self.counter_index].length_bits
        self._has_big = any(s.byte_order == "big" for s in spec.signals)
        self._enc = tuple(self._enc_entry(s, s.minimum, s.maximum) for s in spec.signals)
        self._enc_unchecked = tuple(self._enc_entry(s, *_representable(s)) for s in spec.signals)
        self._dec = tuple(self._dec_entry(s) for s in spec.signals)

    @staticmethod
    def _enc_entry(s: SignalSpec, lo: float, hi: float) -> tuple:
        return (s.byte_order == "big", s.shift, (1 << s.length_bits) - 1, s.is_float,
                s.scale, s.offset, lo, hi)

    @staticmethod
    def _dec_entry(s: SignalSpec) -> tuple:
        sign = 1 << (s.length_bits - 1) if s.signed and not s.is_float else 0
        lo, hi = sorted((_raw_of(s, s.minimum), _raw_of(s, s.maximum)))
        return (s.byte_order == "big", s.shift, (1 << s.length_bits) - 1, sign, s.is_float,
                s.scale, s.offset, lo, hi)

    def __repr__(self) -> str:
        return f"Codec({self.name!r}, id=0x{self.arbitration_id:X}, {self.direction})"

    def index(self, signal: str) -> int:
        """Position of ``signal`` in this message's value arrays."""
        try:
            return self._index[signal]
        except KeyError:
            raise KeyError(f"message {self.name} has no signal {signal!r}; "
                           f"signals: {', '.join(self.signal_names)}") from None

    def is_due(self, cycle: int) -> bool:
        """Whether this message is sent in ``cycle`` (False for event-only messages)."""
        return self.rate_divider > 0 and cycle % self.rate_divider == self.rate_offset

    def next_counter(self, value: int) -> int:
        """The counter value expected after ``value``."""
        return counter_next(value, self.counter_bits)

    def _counter_slot(self) -> int:
        if self.counter_index is None:
            raise ValueError(f"message {self.name} has no counter signal")
        return self.counter_index

    def encode(self, values: np.ndarray | Sequence[float], counter: int | None = None,
               *, check_range: bool = True) -> Frame:
        """Frame carrying ``values`` (physical, signal order); ``counter`` (wrapped) replaces the
        counter signal's value. ``check_range=False`` only refuses unrepresentable values (for
        fault injection). Raises EncodeError (length, nan, range)."""
        vals = values.tolist() if isinstance(values, np.ndarray) else list(values)
        if len(vals) != len(self._enc):
            raise EncodeError("length", f"message {self.name}: {len(vals)} values for "
                                        f"{len(self._enc)} signals {self.signal_names}")
        if counter is not None:
            vals[self._counter_slot()] = counter & ((1 << self.counter_bits) - 1)
        table = self._enc if check_range else self._enc_unchecked
        le = be = 0
        for i, v in enumerate(vals):
            big, shift, mask, is_float, scale, offset, lo, hi = table[i]
            if not lo <= v <= hi and not (is_float and v != v):     # a float32 signal carries NaN
                raise self._refusal(i, v, lo, hi)
            if is_float:
                r = _U32.unpack(_F32.pack((v - offset) / scale))[0]
            else:
                r = round((v - offset) / scale)
            if big:
                be |= (r & mask) << shift
            else:
                le |= (r & mask) << shift
        if self._has_big:
            le |= int.from_bytes(be.to_bytes(self.length, "big"), "little")
        data = le.to_bytes(self.length, "little")
        k = self.crc_byte
        if k is not None:
            data = data[:k] + bytes((crc8_sae_j1850(data[:k] + data[k + 1:]),)) + data[k + 1:]
        return Frame(self.arbitration_id, data, self.is_fd, self.is_extended_id)

    def _refusal(self, i: int, v: Any, lo: float, hi: float) -> EncodeError:
        kind = "nan" if v != v else "range"
        return EncodeError(kind, f"message {self.name}: {self.signal_names[i]} = {v} "
                                 f"{self.units[i]}: expected {lo:g} .. {hi:g} {self.units[i]}")

    def decode(self, frame: Frame, out: np.ndarray | None = None, *,
               expected_counter: int | None = None) -> np.ndarray:
        """Physical values (signal order) of ``frame``, written into ``out`` if given.
        Raises DecodeError (length, crc, nan, range, and counter if ``expected_counter``
        is given and the frame's counter differs)."""
        data = frame.data
        if len(data) != self.length:
            raise DecodeError("length", f"message {self.name} (id 0x{self.arbitration_id:X}): "
                                        f"{len(data)} bytes, expected {self.length}")
        k = self.crc_byte
        if k is not None and crc8_sae_j1850(data[:k] + data[k + 1:]) != data[k]:
            raise DecodeError("crc", f"message {self.name}: CRC byte {k} = 0x{data[k]:02X}, "
                                     f"computed 0x{crc8_sae_j1850(data[:k] + data[k + 1:]):02X}")
        le = int.from_bytes(data, "little")
        be = int.from_bytes(data, "big") if self._has_big else 0
        res = np.empty(len(self._dec)) if out is None else out
        for i, (big, shift, mask, sign, is_float, scale, offset, lo, hi) in enumerate(self._dec):
            r = ((be if big else le) >> shift) & mask
            if is_float:
                r = _F32.unpack(_U32.pack(r))[0]
                if r != r:
                    raise DecodeError("nan", f"message {self.name}: {self.signal_names[i]} is NaN")
            elif r & sign:
                r -= sign << 1
            if not lo <= r <= hi:
                raise DecodeError("range", self._range_text(i, r * scale + offset))
            res[i] = r * scale + offset
        if expected_counter is not None:
            got = int(res[self._counter_slot()])
            want = expected_counter & ((1 << self.counter_bits) - 1)
            if got != want:
                raise DecodeError("counter", f"message {self.name}: counter {got}, expected {want}")
        return res

    def _range_text(self, i: int, value: float) -> str:
        s = self.spec.signals[i]
        return (f"message {self.name}: {s.name} = {value:g} {s.unit}: "
                f"expected {s.minimum:g} .. {s.maximum:g} {s.unit}")


# ----------------------------------------------------------------------------- loader
class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _label(d: Any, prefix: str, i: int) -> str:
    """'prefix[name]' for an entry with a string name, else 'prefix[i]'."""
    name = d.get("name") if isinstance(d, dict) else None
    return f"{prefix}[{name}]" if isinstance(name, str) and name else f"{prefix}[{i}]"


def _bits(mask: int) -> str:
    """'bits a..b' of a contiguous-or-not little-endian mask (lowest..highest set bit)."""
    return f"bits {(mask & -mask).bit_length() - 1}..{mask.bit_length() - 1}"


class _Loader:
    """Validates the parsed TOML (or DBC-derived) dict of one bus map."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str | None, value: Any, expected: str) -> ConfigError:
        return ConfigError(self.source, key, value, expected)

    def table(self, data: Any, key: str, allowed: Sequence[str]) -> dict:
        if not isinstance(data, dict):
            raise self.error(key, data, "expected a table")
        for k in data:
            if k not in allowed:
                raise self.error(f"{key}.{k}" if key else k, data[k],
                                 f"unknown key; expected one of {', '.join(allowed)}")
        return data

    def integer(self, d: dict, key: str, where: str, lo: int, hi: int, unit: str,
                default: int | None = None) -> int:
        v = d.get(key, _MISSING if default is None else default)
        if not _is_int(v) or not lo <= v <= hi:
            raise self.error(f"{where}.{key}", v, f"expected an integer in {lo}..{hi} {unit}")
        return v

    def number(self, d: dict, key: str, where: str, unit: str, default: float | None = None,
               positive: bool = False) -> float:
        v = d.get(key, _MISSING if default is None else default)
        if not _is_number(v) or not math.isfinite(v) or (positive and v <= 0):
            what = "a positive" if positive else "a finite"
            raise self.error(f"{where}.{key}", v, f"expected {what} number in {unit}")
        return float(v)

    def choice(self, d: dict, key: str, where: str, options: Sequence[str],
               default: str | None = None) -> str:
        v = d.get(key, _MISSING if default is None else default)
        if v not in options:
            raise self.error(f"{where}.{key}", v, f"expected one of {', '.join(options)}")
        return v

    def name(self, d: dict, where: str) -> str:
        v = d.get("name", _MISSING)
        if not isinstance(v, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
            raise self.error(f"{where}.name", v, "expected an identifier (letters, digits, _)")
        return v

    # ------------------------------------------------------------------ bus
    def load(self, data: dict) -> BusMap:
        self.table(data, "", ("bus", "message"))
        bus = self.table(data.get("bus", _MISSING), "bus", _BUS_KEYS)
        kind = self.choice(bus, "kind", "bus", KINDS)
        bitrate = self.integer(bus, "bitrate_bps", "bus", 1, 10**9, "bit/s")
        data_bitrate = None
        if kind == "canfd":
            data_bitrate = self.integer(bus, "data_bitrate_bps", "bus", bitrate, 10**9, "bit/s")
        elif "data_bitrate_bps" in bus:
            raise self.error("bus.data_bitrate_bps", bus["data_bitrate_bps"],
                             'only for kind = "canfd"')
        cycle_s = self.number(bus, "cycle_s", "bus", "s", positive=True)
        raw = data.get("message", _MISSING)
        if not isinstance(raw, list) or not raw:
            raise self.error("message", raw,
                             "expected one or more [[message]] tables")
        specs = self.messages(raw, kind)
        return BusMap(kind, bitrate, data_bitrate, cycle_s, specs, self.source)

    def messages(self, raw: list, kind: str) -> tuple[MessageSpec, ...]:
        specs: list[MessageSpec] = []
        for i, m in enumerate(raw):
            spec = self.message(m, i, kind)
            for other in specs:
                if other.name == spec.name:
                    raise self.error(f"message[{i}].name", spec.name, "expected a unique message name")
                if (other.arbitration_id, other.extended_id) == (spec.arbitration_id, spec.extended_id):
                    raise self.error(f"message[{spec.name}].id", spec.arbitration_id,
                                     f"expected an id not used by message {other.name} "
                                     f"(0x{other.arbitration_id:X})")
            specs.append(spec)
        self.unique_signals(specs)
        return tuple(specs)

    def unique_signals(self, specs: list[MessageSpec]) -> None:
        """Signal names are unique on the bus, except counters (may repeat across messages)."""
        seen: dict[str, MessageSpec] = {}
        for spec in specs:
            for s in spec.signals:
                first = seen.setdefault(s.name, spec)
                if first is not spec and not (s.name == spec.counter == first.counter):
                    raise self.error(f"message[{spec.name}].signal[{s.name}].name", s.name,
                                     f"expected a signal name not used in message {first.name} "
                                     "(only counters may repeat)")

    def message(self, m: Any, i: int, kind: str) -> MessageSpec:
        where = _label(m, "message", i)
        self.table(m, where, _MESSAGE_KEYS)
        name = self.name(m, where)
        extended = m.get("extended_id", False)
        if not isinstance(extended, bool) or (extended and kind == "serial"):
            raise self.error(f"{where}.extended_id", extended, "expected true or false (CAN only)")
        id_max = 0xFF if kind == "serial" else 0x1FFFFFFF if extended else 0x7FF
        what = "(serial id byte)" if kind == "serial" else "(CAN id)"
        ident = self.integer(m, "id", where, 0, id_max, what)
        direction = self.choice(m, "direction", where, DIRECTIONS)
        length = self.length(m, where, kind)
        divider = self.integer(m, "rate_divider", where, 0, 10**6, "cycles (0 = on event)", 1)
        offset = self.integer(m, "rate_offset", where, 0, max(divider - 1, 0), "cycles", 0)
        signals = self.signals(m.get("signal", []), where, length)
        crc = None
        if "crc_byte" in m:
            crc = self.integer(m, "crc_byte", where, 0, length - 1, "(byte index)")
            for s in signals:
                if s.frame_mask & (0xFF << 8 * crc):
                    raise self.error(f"{where}.crc_byte", crc,
                                     f"expected a byte free of signals; signal {s.name} uses it")
        counter = m.get("counter")
        if counter is not None:
            self.check_counter(counter, signals, where)
        return MessageSpec(name, ident, direction, length, extended, divider, offset, counter,
                           crc, signals)

    def length(self, m: dict, where: str, kind: str) -> int:
        key, other = ("length_bytes", "dlc") if kind == "serial" else ("dlc", "length_bytes")
        if other in m:
            raise self.error(f"{where}.{other}", m[other], f"use {key} on a {kind} bus")
        if kind == "serial":
            return self.integer(m, key, where, 1, MAX_PAYLOAD, "bytes")
        if kind == "can":
            return self.integer(m, key, where, 0, 8, "bytes")
        v = m.get(key, _MISSING)
        if not _is_int(v) or v not in FD_LENGTHS:
            raise self.error(f"{where}.{key}", v,
                             f"expected a CAN FD length in bytes: {', '.join(map(str, FD_LENGTHS))}")
        return v

    def check_counter(self, counter: Any, signals: tuple[SignalSpec, ...], where: str) -> None:
        sig = next((s for s in signals if s.name == counter), None)
        if sig is None:
            raise self.error(f"{where}.counter", counter,
                             "expected the name of a signal of this message")
        if not sig.type.startswith("uint") or sig.scale != 1 or sig.offset != 0:
            raise self.error(f"{where}.counter", counter,
                             "expected an unsigned integer signal with scale 1 and offset 0")
        if (sig.minimum, sig.maximum) != _representable(sig):
            raise self.error(f"{where}.signal[{counter}].min", sig.minimum,
                             "no min/max on a counter (it wraps at 2**length_bits)")

    # ------------------------------------------------------------------ signals
    def signals(self, raw: Any, where: str, length: int) -> tuple[SignalSpec, ...]:
        if not isinstance(raw, list):
            raise self.error(f"{where}.signal", raw, "expected [[message.signal]] tables")
        out: list[SignalSpec] = []
        for j, d in enumerate(raw):
            swhere = _label(d, f"{where}.signal", j)
            s = self.signal(d, swhere, length)
            for other in out:
                if other.name == s.name:
                    raise self.error(f"{swhere}.name", s.name, "expected a unique signal name")
                if other.frame_mask & s.frame_mask:
                    raise self.error(f"{swhere}.start_bit", s.start_bit,
                                     f"{s.name} ({_bits(s.frame_mask)}) overlaps {other.name} "
                                     f"({_bits(other.frame_mask)}); expected disjoint bits")
            out.append(s)
        return tuple(out)

    def signal(self, d: Any, where: str, length: int) -> SignalSpec:
        self.table(d, where, _SIGNAL_KEYS)
        name = self.name(d, where)
        typ = self.choice(d, "type", where, tuple(TYPES))
        width = TYPES[typ][0]
        lo_len = 32 if typ == "float32" else 1
        nbits = self.integer(d, "length_bits", where, lo_len, width, "bits", width)
        order = self.choice(d, "byte_order", where, BYTE_ORDERS, "little")
        start = self.integer(d, "start_bit", where, 0, max(8 * length - 1, 0), "(bit index)")
        shift, mask = self.placement(start, nbits, order, length, f"{where}.start_bit")
        unit = d.get("unit", "")
        if not isinstance(unit, str):
            raise self.error(f"{where}.unit", unit, "expected a string")
        scale = self.number(d, "scale", where, f"{unit or '1'} per LSB", 1.0)
        if scale == 0:
            raise self.error(f"{where}.scale", scale,
                             f"expected a non-zero number in {unit or '1'} per LSB")
        offset = self.number(d, "offset", where, unit or "1", 0.0)
        sig = SignalSpec(name, typ, start, nbits, order, scale, offset, unit, 0.0, 0.0, shift, mask)
        rep_lo, rep_hi = _representable(sig)
        lo = self.number(d, "min", where, unit or "1", rep_lo)
        hi = self.number(d, "max", where, unit or "1", rep_hi)
        tol = 1e-9 * abs(scale)
        for key, v in (("min", lo), ("max", hi)):
            if not rep_lo - tol <= v <= rep_hi + tol:
                raise self.error(f"{where}.{key}", v,
                                 f"not representable: {typ} of {nbits} bits with scale {scale:g} "
                                 f"and offset {offset:g} spans {rep_lo:g} .. {rep_hi:g} {unit}".rstrip())
        if lo > hi:
            raise self.error(f"{where}.max", hi, f"expected max >= min = {lo:g} {unit}".rstrip())
        return SignalSpec(name, typ, start, nbits, order, scale, offset, unit, lo, hi, shift, mask)

    def placement(self, start: int, nbits: int, order: str, length: int, key: str) -> tuple[int, int]:
        """(shift in the frame integer of ``order``, mask in little-endian coordinates)."""
        if order == "little":
            if start + nbits > 8 * length:
                raise self.error(key, start, f"signal of {nbits} bits from bit {start} ends past "
                                             f"the {length}-byte frame (bit {8 * length - 1})")
            return start, ((1 << nbits) - 1) << start
        msb = 8 * (length - 1 - start // 8) + start % 8       # position in the big-endian integer
        shift = msb - nbits + 1
        if shift < 0:
            raise self.error(key, start, f"big-endian signal of {nbits} bits with MSB at bit {start} "
                                         f"ends past the {length}-byte frame")
        be_mask = ((1 << nbits) - 1) << shift
        return shift, int.from_bytes(be_mask.to_bytes(length, "big"), "little")


# ----------------------------------------------------------------------------- bus map
class BusMap:
    """A validated bus map with one compiled Codec per message."""

    def __init__(self, kind: str, bitrate_bps: int, data_bitrate_bps: int | None, cycle_s: float,
                 specs: Sequence[MessageSpec], source: str = "<map>"):
        self.kind = kind
        self.bitrate_bps = bitrate_bps
        self.data_bitrate_bps = data_bitrate_bps
        self.cycle_s = cycle_s
        self.source = source
        self.codecs = tuple(Codec(s, kind == "canfd") for s in specs)
        self._by_name = {c.name: c for c in self.codecs}
        self._by_id = {(c.arbitration_id, c.is_extended_id): c for c in self.codecs}

    @classmethod
    def from_string(cls, text: str, source: str = "<string>") -> BusMap:
        """Parse bus-map TOML text (``source`` names it in error messages)."""
        return _Loader(source).load(parse_toml(text, source))

    @classmethod
    def load(cls, path: str | Path) -> BusMap:
        """Load and validate ``configs/bus/<name>.toml``."""
        return cls.from_string(Path(path).read_text(encoding="utf-8"), str(path))

    @classmethod
    def from_dbc(cls, path: str | Path, *, plant_node: str = "PLANT", cycle_s: float = 0.001,
                 bitrate_bps: int = 1_000_000, data_bitrate_bps: int = 5_000_000) -> BusMap:
        """Bus map from a DBC file (needs the optional package ``cantools``).

        Messages sent by ``plant_node`` go to_firmware, all others to_plant. The rate divider is
        the DBC cycle time / cycle_s (every cycle if it has none). The bus is CAN FD if any
        message is FD or longer than 8 bytes. Multiplexed and 64-bit signals are refused.
        """
        try:
            import cantools
        except ImportError as exc:
            raise ImportError("BusMap.from_dbc needs the optional package cantools "
                              "(pip install 'ella-hil[dbc]' or pip install cantools)") from exc
        source = str(path)
        try:
            db = cantools.database.load_file(source)
        except Exception as exc:  # cantools raises several parser-specific types
            raise ConfigError(source, None, None, "a DBC file",
                              message=f"{source}: not a readable DBC file: {exc}") from exc
        messages = [_dbc_message(m, plant_node, cycle_s, source) for m in db.messages]
        fd = any(m.is_fd or m.length > 8 for m in db.messages)
        bus = {"kind": "canfd" if fd else "can", "bitrate_bps": bitrate_bps, "cycle_s": cycle_s}
        if fd:
            bus["data_bitrate_bps"] = data_bitrate_bps
        return _Loader(source).load({"bus": bus, "message": messages})

    def __repr__(self) -> str:
        return f"BusMap({self.source!r}, {self.kind}, {len(self.codecs)} messages)"

    def codec(self, name: str) -> Codec:
        """The codec of message ``name``."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{self.source}: no message {name!r}; "
                           f"messages: {', '.join(self._by_name)}") from None

    def by_id(self, arbitration_id: int, extended: bool = False) -> Codec | None:
        """The codec for an arbitration id (serial: id byte), or None if the map has none."""
        return self._by_id.get((arbitration_id, extended))

    def messages(self, direction: str) -> tuple[Codec, ...]:
        """Codecs of one direction ("to_plant" or "to_firmware"), in file order."""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction {direction!r}: expected one of {', '.join(DIRECTIONS)}")
        return tuple(c for c in self.codecs if c.direction == direction)

    def find(self, signal: str) -> tuple[tuple[Codec, int], ...]:
        """Every (codec, index) that carries ``signal`` (counters may appear in several)."""
        hits = tuple((c, c._index[signal]) for c in self.codecs if signal in c._index)
        if not hits:
            raise KeyError(f"{self.source}: no signal {signal!r}")
        return hits

    def decode(self, frame: Frame, out: np.ndarray | None = None) -> tuple[Codec, np.ndarray]:
        """Codec and physical values of a received frame; DecodeError("unknown_id") if unmapped."""
        codec = self._by_id.get((frame.arbitration_id, frame.is_extended_id))
        if codec is None:
            raise DecodeError("unknown_id", f"{self.source}: no message with id "
                                            f"0x{frame.arbitration_id:X}")
        return codec, codec.decode(frame, out)


def _dbc_message(m: Any, plant_node: str, cycle_s: float, source: str) -> dict:
    """The bus-map dict of one cantools Message."""
    divider = 1 if not m.cycle_time else max(1, round(m.cycle_time * 1e-3 / cycle_s))
    return {"name": m.name, "id": m.frame_id, "extended_id": bool(m.is_extended_frame),
            "direction": "to_firmware" if plant_node in (m.senders or ()) else "to_plant",
            "dlc": m.length, "rate_divider": divider,
            "signal": [_dbc_signal(s, m.name, source) for s in m.signals]}


def _dbc_signal(s: Any, message: str, source: str) -> dict:
    """The bus-map dict of one cantools Signal."""
    key = f"message[{message}].signal[{s.name}]"
    if s.is_multiplexer or s.multiplexer_ids:
        raise ConfigError(source, key, s.name, "multiplexed signals are not supported")
    if s.length > 32:
        raise ConfigError(source, f"{key}.length_bits", s.length, "expected at most 32 bits")
    if s.is_float:
        typ = "float32"
    else:
        width = 8 if s.length <= 8 else 16 if s.length <= 16 else 32
        typ = f"{'int' if s.is_signed else 'uint'}{width}"
    d = {"name": s.name, "type": typ, "start_bit": s.start, "length_bits": s.length,
         "byte_order": "little" if s.byte_order == "little_endian" else "big",
         "scale": s.scale, "offset": s.offset, "unit": s.unit or ""}
    if s.minimum is not None:
        d["min"] = s.minimum
    if s.maximum is not None:
        d["max"] = s.maximum
    return d


# ----------------------------------------------------------------------------- bus load
def frame_time_s(bus: BusMap, codec: Codec) -> float:
    """Worst-case wire time of one frame (bit stuffing and interframe space included).

    CAN: 47 + 8n + (34 + 8n - 1)//4 bits (11-bit id), 67 + 8n + (54 + 8n - 1)//4 (29-bit).
    CAN FD with bit-rate switch: SOF..BRS (17 bits, 36 extended) with (k-1)//4 stuff bits, and
    ACK, EOF and interframe space (12 bits) at the nominal rate; ESI, DLC and data with
    worst-case stuffing, the stuff count (4), CRC-17/21 with its fixed stuff bits and the CRC
    delimiter at the data rate. Serial: COBS(id + payload + CRC-16) + 0x00, 10 bits a byte.
    """
    n = codec.length
    if bus.kind == "serial":
        return 10 * (max_encoded_size(n) + 1) / bus.bitrate_bps
    if bus.kind == "can":
        head, stuffable = (67, 54) if codec.is_extended_id else (47, 34)
        return (head + 8 * n + (stuffable + 8 * n - 1) // 4) / bus.bitrate_bps
    arb = 36 if codec.is_extended_id else 17
    nominal = arb + (arb - 1) // 4 + 12
    crc = 17 if n <= 16 else 21
    data = 5 + 8 * n
    data_phase = data + data // 4 + 4 + crc + math.ceil((4 + crc) / 4) + 1
    return nominal / bus.bitrate_bps + data_phase / bus.data_bitrate_bps


def bus_load(bus: BusMap, peak: bool = False) -> float:
    """Fraction of the bus time used by the cyclic messages at 1/cycle_s (event-only messages
    excluded): the average, or with ``peak`` the busiest cycle. A serial link is full duplex:
    the busier direction counts."""
    groups = [bus.messages(d) for d in DIRECTIONS] if bus.kind == "serial" else [bus.codecs]
    cyclic = [c for c in bus.codecs if c.rate_divider > 0]
    period = math.lcm(*(c.rate_divider for c in cyclic)) if cyclic else 1
    loads = []
    for group in groups:
        times = [(c, frame_time_s(bus, c)) for c in group if c.rate_divider > 0]
        if peak:
            loads += [sum(t for c, t in times if c.is_due(k)) for k in range(period)]
        else:
            loads.append(sum(t / c.rate_divider for c, t in times))
    return max(loads) / bus.cycle_s


# ----------------------------------------------------------------------------- CANopen (CiA 301)
SYNC_ID = 0x080
NMT_ID = 0x000
HEARTBEAT_BASE_ID = 0x700
NMT_START = 0x01
NMT_STOP = 0x02
NMT_PRE_OPERATIONAL = 0x80
NMT_RESET_NODE = 0x81
NMT_RESET_COMMUNICATION = 0x82
NMT_COMMANDS = (NMT_START, NMT_STOP, NMT_PRE_OPERATIONAL, NMT_RESET_NODE, NMT_RESET_COMMUNICATION)
STATE_BOOTUP = 0x00
STATE_STOPPED = 0x04
STATE_OPERATIONAL = 0x05
STATE_PRE_OPERATIONAL = 0x7F
NMT_STATES = (STATE_BOOTUP, STATE_STOPPED, STATE_OPERATIONAL, STATE_PRE_OPERATIONAL)


def _check_node(node: int, lo: int) -> None:
    if not _is_int(node) or not lo <= node <= 127:
        raise ValueError(f"node id {node!r}: expected an integer in {lo}..127")


def sync_frame(counter: int | None = None) -> Frame:
    """CiA 301 SYNC (COB-ID 0x080): no data, or one counter byte 1..240 if the SYNC counter
    (object 0x1019) is enabled."""
    if counter is None:
        return Frame(SYNC_ID, b"")
    if not _is_int(counter) or not 1 <= counter <= 240:
        raise ValueError(f"SYNC counter {counter!r}: expected an integer in 1..240")
    return Frame(SYNC_ID, bytes((counter,)))


def nmt_frame(command: int, node: int = 0) -> Frame:
    """CiA 301 NMT node control (COB-ID 0x000): [command, node id]; node 0 addresses all."""
    if command not in NMT_COMMANDS:
        raise ValueError(f"NMT command {command!r}: expected one of "
                         f"{', '.join(f'0x{c:02X}' for c in NMT_COMMANDS)}")
    _check_node(node, 0)
    return Frame(NMT_ID, bytes((command, node)))


def heartbeat_frame(node: int, state: int) -> Frame:
    """CiA 301 heartbeat (COB-ID 0x700 + node id): one byte with the NMT state."""
    _check_node(node, 1)
    if state not in NMT_STATES:
        raise ValueError(f"NMT state {state!r}: expected one of "
                         f"{', '.join(f'0x{s:02X}' for s in NMT_STATES)}")
    return Frame(HEARTBEAT_BASE_ID + node, bytes((state,)))


# ----------------------------------------------------------------------------- CLI
def describe(bus: BusMap) -> str:
    """Layout and bus-load summary of a map, as printed by the command line."""
    rate_hz = 1.0 / bus.cycle_s
    rates = f"{bus.bitrate_bps / 1e3:g} kbit/s" + (
        f" / {bus.data_bitrate_bps / 1e3:g} kbit/s data" if bus.data_bitrate_bps else "")
    lines = [f"{bus.source}: {bus.kind}, {rates}, cycle {bus.cycle_s * 1e3:g} ms"]
    for c in bus.codecs:
        every = f"every {c.rate_divider}" if c.rate_divider else "on event"
        lines.append(f"  0x{c.arbitration_id:03X} {c.name:<24} {c.direction:<11} {c.length:>2} B  "
                     f"{every:<10} {frame_time_s(bus, c) * 1e6:6.1f} us  {', '.join(c.signal_names)}")
    what = "link load (busier direction)" if bus.kind == "serial" else "bus load"
    lines.append(f"  {what} at {rate_hz:g} Hz: {100 * bus_load(bus):.1f} % average, "
                 f"{100 * bus_load(bus, peak=True):.1f} % busiest cycle")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print layout and bus load of each bus map given on the command line."""
    parser = argparse.ArgumentParser(prog="python -m firmware_bridge.messages",
                                     description="Check bus maps and print their bus load.")
    parser.add_argument("maps", nargs="+", type=Path, help="bus map TOML files")
    args = parser.parse_args(argv)
    status = 0
    for path in args.maps:
        try:
            print(describe(BusMap.load(path)))
        except (ConfigError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
