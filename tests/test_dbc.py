"""DBC both ways (firmware_bridge.formats.dbc): every shipped CAN map written as a DBC with its sidecar and read
back gives the same codec, cantools (the independent reader) decodes our frames to the same values and
encodes frames our decoder takes; a DBC that differs, a missing or disagreeing sidecar, overlapping
signals and a serial map are refused in one line naming the file and key."""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from config_schema import ConfigError
from firmware_bridge.formats.dbc import crc_signal_name, export_dbc, sidecar_path
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import BusMap
from wire_values import random_values

cantools = pytest.importorskip("cantools")

ROOT = Path(__file__).resolve().parent.parent
MAPS = sorted(ROOT.glob("configs/bus/*.toml"))
# the shipped CAN maps, and one with extended ids, big-endian, bool, float32 and offset signals
CAN_MAPS = [p for p in MAPS if BusMap.load(p).kind != "serial"] + [ROOT / "tests/bus_maps/odd_can.toml"]
SERIAL_MAPS = [p for p in MAPS if BusMap.load(p).kind == "serial"]


def exported(path: Path, tmp_path: Path) -> tuple[BusMap, Path]:
    bus = BusMap.load(path)
    dbc = tmp_path / f"{path.stem}.dbc"
    export_dbc(bus.spec(), dbc, bus.source)
    return bus, dbc


def differences(a: BusMap, b: BusMap, cases: int = 20) -> list[str]:
    """Where two maps' codecs differ: layout, or bytes or values of the same random frames."""
    found = []
    if (a.kind, a.bitrate_bps, a.data_bitrate_bps, a.cycle_s) != (b.kind, b.bitrate_bps, b.data_bitrate_bps, b.cycle_s):
        found.append("bus")
    rng = random.Random(7)
    for ca in a.codecs:
        cb = b.codec(ca.name)
        if ca.spec != cb.spec:
            found.append(f"{ca.name}: layout")
        for _ in range(cases):
            values = random_values(ca, rng, on_grid=True)
            fa, fb = ca.encode(values), cb.encode(values)
            if fa.data != fb.data or (fa.is_fd, fa.is_extended_id) != (fb.is_fd, fb.is_extended_id):
                found.append(f"{ca.name}: bytes")
                break
            if list(cb.decode(fa)) != list(ca.decode(fa)):
                found.append(f"{ca.name}: values")
                break
    return found


# ----------------------------------------------------------------------------- round trip
@pytest.mark.parametrize("path", CAN_MAPS, ids=lambda p: p.stem)
def test_every_can_map_round_trips_through_dbc_and_sidecar_to_the_same_codec(path, tmp_path):
    bus, dbc = exported(path, tmp_path)
    back = BusMap.load(dbc)
    assert back.spec() == bus.spec()
    assert differences(bus, back) == []


@pytest.mark.parametrize("path", CAN_MAPS, ids=lambda p: p.stem)
def test_cantools_decodes_our_frames_and_we_decode_cantools_frames(path, tmp_path):
    bus, dbc = exported(path, tmp_path)
    db = cantools.database.load_file(str(dbc))
    rng = random.Random(3)
    for codec in bus.codecs:
        message = db.get_message_by_name(codec.name)
        assert (message.frame_id, message.is_extended_frame, message.length) == \
               (codec.arbitration_id, codec.is_extended_id, codec.length)
        assert message.is_fd == (bus.kind == "canfd")
        assert message.senders == (["PLANT"] if codec.direction == "to_firmware" else ["FIRMWARE"])
        assert (message.cycle_time or 0) == round(codec.rate_divider * bus.cycle_s * 1e3)
        for _ in range(20):
            values = dict(zip(codec.signal_names, random_values(codec, rng, on_grid=True)))
            ours = codec.encode(list(values.values()))
            theirs = message.decode(ours.data, decode_choices=False)
            for name, v in values.items():
                assert theirs[name] == pytest.approx(v, rel=1e-12, abs=1e-12), (codec.name, name)
            if codec.crc is not None:       # the CRC signal holds the CRC the codec computed, where it says
                k, w = codec.crc_byte, len(codec.crc_bytes)
                assert theirs[crc_signal_name(codec.spec)] == codec._crc(ours.data[:k] + ours.data[k + w:])
                values[crc_signal_name(codec.spec)] = theirs[crc_signal_name(codec.spec)]
            data = message.encode(values)
            assert data == ours.data
            assert list(codec.decode(Frame(codec.arbitration_id, data, codec.is_fd, codec.is_extended_id))) == \
                   pytest.approx(list(values[n] for n in codec.signal_names), rel=1e-12, abs=1e-12)


