"""Bus message maps: which signal sits where in which frame, compiled into fast codecs.

A bus map (``configs/bus/<name>.toml``, schema in :mod:`firmware_bridge.wire.bus_schema`) is shared by
the emulator (plant side) and the reference firmware (controller side)::

    bus = BusMap.load("configs/bus/compact_classic.toml")
    cmd = bus.codec("cmd_torque")
    frame = cmd.encode([1.5, -20.0, 0.3, 0], counter=cycle)      # values in signal order
    codec, values = bus.decode(frame)                            # raises DecodeError(kind)

The codecs, their errors, the CRC and the counters are in :mod:`firmware_bridge.wire.codec` and
importable from here. Errors in a map raise :class:`config_schema.ConfigError` naming file, key,
value and the expected unit. This module also has the bus-load arithmetic and the CiA 301 service
frames (SYNC, NMT, heartbeat). Importing it loads neither numpy nor numba.

``python -m firmware_bridge.wire.messages MAP.toml ...`` prints each map's layout and bus load.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from config_schema import TextMemo, UserError, is_integer, parse_toml
from firmware_bridge.wire.bus_schema import BusSpec, read_bus_map
from firmware_bridge.wire.codec import (DIRECTIONS, REJECTION_KINDS, Codec, DecodeError, EncodeError, MessageSpec,
                                        StatusFlag, counter_delta, counter_next, crc8_sae_j1850)
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.framing import max_encoded_size

if TYPE_CHECKING:
    import numpy as np

# the codec names a bus-map user needs, importable from here
__all__ = ["DIRECTIONS", "REJECTION_KINDS", "BusMap", "Codec", "DecodeError", "EncodeError", "StatusFlag", "bus_load",
           "counter_delta", "counter_next", "crc8_sae_j1850", "describe", "frame_time_s", "heartbeat_frame", "main",
           "nmt_frame", "sync_frame"]


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
    def from_spec(cls, spec: BusSpec, source: str) -> BusMap:
        """The bus map of a validated ``spec`` (:mod:`firmware_bridge.wire.bus_schema`)."""
        return cls(spec.kind, spec.bitrate_bps, spec.data_bitrate_bps, spec.cycle_s, spec.messages, source)

    @classmethod
    def from_string(cls, text: str, source: str = "<string>") -> BusMap:
        """Parse bus-map TOML text (``source`` names it in error messages)."""
        return cls.from_spec(read_bus_map(parse_toml(text, source), source), source)

    @classmethod
    def load(cls, path: str | Path) -> BusMap:
        """Load and validate ``configs/bus/<name>.toml``, or a DBC file ``FILE.dbc`` with its sidecar
        ``FILE.dbc.toml`` (:meth:`from_dbc`); a missing, unreadable or binary file is a ConfigError
        naming it. A map read before from the same file name and text is that map again (LOADED_MAPS: a
        BusMap is never changed after it is made)."""
        if Path(path).suffix.lower() == ".dbc":
            return cls.from_dbc(path)
        return LOADED_MAPS.load(path)

    @classmethod
    def from_dbc(cls, path: str | Path, sidecar: str | Path | None = None) -> BusMap:
        """Bus map from a DBC file and its TOML sidecar (default ``FILE.dbc.toml``; needs the optional
        package ``cantools``); see :mod:`firmware_bridge.formats.dbc`."""
        from firmware_bridge.formats.dbc import read_dbc
        return cls.from_spec(read_dbc(path, sidecar), str(path))

    def spec(self) -> BusSpec:
        """The validated layout this map was built from."""
        return BusSpec(self.kind, self.bitrate_bps, self.data_bitrate_bps, self.cycle_s,
                       tuple(c.spec for c in self.codecs))

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
            raise UserError(f"direction {direction!r}: expected one of {', '.join(DIRECTIONS)}")
        return tuple(c for c in self.codecs if c.direction == direction)

    def find(self, signal: str) -> tuple[tuple[Codec, int], ...]:
        """Every (codec, index) that carries ``signal`` (counters may appear in several)."""
        hits = tuple((c, c.signal_index[signal]) for c in self.codecs if signal in c.signal_index)
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




# maps kept by file name and text: a campaign worker's cases, its emulator and firmware, share one
LOADED_MAPS: TextMemo[BusMap] = TextMemo(8, lambda text, source: BusMap.from_string(text, source))


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
    if not is_integer(node) or not lo <= node <= 127:
        raise UserError(f"node id {node!r}: expected an integer in {lo}..127")


def sync_frame(counter: int | None = None) -> Frame:
    """CiA 301 SYNC (COB-ID 0x080): no data, or one counter byte 1..240 if the SYNC counter
    (object 0x1019) is enabled."""
    if counter is None:
        return Frame(SYNC_ID, b"")
    if not is_integer(counter) or not 1 <= counter <= 240:
        raise UserError(f"SYNC counter {counter!r}: expected an integer in 1..240")
    return Frame(SYNC_ID, bytes((counter,)))


def nmt_frame(command: int, node: int = 0) -> Frame:
    """CiA 301 NMT node control (COB-ID 0x000): [command, node id]; node 0 addresses all."""
    if command not in NMT_COMMANDS:
        raise UserError(f"NMT command {command!r}: expected one of "
                         f"{', '.join(f'0x{c:02X}' for c in NMT_COMMANDS)}")
    _check_node(node, 0)
    return Frame(NMT_ID, bytes((command, node)))


def heartbeat_frame(node: int, state: int) -> Frame:
    """CiA 301 heartbeat (COB-ID 0x700 + node id): one byte with the NMT state."""
    _check_node(node, 1)
    if state not in NMT_STATES:
        raise UserError(f"NMT state {state!r}: expected one of "
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
    return "\n".join(lines + protection_lines(bus))


def protection_lines(bus: BusMap) -> list[str]:
    """Each message's check and the damage that passes it (firmware_bridge.wire.protection)."""
    from firmware_bridge.wire.protection import BIT_ERROR_RATE, protection

    lines = [f"  protection (the probability that a damaged frame passes; independent bit errors at rate "
             f"{BIT_ERROR_RATE:g}, or a frame of random bytes):"]
    per_hour = 0.0
    for c in bus.codecs:
        p = protection(c, bus.kind == "serial")
        hd = p.hamming_distance
        if p.check == "none":
            text = f"no CRC: any damage that keeps the values in range passes ({p.residual():.1e} per frame)"
        else:
            distance = f"Hamming distance {hd} (A{hd} = {p.undetected[hd]})" if hd else "Hamming distance above 4"
            text = (f"{p.check} over {p.bits} bits, {distance}: "
                    f"{p.residual():.1e} per frame, random bytes {p.random_frame():.1e}")
        if c.counter_index is not None:
            text += f"; counter {c.counter_bits} bits, window {c.counter_max_delta}"
        lines.append(f"    0x{c.arbitration_id:03X} {c.name:<24} {text}")
        if c.rate_divider:
            per_hour += p.residual() * 3600.0 / (bus.cycle_s * c.rate_divider)
    lines.append(f"  residual error rate at {1 / bus.cycle_s:g} Hz: {per_hour:.2g} damaged frames per hour pass "
                 f"(bit error rate {BIT_ERROR_RATE:g})")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print layout and bus load of each bus map given on the command line."""
    parser = argparse.ArgumentParser(prog="python -m firmware_bridge.wire.messages",
                                     description="Check bus maps and print their bus load.")
    parser.add_argument("maps", nargs="+", help="bus map files or shipped names (python -m firmware_bridge.describe "
                                                "prints their signal tables)")
    args = parser.parse_args(argv)
    from firmware_bridge.wire.shipped import resolve
    status = 0
    for name in args.maps:
        try:
            print(describe(BusMap.load(resolve(name))))
        except (UserError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
