"""Every size and count a user sets has a limit, refused in one line naming the key and the unit: modes per
beam, substeps, the step, fault delays, stalls and frame sizes, a run's duration, a campaign's cases."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from config_schema import ConfigError
from hil.campaign.spec import MAX_CASES, case_bound, load_campaign
from hil.cli.campaign import CONFIRM_CASES
from hil.cli.main import main
from hil.faults.scenario import scenario_from_string
from hil.model.config import load_model_from_string

from campaigns import write_campaign

ROOT = Path(__file__).resolve().parent.parent
ELLA = (ROOT / "configs" / "ella.toml").read_text(encoding="utf-8")


def preset_with(old: str, new: str) -> str:
    assert old in ELLA, old
    return ELLA.replace(old, new, 1)


@pytest.mark.parametrize("old, new, message", [
    ("bending_y = 2", "bending_y = 1000000", r"bending_y = 1000000: expected an integer in 0\.\.24"),
    ("dt_s = 0.001", "dt_s = 1e-300", r"dt_s = 1e-300: expected a finite number in s, at least 1e-6, at most 1\.0"),
])
def test_a_preset_size_beyond_its_limit_is_refused(old, new, message):
    with pytest.raises(ConfigError, match=message):
        load_model_from_string(preset_with(old, new), "big.toml")


def test_substeps_beyond_the_limit_are_refused():
    text = preset_with("[integrator]\n", "[integrator]\nsubsteps = 1000000000\n") if "substeps" not in ELLA else \
        re.sub(r"substeps = \d+", "substeps = 1000000000", ELLA, count=1)
    with pytest.raises(ConfigError, match=r"substeps = 1000000000: expected an integer in 0\.\.4096"):
        load_model_from_string(text, "many.toml")


FAULT = '[[fault]]\nname = "f"\nkind = "{kind}"\ntarget = "{target}"\n{params}\n'


@pytest.mark.parametrize("kind, target, params, message", [
    ("delay", "enc_elbow", "samples = 1000000000", r"samples = 1000000000: expected an integer in 1\.\.100000"),
    ("stall", "", "stall_s = 1e6", r"stall_s = 1e6: expected a positive number in s, at most 10\.0"),
    ("corrupt", "to_plant", "bytes = 100000", r"bytes = 100000: expected an integer in 1\.\.255"),
    ("babble", "to_plant:cmd_torque", "rate_hz = 1e12", r"rate_hz = 1e12: expected a positive number in Hz, at most 1e6"),
])
def test_a_fault_size_beyond_its_limit_is_refused(kind, target, params, message):
    text = FAULT.format(kind=kind, target=target, params=params)
    if not target:
        text = text.replace('target = ""\n', "")
    with pytest.raises(ConfigError, match=message):
        scenario_from_string(text, "s.toml")


@pytest.mark.parametrize("argv, message", [
    (["run", "ella", "--bus", "serial_frame", "--duration", "1e308"], "at most 1e+07"),
    (["simulate", "ella", "--duration", "1", "--substeps", "1000000000"], "an integer in 1..4096"),
    (["simulate", "ella", "--duration", "1", "--dt", "1e-300"], "a number in 1e-06 .. 1 s"),
])
def test_a_command_line_size_beyond_its_limit_is_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and err.count("\n") == 1


def test_a_campaign_beyond_its_limit_is_refused_and_a_large_one_needs_a_confirmation(tmp_path, capsys):
    many = write_campaign(tmp_path, sampling=f'method = "random"\nsamples = {MAX_CASES + 1}',
                          variations="body.link2.attachment.payload.mass_kg = {uniform = [1.8, 2.4]}", name="many")
    with pytest.raises(ConfigError, match=r"samples = 1000001: expected an integer in 1\.\.1000000"):
        load_campaign(many)
    large = write_campaign(tmp_path, sampling=f'method = "random"\nsamples = {CONFIRM_CASES + 1}',
                           variations="body.link2.attachment.payload.mass_kg = {uniform = [1.8, 2.4]}", name="large")
    assert case_bound(load_campaign(large)) == CONFIRM_CASES + 1
    assert main(["campaign", str(large), "--out", str(tmp_path / "out")]) == 2
    assert "10001 cases (more than 10000): give --limit N" in capsys.readouterr().err
    grid = write_campaign(tmp_path, sampling="method = \"grid\"\nlevels = 1001", name="grid", variations=(
        "body.link2.attachment.payload.mass_kg = {uniform = [1.8, 2.4]}\n"
        "body.link1.joint.viscous_N_m_s_rad = {scale = [0.5, 2.0]}\n"))
    with pytest.raises(ConfigError, match="a campaign of at most 1000000 cases"):
        load_campaign(grid)


def test_an_arm_of_more_bodies_than_the_limit_is_refused_before_anything_recurses():
    body = ('[[body]]\nname = "b{i}"\nparent = "{p}"\n  [body.joint]\n  type = "revolute"\n  axis = [0, 0, 1]\n'
            '  [body.rigid]\n  mass_kg = 1.0\n  com_m = [0.1, 0, 0]\n'
            '  inertia_kg_m2 = [[0.01,0,0],[0,0.01,0],[0,0,0.01]]\n  length_m = 0.2\n')
    text = '[model]\nname = "deep"\n' + "".join(body.format(i=i, p="base" if i == 0 else f"b{i - 1}")
                                                  for i in range(1000))
    with pytest.raises(ConfigError, match=r"deep.toml: body = \"1000 \[\[body\]\] tables\": at most 256 bodies"):
        load_model_from_string(text, "deep.toml")
