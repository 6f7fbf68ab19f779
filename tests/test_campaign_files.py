"""Campaign files, their expansion into cases, parameter overrides by model path, and the results
store's resume/dedup/corruption rules (no run here: tests/test_campaign_runs.py runs cases)."""
from __future__ import annotations

import glob
import tomllib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from campaigns import PAYLOAD, TWO_FIRMWARE, write_campaign
from config_schema import ConfigError
from hil.campaign.cases import expand, fingerprint, samples
from hil.campaign.overrides import Preset
from hil.campaign.results import ResultsError, ResultStore
from hil.campaign.spec import load_campaign
from hil.campaign.toml_text import dumps
from hil.model.config import load_model_from_string
from hil.model.presets import CONFIG_ROOT, resolve


@pytest.mark.parametrize("path", sorted(glob.glob(str(CONFIG_ROOT / "**" / "*.toml"), recursive=True)))
def test_every_shipped_file_is_written_back_to_the_same_toml(path):
    with open(path, "rb") as f:
        data = tomllib.load(f)
    assert tomllib.loads(dumps(data)) == data


def test_any_string_is_written_as_toml_reads_it_back():
    """Quotes, backslashes, control characters (DEL too) and characters beyond the BMP, in values and keys:
    JSON's escapes would write an emoji as a surrogate pair, which TOML refuses."""
    odd = 'a "quoted" \\ path\twith\x00\x1f\x7f, \u00e9, \U0001f600 and \n a line'
    data = {"provenance": {odd: odd, "body.link1.beam.E_Pa": "published: \U0001f4d6"}, "name": odd}
    assert tomllib.loads(dumps(data)) == data


def test_a_text_written_here_is_read_back_from_its_data_as_a_copy(monkeypatch):
    """A campaign case's model file, written by dumps and read at once by the run: its data is taken (a
    copy each time), not parsed again; other text is parsed."""
    import config_schema
    data = {"a": 1.5, "t": {"v": [1, 2]}}
    text = dumps(data)
    monkeypatch.setattr(config_schema.tomllib, "loads", lambda text: pytest.fail("parsed again"))
    first = config_schema.parse_toml(text, "case.toml")
    assert first == data
    first["t"]["v"].append(3)
    assert config_schema.parse_toml(text, "case.toml") == data
    monkeypatch.undo()
    assert config_schema.parse_toml("b = 2\n" + text, "other.toml") == {"b": 2, **data}


def test_an_override_reaches_the_model_and_a_bad_value_is_the_preset_readers_error():
    preset = Preset(resolve("preset", "ella"))
    model = load_model_from_string(preset.with_overrides({"body.link2.attachment.payload.mass_kg": 2.25,
                                                          "body.link1.beam.E_Pa": 1.5e11}, "x"))
    link1, link2 = (b for b in model.bodies if b.name in ("link1", "link2"))
    assert link2.attachments[0].mass_kg == 2.25 and link1.beam.E_Pa == 1.5e11
    with pytest.raises(ConfigError, match=r"E_Pa = -1e\+?11: expected a positive number in Pa"):
        preset.with_overrides({"body.link1.beam.E_Pa": -1e11}, "x")


