"""One integrator plan for a campaign (hil.campaign.plan): planned at the corners of the parameter space, the
dearest of auto's choices there pinned in every case's model file with its judgement; none where the plan misses a
tolerance at a corner, where the integrator varies or a preset pins a method without substeps; a case judges its
modes but not its motion again, and its model file reruns it exactly."""
from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from campaigns import PAYLOAD, same_log, write_campaign
from config_schema import ConfigError
from hil.campaign.cases import expand
from hil.campaign.engine import settings
from hil.campaign.plan import MAX_CORNERS, campaign_plan, corners
from hil.campaign.results import read_results
from hil.campaign.run import run_campaign, targets_file
from hil.campaign.runner import command, model_text
from hil.campaign.spec import Variation, load_campaign
from hil.cli.campaign_case import run_case as run_case_inside
from hil.dynamics.integrator_plan import EVALUATIONS, plan_integrator
from hil.model.assembly import assemble
from hil.model.config import load_model_from_string

ROOT = Path(__file__).resolve().parent.parent
STIFFNESS = "body.link1.beam.E_Pa = {scale = [0.9, 1.1]}"


def test_the_corners_are_every_combination_of_the_ends_or_one_variation_at_a_time():
    payload = Variation("p", "uniform", (1.0, 3.0))
    assert corners((payload,)) == [{"p": 2.0}, {"p": 1.0}, {"p": 3.0}]
    two = corners((payload, Variation("q", "values", (5, 2, 9))))
    assert two[0] == {"p": 2.0, "q": 2} and len(two) == 5 and {"p": 3.0, "q": 9} in two     # middle, then 2 x 2
    assert corners((Variation("w", "values", ("a", "b", "c")),)) == [{"w": "b"}, {"w": "a"}, {"w": "c"}]
    many = tuple(Variation(f"v{i}", "uniform", (0.0, 1.0)) for i in range(5))                # 32 > MAX_CORNERS
    assert 2 ** 5 > MAX_CORNERS and len(corners(many)) == 1 + 2 * 5


def test_the_dearest_plan_of_the_corners_is_pinned_with_its_judgement(tmp_path):
    campaign = load_campaign(write_campaign(tmp_path, variations=f"{PAYLOAD}\n{STIFFNESS}"))
    plan = campaign_plan(campaign)
    pinned = plan["overrides"]
    cost = EVALUATIONS[pinned["integrator.method"]] * pinned["integrator.substeps"]
    for point in corners(campaign.variations):
        own = plan_integrator(assemble(load_model_from_string(campaign.preset.with_overrides(point, "corner"))))
        assert EVALUATIONS[own.method] * own.substeps <= cost
    assert "at 5 corners of its parameter space" in pinned["integrator.judged_by"] and "every mode accurate" in \
        pinned["integrator.judged_by"]


def test_a_plan_that_misses_a_tolerance_at_a_corner_leaves_each_case_its_own(tmp_path):
    strict = (ROOT / "configs/ella.toml").read_text().replace('method = "auto"\n',
                                                              'method = "auto"\nmotion_tolerance_rad = 1e-12\n')
    (tmp_path / "strict.toml").write_text(strict)
    path = write_campaign(tmp_path, variations=PAYLOAD)
    path.write_text(path.read_text().replace('arm = "ella"', f'arm = "{tmp_path / "strict.toml"}"'))
    with pytest.warns(UserWarning, match="no plan within the time budget"):
        plan = campaign_plan(load_campaign(path))
    assert "misses a tolerance at one of them" in plan["reason"] and "overrides" not in plan


@pytest.mark.parametrize("variations, preset_edit, reason", [
    ("integrator.substeps = {values = [3, 4]}", None, "varies the integrator"),
    (PAYLOAD, ('method = "auto"', 'method = "rk4"'), "pins integrator.method = 'rk4' without substeps")])
def test_no_campaign_plan_where_the_integrator_varies_the_substeps_follow_each_model_or_the_plant_is_alike(tmp_path, variations,
                                                                                        preset_edit, reason):
    path = write_campaign(tmp_path, variations=variations)
    if preset_edit:
        (tmp_path / "pinned.toml").write_text((ROOT / "configs/ella.toml").read_text().replace(*preset_edit))
        path.write_text(path.read_text().replace('arm = "ella"', f'arm = "{tmp_path / "pinned.toml"}"'))
    assert reason in campaign_plan(load_campaign(path))["reason"]
    assert campaign_plan(load_campaign(write_campaign(tmp_path, variations="", name="plain"))) is None
    seeds = write_campaign(tmp_path, variations="model.sensor_seed = {integers = [0, 1000]}", name="seeds")
    assert campaign_plan(load_campaign(seeds)) is None          # the plant's arrays alike: the plan cache serves


def test_a_case_skips_its_motion_probe_and_its_model_file_reruns_it_exactly(tmp_path):
    path = write_campaign(tmp_path, variations=PAYLOAD, sampling='method = "lhs"\nsamples = 2', logs="all")
    out, stream = tmp_path / "out", io.StringIO()
    outcome = run_campaign(path, out, workers=1, stream=stream, case_runner=run_case_inside)
    assert outcome.counts == {"passed": 2} and "integrator: fitted_midpoint x" in stream.getvalue()
    row = read_results(out)[0]
    campaign = load_campaign(path)
    common = settings(campaign, out, targets_file(campaign, out))
    case = next(c.as_dict() for c in expand(campaign) if c.case_id == row["case_id"])
    model = tmp_path / "case.toml"
    model.write_text(model_text(case, common))
    proc = subprocess.run(command(case, common, model, tmp_path / "rerun.msgpack"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    integrator = json.loads(proc.stdout.splitlines()[-1])["integrator"]
    assert integrator["motion_judged_by"].startswith("campaign small at 3 corners") and integrator["accurate"]
    assert integrator["motion_error_rad"] is None
    assert same_log(out / row["log"], tmp_path / "rerun.msgpack")


@pytest.mark.parametrize("integrator, message", [
    ('method = "auto"\njudged_by = "me"', "only beside a pinned integrator.method and substeps"),
    ('method = "rk4"\nsubsteps = 3\njudged_by = 3', "expected a string"),
    ('method = "rk4"\nsubsteps = 3\njudged_by = "' + "x" * 1001 + '"', "at most 1000 characters")])
def test_a_judged_by_note_without_a_pinned_plan_or_too_long_is_refused(integrator, message):
    text = (ROOT / "configs/ella.toml").read_text().replace('method = "auto"\n', integrator + "\n", 1)
    text = text.replace("substeps = 0\n", "", 1) if "substeps = 3" in integrator else text
    with pytest.raises(ConfigError, match=message):
        load_model_from_string(text, "ella.toml")