def test_the_dbc_states_counters_crcs_and_bus_as_attributes(tmp_path):
    _, dbc = exported(ROOT / "configs/bus/compact_fd.toml", tmp_path)
    db = cantools.database.load_file(str(dbc))
    assert db.dbc.attributes["BusType"].value == "CAN FD"
    assert (db.dbc.attributes["Baudrate"].value, db.dbc.attributes["BaudrateCANFD"].value) == (1_000_000, 5_000_000)
    cmd = db.get_message_by_name("cmd_torque")
    crc = cmd.get_signal_by_name("cmd_torque_crc").dbc.attributes
    assert (crc["CRCPolynomial"].value, crc["CRCInit"].value, crc["CRCDataID"].value) == (0x1021, 0xFFFF, 0x100)
    assert "B0-5,B8-11" in crc["CRCCoverage"].value
    counter = cmd.get_signal_by_name("command_counter")
    assert counter.dbc.attributes["CounterWidth"].value == 8 and "rolling counter" in counter.comment
    assert cmd.dbc.attributes["VFrameFormat"].value == 14 and cmd.dbc.attributes["CANFD_BRS"].value == 1



def test_a_sub_millisecond_cycle_is_stated_in_microseconds(tmp_path):
    bus, dbc = exported(ROOT / "configs/bus/udp_10khz.toml", tmp_path)
    db = cantools.database.load_file(str(dbc))
    cmd = db.get_message_by_name("cmd_torque")
    assert cmd.dbc.attributes["GenMsgCycleTimeUs"].value == 100 and "GenMsgCycleTime" not in cmd.dbc.attributes
    assert all(c.rate_divider == 1 for c in BusMap.load(dbc).messages("to_plant"))
    _, whole = exported(ROOT / "configs/bus/compact_fd.toml", tmp_path / "fd")
    attrs = cantools.database.load_file(str(whole)).get_message_by_name("cmd_torque").dbc.attributes
    assert (attrs["GenMsgCycleTime"].value, attrs["GenMsgCycleTimeUs"].value) == (1, 1000)

# ----------------------------------------------------------------------------- failing subjects
def test_a_dbc_whose_scale_differs_does_not_round_trip_silently(tmp_path):
    bus, dbc = exported(ROOT / "configs/bus/compact_classic.toml", tmp_path)
    text = dbc.read_text()
    dbc.write_text(text.replace("SG_ tau_elbow : 32|16@1- (0.02,0)", "SG_ tau_elbow : 32|16@1- (0.025,0)"))
    back = BusMap.load(dbc)
    assert differences(bus, back) == ["cmd_torque: layout", "cmd_torque: bytes"]


def one_line_error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        BusMap.load(path)
    text = str(info.value)
    assert "\n" not in text, text
    return text


def test_cycle_times_in_ms_and_us_that_disagree_are_refused(tmp_path):
    _, dbc = exported(ROOT / "configs/bus/compact_fd.toml", tmp_path)
    dbc.write_text(dbc.read_text().replace('"GenMsgCycleTimeUs" BO_ 256 1000;', '"GenMsgCycleTimeUs" BO_ 256 2000;'))
    assert "GenMsgCycleTimeUs = 2000" in one_line_error(dbc)


