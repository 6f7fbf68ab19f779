"""Bus message maps: presets, codecs, rejections, bus load, CANopen helpers, DBC import."""
from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import (
    NMT_PRE_OPERATIONAL, NMT_START, NMT_STOP, STATE_OPERATIONAL, STATE_PRE_OPERATIONAL,
    BusMap, DecodeError, EncodeError, bus_load, counter_delta, counter_next, crc8_sae_j1850,
    heartbeat_frame, main, nmt_frame, sync_frame,
)
from config_schema import ConfigError
from wire_values import random_values

BUS_DIR = Path("configs/bus")
PRESETS = ("compact_classic", "compact_fd", "canopen_cst", "serial_frame", "full_fd", "udp_10khz")
JOINTS = ("base_yaw", "shoulder_pitch", "elbow")


def preset(name: str) -> BusMap:
    return BusMap.load(BUS_DIR / f"{name}.toml")


def crc8_bitwise(data: bytes) -> int:
    """Reference CRC-8 SAE J1850, bit by bit."""
    crc = 0xFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1D) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc ^ 0xFF


def test_a_map_read_again_from_the_same_text_is_the_same_map_and_a_changed_file_is_read_anew(tmp_path):
    """BusMap.load keeps the maps it made by file name and text (a campaign worker's cases share one): the
    same file gives the same object; one byte changed at once, at the same size (a clock too coarse to
    tell the two writes apart), gives a new map with the new value; at most LOADED_MAPS.size are kept."""
    from firmware_bridge.wire import messages
    text = (BUS_DIR / "serial_frame.toml").read_text()
    path = tmp_path / "map.toml"
    path.write_text(text)
    first = BusMap.load(path)
    assert BusMap.load(path) is first and BusMap.load(str(path)) is first
    changed = text.replace("cycle_s = 0.001", "cycle_s = 0.002")
    assert len(changed) == len(text) and changed != text
    path.write_text(changed)
    assert BusMap.load(path).cycle_s == 0.002 and first.cycle_s == 0.001
    for k in range(2 * messages.LOADED_MAPS.size):
        other = tmp_path / f"map{k}.toml"
        other.write_text(text)
        BusMap.load(other)
    assert len(messages.LOADED_MAPS) == messages.LOADED_MAPS.size
    path.write_text(text)
    assert BusMap.load(path) is not first      # pushed out by newer maps: read again