def test_one_element_of_a_list_is_a_path_and_a_per_mode_number_is_one_per_mode_first():
    preset = Preset(resolve("preset", "ella"))
    for path in ("body.link2.beam.damping_ratio[4]", "body.link1.beam.frequency_scale[0]",
                 "sensor.imu.gyro.bias_rad_s[2]", "sensor.imu.accel.scale_error[1]", "sensor.cur_elbow.bias_A"):
        preset.check_path("c.toml", "variations", path)
    assert preset.value("body.link2.beam.damping_ratio[4]") == 0.01 and preset.value("sensor.imu.gyro.bias_rad_s[2]") == 8e-4
    model = load_model_from_string(preset.with_overrides({"body.link2.beam.damping_ratio[1]": 0.03,
                                                          "body.link2.beam.frequency_scale[0]": 1.05,
                                                          "sensor.imu.gyro.bias_rad_s[0]": -2e-3,
                                                          "sensor.cur_elbow.bias_A": 0.5}, "x"))
    link2 = next(b for b in model.bodies if b.name == "link2")
    assert link2.beam.damping_ratio.tolist() == [0.01, 0.03, 0.01, 0.01, 0.01]
    assert link2.beam.frequency_scale.tolist() == [1.05, 1.0, 1.0, 1.0, 1.0]
    imu = next(s for s in model.sensors if s.name == "imu")
    cur = next(s for s in model.sensors if getattr(s, "joint", "") == "elbow" and s.kind == "current")
    assert imu.gyro.bias.tolist() == [-2e-3, -1e-3, 8e-4] and cur.chain.bias == 0.5
    for path, match in (("body.link2.beam.damping_ratio[5]", r"5 values \(elements \[0\] .. \[4\]\)"),
                        ("body.link2.beam.E_Pa[0]", "gives body.link2.beam.E_Pa no list of numbers"),
                        ("sensor.imu.gyro.misalignment_rad[0]", "an element of a list of numbers"),
                        ("body.link2.beam.dampng_ratio[1]", "did you mean 'body.link2.beam.damping_ratio'")):
        with pytest.raises(ConfigError, match=match):
            preset.check_path("c.toml", "variations", path)


def test_a_path_with_a_wrong_unit_is_unknown_with_the_closest_suggested(tmp_path):
    path = write_campaign(tmp_path, variations="body.link1.beam.E_GPa = {scale = [0.9, 1.1]}")
    with pytest.raises(ConfigError, match=r"small.toml: variations.body.link1.beam.E_GPa = .*did you mean "
                                          r"'body.link1.beam.E_Pa'"):
        load_campaign(path)


def test_a_range_the_preset_refuses_names_the_key_value_and_unit(tmp_path):
    path = write_campaign(tmp_path, variations="body.link2.attachment.payload.mass_kg = {uniform = [-1.0, 2.0]}")
    with pytest.raises(ConfigError, match=r"variations.body.link2.attachment.payload.mass_kg = .*at -1.0: "
                                          r".*mass_kg = -1.0: expected a positive number in kg"):
        load_campaign(path)


@pytest.mark.parametrize("text, match", [
    ('mode = "realtime"', r'campaign.mode = "realtime": expected one of "lockstep", "afap"'),
    ('logs = "some"', r'campaign.logs = "some"'),
    ('scenarios = ["none", "no_such_scenario"]', r'campaign.scenarios = "no_such_scenario".*shipped'),
    ('duration_s = -1', r"campaign.duration_s = -1: expected a positive number in s"),
])
def test_campaign_keys_are_checked(tmp_path, text, match):
    path = write_campaign(tmp_path)
    key = text.split(" = ")[0]
    lines = [line for line in path.read_text().splitlines() if not line.startswith(key + " =")]
    lines.insert(1, text)
    path.write_text("\n".join(lines))
    with pytest.raises(ConfigError, match=match):
        load_campaign(path)


def test_a_variation_of_unknown_kind_and_a_scale_without_a_value_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="expected exactly one of"):
        load_campaign(write_campaign(tmp_path, variations="body.link1.beam.E_Pa = {gauss = [1, 2]}"))
    with pytest.raises(ConfigError, match="leaves body.link1.joint.stribeck_N_m to its default"):
        load_campaign(write_campaign(tmp_path, variations="body.link1.joint.stribeck_N_m = {scale = [1, 2]}"))


def test_grid_is_every_combination_and_seeds_follow_the_sample(tmp_path):
    variations = PAYLOAD + '\n"model.sensor_seed" = {values = [1, 2, 3]}'
    campaign = load_campaign(write_campaign(tmp_path, firmware=TWO_FIRMWARE, scenarios='["none", "imu_degradation"]',
                                            variations=variations))
    cases = expand(campaign)
    assert len(cases) == 2 * 2 * (2 * 3)
    assert len({c.case_id for c in cases}) == len(cases)
    assert sorted({c.overrides["body.link2.attachment.payload.mass_kg"] for c in cases}) == [1.8, 2.4]
    by_sample = {}
    for c in cases:
        assert by_sample.setdefault(c.sample, c.seed) == c.seed     # one seed per sample, for every firmware
    assert len(set(by_sample.values())) == len(by_sample)             # and a different one per sample
    assert expand(load_campaign(campaign.source)) == cases              # reproducible


