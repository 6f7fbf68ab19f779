"""One strict TOML reader for every file: a typo'd key in each kind of file gets "did you mean",
and a missing or binary file is a one-line error naming it."""
from __future__ import annotations

from pathlib import Path

import pytest

from config_schema import ConfigError
from firmware_bridge.wire.messages import BusMap
from hil.faults.params import check_fault
from hil.faults.spec import Fault, FaultError
from hil.faults.scenario import load_scenario
from hil.model.config import load_model

ROOT = Path(__file__).resolve().parent.parent
PRESET = ROOT / "configs" / "ella.toml"
BUS_MAP = ROOT / "configs" / "bus" / "compact_classic.toml"
SCENARIO = ROOT / "configs" / "scenarios" / "combined.toml"
LOADERS = {"preset": load_model, "bus map": BusMap.load, "scenario": load_scenario}


def _typo(tmp_path: Path, original: Path, old: str, new: str) -> Path:
    text = original.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / original.name
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


TYPOS = [  # (file kind, file, text, typo, key named, suggestion)
    ("preset", PRESET, "  E_Pa = 2.1e11", "  E_pa = 2.1e11", "body[link1].beam.E_pa", "E_Pa"),
    ("preset", PRESET, "sensor_seed = 1\n", "sensor_sed = 1\n", "model.sensor_sed", "sensor_seed"),
    ("sensor table", PRESET, "quadrature = 4", "quadratur = 4", "sensor[enc_base_yaw].quadratur", "quadrature"),
    ("bus map", BUS_MAP, "cycle_s = 0.001", "cycel_s = 0.001", "bus.cycel_s", "cycle_s"),
    ("scenario", SCENARIO, "  at_s = 0.8", "  at_ss = 0.8", "fault[gyro_z_noise].trigger.at_ss", "at_s"),
    ("scenario", SCENARIO, "[scenario]\ndescription", "[scenario]\ndescriptoin", "scenario.descriptoin",
     "description"),
    ("fault parameters", SCENARIO, "sigma_rad_s = 0.02", "sigma_rad = 0.02", "fault[gyro_z_noise].sigma_rad",
     "sigma_rad_s"),
    ("fault parameters", SCENARIO, 'target = "imu_gz"', 'targte = "imu_gz"', "fault[gyro_z_noise].targte",
     "target"),
]


@pytest.mark.parametrize("kind, original, old, new, key, hint", TYPOS, ids=[f"{t[0]}:{t[3]}" for t in TYPOS])
def test_a_typo_in_any_file_gets_did_you_mean(tmp_path, kind, original, old, new, key, hint):
    loader = LOADERS["bus map" if original == BUS_MAP else "scenario" if original == SCENARIO else "preset"]
    path = _typo(tmp_path, original, old, new)
    with pytest.raises(ConfigError) as info:
        loader(path)
    message = str(info.value)
    assert message.startswith(f"{path}: {key} = "), message
    assert f"(did you mean {hint!r}?)" in message, message


def test_a_typo_in_fault_parameters_given_in_code_gets_did_you_mean():
    with pytest.raises(FaultError) as info:
        check_fault(Fault("bias", "offset", "imu_ax", {"ofset_m_s2": 0.5}))
    assert str(info.value).startswith("fault 'bias': ofset_m_s2 = 0.5: unknown parameter of offset faults "
                                      "(did you mean 'offset_m_s2'?)")


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_a_binary_file_is_a_one_line_error_naming_it(tmp_path, kind):
    path = tmp_path / "image.toml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")
    with pytest.raises(ConfigError) as info:
        LOADERS[kind](path)
    message = str(info.value)
    assert message.startswith(f"{path}: not a text file") and "\n" not in message, message


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_a_missing_file_is_a_one_line_error_naming_it(tmp_path, kind):
    path = tmp_path / "nowhere.toml"
    with pytest.raises(ConfigError) as info:
        LOADERS[kind](path)
    message = str(info.value)
    assert message.startswith(f"{path}: cannot read") and "\n" not in message, message
