"""End-to-end protection of the bus maps: counter rules (a rejected frame never moves the expected
counter), the CRC-16 of E2E Profile 5 on CAN FD maps, and the stated residual error."""
from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.wire.codec import crc8_sae_j1850
from firmware_bridge.wire.messages import BusMap, describe
from firmware_bridge.wire.protection import _counted, protection
from firmware_bridge.wire.signals import CommandInput
from firmware_bridge.wire.frame_io import FrameReader
from config_schema import ConfigError
from hil.model.config import load_model
from hil.runtime.loop import Emulator, RuntimeOptions

from links import AnsweringLink, on_cue

ROOT = Path(__file__).resolve().parent.parent
BUS = ROOT / "configs" / "bus"
NAMES = ["base_yaw", "shoulder_pitch", "elbow"]


def frames_of(bus: BusMap, counters) -> list[Frame]:
    cmd = bus.codec("cmd_torque")
    return [cmd.encode([0.02 * k, 0.0, 0.0, 0], counter=k) for k in counters]


# ----------------------------------------------------------------------------- counter rules
@pytest.mark.parametrize("bus_name", ["compact_classic", "compact_fd", "serial_frame"])
def test_a_replayed_stale_frame_never_knocks_out_the_next_genuine_one(bus_name):
    bus = BusMap.load(BUS / f"{bus_name}.toml")
    genuine = frames_of(bus, range(600))
    reader = FrameReader(bus, "to_plant")
    rng = np.random.default_rng(3)
    knocked_out = replays = 0
    for k, frame in enumerate(genuine):
        if k > 256:
            age = int(rng.integers(2, 254))            # a stale frame outside the counter window
            assert reader.read(genuine[k - 1 - age]) is None
            replays += 1
        knocked_out += reader.read(frame) is None
    assert replays > 300 and knocked_out == 0
    assert reader.counters.lost == 0 and reader.counters.resyncs == 0
    assert reader.rejected["counter"] == replays and reader.accepted == len(genuine)


def test_lost_counts_only_genuine_gaps_and_a_repeat_is_rejected():
    bus = BusMap.load(BUS / "compact_classic.toml")
    f = frames_of(bus, range(10))
    reader = FrameReader(bus, "to_plant")
    results = [reader.read(x) is not None for x in (f[0], f[1], f[1], f[3], f[2], f[4], f[4], f[5])]
    assert results == [True, True, False, True, False, True, False, True]
    assert reader.counters.lost == 1 and reader.rejected["counter"] == 3


def test_a_restarted_sender_is_followed_after_two_frames_in_order():
    bus = BusMap.load(BUS / "compact_fd.toml")
    reader = FrameReader(bus, "to_plant")
    for frame in frames_of(bus, range(50)):
        assert reader.read(frame) is not None
    restarted = frames_of(bus, range(200, 205))
    assert [reader.read(x) is not None for x in restarted] == [False, True, True, True, True]
    assert reader.counters.resyncs == 1 and reader.counters.lost == 0


def test_a_frozen_sender_is_rejected_every_time():
    bus = BusMap.load(BUS / "compact_fd.toml")
    reader = FrameReader(bus, "to_plant")
    f = frames_of(bus, range(3))
    assert reader.read(f[0]) is not None
    assert [reader.read(f[0]) is not None for _ in range(20)] == [False] * 20
    assert reader.read(f[1]) is not None and reader.counters.resyncs == 0


def test_lockstep_keeps_stepping_when_a_stale_frame_precedes_every_command():
    """A firmware (or a bus) that sends an old frame before each genuine command: every genuine
    command is taken, the run reaches its end."""
    bus = BusMap.load(BUS / "serial_frame.toml")
    model = load_model(ROOT / "configs" / "ella.toml")
    from hil.dynamics.plant import Plant
    from hil.devices.drives import DriveBank
    from firmware_bridge.wire.signals import SensorOutput

    plant = Plant(model)
    hold = plant.equilibrium_eta()
    cmd = bus.codec("cmd_torque")
    answers = [cmd.encode([*np.round(hold / 0.02) * 0.02, 0], counter=k) for k in range(300)]

    def stale_then_genuine(k: int) -> list[Frame]:
        return ([answers[k - 5]] if k >= 5 else []) + [answers[k]]

    opts = RuntimeOptions(mode="lockstep", realtime=False, duration_s=0.1, lockstep_timeout_s=1.0)
    firmware = AnsweringLink(on_cue(0x81, stale_then_genuine))
    emu = Emulator(plant, firmware, CommandInput(bus, NAMES), SensorOutput(bus, NAMES), opts,
                   drives=DriveBank(plant, [None] * 3))
    summary = emu.run()
    assert summary["halted"] is None and summary["cycles"] == 100
    c = summary["commands"]
    assert c["accepted"] == 100 and c["rejected"]["counter"] == 95 and c["lost"] == 0


