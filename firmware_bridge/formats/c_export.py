"""C code for firmware from a bus map: pack/unpack of every frame, and the CRCs, rolling counters and
serial framing the emulator checks.

``export_c(bus, name, out_dir)`` writes four files:

* ``<name>.h``, ``<name>.c``: cantools' C generator run on the map's DBC (:mod:`firmware_bridge.formats.dbc`;
  a serial map's payloads are laid out as DBC frames for it, with the packet's id byte as frame
  id): per message a struct of raw signal values, ``<name>_<message>_pack(dst, &msg, size)`` and
  ``_unpack``, and per signal ``_encode(double)`` (physical to raw, rounded to nearest, as the
  emulator's codec) and ``_decode(raw)``. A CAN map's CRC is a plain signal ``<message>_crc`` there.
* ``<name>_protocol.h``, ``<name>_protocol.c``: what the generator does not cover, with the
  algorithms of firmware_bridge.wire.codec and firmware_bridge.wire.framing: CRC-8 SAE J1850, CRC-16/CCITT-FALSE,
  per protected message ``<name>_<message>_protect(frame)`` (computes and stores its CRC; call it
  after pack) and ``_crc_ok(frame)``, per message with a rolling counter its width, window and
  ``_counter_next``; on a serial map ``<name>_cobs_encode/_decode``, ``<name>_packet_write``
  (COBS(id, payload, CRC-16 big-endian) + 0x00) and ``<name>_packet_read`` (the inverse, -1 on a
  damaged packet).

The generated code is C99 and compiles cleanly with -Wall -Wextra -Werror. Needs ``cantools``.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from firmware_bridge.formats.dbc import dbc_text
from firmware_bridge.wire.bus_schema import BusSpec
from firmware_bridge.wire.codec import CRC_WIDTH, MessageSpec
from firmware_bridge.wire.framing import MAX_PAYLOAD, max_encoded_size
from config_schema import UserError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _codec_layout(bus: BusSpec) -> BusSpec:
    """The map as CAN frames for the C generator (a serial map: its payloads as FD-sized frames)."""
    if bus.kind != "serial":
        return bus
    return dataclasses.replace(bus, kind="canfd", data_bitrate_bps=bus.bitrate_bps)


def generated_sources(bus: BusSpec, name: str, source: str = "<map>") -> dict[str, str]:
    """File name -> text of the four C files of ``bus`` (``name``: the C prefix, an identifier)."""
    if not _IDENT.match(name):
        raise UserError(f"C name {name!r}: expected an identifier (letters, digits, _)")
    try:
        import cantools
        from cantools.database.can.c_source import generate
    except ImportError as exc:
        raise ImportError("hil bus export --c needs the optional package cantools "
                          "(pip install 'ella-hil[dbc]' or pip install cantools)") from exc
    db = cantools.database.load_string(dbc_text(_codec_layout(bus), source), database_format="dbc")
    header, code, _, _ = generate(db, name, f"{name}.h", f"{name}.c", f"{name}_fuzzer.c",
                                  floating_point_numbers=True, use_round=True)
    proto_h, proto_c = _protocol(bus, name, source)
    return {f"{name}.h": header, f"{name}.c": code, f"{name}_protocol.h": proto_h, f"{name}_protocol.c": proto_c}


def export_c(bus: BusSpec, name: str, out_dir: str | Path, source: str = "<map>") -> list[Path]:
    """Write the C files of ``bus`` into ``out_dir``; the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for file, text in generated_sources(bus, name, source).items():
        (out / file).write_text(text)
        paths.append(out / file)
    return paths


# ----------------------------------------------------------------------------- protocol files
_CRC_FUNCTIONS = '''uint8_t {p}_crc8_sae_j1850(const uint8_t *data, size_t size)
{{
    uint8_t crc = 0xFFu;
    for (size_t i = 0; i < size; i++) {{
        crc ^= data[i];
        for (int bit = 0; bit < 8; bit++) {{
            crc = (uint8_t)((crc & 0x80u) ? (((unsigned)crc << 1) ^ 0x1Du) : ((unsigned)crc << 1));
        }}
    }}
    return (uint8_t)(crc ^ 0xFFu);
}}

uint16_t {p}_crc16_ccitt_false(const uint8_t *data, size_t size, uint16_t crc)
{{
    for (size_t i = 0; i < size; i++) {{
        crc ^= (uint16_t)((uint16_t)data[i] << 8);
        for (int bit = 0; bit < 8; bit++) {{
            crc = (uint16_t)((crc & 0x8000u) ? (((unsigned)crc << 1) ^ 0x1021u) : ((unsigned)crc << 1));
        }}
    }}
    return crc;
}}
'''

