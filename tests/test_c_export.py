"""C code for firmware (firmware_bridge.formats.c_export, hil bus export --c): every shipped map's files compile
with -Wall -Wextra -Werror -std=c99 -pedantic; a generated C program packs random values to the bytes the
Python codec encodes (CRC, serial packet and all) and unpacks the codec's frames to its values, and
tells when a byte differs (C from a wrong map); the C example firmwares on the generated code (serial at
1 kHz, udp_loopback at 10 kHz) close the loop to the set-points in lockstep."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from firmware_bridge.formats.c_export import export_c
from firmware_bridge.wire.codec import crc8_sae_j1850
from firmware_bridge.wire.framing import crc16_ccitt_false, encode_packet
from firmware_bridge.wire.messages import BusMap
from tools import c_firmware
from wire_values import random_values

pytest.importorskip("cantools")
GCC = shutil.which("gcc")
pytestmark = pytest.mark.skipif(GCC is None, reason="no gcc on this machine")

ROOT = Path(__file__).resolve().parent.parent
MAPS = sorted(ROOT.glob("configs/bus/*.toml")) + [ROOT / "tests/bus_maps/odd_can.toml"]   # every shipped map, and
# one with extended ids, big-endian, bool, float32 and offset signals
CFLAGS = ["-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-O1"]


def _bytes(data: bytes) -> str:
    return "{" + ", ".join(f"0x{b:02X}u" for b in data) + "}" if data else "{0}"


def c_program(c_map: BusMap, py_map: BusMap, cases: int, seed: int = 11) -> tuple[str, list[str]]:
    """A C program on the code generated for ``c_map`` (prefix m) and the lines it must print: for
    random values, the frame (and serial packet) the Python codec of ``py_map`` encodes, and the
    values it decodes from that frame."""
    rng = random.Random(seed)
    serial = py_map.kind == "serial"
    check = b"123456789"       # the CRC catalogue's check input: 0x4B and 0x29B1
    body = ['    static const uint8_t check[9] = {0x31u, 0x32u, 0x33u, 0x34u, 0x35u, 0x36u, 0x37u, 0x38u, 0x39u};',
            '    printf("check %02x %04x\\n", m_crc8_sae_j1850(check, 9u), m_crc16_ccitt_false(check, 9u, 0xFFFFu));']
    expected = [f"check {crc8_sae_j1850(check):02x} {crc16_ccitt_false(check):04x}"]
    for codec in py_map.codecs:
        m, n = f"m_{codec.name}", codec.length
        for i in range(cases):
            values = random_values(codec, rng)
            frame = codec.encode(values)
            decoded = codec.decode(frame)
            body.append("    {")
            body.append(f"        struct {m}_t msg;")
            body.append("        memset(&msg, 0, sizeof msg);")
            body += [f"        msg.{s} = {m}_{s}_encode({v!r});" for s, v in zip(codec.signal_names, values)]
            body.append(f"        uint8_t buf[{max(n, 1)}] = {{0}};")
            body.append(f"        {m}_pack(buf, &msg, {n}u);")
            if codec.crc is not None:
                body.append(f"        {m}_protect(buf);")
            body.append(f'        show("pack {codec.name} {i}", buf, {n}u);')
            expected.append(f"pack {codec.name} {i} {frame.data.hex()}")
            if serial:
                body.append("        uint8_t wire[M_MAX_PAYLOAD + 8];")
                body.append(f'        show("packet {codec.name} {i}", wire, '
                            f'm_packet_write({m.upper()}_FRAME_ID, buf, {n}u, wire));')
                expected.append(f"packet {codec.name} {i} {encode_packet(codec.arbitration_id, frame.data).hex()}")
            body.append(f"        static const uint8_t in[{max(n, 1)}] = {_bytes(frame.data)};")
            body.append(f"        {m}_unpack(&msg, in, {n}u);")
            line = f"unpack {codec.name} {i}"
            if codec.crc is not None:
                body.append(f'        printf("{line} crc %d", (int){m}_crc_ok(in));')
                line += " crc 1"
            else:
                body.append(f'        printf("{line}");')
            for s, v in zip(codec.signal_names, decoded):
                body.append(f'        printf(" %.17g", {m}_{s}_decode(msg.{s}));')
                line += f" {float(v)!r}"
            body.append('        printf("\\n");')
            body.append("    }")
            expected.append(line)
    head = ["#include <stdio.h>", "#include <string.h>", '#include "m.h"', '#include "m_protocol.h"', "",
            "static void show(const char *what, const uint8_t *p, size_t n)", "{", '    printf("%s ", what);',
            '    for (size_t i = 0; i < n; i++) printf("%02x", p[i]);', '    printf("\\n");', "}", "",
            "int main(void)", "{"]
    return "\n".join(head + body + ["    return 0;", "}", ""]), expected


def c_mismatches(c_map: BusMap, py_map: BusMap, tmp_path: Path, cases: int = 25) -> list[str]:
    """The lines where the C code of ``c_map`` disagrees with the Python codec of ``py_map``."""
    gen = tmp_path / "gen"
    export_c(c_map.spec(), "m", gen, c_map.source)
    text, expected = c_program(c_map, py_map, cases)
    (gen / "check.c").write_text(text)
    binary = gen / "check"
    subprocess.run([GCC, *CFLAGS, "-I", str(gen), "-o", str(binary), str(gen / "check.c"), str(gen / "m.c"),
                    str(gen / "m_protocol.c"), "-lm"], check=True, timeout=300, capture_output=True)
    got = subprocess.run([str(binary)], check=True, capture_output=True, text=True, timeout=60).stdout.splitlines()
    assert len(got) == len(expected)
    return [g for g, e in zip(got, expected) if _parsed(g) != _parsed(e)]


def _parsed(line: str) -> list:
    words = line.split()
    return [float(w) if words[0] == "unpack" and w[0] in "-0123456789" else w for w in words]


# ----------------------------------------------------------------------------- compile
@pytest.mark.parametrize("path", MAPS, ids=lambda p: p.stem)
def test_the_generated_code_of_every_map_compiles_with_all_warnings_as_errors(path, tmp_path):
    bus = BusMap.load(path)
    files = export_c(bus.spec(), path.stem, tmp_path, bus.source)
    assert sorted(p.name for p in files) == sorted(f"{path.stem}{s}" for s in (".h", ".c", "_protocol.h", "_protocol.c"))
    for source in (f for f in files if f.suffix == ".c"):
        proc = subprocess.run([GCC, *CFLAGS, "-Wconversion", "-c", str(source), "-o", str(tmp_path / "x.o")],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------------------- C equals Python
@pytest.mark.parametrize("path", MAPS, ids=lambda p: p.stem)
def test_c_packs_and_unpacks_exactly_as_the_python_codec(path, tmp_path):
    bus = BusMap.load(path)
    assert c_mismatches(bus, bus, tmp_path) == []


@pytest.mark.parametrize("name, old, new, message", [
    ("compact_fd", 'name = "tau_elbow"\n  type = "int16"\n  start_bit = 32\n  scale = 0.02',
     'name = "tau_elbow"\n  type = "int16"\n  start_bit = 32\n  scale = 0.025', "cmd_torque"),
    ("compact_classic", 'name = "status"\n  type = "uint8"', 'name = "status"\n  type = "int8"', "enc_b"),
    ("serial_frame", "id = 0x81", "id = 0x82", "sensors"),
])
def test_c_from_a_wrong_map_is_caught_byte_for_byte(tmp_path, name, old, new, message):
    path = ROOT / "configs/bus" / f"{name}.toml"
    text = path.read_text()
    assert old in text
    wrong = BusMap.from_string(text.replace(old, new, 1), f"wrong_{name}.toml")
    mismatches = c_mismatches(wrong, BusMap.load(path), tmp_path, cases=5)
    assert mismatches and all(f" {message} " in line for line in mismatches), mismatches


# ----------------------------------------------------------------------------- the example firmware
@pytest.mark.parametrize("source, bus, arm, link, argv, duration_s, period_s", [
    ("ella_pid_generated.c", "serial_frame", "ella", [], "{port}", 4, 1e-3),
    ("ella_pid_udp.c", "udp_10khz", "configs/ella_10khz.toml", ["--link", f"canfd:udp_loopback:cudp-{os.getpid()},nodes=2"],
     "{channel} 2", 3, 1e-4),
])
def test_the_c_examples_on_the_generated_code_close_the_loop_in_lockstep(tmp_path, source, bus, arm, link, argv,
                                                                          duration_s, period_s):
    binary = c_firmware.build(source, bus, tmp_path)
    proc = subprocess.run([sys.executable, "-m", "hil", "run", arm, "--bus", bus, *link, "--mode", "lockstep",
                           "--duration", str(duration_s), "--json", "--targets", "seed000_setpoints", "--check",
                           "--firmware", f"{binary} {argv}"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    cycles = round(duration_s / period_s)
    assert s["cycles"] == cycles and s["commands"]["accepted"] == cycles
    assert not any(s["commands"]["rejected"].values()), s["commands"]
    assert [v["name"] for v in s["verdicts"] if not v["passed"]] == []
    assert {v["name"] for v in s["verdicts"]} >= {"setpoint_base_yaw", "setpoint_shoulder_pitch", "setpoint_elbow"}


def test_a_c_example_that_does_not_compile_is_refused_naming_the_step(tmp_path):
    with pytest.raises(RuntimeError, match=r"ella_pid_udp\.c: .*error"):
        c_firmware.build("ella_pid_udp.c", "serial_frame", tmp_path / "build")     # the wrong map's names
    with pytest.raises(RuntimeError, match="hil bus export no_such_map --c"):
        c_firmware.build("ella_pid_udp.c", "no_such_map", tmp_path / "build")