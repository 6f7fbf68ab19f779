"""Campaign runs on this machine: every case a `hil run` process (short lockstep cases). A crashing
firmware and a hanging case become error rows and the campaign goes on; a rerun resumes without
duplicating a row. The cluster tests (a Dask scheduler and two worker processes on 127.0.0.1):
tests/test_campaign_cluster.py."""
from __future__ import annotations

import io
import json
import sys

import pytest

from campaigns import PAYLOAD, comparable, write_campaign
from hil.campaign.report import write_report
from hil.campaign.results import read_results
from hil.campaign.run import run_campaign
from hil.cli.main import main

CRASHING = f'[[firmware]]\nname = "crash"\nkind = "command"\ncommand = "{sys.executable} -c \'import sys; sys.exit(3)\' {{port}}"\n'
HANGING = '[[firmware]]\nname = "hang"\nkind = "command"\ncommand = "sleep 600"\n'
GOOD = '[[firmware]]\nname = "pid"\nmove_time_s = 0.2\n'


def test_a_crashing_firmware_is_an_error_row_and_the_campaign_goes_on(tmp_path):
    path = write_campaign(tmp_path, firmware=GOOD + "\n" + CRASHING, logs="failing")
    outcome = run_campaign(path, tmp_path / "out", workers=2, stream=io.StringIO())
    rows = {r["firmware"]: r for r in read_results(tmp_path / "out")}
    assert outcome.counts == {"passed": 1, "run_failed": 1}
    assert rows["pid"]["passed"] and rows["pid"]["status"] == "passed" and rows["pid"]["log"] == ""
    crash = rows["crash"]
    assert not crash["passed"] and "firmware exited with status 3" in crash["error"]
    assert crash["log"] and (tmp_path / "out" / crash["log"]).exists()      # a failing case keeps its log
    report = write_report(path, tmp_path / "out").read_text()
    assert "crash/none/0000" in report and "run_failed" in report


def test_a_hanging_case_is_killed_at_its_timeout(tmp_path):
    path = write_campaign(tmp_path, firmware=HANGING, timeout_s=3.0, logs="none")
    outcome = run_campaign(path, tmp_path / "out", workers=1, stream=io.StringIO())
    (row,) = read_results(tmp_path / "out")
    assert outcome.counts == {"timeout": 1}
    assert row["status"] == "timeout" and "timeout_s = 3 s" in row["error"] and not row["passed"]


def test_a_failed_verdict_is_a_failed_row_over_a_udp_loopback_link(tmp_path):
    path = write_campaign(tmp_path)
    text = path.read_text().replace("max_torque_N_m = 250.0", "max_torque_N_m = 1.0")
    path.write_text(text.replace('bus = "serial_frame"', 'bus = "compact_fd"\nlink = "udp_loopback"'))
    run_campaign(path, tmp_path / "out", workers=1, stream=io.StringIO())
    (row,) = read_results(tmp_path / "out")
    assert row["status"] == "failed" and not row["passed"] and row["error"] == ""
    assert row["verdict:max_torque_shoulder_pitch"] is False and row["value:max_torque_shoulder_pitch"] > 1.0
    assert row["verdict:setpoint_elbow"] is True


def test_a_rerun_resumes_without_duplicating_a_row(tmp_path, capsys):
    path = write_campaign(tmp_path, variations=PAYLOAD, sampling='method = "grid"\nlevels = 3')
    out = tmp_path / "out"
    first = run_campaign(path, out, workers=2, limit=2, stream=io.StringIO())
    assert (first.total, first.ran, len(read_results(out))) == (3, 2, 2)
    done = {r["case_id"]: r for r in read_results(out)}
    assert main(["campaign", str(path), "--out", str(out), "--workers", "2", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)
    assert (second["skipped"], second["ran"], second["duplicates_refused"]) == (2, 1, 0)
    rows = read_results(out)
    assert sorted(r["case_id"] for r in rows) == [f"pid/none/{k:04d}" for k in range(3)]
    assert all(rows[i] == done[rows[i]["case_id"]] for i in range(3) if rows[i]["case_id"] in done)
    third = run_campaign(path, out, workers=2, stream=io.StringIO())
    assert (third.ran, third.skipped, len(read_results(out))) == (0, 3, 3)
    # the same case again in the same process: comparable, row for row, with a fresh run
    again = run_campaign(path, tmp_path / "again", workers=1, stream=io.StringIO())
    assert again.ran == 3
    assert comparable(read_results(tmp_path / "again")) == comparable(rows)


def test_the_campaign_command_refuses_dask_without_an_address(tmp_path, capsys):
    path = write_campaign(tmp_path)
    assert main(["campaign", str(path), "--engine", "dask"]) == 2
    assert "--engine dask needs --address" in capsys.readouterr().err


CONTROLLERS = ('[[firmware]]\nname = "pd"\nkind = "controller"\ncontroller = "tools.seed000_experiment:controller"\n\n'
               '[[firmware]]\nname = "missing"\nkind = "controller"\ncontroller = "tools.seed000_experiment:no_such"\n')


def test_an_in_process_controller_is_judged_and_a_missing_one_is_an_error_row(tmp_path):
    path = write_campaign(tmp_path, firmware=CONTROLLERS)
    run_campaign(path, tmp_path / "out", workers=2, stream=io.StringIO())
    rows = {r["firmware"]: r for r in read_results(tmp_path / "out")}
    pd = rows["pd"]
    assert pd["status"] in ("passed", "failed") and pd["cycles"] == 301 and pd["verdict:setpoint_elbow"] is not None
    assert pd["overruns"] is None                             # no loop, no pacer
    assert rows["missing"]["status"] == "error" and "no_such" in rows["missing"]["error"]


def test_an_in_process_controller_refuses_fault_scenarios(tmp_path):
    from config_schema import ConfigError
    from hil.campaign.spec import load_campaign
    with pytest.raises(ConfigError, match=r'campaign.scenarios = .*expected \["none"\] with an in-process controller'):
        load_campaign(write_campaign(tmp_path, firmware=CONTROLLERS, scenarios='["none", "imu_degradation"]'))