def test_latin_hypercube_uses_each_stratum_once(tmp_path):
    campaign = load_campaign(write_campaign(tmp_path, variations=PAYLOAD + "\nbody.link1.beam.E_Pa = {scale = [0.9, 1.1]}",
                                            sampling='method = "lhs"\nsamples = 8'))
    points = samples(campaign)
    mass = np.array([p["body.link2.attachment.payload.mass_kg"] for p in points])
    strata = np.floor((mass - 1.8) / 0.6 * 8).astype(int)
    assert sorted(strata) == list(range(8))
    base = campaign.preset.value("body.link1.beam.E_Pa")
    factors = np.array([p["body.link1.beam.E_Pa"] for p in points]) / base
    assert sorted(np.floor((factors - 0.9) / 0.2 * 8).astype(int)) == list(range(8))


def _row(case_id: str, index: int, **extra) -> dict:
    return {"case_id": case_id, "index": index, "status": "passed", "passed": True, "error": "", **extra}


def test_the_store_refuses_a_second_row_for_a_case(tmp_path):
    store = ResultStore(tmp_path, "f1", "c.toml", warn=lambda _: None)
    assert store.add(_row("a", 0, value=1.0))
    assert not store.add(_row("a", 0, value=2.0))
    store.write_table()
    again = ResultStore(tmp_path, "f1", "c.toml", warn=lambda _: None)
    assert again.duplicates == 0 and list(again.rows) == ["a"] and again.rows["a"]["value"] == 1.0
    # a part that repeats a row (two writers raced): read once, counted
    pq.write_table(pa.Table.from_pylist([_row("a", 0, value=3.0)]), tmp_path / "parts" / "part-99999999999999999999-1.parquet")
    third = ResultStore(tmp_path, "f1", "c.toml", warn=lambda _: None)
    assert third.duplicates == 1 and len(third.rows) == 1
    assert [r["case_id"] for r in pq.read_table(third.write_table()).to_pylist()] == ["a"]


def test_a_corrupted_part_is_set_aside_and_its_cases_run_again(tmp_path):
    store = ResultStore(tmp_path, "f1", "c.toml", warn=lambda _: None)
    store.add(_row("a", 0))
    store.flush()
    store.add(_row("b", 1))
    store.flush()
    parts = sorted((tmp_path / "parts").glob("part-*.parquet"))
    parts[1].write_bytes(parts[1].read_bytes()[:40])            # cut short
    warnings = []
    again = ResultStore(tmp_path, "f1", "c.toml", warn=warnings.append)
    assert again.done("a") and not again.done("b")
    assert len(again.corrupt) == 1 and "unreadable" in warnings[0]


def test_a_folder_of_another_campaign_is_refused(tmp_path):
    ResultStore(tmp_path, "f1", "c.toml")
    with pytest.raises(ResultsError, match="another campaign"):
        ResultStore(tmp_path, "f2", "c.toml")


def test_the_fingerprint_changes_with_the_cases(tmp_path):
    a = load_campaign(write_campaign(tmp_path, variations=PAYLOAD))
    b = load_campaign(write_campaign(tmp_path, variations=PAYLOAD.replace("2.4", "2.5")))
    assert fingerprint(a, expand(a)) != fingerprint(b, expand(b))


def test_the_shipped_example_campaign_loads():
    campaign = load_campaign(CONFIG_ROOT / "campaigns" / "payload_spread.toml")
    assert len(expand(campaign)) == 12


def test_two_scenarios_of_one_name_are_refused(tmp_path):
    (tmp_path / "a").mkdir()
    shipped = (CONFIG_ROOT / "scenarios" / "imu_degradation.toml").read_text()
    (tmp_path / "a" / "imu_degradation.toml").write_text(shipped)
    path = write_campaign(tmp_path, scenarios='["imu_degradation", "a/imu_degradation.toml"]')
    with pytest.raises(ConfigError, match="distinct names"):
        load_campaign(path)