# ----------------------------------------------------------------------------- CRC-16 (E2E Profile 5)
def test_the_fd_maps_protect_their_frames_with_the_crc_of_e2e_profile_5():
    p05 = pytest.importorskip("e2e.p05")
    for name in ("compact_fd", "full_fd"):
        bus = BusMap.load(BUS / f"{name}.toml")
        for c in bus.codecs:
            assert c.crc == "crc16"
            frame = c.encode(np.zeros(len(c.signal_names)), counter=57)
            # the CRC at crc_byte, the 8-bit counter right after it, the CAN id as Data ID: a Profile 5 frame
            assert p05.e2e_p05_check(frame.data, c.arbitration_id, offset=c.crc_byte)
            assert frame.data[c.crc_byte + 2] == 57
            assert not p05.e2e_p05_check(frame.data, c.arbitration_id ^ 1, offset=c.crc_byte)


def flip_campaign(bus: BusMap, frames: int, seed: int = 1) -> int:
    """Frames with 1-8 random flipped bits that a receiver accepted with changed values."""
    cmd = bus.codec("cmd_torque")
    rng = np.random.default_rng(seed)
    passed = 0
    for k in range(frames):
        reader = FrameReader(bus, "to_plant")
        good = cmd.encode([rng.uniform(-200, 200), rng.uniform(-300, 300), rng.uniform(-80, 80), 0], counter=k + 1)
        reader.read(cmd.encode([0.0, 0.0, 0.0, 0], counter=k))
        data = bytearray(good.data)
        for bit in rng.choice(8 * len(data), size=int(rng.integers(1, 9)), replace=False):
            data[bit // 8] ^= 1 << bit % 8
        if reader.read(Frame(good.arbitration_id, bytes(data), good.is_fd)) is not None:
            passed += 1
    return passed


def test_damaged_commands_pass_a_crc8_now_and_then_but_not_the_crc16():
    classic, fd = BusMap.load(BUS / "compact_classic.toml"), BusMap.load(BUS / "compact_fd.toml")
    assert flip_campaign(classic, 20000) > 0          # 1 in 256 of the heavier damage passes a CRC-8
    assert flip_campaign(fd, 20000) == 0


def test_a_crc16_is_an_option_of_classic_can_maps_and_needs_two_free_bytes():
    text = (BUS / "compact_classic.toml").read_text()
    with pytest.raises(ConfigError, match=r"crc_byte = 7: expected an integer in 0..6"):
        BusMap.from_string(text.replace("crc_byte = 7\n", 'crc = "crc16"\ncrc_byte = 7\n', 1), "m")
    with pytest.raises(ConfigError, match="2 byte\\(s\\) free of signals for the CRC16; signal command_counter"):
        BusMap.from_string(text.replace("crc_byte = 7\n", 'crc = "crc16"\ncrc_byte = 6\n', 1), "m")
    wide = text.replace('dlc = 7\ncounter = "cycle"\ncrc_byte = 6', 'dlc = 8\ncounter = "cycle"\ncrc = "crc16"\ncrc_byte = 6')
    assert BusMap.from_string(wide, "m").codec("enc_b").crc_bytes == (6, 7)
    with pytest.raises(ConfigError, match="crc = .*only with crc_byte"):
        BusMap.from_string(text.replace('counter = "command_counter"', 'counter = "command_counter"\ncrc = "crc8"')
                           .replace("crc_byte = 7\n", "", 1), "m")


# ----------------------------------------------------------------------------- residual error
def test_undetected_damage_is_counted_exactly():
    """The syndrome count against brute force: every 1..3-bit damage of a CRC-8 frame of 3 data bytes."""
    p = _counted("crc8", crc8_sae_j1850, 3, 8, 1.0)
    brute = {}
    for w in (2, 3):
        brute[w] = 0
        for bits in combinations(range(32), w):
            data, stored = bytearray(3), 0
            for b in bits:
                if b < 24:
                    data[b // 8] ^= 1 << b % 8
                else:
                    stored ^= 1 << (b - 24)
            brute[w] += crc8_sae_j1850(bytes(data)) ^ crc8_sae_j1850(bytes(3)) == stored
    assert {w: p.undetected[w] for w in (2, 3)} == brute


def test_the_layout_print_out_states_each_maps_residual_error():
    classic = protection(BusMap.load(BUS / "compact_classic.toml").codec("cmd_torque"), serial=False)
    assert classic.hamming_distance == 3 and classic.undetected[3] == 198     # CRC-8 0x1D over 8 bytes
    fd = protection(BusMap.load(BUS / "compact_fd.toml").codec("cmd_torque"), serial=False)
    assert fd.hamming_distance == 4 and fd.random_frame() == pytest.approx(2 ** -16 * 2 / 256)
    text = describe(BusMap.load(BUS / "compact_classic.toml"))
    assert "enc_a                    no CRC: any damage" in text
    assert "Hamming distance 3 (A3 = 198)" in text and "damaged frames per hour pass" in text


def test_command_input_counts_the_counter_rules_in_its_stats():
    bus = BusMap.load(BUS / "compact_fd.toml")
    inp = CommandInput(bus, NAMES)
    for frame in frames_of(bus, [0, 1, 100, 101, 102]):
        inp.feed(frame)
    assert inp.counters()["resyncs"] == 1 and inp.counters()["rejected"]["counter"] == 1