_COBS_FUNCTIONS = '''size_t {p}_cobs_encode(const uint8_t *in, size_t size, uint8_t *out)
{{
    size_t code_at = 0, o = 1;
    uint8_t code = 1;
    for (size_t i = 0; i < size; i++) {{
        if (in[i] != 0u) {{
            out[o++] = in[i];
            code++;
        }}
        if (in[i] == 0u || code == 0xFFu) {{
            out[code_at] = code;
            code_at = o++;
            code = 1;
        }}
    }}
    out[code_at] = code;
    return o;
}}

long {p}_cobs_decode(const uint8_t *in, size_t size, uint8_t *out, size_t capacity)
{{
    size_t i = 0, o = 0;
    while (i < size) {{
        uint8_t code = in[i++];
        if (code == 0u || i + code - 1u > size) {{
            return -1;
        }}
        for (uint8_t k = 1; k < code; k++) {{
            if (o >= capacity) {{
                return -1;
            }}
            out[o++] = in[i++];
        }}
        if (code != 0xFFu && i < size) {{
            if (o >= capacity) {{
                return -1;
            }}
            out[o++] = 0;
        }}
    }}
    return (long)o;
}}

size_t {p}_packet_write(uint8_t id, const uint8_t *payload, size_t size, uint8_t *out)
{{
    uint8_t body[{P}_MAX_PAYLOAD + 3u];
    body[0] = id;
    memcpy(&body[1], payload, size);
    uint16_t crc = {p}_crc16_ccitt_false(body, size + 1u, 0xFFFFu);
    body[size + 1u] = (uint8_t)(crc >> 8);
    body[size + 2u] = (uint8_t)crc;
    size_t n = {p}_cobs_encode(body, size + 3u, out);
    out[n] = 0;
    return n + 1u;
}}

long {p}_packet_read(const uint8_t *packet, size_t size, uint8_t *id, uint8_t *payload, size_t capacity)
{{
    uint8_t body[{P}_MAX_PAYLOAD + 3u];
    if (size > 0u && packet[size - 1u] == 0u) {{
        size--;
    }}
    long n = {p}_cobs_decode(packet, size, body, sizeof body);
    if (n < 3 || {p}_crc16_ccitt_false(body, (size_t)n, 0xFFFFu) != 0u || (size_t)n - 3u > capacity) {{
        return -1;
    }}
    *id = body[0];
    memcpy(payload, &body[1], (size_t)n - 3u);
    return n - 3;
}}
'''


def _message_crc(p: str, spec: MessageSpec) -> tuple[list[str], list[str]]:
    """(header lines, source lines) of one protected message's protect/crc_ok."""
    m = f"{p}_{spec.name}"
    k, w, n = spec.crc_byte, CRC_WIDTH[spec.crc], spec.length
    covered = [f"    uint8_t covered[{n - w}];",                       # every payload byte but the CRC's
               f"    memcpy(covered, frame, {k}u);",
               f"    memcpy(&covered[{k}], &frame[{k + w}], {n - k - w}u);"]
    if spec.crc == "crc8":
        what = f"CRC-8 SAE J1850 of bytes 0..{n - 1} but {k}, stored at byte {k}"
        compute = covered + [f"    uint8_t crc = {p}_crc8_sae_j1850(covered, {n - w}u);"]
        store = [f"    frame[{k}] = crc;"]
        check = f"frame[{k}] == crc"
        ctype = "uint8_t"
    else:
        data_id = spec.arbitration_id & 0xFFFF
        what = (f"CRC-16/CCITT-FALSE of bytes 0..{n - 1} but {k}..{k + 1}, then Data ID 0x{data_id:04X} "
                f"(low byte, high byte), stored little-endian at byte {k} (AUTOSAR E2E Profile 5)")
        compute = covered + [f"    static const uint8_t data_id[2] = {{0x{data_id & 0xFF:02X}u, 0x{data_id >> 8:02X}u}};",
                             f"    uint16_t crc = {p}_crc16_ccitt_false(covered, {n - w}u, 0xFFFFu);",
                             f"    crc = {p}_crc16_ccitt_false(data_id, 2u, crc);"]
        store = [f"    frame[{k}] = (uint8_t)crc;", f"    frame[{k + 1}] = (uint8_t)(crc >> 8);"]
        check = f"frame[{k}] == (uint8_t)crc && frame[{k + 1}] == (uint8_t)(crc >> 8)"
        ctype = "uint16_t"
    header = [f"/* {spec.name}: {what}. */",
              f"#define {m.upper()}_CRC_BYTE ({k}u)",
              f"void {m}_protect(uint8_t frame[{n}]);",
              f"bool {m}_crc_ok(const uint8_t frame[{n}]);", ""]
    body = [f"static {ctype} {m}_crc(const uint8_t *frame)", "{", *compute, "    return crc;", "}", "",
            f"void {m}_protect(uint8_t frame[{n}])", "{", f"    {ctype} crc = {m}_crc(frame);", *store, "}", "",
            f"bool {m}_crc_ok(const uint8_t frame[{n}])", "{", f"    {ctype} crc = {m}_crc(frame);",
            f"    return {check};", "}", ""]
    return header, body


