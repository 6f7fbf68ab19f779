"""Frame codecs: one validated message layout (:class:`MessageSpec` of :class:`SignalSpec`) compiled
into an encoder and decoder of physical values, with the CRC and rolling counters they check.

Protection of a message (bus-map keys ``crc``, ``crc_byte``, ``counter``, ``counter_max_delta``):

* ``crc = "crc8"``: CRC-8 SAE J1850 (poly 0x1D, init 0xFF, xorout 0xFF; AUTOSAR E2E Profiles 1 and
  11 use it) over all payload bytes but the CRC byte ``crc_byte``; no Data ID.
* ``crc = "crc16"``: CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no xorout) over all payload bytes
  but the two CRC bytes, then over the 16-bit Data ID = the low 16 bits of the frame's id (low
  byte, high byte), stored little-endian at ``crc_byte``, ``crc_byte + 1``: AUTOSAR E2E Profile 5's
  CRC. With an 8-bit counter right after the CRC the frame is a Profile 5 frame (Offset =
  8 crc_byte bits, DataID = the id).
* ``counter``: the rolling counter; the receiver's rules are those of
  :class:`firmware_bridge.wire.signals.CounterCheck`.

physical = raw * scale + offset. Encoding refuses values outside [min, max] and NaN in integer
signals (a float32 signal carries NaN, for fault injection); decoding rejects frames with the
wrong length, a bad CRC, NaN or out-of-range values, and (when asked) an unexpected counter,
raising a :class:`DecodeError` whose ``kind`` is one of REJECTION_KINDS.

Layouts come from bus maps (:mod:`firmware_bridge.wire.bus_schema` reads them, ``BusMap`` in
:mod:`firmware_bridge.wire.messages` holds their codecs). Importing this module loads neither numpy nor
numba: ``decode`` imports numpy when it allocates its output array.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntFlag
from typing import TYPE_CHECKING, Any, Sequence

from firmware_bridge.links.base import Frame
from firmware_bridge.wire.framing import crc16_ccitt_false
from config_schema import UserError

if TYPE_CHECKING:
    import numpy as np

DIRECTIONS = ("to_plant", "to_firmware")
REJECTION_KINDS = ("unknown_id", "length", "crc", "counter", "range", "nan")
# type -> (width in bits, signed); float32 and bool are special-cased by name
TYPES = {"int8": (8, True), "int16": (16, True), "int32": (32, True),
         "uint8": (8, False), "uint16": (16, False), "uint32": (32, False),
         "float32": (32, True), "bool": (1, False)}
_F32_MAX = 3.4028234663852886e38
_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")


class StatusFlag(IntFlag):
    """Bits of the ``status`` sensor signal (plant -> firmware)."""

    RUNNING = 0x01           # plant integrating in real time
    FAULT_ACTIVE = 0x02      # an injected fault is active
    TORQUE_LIMITED = 0x04    # a commanded torque was clipped to the joint's limit
    OVERRUN = 0x08           # the previous cycle missed its deadline
    COMMAND_TIMEOUT = 0x10   # no valid command frame within the timeout; torques held at 0
    COMMAND_REJECTED = 0x20  # the last command frame was rejected (length, CRC, counter, range)


# ----------------------------------------------------------------------------- errors
class MessageError(UserError):
    """A frame or value refused by a codec; ``kind`` says why (see REJECTION_KINDS)."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


class DecodeError(MessageError):
    """A received frame rejected: kind in unknown_id, length, crc, counter, range, nan."""


class EncodeError(MessageError):
    """Values refused by ``Codec.encode``: kind in length, range, nan."""


# ----------------------------------------------------------------------------- CRC, counters
CRC_WIDTH = {"crc8": 1, "crc16": 2}       # bytes of each CRC kind
def _crc8_table(poly: int = 0x1D) -> tuple[int, ...]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = ((c << 1) ^ poly) & 0xFF if c & 0x80 else (c << 1) & 0xFF
        table.append(c)
    return tuple(table)


CRC8_TABLE = _crc8_table()


