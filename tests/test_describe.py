"""`python -m firmware_bridge.describe`: a bus map's tables are enough to pack a frame by hand. A frame
packed from the printed table alone (bytes, bits, scale, offset, CRC rule and place, counter) equals the
codec's own, for every shipped kind of protection; shipped names resolve, a wrong one gets a suggestion."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from firmware_bridge.describe import describe, main
from firmware_bridge.wire.shipped import resolve, shipped
from firmware_bridge.wire.codec import crc8_sae_j1850, crc16_e2e_p05
from firmware_bridge.wire.messages import BusMap

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^  (\w+)\s+(u?int\d+|float32)\s+(\d+)(?:-(\d+))?\s+(\d+)\.\.(\d+)\s+(\w+)\s+(\S+)\s+(\S+)\s+")


def message_block(text: str, name: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^0x\w+\s+{name}\s", line))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def pack_by_hand(block: list[str], values: dict[str, float], counter: int) -> bytes:
    """A payload from the description alone."""
    length = int(re.search(r", (\d+) bytes,", block[0]).group(1))
    word = 0
    for line in block:
        m = ROW.match(line)
        if not m or m.group(2) == "float32":
            continue
        name, kind, _, _, first, last, order, scale, offset = m.groups()
        assert order == "little"
        bits = int(last) - int(first) + 1
        raw = counter if name in ("command_counter", "cycle") else round((values[name] - float(offset)) / float(scale))
        word |= (raw & ((1 << bits) - 1)) << int(first)
    data = bytearray(word.to_bytes(length, "little"))
    crc = next(line for line in block if line.startswith("  CRC:"))
    if "none" in crc:
        return bytes(data)
    where = re.search(r"stored (?:little-endian in bytes (\d+)-(\d+)|in byte (\d+))", crc)
    first = int(where.group(1) or where.group(3))
    width = 2 if where.group(1) else 1
    covered = bytes(data[:first] + data[first + width:])
    if "Profile 5" in crc:
        value = crc16_e2e_p05(covered, int(re.search(r"Data ID 0x([0-9A-F]+)", crc).group(1), 16))
    else:
        value = crc8_sae_j1850(covered)
    data[first:first + width] = value.to_bytes(width, "little")
    return bytes(data)


@pytest.mark.parametrize("name", ["compact_fd", "compact_classic", "serial_frame", "full_fd"])
def test_a_frame_packed_from_the_table_equals_the_codecs(name):
    bus = BusMap.load(resolve(name))
    text = describe(bus, name)
    cmd = bus.codec("cmd_torque")
    torques = {"tau_base_yaw": 12.34, "tau_shoulder_pitch": -101.5, "tau_elbow": 7.02}
    values = [torques.get(s, 0.0) for s in cmd.signal_names]
    for counter in (0, 1, 200):
        expected = cmd.encode(values, counter=counter).data
        assert pack_by_hand(message_block(text, "cmd_torque"), torques, counter) == expected


def test_the_hand_packing_check_fails_on_a_wrong_table():
    bus = BusMap.load(resolve("compact_fd"))
    text = describe(bus, "compact_fd").replace("Data ID 0x0100", "Data ID 0x0101")
    cmd = bus.codec("cmd_torque")
    wrong = pack_by_hand(message_block(text, "cmd_torque"), {"tau_base_yaw": 1.0, "tau_shoulder_pitch": 0.0,
                                                             "tau_elbow": 0.0}, 3)
    assert wrong != cmd.encode([1.0, 0.0, 0.0, 0], counter=3).data


def test_shipped_names_resolve_and_a_wrong_name_gets_a_suggestion(capsys):
    assert {"compact_fd", "serial_frame", "canopen_cst"} <= set(shipped())
    assert main(["serial_frame"]) == 0
    out = capsys.readouterr().out
    assert "COBS" in out and "tau_elbow" in out and "0.02" in out and "counts" in out
    assert main(["compact_fdd"]) == 2
    assert "did you mean 'compact_fd'?" in capsys.readouterr().err


def test_the_module_runs_from_the_command_line():
    proc = subprocess.run([sys.executable, "-m", "firmware_bridge.describe", "compact_classic"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "CRC-8 SAE J1850" in proc.stdout and "stored in byte 7" in proc.stdout