def _message_counter(p: str, spec: MessageSpec) -> list[str]:
    m = f"{p}_{spec.name}"
    bits = next(s.length_bits for s in spec.signals if s.name == spec.counter)
    return [f"/* {spec.name}: rolling counter {spec.counter}, {bits} bits, +1 per frame; a receiver takes "
            f"steps 1..{spec.counter_max_delta}. */",
            f"#define {m.upper()}_COUNTER_BITS ({bits}u)",
            f"#define {m.upper()}_COUNTER_MAX_DELTA ({spec.counter_max_delta}u)",
            f"static inline uint32_t {m}_counter_next(uint32_t value)",
            "{", f"    return (value + 1u) & {(1 << bits) - 1}u;", "}", ""]


def _protocol(bus: BusSpec, p: str, source: str) -> tuple[str, str]:
    guard = f"{p.upper()}_PROTOCOL_H"
    serial = bus.kind == "serial"
    h = [f"/* {p}_protocol.h: CRCs, rolling counters{' and serial packets' if serial else ''} of bus map "
         f"{Path(source).name} (generated by hil bus export --c). */",
         f"#ifndef {guard}", f"#define {guard}", "", "#include <stdbool.h>", "#include <stddef.h>",
         "#include <stdint.h>", "", "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
         f"#define {p.upper()}_CYCLE_S ({bus.cycle_s!r})", "",
         "/* CRC-8 SAE J1850: poly 0x1D, init 0xFF, xorout 0xFF, not reflected (check 0x4B). */",
         f"uint8_t {p}_crc8_sae_j1850(const uint8_t *data, size_t size);",
         "/* CRC-16/CCITT-FALSE: poly 0x1021, not reflected, no xorout; start with crc = 0xFFFF (check 0x29B1). */",
         f"uint16_t {p}_crc16_ccitt_false(const uint8_t *data, size_t size, uint16_t crc);", ""]
    c = [f'/* {p}_protocol.c: see {p}_protocol.h (generated by hil bus export --c). */', "",
         "#include <string.h>", "", f'#include "{p}_protocol.h"', "", _CRC_FUNCTIONS.format(p=p)]
    for spec in bus.messages:
        h += [f"#define {p.upper()}_{spec.name.upper()}_RATE_DIVIDER ({spec.rate_divider}u)",
              f"#define {p.upper()}_{spec.name.upper()}_RATE_OFFSET ({spec.rate_offset}u)"]
        if spec.crc is not None:
            hh, cc = _message_crc(p, spec)
            h += hh
            c += cc
        if spec.counter is not None:
            h += _message_counter(p, spec)
    if serial:
        longest = max(s.length for s in bus.messages)
        h += ["/* Serial packets: COBS(id, payload, CRC-16/CCITT-FALSE of id and payload, big-endian) + 0x00. */",
              f"#define {p.upper()}_MAX_PAYLOAD ({MAX_PAYLOAD}u)",
              f"#define {p.upper()}_MAX_PACKET ({max_encoded_size(longest) + 1}u)   /* the longest packet of this map, "
              "with its 0x00 */",
              f"size_t {p}_cobs_encode(const uint8_t *in, size_t size, uint8_t *out);   /* out: size + size / 254 + 1 bytes */",
              f"long {p}_cobs_decode(const uint8_t *in, size_t size, uint8_t *out, size_t capacity);  /* -1: invalid */",
              f"size_t {p}_packet_write(uint8_t id, const uint8_t *payload, size_t size, uint8_t *out);  /* bytes written */",
              f"long {p}_packet_read(const uint8_t *packet, size_t size, uint8_t *id, uint8_t *payload, size_t capacity);"
              "  /* payload bytes, -1: damaged */", ""]
        c.append(_COBS_FUNCTIONS.format(p=p, P=p.upper()))
    h += ["#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {guard} */", ""]
    return "\n".join(h), "\n".join(c)
