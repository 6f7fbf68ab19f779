"""Lockstep's cue (hil.runtime.lockstep.FirmwareCue): which cycles a firmware following the bus map's
receive rules answers, from the sensor frames as they went out on the wire."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.signals import SensorOutput
from hil.runtime.lockstep import FirmwareCue, firmware_cue

BUS = Path(__file__).resolve().parent.parent / "configs" / "bus"
NAMES = ["base_yaw", "shoulder_pitch", "elbow"]


def sensor_cycles(bus: BusMap, n: int) -> list[list]:
    """The sensor frames of cycles 0..n-1 (rolling counters advancing once per frame sent)."""
    out = SensorOutput(bus, NAMES)
    channels = sorted({s for c in bus.messages("to_firmware") for s in c.signal_names} - {"status", "cycle"}
                      - {c.spec.counter for c in bus.messages("to_firmware")})
    out.bind(channels)
    return [out.frames(k, np.full(len(channels), 0.001 * k), 0) for k in range(n)]


def cued(cue: FirmwareCue, frames) -> bool:
    cue.cued = False
    for f in frames:
        cue.see(f)
    return cue.cued


@pytest.mark.parametrize("bus_name", ["serial_frame", "compact_classic", "compact_fd"])
def test_every_cycle_is_answered_and_a_repeat_is_not(bus_name):
    bus = BusMap.load(BUS / f"{bus_name}.toml")
    cycles = sensor_cycles(bus, 6)
    cue = FirmwareCue(bus, NAMES)
    assert [cued(cue, c) for c in cycles[:3]] == [True] * 3
    assert not cued(cue, cycles[2])                  # the keep-alive repeat: answered already


def test_the_first_cycle_after_a_bus_off_is_not_answered_the_next_is():
    bus = BusMap.load(BUS / "serial_frame.toml")
    cycles = sensor_cycles(bus, 120)
    cue = FirmwareCue(bus, NAMES)
    assert all(cued(cue, c) for c in cycles[:10])
    assert [cued(cue, c) for c in cycles[110:113]] == [False, True, True]   # 100 cycles withheld
    cue2 = FirmwareCue(bus, NAMES)
    assert all(cued(cue2, c) for c in cycles[:10])
    assert cued(cue2, cycles[11])                     # one lost frame: inside the counter window


def test_damaged_or_missing_frames_of_a_cycle_cue_no_answer():
    bus = BusMap.load(BUS / "compact_classic.toml")  # a cycle's counts in two frames
    cycles = sensor_cycles(bus, 4)
    cue = FirmwareCue(bus, NAMES)
    assert cued(cue, cycles[0])
    assert not cued(cue, cycles[1][1:])               # the first encoder frame lost
    assert not cued(cue, [b"\x01\x02\x03"])           # a packet damaged below the framing
    f = cycles[2][1]                                  # enc_b, protected by its CRC-8 (enc_a has none)
    broken = replace(f, data=bytes([f.data[0] ^ 0xFF]) + bytes(f.data[1:]))
    assert not cued(cue, [cycles[2][0], broken] + cycles[2][2:])
    assert cued(cue, cycles[3])


def test_a_map_without_encoders_has_no_cue(tmp_path):
    text = (BUS / "serial_frame.toml").read_text().replace('name = "enc_elbow"', 'name = "spare_elbow"')
    path = tmp_path / "no_elbow_encoder.toml"
    path.write_text(text)
    assert firmware_cue(BusMap.load(path), NAMES) is None
    assert firmware_cue(BusMap.load(BUS / "serial_frame.toml"), NAMES) is not None
