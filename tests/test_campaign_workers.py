"""Long-lived campaign workers (hil.campaign.worker): a lockstep case of the reference firmware runs in its
worker's own process with the firmware in it, and writes the log a fresh `hil run` process writes; a case that
wrecks its plant leaves the next case as a fresh process runs it; a case that kills its worker is an error row
while the others give theirs; a case past its timeout is stopped; a killed campaign's workers end with it, and a
rerun completes it with one row per case."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from campaigns import PAYLOAD, comparable, same_log, write_campaign
from hil.campaign.cases import expand
from hil.campaign.engine import settings
from hil.campaign.results import read_results
from hil.campaign.run import run_campaign
from hil.campaign.runner import run_case
from hil.campaign.spec import load_campaign
from hil.campaign.worker import WorkerPool
from hil.cli.campaign_case import run_case as run_case_inside, run_inside

import worker_cases
from tools.campaign_scale import alive, workers_of


def test_cases_in_long_lived_workers_write_the_logs_of_fresh_processes(tmp_path):
    path = write_campaign(tmp_path, variations=PAYLOAD, sampling='method = "lhs"\nsamples = 4', logs="all",
                          duration_s=0.5)
    inside = run_campaign(path, tmp_path / "inside", workers=2, stream=io.StringIO(), case_runner=run_case_inside)
    fresh = run_campaign(path, tmp_path / "fresh", workers=2, stream=io.StringIO())
    assert inside.counts == fresh.counts == {"passed": 4}
    rows, fresh_rows = read_results(tmp_path / "inside"), read_results(tmp_path / "fresh")
    assert comparable(rows) == comparable(fresh_rows)
    for row in rows:
        assert same_log(tmp_path / "inside" / row["log"], tmp_path / "fresh" / row["log"]), row["case_id"]
    workers = {row["worker"] for row in rows}
    assert len(workers) <= 2 and str(os.getpid()) not in " ".join(workers)     # 4 cases on at most 2 processes


def test_a_case_that_wrecks_its_plant_leaves_the_next_case_as_a_fresh_process_runs_it(tmp_path):
    """Link 1 made 10^6 times softer, the plant of the first case diverges in its first step (run_failed); the
    nominal case run next in the same process equals the nominal case run in a fresh process, bit for bit."""
    path = write_campaign(tmp_path, variations="body.link1.beam.E_Pa = {values = [2.1e11]}", sampling='method = "grid"',
                          logs="all", duration_s=0.5)
    campaign = load_campaign(path)
    nominal = expand(campaign)[0].as_dict()
    wrecked = {**nominal, "case_id": "pid/none/wrecked", "overrides": {"body.link1.beam.E_Pa": 2.1e5}}
    here = settings(campaign, tmp_path / "here", None)
    (tmp_path / "here").mkdir()
    first = run_case_inside(wrecked, here)
    assert first["status"] == "run_failed" and "diverged" in first["error"]
    second = run_case_inside(nominal, here)
    fresh = settings(campaign, tmp_path / "fresh", None, fresh_process=True)
    (tmp_path / "fresh").mkdir()
    reference = run_case(nominal, fresh)
    assert second["worker"] == first["worker"] and reference["worker"] == first["worker"]
    assert second["status"] == reference["status"] == "passed"
    assert same_log(tmp_path / "here" / second["log"], tmp_path / "fresh" / reference["log"])


def test_a_case_that_kills_its_worker_is_an_error_row_and_the_others_give_theirs():
    cases = [{"case_id": f"c{i}", "index": i} for i in range(7)]
    pool = WorkerPool(2)
    try:
        rows = list(pool.rows(cases, {"fatal_index": 2}, worker_cases.row_or_die, worker_cases.lost))
        again = list(pool.rows(cases[3:5], {"fatal_index": -1}, worker_cases.row_or_die, worker_cases.lost))
    finally:
        pool.close()
    assert [r["status"] for r in again] == ["passed", "passed"]       # the pool goes on after the break
    assert sorted(r["case_id"] for r in rows) == [f"c{i}" for i in range(7)]       # each case once
    by_id = {r["case_id"]: r for r in rows}
    assert by_id["c2"]["status"] == "error" and "worker process died" in by_id["c2"]["error"]
    assert all(r["status"] == "passed" for k, r in by_id.items() if k != "c2")


def test_a_workers_memory_stays_flat_over_cases_that_leave_reference_cycles_behind():
    cases = [{"case_id": f"c{i}", "index": i} for i in range(25)]
    pool = WorkerPool(1)
    try:
        rss = [r["worker_rss_mb"] for r in pool.rows(cases, {"megabytes": 20}, worker_cases.cyclic_garbage,
                                                      worker_cases.lost)]
    finally:
        pool.close()
    assert max(rss[5:]) - min(rss[5:]) < 40        # uncollected, 25 x 20 MB would pile up to 500 MB


def test_a_case_past_its_timeout_is_stopped():
    started = time.monotonic()
    summary, error, status = run_inside(["run", "ella", "--bus", "serial_frame", "--mode", "lockstep", "--duration",
                                         "30", "--firmware-in-process"], 0.5, ".")
    assert status == "timeout" and summary is None and "timeout_s = 0.5 s" in error
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("argv, message", [(["run", "ella", "--bus", "no_such_map", "--mode", "lockstep"],
                                            "hil run refused the case")])
def test_a_case_hil_run_refuses_is_an_error(argv, message):
    summary, error, status = run_inside(argv + ["--firmware-in-process"], 30.0, ".")
    assert status == "error" and message in error


def test_a_worker_whose_case_stops_gracefully_on_sigterm_still_ends_with_its_killed_campaign(tmp_path):
    """The loop stops on SIGTERM and returns its row: a worker told of its parent's death by SIGTERM would then
    wait for its next case forever."""
    started = tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", "import sys, worker_cases; worker_cases.campaign_of_sigterm_cases("
                             "sys.argv[1])", str(started)], env=env)
    deadline = time.monotonic() + 120
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    worker = int(started.read_text())
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(worker)


def test_a_killed_campaign_leaves_no_worker_behind_and_resumes_to_one_row_per_case(tmp_path):
    path = write_campaign(tmp_path, variations=PAYLOAD, sampling='method = "lhs"\nsamples = 6', duration_s=1.0)
    argv = [sys.executable, "-m", "hil", "campaign", str(path), "--out", str(tmp_path / "out"), "--workers", "2",
            "--json"]
    proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while len(workers := workers_of(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(workers) == 2
    time.sleep(2.0)                                  # into the first cases
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(pid) for pid in workers)    # they end with the campaign's process
    resumed = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    outcome = json.loads(resumed.stdout.splitlines()[-1])
    rows = read_results(tmp_path / "out")
    assert outcome["cases"] == 6 and outcome["duplicates_refused"] == 0
    assert sorted(r["case_id"] for r in rows) == sorted({r["case_id"] for r in rows}) and len(rows) == 6