def crc8_sae_j1850(data: bytes) -> int:
    """CRC-8 SAE J1850 (poly 0x1D, init 0xFF, not reflected, xorout 0xFF; check 0x4B)."""
    crc = 0xFF
    for b in data:
        crc = CRC8_TABLE[crc ^ b]
    return crc ^ 0xFF


def crc16_e2e_p05(data: bytes, data_id: int) -> int:
    """AUTOSAR E2E Profile 5's CRC: CRC-16/CCITT-FALSE of ``data``, then of the Data ID's low and
    high byte."""
    return crc16_ccitt_false(bytes((data_id & 0xFF, (data_id >> 8) & 0xFF)), crc16_ccitt_false(data))


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
    crc: str | None = None              # "crc8" | "crc16" (CRC_WIDTH), None without crc_byte
    counter_max_delta: int = 2          # counter steps still accepted (the steps beyond one: lost frames)

    @property
    def crc_bytes(self) -> tuple[int, ...]:
        """The payload bytes that hold the CRC."""
        return () if self.crc_byte is None else tuple(range(self.crc_byte, self.crc_byte + CRC_WIDTH[self.crc]))


# ----------------------------------------------------------------------------- codec
def _raw_range(sig: SignalSpec) -> tuple[float, float]:
    """Smallest and largest raw value of the signal's type and length."""
    if sig.is_float:
        return -_F32_MAX, _F32_MAX
    if sig.signed:
        return -(1 << (sig.length_bits - 1)), (1 << (sig.length_bits - 1)) - 1
    return 0, (1 << sig.length_bits) - 1


def representable(sig: SignalSpec) -> tuple[float, float]:
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
        self.crc = spec.crc
        self.crc_bytes = spec.crc_bytes
        self.data_id = spec.arbitration_id & 0xFFFF
        self.counter_max_delta = spec.counter_max_delta
        self.signal_names = tuple(s.name for s in spec.signals)
        self.units = tuple(s.unit for s in spec.signals)
        self.signal_index = {n: i for i, n in enumerate(self.signal_names)}
        self.counter_index = None if spec.counter is None else self.signal_index[spec.counter]
        self.counter_bits = 0 if spec.counter is None else spec.signals[self.counter_index].length_bits
        self._has_big = any(s.byte_order == "big" for s in spec.signals)
        self._enc = tuple(self._enc_entry(s, s.minimum, s.maximum) for s in spec.signals)
        self._enc_unchecked = tuple(self._enc_entry(s, *representable(s)) for s in spec.signals)
        self.decode_rows = tuple(self._dec_entry(s) for s in spec.signals)

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
            return self.signal_index[signal]
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
        vals = values.tolist() if hasattr(values, "tolist") else list(values)   # numpy: Python floats
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
            w = CRC_WIDTH[self.crc]
            data = data[:k] + self._crc(data[:k] + data[k + w:]).to_bytes(w, "little") + data[k + w:]
        return Frame(self.arbitration_id, data, self.is_fd, self.is_extended_id)

    def _crc(self, covered: bytes) -> int:
        """The CRC of the payload without its CRC bytes."""
        return crc8_sae_j1850(covered) if self.crc == "crc8" else crc16_e2e_p05(covered, self.data_id)

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
        if k is not None:
            w = CRC_WIDTH[self.crc]
            stored, computed = int.from_bytes(data[k:k + w], "little"), self._crc(data[:k] + data[k + w:])
            if stored != computed:
                raise DecodeError("crc", f"message {self.name}: {self.crc.upper()} at byte {k} = "
                                         f"0x{stored:0{2 * w}X}, computed 0x{computed:0{2 * w}X}")
        le = int.from_bytes(data, "little")
        be = int.from_bytes(data, "big") if self._has_big else 0
        res = _new_values(len(self.decode_rows)) if out is None else out
        for i, (big, shift, mask, sign, is_float, scale, offset, lo, hi) in enumerate(self.decode_rows):
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


def _new_values(n: int) -> np.ndarray:
    """A fresh output array of ``decode``; numpy is imported here so that importing the codecs
    does not load it (a firmware that passes ``out`` never needs it)."""
    import numpy

    return numpy.empty(n)
