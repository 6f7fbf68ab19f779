"""Bus-map files: ``configs/bus/<name>.toml`` (or a DBC file, :mod:`firmware_bridge.formats.dbc`) read into validated
message layouts.

A bus map is shared by the emulator (plant side) and the firmware (controller side). Schema (every
key is checked; an unknown key is an error with the closest allowed name suggested)::

    [bus]      kind = "can" | "canfd" | "serial", bitrate_bps (serial: baud, 8N1),
               data_bitrate_bps (canfd only, >= bitrate_bps), cycle_s > 0 (nominal 0.001)
    [[message]]
               name, id (CAN id; serial: the packet's id byte), direction = "to_plant"
               (commands) | "to_firmware" (sensors/status), dlc (CAN/CAN FD payload bytes:
               0..8, FD also 12..64) or length_bytes (serial, 1..255), extended_id (CAN,
               default false), rate_divider (send when cycle % N == rate_offset; default 1;
               0 = on event only), rate_offset (default 0), counter (name of the rolling-counter
               signal: unsigned, scale 1, offset 0, wraps at 2**length_bits), counter_max_delta
               (counter steps a receiver still takes, the steps beyond one counted as lost frames;
               default 2), crc_byte (first byte of the CRC), crc = "crc8" (CRC-8 SAE J1850 of all
               other payload bytes; the default on CAN and serial buses) | "crc16" (CRC-16/CCITT-
               FALSE of all other payload bytes and the id as Data ID, little-endian in crc_byte
               and crc_byte + 1: AUTOSAR E2E Profile 5's CRC; the default on CAN FD buses); see
               firmware_bridge.wire.codec
      [[message.signal]]
               name, type (int8..int32, uint8..uint32, float32, bool), start_bit,
               length_bits (default: the type's width; at most that width; float32: 32),
               byte_order = "little" (default; start_bit = LSB, bit 8*byte + bit_in_byte) |
               "big" (Motorola as in DBC: start_bit = MSB in the same numbering),
               scale (physical per LSB, default 1), offset (default 0), unit,
               min / max (physical range, default: all the raw type can represent)

A signal name is unique on a bus, except counters, which may repeat (e.g. ``cycle`` in every
sensor frame); signals of a message do not overlap, nor the CRC byte. Errors raise
:class:`config_schema.ConfigError` naming file, key, value and the expected unit.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from config_schema import MISSING, Document, Table, is_integer, suggest
from firmware_bridge.wire.codec import CRC_WIDTH, DIRECTIONS, TYPES, MessageSpec, SignalSpec, representable
from firmware_bridge.wire.framing import MAX_PAYLOAD

KINDS = ("can", "canfd", "serial")
FD_LENGTHS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64)
BYTE_ORDERS = ("little", "big")
BUS_KEYS = ("kind", "bitrate_bps", "data_bitrate_bps", "cycle_s")
MESSAGE_KEYS = ("name", "id", "direction", "dlc", "length_bytes", "extended_id", "rate_divider",
                "rate_offset", "counter", "counter_max_delta", "crc", "crc_byte", "signal")
SIGNAL_KEYS = ("name", "type", "start_bit", "length_bits", "byte_order", "scale", "offset",
               "unit", "min", "max")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_IDENTIFIER_TEXT = "an identifier (letters, digits, _)"


@dataclass(frozen=True)
class BusSpec:
    """A validated bus map: the bus and its messages in file order."""

    kind: str
    bitrate_bps: int
    data_bitrate_bps: int | None
    cycle_s: float
    messages: tuple[MessageSpec, ...]


def read_bus_map(data: dict, source: str) -> BusSpec:
    """The bus map in ``data`` (parsed TOML, or a DBC file and its sidecar merged by firmware_bridge.formats.dbc)."""
    return _Reader(Document(source)).bus_map(data)


def _label(d: Any, prefix: str, i: int) -> str:
    """'prefix[name]' for an entry with a string name, else 'prefix[i]'."""
    name = d.get("name") if isinstance(d, dict) else None
    return f"{prefix}[{name}]" if isinstance(name, str) and name else f"{prefix}[{i}]"


def _bits(mask: int) -> str:
    """'bits a..b' of a contiguous-or-not little-endian mask (lowest..highest set bit)."""
    return f"bits {(mask & -mask).bit_length() - 1}..{mask.bit_length() - 1}"


class _Reader:
    """Validates the parsed dict of one bus map."""

    def __init__(self, doc: Document):
        self.doc = doc

    # ------------------------------------------------------------------ bus
    def bus_map(self, data: dict) -> BusSpec:
        top = self.doc.root(data, ("bus", "message"))
        bus = top.table("bus", BUS_KEYS, required=True, what="a [bus] table")
        kind = bus.choice("kind", MISSING, KINDS)
        bitrate = bus.integer("bitrate_bps", minimum=1, maximum=10**9, what="bit/s")
        data_bitrate = None
        if kind == "canfd":
            data_bitrate = bus.integer("data_bitrate_bps", minimum=bitrate, maximum=10**9, what="bit/s")
        elif bus.has("data_bitrate_bps"):
            raise bus.error("data_bitrate_bps", bus.raw("data_bitrate_bps"), 'only for kind = "canfd"')
        cycle_s = bus.number("cycle_s", unit="s", positive=True)
        raw = top.array_of_tables("message", required=True, what="one or more [[message]] tables")
        return BusSpec(kind, bitrate, data_bitrate, cycle_s, self.messages(raw, kind))

    def messages(self, raw: list, kind: str) -> tuple[MessageSpec, ...]:
        specs: list[MessageSpec] = []
        for i, m in enumerate(raw):
            spec = self.message(m, i, kind)
            for other in specs:
                if other.name == spec.name:
                    raise self.doc.error(f"message[{i}].name", spec.name, "expected a unique message name")
                if (other.arbitration_id, other.extended_id) == (spec.arbitration_id, spec.extended_id):
                    raise self.doc.error(f"message[{spec.name}].id", spec.arbitration_id,
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
                    raise self.doc.error(f"message[{spec.name}].signal[{s.name}].name", s.name,
                                         f"expected a signal name not used in message {first.name} "
                                         "(only counters may repeat)")

    def message(self, m: dict, i: int, kind: str) -> MessageSpec:
        where = _label(m, "message", i)
        t = Table(self.doc, m, where, where, MESSAGE_KEYS, "a [[message]] table")
        name = t.name("name", pattern=_IDENTIFIER, what=_IDENTIFIER_TEXT)
        extended = t.boolean("extended_id", False)
        if extended and kind == "serial":
            raise t.error("extended_id", extended, "expected false: extended ids are CAN only")
        id_max = 0xFF if kind == "serial" else 0x1FFFFFFF if extended else 0x7FF
        ident = t.integer("id", minimum=0, maximum=id_max, what="serial id byte" if kind == "serial" else "CAN id")
        direction = t.choice("direction", MISSING, DIRECTIONS)
        length = self.length(t, kind)
        divider = t.integer("rate_divider", 1, minimum=0, maximum=10**6, what="cycles; 0 = on event")
        offset = t.integer("rate_offset", 0, minimum=0, maximum=max(divider - 1, 0), what="cycles")
        signals = self.signals(t, where, length)
        crc_kind, crc = self.crc(t, kind, length, signals)
        counter = t.raw("counter", None)
        max_delta = 2
        if counter is not None:
            bits = self.check_counter(t, counter, signals, where)
            max_delta = t.integer("counter_max_delta", 2, minimum=1, maximum=(1 << bits) - 1,
                                  what="counter steps a receiver takes")
        elif t.has("counter_max_delta"):
            raise t.error("counter_max_delta", t.raw("counter_max_delta"), "only with a counter")
        return MessageSpec(name, ident, direction, length, extended, divider, offset, counter,
                           crc, signals, crc_kind, max_delta)

    def crc(self, t: Table, kind: str, length: int, signals: tuple[SignalSpec, ...]) -> tuple[str | None, int | None]:
        """(CRC kind, first CRC byte) of a message, or (None, None) without crc_byte."""
        if not t.has("crc_byte"):
            if t.has("crc"):
                raise t.error("crc", t.raw("crc"), "only with crc_byte (the byte the CRC starts at)")
            return None, None
        crc_kind = t.choice("crc", "crc16" if kind == "canfd" else "crc8", tuple(CRC_WIDTH))
        width = CRC_WIDTH[crc_kind]
        if length < width + 1:
            raise t.error("crc", crc_kind, f"a {width}-byte CRC needs a payload of more than {width} bytes")
        crc = t.integer("crc_byte", minimum=0, maximum=length - width,
                        what=f"byte index of the {width}-byte {crc_kind.upper()}")
        for s in signals:
            if s.frame_mask & (((1 << 8 * width) - 1) << 8 * crc):
                raise t.error("crc_byte", crc, f"expected {width} byte(s) free of signals for the {crc_kind.upper()}; "
                                               f"signal {s.name} uses them")
        return crc_kind, crc

    def length(self, t: Table, kind: str) -> int:
        key, other = ("length_bytes", "dlc") if kind == "serial" else ("dlc", "length_bytes")
        if t.has(other):
            raise t.error(other, t.raw(other), f"use {key} on a {kind} bus")
        if kind == "serial":
            return t.integer(key, minimum=1, maximum=MAX_PAYLOAD, what="bytes")
        if kind == "can":
            return t.integer(key, minimum=0, maximum=8, what="bytes")
        v = t.raw(key)
        if not is_integer(v) or v not in FD_LENGTHS:
            raise t.error(key, v, f"{'required; ' if v is MISSING else ''}expected a CAN FD length in bytes: "
                                  f"{', '.join(map(str, FD_LENGTHS))}")
        return int(v)

    def check_counter(self, t: Table, counter: Any, signals: tuple[SignalSpec, ...], where: str) -> int:
        """Check the counter signal; its width in bits."""
        sig = next((s for s in signals if s.name == counter), None)
        if sig is None:
            did = suggest(counter, [s.name for s in signals]) if isinstance(counter, str) else ""
            raise t.error("counter", counter, f"expected the name of a signal of this message{did}")
        if not sig.type.startswith("uint") or sig.scale != 1 or sig.offset != 0:
            raise t.error("counter", counter, "expected an unsigned integer signal with scale 1 and offset 0")
        if (sig.minimum, sig.maximum) != representable(sig):
            raise self.doc.error(f"{where}.signal[{counter}].min", sig.minimum,
                                 "no min/max on a counter (it wraps at 2**length_bits)")
        return sig.length_bits

    # ------------------------------------------------------------------ signals
    def signals(self, t: Table, where: str, length: int) -> tuple[SignalSpec, ...]:
        out: list[SignalSpec] = []
        for j, d in enumerate(t.array_of_tables("signal", what="[[message.signal]] tables")):
            swhere = _label(d, f"{where}.signal", j)
            s = self.signal(d, swhere, length)
            for other in out:
                if other.name == s.name:
                    raise self.doc.error(f"{swhere}.name", s.name, "expected a unique signal name")
                if other.frame_mask & s.frame_mask:
                    raise self.doc.error(f"{swhere}.start_bit", s.start_bit,
                                         f"{s.name} ({_bits(s.frame_mask)}) overlaps {other.name} "
                                         f"({_bits(other.frame_mask)}); expected disjoint bits")
            out.append(s)
        return tuple(out)

    def signal(self, d: dict, where: str, length: int) -> SignalSpec:
        t = Table(self.doc, d, where, where, SIGNAL_KEYS, "a [[message.signal]] table")
        name = t.name("name", pattern=_IDENTIFIER, what=_IDENTIFIER_TEXT)
        typ = t.choice("type", MISSING, tuple(TYPES))
        width = TYPES[typ][0]
        nbits = t.integer("length_bits", width, minimum=32 if typ == "float32" else 1, maximum=width, what="bits")
        order = t.choice("byte_order", "little", BYTE_ORDERS)
        start = t.integer("start_bit", minimum=0, maximum=max(8 * length - 1, 0), what="bit index")
        shift, mask = self.placement(start, nbits, order, length, t.key("start_bit"))
        unit = t.string("unit", "", what="a string")
        scale = t.number("scale", 1.0, unit=f"{unit or '1'} per LSB")
        if scale == 0:
            raise t.error("scale", scale, f"expected a non-zero number in {unit or '1'} per LSB")
        offset = t.number("offset", 0.0, unit=unit or "1")
        sig = SignalSpec(name, typ, start, nbits, order, scale, offset, unit, 0.0, 0.0, shift, mask)
        rep_lo, rep_hi = representable(sig)
        lo = t.number("min", rep_lo, unit=unit or "1")
        hi = t.number("max", rep_hi, unit=unit or "1")
        tol = 1e-9 * abs(scale)
        for key, v in (("min", lo), ("max", hi)):
            if not rep_lo - tol <= v <= rep_hi + tol:
                raise t.error(key, v, f"not representable: {typ} of {nbits} bits with scale {scale:g} "
                                      f"and offset {offset:g} spans {rep_lo:g} .. {rep_hi:g} {unit}".rstrip())
        if lo > hi:
            raise t.error("max", hi, f"expected max >= min = {lo:g} {unit}".rstrip())
        return SignalSpec(name, typ, start, nbits, order, scale, offset, unit, lo, hi, shift, mask)

    def placement(self, start: int, nbits: int, order: str, length: int, key: str) -> tuple[int, int]:
        """(shift in the frame integer of ``order``, mask in little-endian coordinates)."""
        if order == "little":
            if start + nbits > 8 * length:
                raise self.doc.error(key, start, f"signal of {nbits} bits from bit {start} ends past "
                                                 f"the {length}-byte frame (bit {8 * length - 1})")
            return start, ((1 << nbits) - 1) << start
        msb = 8 * (length - 1 - start // 8) + start % 8       # position in the big-endian integer
        shift = msb - nbits + 1
        if shift < 0:
            raise self.doc.error(key, start, f"big-endian signal of {nbits} bits with MSB at bit {start} "
                                             f"ends past the {length}-byte frame")
        be_mask = ((1 << nbits) - 1) << shift
        return shift, int.from_bytes(be_mask.to_bytes(length, "big"), "little")