def test_a_dbc_without_its_sidecar_is_refused(tmp_path):
    _, dbc = exported(ROOT / "configs/bus/compact_fd.toml", tmp_path)
    sidecar_path(dbc).unlink()
    text = one_line_error(dbc)
    assert str(dbc) in text and "no sidecar" in text and str(sidecar_path(dbc)) in text


@pytest.mark.parametrize("edit, key", [
    (('counter = "command_counter"', 'counter = "command_count"'), "message.cmd_torque.counter"),
    (("[message.sensors]\nid = 0x110", "[message.sensors]\nid = 0x111"), "message.sensors.id"),
    (("[message.sensors]", "[message.sensor]"), "message.sensor"),
    (('crc_signal = "cmd_torque_crc"', 'crc_signal = "tau_elbow"'), "message.cmd_torque.crc_signal"),
    (('crc = "crc16"\ncrc_signal = "sensors_crc"', 'crc = "crc8"\ncrc_signal = "sensors_crc"'),
     "message.sensors.crc"),
    (("cycle_s = 0.001", "cycle_s = 0.001\nbitrate_bps = 500000"), "bus.bitrate_bps"),
    (('counter = "cycle"', 'counter = "status"'), "message.sensors.counter"),
    (('plant_node = "PLANT"', 'plant_node = "EMULATOR"'), "bus.plant_node"),
    (('counter = "cycle"\ncounter_max_delta = 2\n', ""), "message.sensors.counter"),
    (("cycle_s = 0.001", "cycle_s = 0.0003"), "GenMsgCycleTime"),
])
def test_a_sidecar_that_disagrees_with_its_dbc_is_refused_naming_the_key(tmp_path, edit, key):
    _, dbc = exported(ROOT / "configs/bus/compact_fd.toml", tmp_path)
    side = sidecar_path(dbc)
    old, new = edit
    assert old in side.read_text()
    side.write_text(side.read_text().replace(old, new))
    text = one_line_error(dbc)
    assert key in text, text


def test_a_sidecar_without_a_table_for_a_dbc_message_is_refused(tmp_path):
    _, dbc = exported(ROOT / "configs/bus/compact_classic.toml", tmp_path)
    side = sidecar_path(dbc)
    text = side.read_text()
    side.write_text(text[:text.index("[message.imu_gyro]")])
    assert "message.imu_gyro" in one_line_error(dbc)


def test_a_sidecar_whose_crc_is_not_the_dbcs_is_refused(tmp_path):
    """The DBC annotates a CRC-16 (polynomial 0x1021); a sidecar that calls it a CRC-8 is refused, on
    a DBC whose CRC signal is 8 bits wide so that the width alone would pass."""
    _, dbc = exported(ROOT / "configs/bus/compact_fd.toml", tmp_path)
    dbc.write_text(dbc.read_text().replace("SG_ cmd_torque_crc : 48|16@1+ (1,0) [0|65535]",
                                           "SG_ cmd_torque_crc : 48|8@1+ (1,0) [0|255]"))
    side = sidecar_path(dbc)
    side.write_text(side.read_text().replace('crc = "crc16"\ncrc_signal = "cmd_torque_crc"',
                                             'crc = "crc8"\ncrc_signal = "cmd_torque_crc"'))
    text = one_line_error(dbc)
    assert "message.cmd_torque.crc" in text and "CRCPolynomial 0x1021" in text, text


def test_a_crc_signal_narrower_than_its_crc_is_refused(tmp_path):
    _, dbc = exported(ROOT / "configs/bus/compact_fd.toml", tmp_path)
    dbc.write_text(dbc.read_text().replace("SG_ cmd_torque_crc : 48|16@1+ (1,0) [0|65535]",
                                           "SG_ cmd_torque_crc : 48|8@1+ (1,0) [0|255]"))
    text = one_line_error(dbc)
    assert "message.cmd_torque.crc_signal" in text and "16-bit" in text, text


