"""The campaign report: matrix, worst cases and the sensitivity ranking, on a results table made
here (cases with known answers)."""
from __future__ import annotations

import re

import numpy as np

from campaigns import write_campaign
from hil.campaign.report import margin, sensitivity, write_report
from hil.campaign.results import ResultStore


def _rows() -> list[dict]:
    rng = np.random.default_rng(1)
    rows = []
    for i in range(12):
        mass, noise = 1.8 + 0.05 * i, float(rng.random())
        peak = 100.0 + 40.0 * mass                       # the payload decides the torque, the other does not
        rows.append({"case_id": f"pid/{'none' if i % 2 else 'loss'}/{i:04d}", "index": i, "firmware": "pid",
                     "scenario": "none" if i % 2 else "loss", "sample": i, "seed": i, "log": "",
                     "param:mass_kg": mass, "param:other": noise, "param:constant": 1.0,
                     "verdict:max_torque": peak <= 190.0, "value:max_torque": peak, "limit:max_torque": 190.0,
                     "status": "passed" if peak <= 190.0 else "failed", "passed": peak <= 190.0, "error": ""})
    rows[4].update(status="timeout", passed=False, error="no result within timeout_s", **{"value:max_torque": None})
    return rows


def test_the_parameter_that_decides_a_verdict_ranks_first():
    ranking = sensitivity(_rows())
    assert ranking[0][:2] == ("mass_kg", "max_torque") and ranking[0][2] == 1.0 and ranking[0][3] == 11
    assert abs(next(r for r in ranking if r[0] == "other")[2]) < 0.9
    assert not any(r[0] == "constant" for r in ranking)     # a parameter that never moved ranks nothing


def test_margin_puts_cases_without_a_judgement_first():
    rows = _rows()
    assert margin(rows[4]) == np.inf
    assert margin(rows[11]) == (100.0 + 40.0 * 2.35) / 190.0 > 1.0 > margin(rows[0])


def test_the_report_shows_the_matrix_and_the_worst_cases(tmp_path):
    path = write_campaign(tmp_path)
    store = ResultStore(tmp_path / "out", "f", str(path), warn=lambda _: None)
    for row in _rows():
        store.add(row)
    store.write_table()
    text = " ".join(re.sub(r"<[^>]+>", " ", write_report(path, tmp_path / "out").read_text()).split())
    passing = {s: sum(1 for r in _rows() if r["scenario"] == s and r["passed"]) for s in ("loss", "none")}
    assert passing == {"loss": 4, "none": 5}
    assert "scenario pid loss 4 / 6 none 5 / 6" in text
    worst = text[text.index("worst cases"):text.index("Which parameter")]
    assert worst.index("pid/loss/0004") < worst.index("pid/none/0011") < worst.index("pid/loss/0010")
    assert "mass_kg max_torque +1.00 11" in text


def test_a_report_without_results_says_to_run_the_campaign_first(tmp_path):
    import pytest
    with pytest.raises(ValueError, match="no results table .*run the campaign first"):
        write_report(write_campaign(tmp_path), tmp_path / "empty")
