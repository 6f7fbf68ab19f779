"""Falsification (`hil campaign search`, hil.campaign.search): a case's robustness from its verdicts, and CMA-ES
finding the planted weakness of tests/planted_controller.py (a bad gain-schedule cell near 3.41 kg and 1.037
times link 1's stiffness) that the campaign's own 100-case random sample misses, as it misses it with
probability 0.98; each failing case found reruns to the same log."""
from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import planted_controller
from hil.campaign.results import read_results
from hil.campaign.run import run_campaign
from hil.campaign.search import FAILED_ROBUSTNESS, robustness, search
from hil.cli.campaign_case import run_case
from hil.cli.main import main
from hil.logs.compare import DEFAULT_IGNORE, compare_runs
from hil.logs.runlog import read_run

ROOT = Path(__file__).resolve().parent.parent
LIMIT_N_M = 0.995
CAMPAIGN = f"""[campaign]
name = "planted"
arm = "ella"
bus = "serial_frame"
mode = "lockstep"
duration_s = 0.05
seed = 11
timeout_s = 120
logs = "failing"
scenarios = ["none"]

[[firmware]]
name = "planted"
kind = "controller"
controller = "planted_controller:controller"

[sampling]
method = "random"
samples = 100

[variations]
body.link2.attachment.payload.mass_kg = {{uniform = [0.01, 5.0]}}
body.link1.beam.E_Pa = {{scale = [0.9, 1.1]}}

[verdict]
[[verdict.assert]]
name = "quiet_start"
formula = "always[0, 0.02] abs(tau_base_yaw) < {LIMIT_N_M}"
"""


def test_a_case_is_as_robust_as_its_least_robust_verdict():
    row = {"status": "failed", "value:settling_time": 1.5, "limit:settling_time": 2.0, "verdict:settling_time": True,
           "value:peak_torque_elbow": 260.0, "limit:peak_torque_elbow": 250.0, "verdict:peak_torque_elbow": False,
           "value:assert_quiet": 0.01, "limit:assert_quiet": 0.0, "verdict:assert_quiet": True}
    assert robustness(row) == pytest.approx(-0.04)                 # 10 N m beyond 250 N m
    assert robustness({**row, "value:peak_torque_elbow": 100.0}) == pytest.approx(0.01)     # the assertion's
    assert robustness({**row, "status": "run_failed"}) == FAILED_ROBUSTNESS


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("planted")
    shutil.copy(Path(planted_controller.__file__), folder)
    path = folder / "planted.toml"
    path.write_text(CAMPAIGN, encoding="utf-8")
    return path


def test_a_random_sample_of_100_misses_the_planted_weakness(planted):
    """The failing region is 1.7e-4 of the space (Monte Carlo over the controller's own bump): a 100-case random
    sample misses it with probability 0.98, and the campaign's sample does."""
    u = np.random.default_rng(5).random((1_000_000, 2))
    share = np.mean(planted_controller.bump(0.01 + 4.99 * u[:, 0], 0.9 + 0.2 * u[:, 1]) > LIMIT_N_M)
    assert 1e-4 < share < 2.5e-4 and (1 - share) ** 100 > 0.97
    outcome = run_campaign(planted, planted.parent / "random", workers=2, stream=io.StringIO(), case_runner=run_case)
    assert outcome.counts == {"passed": 100}
    rows = read_results(planted.parent / "random")
    assert min(robustness(r) for r in rows) > 0.05


def test_the_search_finds_the_planted_weakness_within_150_cases(planted):
    out = planted.parent / "search"
    outcome = search(planted, out, 150, workers=2, case_runner=run_case, stream=io.StringIO())
    (cell,) = outcome.cells
    assert cell["cases"] == 150 and cell["failing"] and cell["min_robustness"] < 0
    found = cell["least_robust"]
    assert abs(found["params"]["body.link2.attachment.payload.mass_kg"] - 3.41) < 0.03
    assert abs(found["params"]["body.link1.beam.E_Pa"] / 2.1e11 - 1.037) < 0.003
    assert json.loads(outcome.summary.read_text())["cells"][0]["least_robust"]["case_id"] == found["case_id"]
    assert (out / found["report"]).exists() and len(read_results(out)) == 150
    rerun = subprocess.run([sys.executable, "-m", "hil", *found["rerun"][1:]], cwd=planted.parent, capture_output=True,
                           text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    (ha, ra), (hb, rb) = read_run(out / found["log"]), read_run(out / "rerun.msgpack")
    assert compare_runs(ha["columns"], ra, hb["columns"], rb, 0.0, [], DEFAULT_IGNORE, ()).passed
    again = search(planted, out, 150, workers=2, case_runner=run_case, stream=io.StringIO())
    assert again.cells[0]["least_robust"]["case_id"] == found["case_id"]       # resumed from its rows, the same


@pytest.mark.parametrize("args, message", [
    (["campaign", "search", "payload_spread"], "expected one campaign file and a results folder"),
    (["campaign", "search", "payload_spread", "--out", "{dir}", "--budget", "0"], "--budget"),
])
def test_a_search_without_its_folder_or_budget_is_one_line(tmp_path, capsys, args, message):
    try:
        status = main([a.replace("{dir}", str(tmp_path / "out")) for a in args])
    except SystemExit as exc:           # the argument parser's own refusal
        status = exc.code
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