def test_without_cantools_hil_bus_says_what_to_install_in_one_line(tmp_path, monkeypatch, capsys):
    from hil.cli.main import main
    _, dbc = exported(ROOT / "configs/bus/compact_fd.toml", tmp_path)
    monkeypatch.setitem(sys.modules, "cantools", None)
    assert main(["bus", "export", str(dbc), "--dbc", str(tmp_path / "again.dbc")]) == 2
    assert main(["bus", "export", "compact_fd", "--c", str(tmp_path / "c")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all("cantools" in line for line in lines), lines


def test_overlapping_signals_in_a_dbc_are_refused(tmp_path):
    _, dbc = exported(ROOT / "configs/bus/compact_classic.toml", tmp_path)
    dbc.write_text(dbc.read_text().replace("SG_ tau_elbow : 32|16@1-", "SG_ tau_elbow : 24|16@1-"))
    text = one_line_error(dbc)
    assert str(dbc) in text and "overlap" in text


def test_an_export_that_would_not_read_back_is_refused(tmp_path, monkeypatch):
    """A writer that rounds numbers to 6 digits (enc_a's range, +-2147483648 counts) is caught
    by the export's own read-back, and leaves no file."""
    import firmware_bridge.formats.dbc as dbc_module
    monkeypatch.setattr(dbc_module, "_num", lambda x: f"{x:.6g}")
    bus = BusMap.load(ROOT / "configs/bus/compact_classic.toml")
    with pytest.raises(ValueError, match=r"does not read back as the map \(enc_a differs\)"):
        export_dbc(bus.spec(), tmp_path / "x.dbc", bus.source)
    assert list(tmp_path.iterdir()) == []


def test_a_serial_map_has_no_dbc(tmp_path):
    bus = BusMap.load(SERIAL_MAPS[0])
    with pytest.raises(ConfigError, match="DBC describes CAN frames only"):
        export_dbc(bus.spec(), tmp_path / "x.dbc", bus.source)
    assert not (tmp_path / "x.dbc").exists()


# ----------------------------------------------------------------------------- commands
def hil(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_hil_bus_export_dbc_writes_the_dbc_and_its_sidecar_and_refuses_a_serial_map(tmp_path):
    proc = hil("bus", "export", "compact_classic", "--dbc", str(tmp_path / "ella.dbc"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(tmp_path / "ella.dbc"), str(tmp_path / "ella.dbc.toml")]
    assert BusMap.load(tmp_path / "ella.dbc").spec() == BusMap.load(ROOT / "configs/bus/compact_classic.toml").spec()
    proc = hil("bus", "export", "serial_frame", "--dbc", str(tmp_path / "serial.dbc"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "serial" in proc.stderr and "DBC describes CAN frames only" in proc.stderr


def test_hil_run_takes_a_dbc_as_its_bus_and_closes_the_loop(tmp_path):
    """The compact_fd map as a DBC and sidecar drives the python-can example over CAN FD to the set-points."""
    _, dbc = exported(ROOT / "configs/bus/compact_fd.toml", tmp_path)
    channel = f"dbc-{os.getpid()}"
    proc = hil("run", "ella", "--bus", str(dbc), "--link", f"canfd:udp_loopback:{channel}", "--mode", "lockstep",
               "--duration", "4", "--json", "--targets", "seed000_setpoints", "--check",
               "--firmware", f"{sys.executable} examples/python_can_firmware.py {{interface}} {{channel}}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert '"accepted": 4000' in proc.stdout


def test_hil_run_with_a_dbc_but_no_sidecar_is_a_one_line_error(tmp_path):
    _, dbc = exported(ROOT / "configs/bus/compact_fd.toml", tmp_path)
    sidecar_path(dbc).unlink()
    proc = hil("run", "ella", "--bus", str(dbc), "--duration", "0.1")
    assert proc.returncode == 2
    assert "no sidecar" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
