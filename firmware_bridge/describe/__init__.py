"""What a firmware needs of a bus map, as tables: ``python -m firmware_bridge.describe MAP [MAP ...]``.

MAP is a bus map file (TOML, or a DBC with its sidecar) or the name of a shipped one (``compact_fd``,
``serial_frame``, ...: firmware_bridge.wire.shipped). For each message: its id, direction, length and rate;
its CRC (algorithm, the bytes it covers and where it sits) and rolling counter (the rules a receiver
applies); and per signal its bytes and bits, type, scale, offset, unit and range, so that

    physical = raw * scale + offset,   raw = round((physical - offset) / scale)

and a frame can be packed or checked by hand. A serial map adds the packet framing.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from config_schema import UserError
from firmware_bridge.wire.codec import CRC_WIDTH, Codec
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.shipped import resolve, shipped
from firmware_bridge.wire.frame_io import CounterCheck

KINDS = {"can": "classic CAN", "canfd": "CAN FD", "serial": "serial"}
DIRECTIONS = {"to_plant": "firmware -> emulator", "to_firmware": "emulator -> firmware"}
CRC_RULES = {
    "crc8": "CRC-8 SAE J1850 (poly 0x1D, init 0xFF, xorout 0xFF)",
    "crc16": "CRC-16 of AUTOSAR E2E Profile 5: CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF) of the covered "
             "bytes, continued over the Data ID's low then high byte",
}
SERIAL_FRAMING = ("serial framing: each frame is one packet, COBS(id byte + payload + CRC-16/CCITT-FALSE of id and "
                  "payload, big-endian) followed by a 0x00 delimiter (firmware_bridge.wire.framing)")


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def _number(x: float) -> str:
    return f"{x:.10g}"


def message_lines(c: Codec, bus: BusMap) -> list[str]:
    """One message: its header, protection and signal table."""
    spec = c.spec
    rate = (f"every {spec.rate_divider} cycle(s)" + (f", offset {spec.rate_offset}" if spec.rate_offset else "")
            if spec.rate_divider else "on event")
    ident = f"0x{c.arbitration_id:08X} (extended)" if c.is_extended_id else f"0x{c.arbitration_id:03X}"
    lines = [f"{ident}  {c.name}  {DIRECTIONS.get(c.direction, c.direction)}, {c.length} bytes, {rate}"]
    crc = c.crc_bytes
    if crc:
        covered = [b for b in range(c.length) if b not in crc]
        ranges = _ranges(covered)
        rule = CRC_RULES[spec.crc] + (f", Data ID 0x{c.data_id:04X} (the id's low 16 bits)" if spec.crc == "crc16"
                                      else "")
        where = (f"little-endian in bytes {_span(crc[0], crc[-1])}" if CRC_WIDTH[spec.crc] > 1
                 else f"in byte {crc[0]}")
        lines.append(f"  CRC: {rule}; over bytes {ranges}; stored {where}")
    else:
        lines.append("  CRC: none")
    if c.counter_index is not None:
        lines.append(f"  counter: {spec.counter}, {c.counter_bits} bits, +1 per frame and wrapping; the receiver "
                     f"takes 1 to {c.counter_max_delta} steps after the last frame it took (the steps beyond one "
                     "are lost frames), rejects a repeat or a larger jump, and follows a restarted sender after "
                     f"{CounterCheck.SYNC_FRAMES} of its frames in order")
    lines.append(f"  {'signal':<24} {'type':<8} {'bytes':<6} {'bits':<8} {'order':<7} {'scale':>14} {'offset':>8} "
                 f"{'unit':<8} {'min':>12} {'max':>12}")
    for s in spec.signals:
        last = s.start_bit + s.length_bits - 1
        lines.append(f"  {s.name:<24} {s.type:<8} {_span(s.start_bit // 8, last // 8):<6} "
                     f"{f'{s.start_bit}..{last}':<8} {s.byte_order:<7} {_number(s.scale):>14} {_number(s.offset):>8} "
                     f"{s.unit or '-':<8} {_number(s.minimum):>12} {_number(s.maximum):>12}")
    return lines


def _ranges(indices: list[int]) -> str:
    out, start = [], None
    for i, b in enumerate(indices):
        if start is None:
            start = b
        if i + 1 == len(indices) or indices[i + 1] != b + 1:
            out.append(_span(start, b))
            start = None
    return ", ".join(out) or "none"


def describe(bus: BusMap, name: str) -> str:
    """The tables of one bus map."""
    rates = f"{bus.bitrate_bps} bit/s" + (f" / {bus.data_bitrate_bps} bit/s data phase" if bus.data_bitrate_bps else "")
    lines = [f"{name} ({bus.source}): {KINDS.get(bus.kind, bus.kind)}, {rates}, cycle {bus.cycle_s * 1e3:g} ms",
             "  physical = raw * scale + offset; bits are numbered from bit 0 of byte 0 (little-endian payload)"]
    if bus.kind == "serial":
        lines.append(f"  {SERIAL_FRAMING}")
    for c in bus.codecs:
        lines += [""] + message_lines(c, bus)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m firmware_bridge.describe",
                                     description="Print a bus map's messages, protection and signals as tables.")
    parser.add_argument("maps", nargs="+", help="bus map files or shipped names (" + ", ".join(shipped()) + ")")
    args = parser.parse_args(argv)
    status = 0
    for i, name in enumerate(args.maps):
        try:
            text = describe(BusMap.load(resolve(name)), name)
        except (UserError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 2
            continue
        try:
            print(("\n" if i else "") + text, flush=True)
        except BrokenPipeError:         # the reader (`| head`) has had enough
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return status
    return status