# ----------------------------------------------------------------------------- presets
def test_presets_cover_the_directory():
    assert sorted(p.stem for p in BUS_DIR.glob("*.toml")) == sorted(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_loads_with_emulator_signal_names(name):
    bus = preset(name)
    for j in JOINTS:
        assert bus.find(f"tau_{j}")[0][0].direction == "to_plant"
        assert bus.find(f"enc_{j}")[0][0].direction == "to_firmware"
    for axis in ("ax", "ay", "az", "gx", "gy", "gz"):
        assert bus.find(f"imu_{axis}")[0][0].direction == "to_firmware"
    assert bus.cycle_s == (1e-4 if name == "udp_10khz" else 0.001)      # 10 kHz, else 1 kHz


@pytest.mark.parametrize("name", PRESETS)
def test_round_trip_within_one_lsb(name):
    bus = preset(name)
    rng = random.Random(7)
    for codec in bus.codecs:
        scales = np.array([abs(s.scale) for s in codec.spec.signals])
        for _ in range(50):
            values = np.array(random_values(codec, rng))
            frame = codec.encode(values)
            assert len(frame.data) == codec.length
            assert frame.is_fd == (bus.kind == "canfd")
            got_codec, decoded = bus.decode(frame)
            assert got_codec is codec
            np.testing.assert_array_less(np.abs(decoded - values), scales * 0.5 + 1e-9)


def test_compact_classic_command_frame_is_bit_exact():
    codec = preset("compact_classic").codec("cmd_torque")
    frame = codec.encode([1.5, -20.0, 0.3, 0], counter=300)
    # 1.5/0.02 = 75 = 0x004B, -20/0.02 = -1000 = 0xFC18, 0.3/0.02 = 15 = 0x000F, 300 mod 256 = 0x2C
    body = bytes([0x4B, 0x00, 0x18, 0xFC, 0x0F, 0x00, 0x2C])
    assert frame.data == body + bytes([crc8_bitwise(body)])
    assert (frame.arbitration_id, frame.is_fd, frame.is_extended_id) == (0x100, False, False)


def test_canopen_torque_is_per_mille_of_rated():
    bus = preset("canopen_cst")
    frame = bus.codec("rpdo1_shoulder_pitch").encode([12.0])     # rated 120 N m -> 100 per mille
    assert (frame.arbitration_id, frame.data) == (0x202, (100).to_bytes(2, "little", signed=True))
    frame = bus.codec("rpdo1_elbow").encode([-90.0])             # rated 30 N m -> -3000 per mille
    assert frame.data == (-3000).to_bytes(2, "little", signed=True)


MINI = """
[bus]
kind = "can"
bitrate_bps = 500000
cycle_s = 0.001

[[message]]
name = "m"
id = 0x10
direction = "to_firmware"
dlc = 4
  [[message.signal]]
  name = "be16"
  type = "uint16"
  start_bit = 7
  byte_order = "big"
  [[message.signal]]
  name = "be12"
  type = "int16"
  length_bits = 12
  start_bit = 19
  byte_order = "big"
"""


def test_big_endian_signals_use_dbc_motorola_numbering():
    codec = BusMap.from_string(MINI, "mini.toml").codec("m")
    frame = codec.encode([0x1234, -2])                  # -2 in 12 bits = 0xFFE
    assert frame.data == bytes([0x12, 0x34, 0x0F, 0xFE])
    np.testing.assert_array_equal(codec.decode(frame), [0x1234, -2])


# ----------------------------------------------------------------------------- counters, CRC
def test_crc8_sae_j1850_check_value():
    assert crc8_sae_j1850(b"123456789") == 0x4B == crc8_bitwise(b"123456789")


def test_rolling_counter_wraps():
    assert counter_next(254, 8) == 255 and counter_next(255, 8) == 0
    assert counter_delta(255, 0, 8) == 1 and counter_delta(3, 3, 8) == 0
    assert counter_delta(250, 2, 8) == 8
    codec = preset("compact_classic").codec("cmd_torque")
    assert codec.counter_bits == 8 and codec.next_counter(255) == 0
    frame = codec.encode([0.0, 0.0, 0.0, 0], counter=256)
    assert frame.data[6] == 0
    assert codec.decode(frame, expected_counter=256)[3] == 0
    with pytest.raises(DecodeError) as err:
        codec.decode(frame, expected_counter=255)
    assert err.value.kind == "counter"


def test_counter_signal_may_repeat_across_messages():
    hits = preset("compact_classic").find("cycle")
    assert sorted(c.name for c, _ in hits) == ["enc_b", "imu_accel", "imu_gyro"]


# ----------------------------------------------------------------------------- rejections
def rejection(fn, *args, **kwargs) -> str:
    with pytest.raises((DecodeError, EncodeError)) as err:
        fn(*args, **kwargs)
    return err.value.kind


def test_decode_rejections_by_kind():
    bus = preset("compact_classic")
    codec = bus.codec("cmd_torque")
    good = codec.encode([10.0, -10.0, 5.0, 0], counter=1)
    assert rejection(bus.decode, Frame(0x7FF, good.data)) == "unknown_id"
    assert rejection(bus.decode, Frame(0x100, good.data[:7])) == "length"
    corrupt = bytes([good.data[0] ^ 0x01]) + good.data[1:]
    assert rejection(bus.decode, Frame(0x100, corrupt)) == "crc"
    too_big = codec.encode([0.0, 0.0, 200.0, 0], check_range=False)     # elbow limit 90 N m
    assert rejection(bus.decode, too_big) == "range"


def test_encode_refuses_nan_range_and_wrong_count():
    codec = preset("compact_fd").codec("cmd_torque")
    assert rejection(codec.encode, [np.nan, 0.0, 0.0, 0]) == "nan"
    assert rejection(codec.encode, np.array([0.0, 0.0, 90.5, 0.0])) == "range"
    assert rejection(codec.encode, [0.0, 0.0, np.inf, 0], check_range=False) == "range"
    assert rejection(codec.encode, [0.0, 0.0]) == "length"


def test_float32_nan_is_rejected_on_decode():
    text = MINI.replace('name = "be12"', 'name = "unused"').split("  [[message.signal]]")[0] + """
  [[message.signal]]
  name = "f"
  type = "float32"
  start_bit = 0
"""
    codec = BusMap.from_string(text, "f32.toml").codec("m")
    assert codec.decode(codec.encode([1.25]))[0] == 1.25
    assert rejection(codec.decode, Frame(0x10, bytes([0, 0, 0xC0, 0x7F]))) == "nan"


# ----------------------------------------------------------------------------- bus load
def test_compact_classic_bus_load_under_60_percent_and_printed(capsys):
    bus = preset("compact_classic")
    assert bus_load(bus) == pytest.approx(0.530)                    # 135 + 135 + 125 + 135 bits
    assert bus_load(bus, peak=True) == pytest.approx(0.530)         # IMU frames alternate
    assert bus_load(bus) < 0.6
    assert main([str(BUS_DIR / "compact_classic.toml")]) == 0
    assert "bus load at 1000 Hz: 53.0 % average" in capsys.readouterr().out


def test_compact_fd_has_one_frame_per_direction_per_cycle():
    bus = preset("compact_fd")
    for direction in ("to_plant", "to_firmware"):
        (codec,) = bus.messages(direction)
        assert codec.rate_divider == 1
    assert bus_load(bus) < 0.2


def test_other_preset_loads():
    assert bus_load(preset("serial_frame")) == pytest.approx(31 * 10 / 921600 / 1e-3)
    assert bus_load(preset("canopen_cst")) == pytest.approx(0.8026)


# ----------------------------------------------------------------------------- CANopen
def test_canopen_helpers_follow_cia301():
    assert sync_frame() == Frame(0x080, b"")
    assert sync_frame(7) == Frame(0x080, b"\x07")
    assert nmt_frame(NMT_START, 2) == Frame(0x000, b"\x01\x02")
    assert nmt_frame(NMT_STOP) == Frame(0x000, b"\x02\x00")
    assert nmt_frame(NMT_PRE_OPERATIONAL, 3) == Frame(0x000, b"\x80\x03")
    assert heartbeat_frame(3, STATE_OPERATIONAL) == Frame(0x703, b"\x05")
    assert heartbeat_frame(1, STATE_PRE_OPERATIONAL).data == b"\x7f"
    for bad in (lambda: sync_frame(0), lambda: nmt_frame(0x03), lambda: heartbeat_frame(0, 5),
                lambda: heartbeat_frame(1, 0x06)):
        with pytest.raises(ValueError):
            bad()


def test_canopen_map_decodes_helper_frames():
    bus = preset("canopen_cst")
    codec, values = bus.decode(nmt_frame(NMT_START, 0))
    assert codec.name == "nmt" and values.tolist() == [1, 0]
    codec, values = bus.decode(heartbeat_frame(2, STATE_OPERATIONAL))
    assert codec.name == "heartbeat_shoulder_pitch" and values.tolist() == [5]
    codec, values = bus.decode(sync_frame())
    assert codec.name == "sync" and values.size == 0
    assert rejection(bus.decode, sync_frame(1)) == "length"             # map has the counter off


# ----------------------------------------------------------------------------- broken maps
BASE = """
[bus]
kind = "can"
bitrate_bps = 1000000
cycle_s = 0.001

[[message]]
name = "cmd"
id = 0x100
direction = "to_plant"
dlc = 8
counter = "cnt"
crc_byte = 7
  [[message.signal]]
  name = "tau"
  type = "int16"
  start_bit = 0
  scale = 0.01
  unit = "N m"
  min = -100.0
  max = 100.0
  [[message.signal]]
  name = "cnt"
  type = "uint8"
  start_bit = 48

[[message]]
name = "enc"
id = 0x110
direction = "to_firmware"
dlc = 4
  [[message.signal]]
  name = "pos"
  type = "int32"
  start_bit = 0
  unit = "counts"
"""

BROKEN = [  # (old, new, key named in the error, text in the error)
    ('start_bit = 48', 'start_bit = 8', "message[cmd].signal[cnt].start_bit", "overlaps tau"),
    ('start_bit = 48', 'start_bit = 60', "message[cmd].signal[cnt].start_bit", "ends past"),
    ('max = 100.0', 'max = 400.0', "message[cmd].signal[tau].max", "N m"),
    ('id = 0x110', 'id = 0x100', "message[enc].id", "cmd"),
    ('name = "enc"', 'name = "cmd"', "message[1].name", "unique"),
    ('name = "pos"', 'name = "tau"', "message[enc].signal[tau].name", "cmd"),
    ('crc_byte = 7', 'crc_byte = 6', "message[cmd].crc_byte", "cnt"),
    ('counter = "cnt"', 'counter = "tau"', "message[cmd].counter", "unsigned"),
    ('dlc = 4', 'dlc = 9', "message[enc].dlc", "bytes"),
    ('kind = "can"', 'kind = "flexray"', "bus.kind", "canfd"),
    ('cycle_s = 0.001', 'cycle_s = -1.0', "bus.cycle_s", "in s"),
    ('unit = "counts"', 'units = "counts"', "message[enc].signal[pos].units", "unknown key"),
    ('type = "int32"', 'type = "int64"', "message[enc].signal[pos].type", "int32"),
    ('scale = 0.01', 'scale = 0.0', "message[cmd].signal[tau].scale", "N m per LSB"),
    ('id = 0x110', 'id = 0x800', "message[enc].id", "2047"),
]


@pytest.mark.parametrize("old,new,key,text", BROKEN)
def test_broken_map_names_file_and_key(tmp_path, old, new, key, text):
    assert old in BASE
    path = tmp_path / "broken.toml"
    path.write_text(BASE.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        BusMap.load(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: {key} = ") and text in msg, msg
    assert err.value.key == key


def test_base_map_is_valid_and_bad_toml_names_file(tmp_path):
    BusMap.from_string(BASE, "base.toml")
    path = tmp_path / "bad.toml"
    path.write_text("[bus\n")
    with pytest.raises(ConfigError, match="bad.toml: not valid TOML"):
        BusMap.load(path)


# ----------------------------------------------------------------------------- DBC
DBC = '''VERSION ""

NS_ :

BS_:

BU_: PLANT FW

BO_ 256 Cmd: 8 FW
 SG_ tau_a : 0|16@1- (0.01,0) [-100|100] "N m" PLANT
 SG_ ctr : 48|8@1+ (1,0) [0|255] "" PLANT

BO_ 272 Enc: 8 PLANT
 SG_ pos : 7|32@0- (1,0) [0|0] "counts" FW
 SG_ temp : 32|8@1+ (0.5,-20) [-20|100] "degC" FW

BA_DEF_ BO_ "GenMsgCycleTime" INT 0 10000;
BA_DEF_DEF_ "GenMsgCycleTime" 0;
BA_ "GenMsgCycleTime" BO_ 272 2;
'''


SIDECAR = '''[bus]
cycle_s = 0.001
bitrate_bps = 500000        # the DBC has no Baudrate attribute
plant_node = "PLANT"

[message.Cmd]
counter = "ctr"

[message.Enc]
name = "encoders"
signals = { pos = "enc_elbow" }
'''


def test_from_dbc_matches_cantools(tmp_path):
    """A DBC written elsewhere (no bit rate, a big-endian signal, no range) with a sidecar that
    names its counter and renames a frame and a signal."""
    cantools = pytest.importorskip("cantools")
    path = tmp_path / "tiny.dbc"
    path.write_text(DBC)
    (tmp_path / "tiny.dbc.toml").write_text(SIDECAR)
    bus = BusMap.from_dbc(path)
    db = cantools.database.load_file(str(path))
    assert (bus.kind, bus.bitrate_bps) == ("can", 500_000)
    assert bus.codec("Cmd").direction == "to_plant" and bus.codec("encoders").direction == "to_firmware"
    assert bus.codec("Cmd").rate_divider == 0 and bus.codec("encoders").rate_divider == 2
    assert bus.codec("Cmd").counter_bits == 8
    cases = {"Cmd": {"tau_a": -12.34, "ctr": 9}, "Enc": {"pos": -123456, "temp": 37.5}}
    for name, values in cases.items():
        codec = bus.codec("encoders" if name == "Enc" else name)
        ours = {"enc_elbow": "pos"}
        frame = codec.encode([values[ours.get(n, n)] for n in codec.signal_names])
        assert frame.data == db.encode_message(name, values)
        np.testing.assert_allclose(codec.decode(frame), [values[ours.get(n, n)] for n in codec.signal_names])


def test_from_dbc_without_cantools_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "cantools", None)
    with pytest.raises(ImportError, match="cantools"):
        BusMap.from_dbc(tmp_path / "x.dbc")


def test_counter_argument_needs_a_counter_signal():
    codec = preset("compact_classic").codec("enc_a")
    with pytest.raises(ValueError, match="no counter"):
        codec.encode([0, 0], counter=1)


def test_a_writer_withholds_and_counts_a_frame_with_nan_in_an_integer_signal():
    from firmware_bridge.wire.frame_io import FrameWriter
    bus = BusMap.load("configs/bus/compact_fd.toml")
    writer = FrameWriter(bus, "to_firmware")
    codec = writer.codecs[0]
    assert len(writer.frames(0)) == 1
    writer.values[id(codec)][codec.index("imu_gz")] = float("nan")
    assert writer.frames(1) == [] and writer.refused == 1          # never raised into the loop
    writer.values[id(codec)][codec.index("imu_gz")] = 0.0
    assert len(writer.frames(2)) == 1
