"""Broken input gives one line that names what is wrong (the option, the file, the key), never a
traceback; values no physical arm has are said at load; a bus map's signals must all mean something."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from config_schema import ConfigError
from firmware_bridge.links.connect import open_link
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.cli.main import main
from hil.dynamics.simulate import InputError, TorqueTable
from hil.model.config import load_model_from_string
from hil.model.plausibility import PlausibilityWarning

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "configs" / "ella.toml"
SERIAL = ROOT / "configs" / "bus" / "serial_frame.toml"
NAMES = ["base_yaw", "shoulder_pitch", "elbow"]
RUN = ["run", str(ARM), "--bus", str(SERIAL)]


@pytest.mark.parametrize("option, value, expected", [
    ("--duration", "-1", "expected a duration in s, > 0 and at most 1e+07"),
    ("--duration", "nan", "expected a duration in s, > 0 and at most 1e+07"),
    ("--duration", "1e308", "expected a duration in s, > 0 and at most 1e+07"),
    ("--watchdog", "nan", "expected a positive number"),
    ("--watchdog", "inf", "expected a positive number"),
    ("--watchdog", "-1", "expected a positive number"),
    ("--move-time", "nan", "expected a positive number"),
    ("--period", "0", "expected a positive number"),
    ("--seed", "-5", "expected an integer >= 0"),
    ("--halt-after", "-3", "expected an integer >= 0"),
    ("--firmware-priority", "200", "expected an integer in 1..99"),
    ("--cpu", "4096", "expected an integer in 0.."),
    ("--ignore-first", "-0.5", "expected a finite number >= 0"),
    ("--heartbeat-ms", "inf", "expected a finite number >= 0"),
    ("--live-rate", "0", "expected a positive number"),
    ("--log", "x.txt", "expected a file name ending in .msgpack"),
])
def test_every_bad_numeric_or_file_option_is_an_error_naming_it(capsys, option, value, expected):
    with pytest.raises(SystemExit) as exit_:
        main(RUN + [option, value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {option}: {value!r}: {expected}" in err


@pytest.mark.parametrize("command", [["firmware", "--params", "p", "--bus", "b", "--link", "l"],
                                     ["log", "export", "x.msgpack"], ["plot", "x.msgpack", "q_*"]])
def test_the_other_commands_validate_their_numbers_too(capsys, command):
    option = {"firmware": "--move-time", "log": "--scene-rate", "plot": "--t0"}[command[0]]
    with pytest.raises(SystemExit):
        main(command + [option, "nan"])
    assert f"argument {option}: 'nan'" in capsys.readouterr().err


@pytest.mark.parametrize("spec, message", [
    ("can:nosuchiface:0", "Unknown interface type"),
    ("can:udp_loopback:10.0.0.1", "looks like a network address"),
    ("can:udp_loopback:ella,nodes=99", "nodes=99 outside 1..8"),
    ("can:udp_loopback:ella,host=8.8.8.8", "refuses host '8.8.8.8'"),
    ("can:udp_loopback:80", "base port 80 outside"),
])
def test_a_refused_link_is_a_value_error_naming_the_spec(spec, message):
    with pytest.raises(ValueError, match=f"link {spec!r}: .*{message}"):
        open_link(spec)


def test_hil_run_with_a_refused_link_prints_one_line(capsys):
    assert main(RUN + ["--link", "can:nosuchiface:0", "--duration", "0.01"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "can:nosuchiface:0" in err


def map_text() -> str:
    return SERIAL.read_text(encoding="utf-8")


def test_a_map_without_a_joints_torque_names_the_map_and_the_signal():
    bus = BusMap.from_string(map_text().replace('name = "tau_elbow"', 'name = "tau_elbw"'), "no_elbow.toml")
    with pytest.raises(ConfigError, match="no_elbow.toml: no to_plant message carries signal 'tau_elbow' "
                                          "\\(did you mean 'tau_elbw'\\?\\)"):
        CommandInput(bus, NAMES)
    fd = (ROOT / "configs" / "bus" / "compact_fd.toml").read_text(encoding="utf-8")
    extra = fd.replace('  name = "command_counter"', '  name = "tau_wrist"\n  type = "int8"\n  start_bit = 72\n'
                       '  [[message.signal]]\n  name = "command_counter"', 1)
    with pytest.raises(ConfigError, match="message\\[cmd_torque\\].signal\\[tau_wrist\\].name = \"tau_wrist\": "
                                          "expected a joint's torque command"):
        CommandInput(BusMap.from_string(extra, "extra.toml"), NAMES)


def test_a_misspelt_sensor_signal_is_refused_not_sent_as_zero():
    bus = BusMap.from_string(map_text().replace('name = "enc_elbow"', 'name = "enc_elbw"'), "typo.toml")
    out = SensorOutput(bus, NAMES)
    channels = ["enc_base_yaw", "enc_shoulder_pitch", "enc_elbow", "imu_ax", "imu_ay", "imu_az", "imu_gx",
                "imu_gy", "imu_gz"]
    with pytest.raises(ConfigError, match="signal\\[enc_elbw\\].name = \"enc_elbw\": expected a sensor channel "
                                          "of the arm, status or cycle \\(did you mean 'enc_elbow'\\?\\)"):
        out.bind(channels)
    SensorOutput(BusMap.load(SERIAL), NAMES).bind(channels)        # the shipped map binds


def test_a_map_without_sensor_messages_is_refused():
    text = map_text()
    cut = text[:text.index('[[message]]\nname = "sensors"')]
    bus = BusMap.from_string(cut, "no_sensors.toml")
    with pytest.raises(ConfigError, match="no_sensors.toml: no to_firmware message carries a sensor channel"):
        SensorOutput(bus, NAMES).bind(["enc_elbow"])


def test_a_huge_quadrature_point_count_is_refused_before_allocating():
    text = ARM.read_text(encoding="utf-8").replace('family = "clamped_mass"', 'family = "clamped_mass"\n'
                                                   '  quadrature_points = 200000', 1)
    with pytest.raises(ConfigError, match="quadrature_points = 200000: expected an integer in 0..256"):
        load_model_from_string(text, "quad.toml")


@pytest.mark.parametrize("old, new, message", [
    ("E_Pa = 2.1e11", "E_Pa = 1e308", r"body\[link1\].beam.E_Pa = 1e308 Pa: outside the physical range 1e\+06 .. 1.2e\+12 Pa"),
    ("mass_kg = 2.1\n", "mass_kg = 1e6\n", r"attachment\[payload\].mass_kg = 1e6 kg: outside the physical range"),
    ("gravity_m_s2 = [0.0, 0.0, -9.81]", "gravity_m_s2 = [0.0, 0.0, -1e5]", r"gravity_m_s2 \(magnitude\) = 100000.0 m/s\^2: outside the physical range 0 .. 30"),
])
def test_implausible_parameters_are_warned_at_load_with_value_and_range(old, new, message):
    text = ARM.read_text(encoding="utf-8")
    assert old in text
    with pytest.warns(PlausibilityWarning, match=message):
        load_model_from_string(text.replace(old, new, 1), "odd.toml")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlausibilityWarning)
        load_model_from_string(text, "ella.toml")              # the preset itself is plausible


def test_an_arm_that_sags_beyond_its_modes_is_warned():
    from hil.dynamics.plant import Plant
    from hil.model.plausibility import warn_static_deflection
    text = ARM.read_text(encoding="utf-8").replace("mass_kg = 2.1\n", "mass_kg = 500.0\n", 1)
    plant = Plant(load_model_from_string(text, "heavy.toml"))
    plant.equilibrium_eta()
    with pytest.warns(PlausibilityWarning, match=r"heavy.toml: body\[link2\] deflects .* beyond the small-deflection"):
        warn_static_deflection(plant)


def test_binary_input_files_are_named_in_the_error(tmp_path, capsys):
    blob = tmp_path / "tau.csv"
    blob.write_bytes(b"\x89PNG\r\n\x1a\n\xff\x00")
    with pytest.raises(InputError, match=f"{blob}: not a text file"):
        TorqueTable.from_csv(blob, NAMES)
    log = tmp_path / "run.msgpack"
    (tmp_path / "run.msgpack.summary.json").write_bytes(b"\xff\xfe\x00")
    from hil.cli.report import summary_of
    from hil.cli.registry import CliError
    with pytest.raises(CliError, match="run.msgpack.summary.json: not a run summary"):
        summary_of(str(log))


@pytest.mark.parametrize("old, new, message", [
    ('kind = "encoder"', "kind = { x = 1 }", 'kind = {x}: expected one of "encoder"'),
    ('kind = "imu"', "kind = [1, 2]", 'expected one of "encoder"'),
    ('name = "ella"', 'name = ""', 'model.name = "": expected a non-empty string'),
])
def test_a_preset_value_of_the_wrong_kind_is_one_line(old, new, message):
    """Found by tools.badinputs' generated cases (every value of the preset broken three ways)."""
    text = (Path(__file__).resolve().parent.parent / "configs/ella.toml").read_text()
    assert old in text
    broken = text.replace(old, new, 1)
    with pytest.raises(ConfigError) as error:
        load_model_from_string(broken, "broken.toml")
    assert message in str(error.value) and "\n" not in str(error.value)
