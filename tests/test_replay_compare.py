"""`hil replay` re-simulates the plant of a run log bit for bit (lockstep, and a realtime run whose
watchdog closed the brakes) and finds a changed input; `hil compare` passes identical runs and
fails a perturbed one beyond its tolerance."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hil.cli.main import main
from hil.logs.compare import compare_runs, parse_tolerances
from hil.logs.runlog import MsgpackRunWriter, read_run
from hil.replay.plant_replay import replay

ROOT = Path(__file__).resolve().parent.parent


def _hil_run(log: Path, *extra: str, duration: float = 1.5, statuses: tuple[int, ...] = (0,)) -> None:
    proc = subprocess.run([sys.executable, "-m", "hil", "run", "configs/ella.toml", "--bus",
                           "configs/bus/serial_frame.toml", "--link", "pty", "--spawn-firmware", "--no-realtime",
                           "--duration", str(duration), "--move-time", "1.0", "--log", str(log), "--json", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode in statuses, proc.stdout[-2000:] + proc.stderr


@pytest.fixture(scope="module")
def lockstep_log(tmp_path_factory):
    log = tmp_path_factory.mktemp("replay") / "lockstep.msgpack"
    _hil_run(log, "--mode", "lockstep")
    return log


@pytest.fixture(scope="module")
def braked_log(tmp_path_factory):
    """A realtime run in which the elbow encoder reads 0 from 0.7 s: the firmware stops, the
    watchdog trips and closes the holding brakes."""
    log = tmp_path_factory.mktemp("replay") / "braked.msgpack"
    # a run that failed as a run (status 3: on a busy machine the firmware may fall behind the real-time
    # loop) still logged what its plant did: the replay is judged on the log either way
    _hil_run(log, "--scenario", "configs/scenarios/encoder_signal_loss.toml", "--safe-state", "brake",
             "--watchdog", "0.02", statuses=(0, 3))
    return log


def _rewrite(path: Path, header: dict, rows: np.ndarray) -> None:
    with MsgpackRunWriter(path, {k: v for k, v in header.items() if k not in ("events", "trailing_bytes", "gaps", "corrupt")}) as w:
        for row in rows:
            w.write(row)


def test_lockstep_log_replays_bit_for_bit(lockstep_log, capsys):
    header, rows = read_run(lockstep_log)
    assert any(c.startswith("eta_link2_") for c in header["columns"])      # hil run logs the modal coordinates
    assert main(["replay", str(lockstep_log), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["bit_identical"] and out["rows"] == len(rows) == 1500
    assert out["largest_deviation"]["value"] == 0.0
    assert {"q_elbow", "qd_elbow", "eta_link2_bending_y_1", "tip_z"} <= set(out["deviation"])
    assert out["integrator"]["logged"] == header["integrator"] and out["integrator"]["differences"] == []


def test_the_logged_plan_is_checked_by_the_replay(lockstep_log, tmp_path, capsys):
    """The header names the run's integrator plan (method, substeps, step, formulation, the fitted blocks'
    hash); the replay steps with it and says where the plan this version makes with it differs: a
    tampered hash (the blocks of another machine), a tampered substep count (its blocks differ then)."""
    header, rows = read_run(lockstep_log)
    plan = header["integrator"]
    assert plan["method"] == "fitted_midpoint" and plan["substeps"] >= 1 and len(plan["fitted_blocks_sha256"]) == 16
    assert replay(header, rows).plan["differences"] == []
    for key, value in (("fitted_blocks_sha256", "0" * 16), ("substeps", plan["substeps"] + 1)):
        result = replay({**header, "integrator": {**plan, key: value}}, rows)
        assert result.plan["differences"] == ["fitted_blocks_sha256"]
        assert result.bit_identical == (key == "fitted_blocks_sha256")      # the tampered count replays another plan
    tampered = tmp_path / "tampered.msgpack"
    _rewrite(tampered, {**header, "integrator": {**plan, "fitted_blocks_sha256": "0" * 16}}, rows)
    assert main(["replay", str(tampered)]) == 0
    assert "NOT as logged: fitted_blocks_sha256 differ" in capsys.readouterr().out
    older = {k: v for k, v in header.items() if k != "integrator"}      # a log from before: the preset's plan
    assert replay(older, rows).plan is None


def test_a_changed_torque_is_found(lockstep_log, tmp_path):
    header, rows = read_run(lockstep_log)
    cols = header["columns"]
    bad = rows.copy()
    bad[800, cols.index("tau_elbow")] += 1e-3
    result = replay(header, bad)
    assert not result.bit_identical and result.missing_rows == 0
    assert result.first_deviation_t == pytest.approx(rows[800, cols.index("t")])
    assert result.deviation["q_elbow"] > 0


def test_a_dropped_row_is_counted_and_found(lockstep_log):
    header, rows = read_run(lockstep_log)
    result = replay(header, np.delete(rows, 600, axis=0))
    assert result.missing_rows == 1 and not result.bit_identical


def test_replay_refuses_a_log_without_cycles():
    with pytest.raises(ValueError, match="hil simulate"):
        replay({"columns": ["t", "q_elbow"], "config": "configs/ella.toml"}, np.zeros((2, 2)))


def test_realtime_log_with_brakes_replays_bit_for_bit_and_needs_the_brakes(braked_log):
    header, rows = read_run(braked_log)
    cols = header["columns"]
    brakes = rows[:, [cols.index(f"brake_{j}") for j in ("base_yaw", "shoulder_pitch", "elbow")]]
    assert (brakes > 0).any(), "the watchdog should have closed the brakes"
    assert replay(header, rows).bit_identical
    released = rows.copy()
    released[:, [cols.index(f"brake_{j}") for j in ("base_yaw", "shoulder_pitch", "elbow")]] = 0.0
    assert not replay(header, released).bit_identical


def test_replay_writes_a_log_that_compares_equal(lockstep_log, tmp_path, capsys):
    out = tmp_path / "replayed.msgpack"
    assert main(["replay", str(lockstep_log), "--out", str(out)]) == 0
    assert "bit for bit identical" in capsys.readouterr().out
    assert main(["compare", str(lockstep_log), str(out)]) == 0
    assert "PASSED" in capsys.readouterr().out


def test_compare_fails_a_perturbed_run_and_passes_within_tolerance(lockstep_log, tmp_path, capsys):
    header, rows = read_run(lockstep_log)
    cols = header["columns"]
    perturbed = rows.copy()
    perturbed[1000, cols.index("q_elbow")] += 2e-6
    perturbed[:, cols.index("lateness_us")] += 50.0          # wall-clock timing: ignored
    b = tmp_path / "b.msgpack"
    _rewrite(b, header, perturbed)
    assert main(["compare", str(lockstep_log), str(lockstep_log)]) == 0
    capsys.readouterr()
    assert main(["compare", str(lockstep_log), str(b)]) == 1
    text = capsys.readouterr().out
    assert "FAIL q_elbow" in text and "FAILED" in text and "lateness_us" not in text
    assert main(["compare", str(lockstep_log), str(b), "--tol", "q_*=1e-5"]) == 0
    capsys.readouterr()
    assert main(["compare", str(lockstep_log), str(b), "--tol", "1e-5", "--include", "*_us", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] == ["lateness_us"]


def test_compare_fails_a_shorter_run(lockstep_log, tmp_path):
    header, rows = read_run(lockstep_log)
    short = tmp_path / "short.msgpack"
    _rewrite(short, header, rows[:-10])
    assert main(["compare", str(lockstep_log), str(short)]) == 1


def test_compare_nan_and_tolerance_rules():
    cols = ["cycle", "t", "x", "y"]
    a = np.array([[1, 0.0, np.nan, 1.0], [2, 0.001, 2.0, np.inf]])
    same = compare_runs(cols, a, cols, a.copy())
    assert same.passed and all(d.max_abs == 0.0 for d in same.signals)
    b = a.copy()
    b[0, 2] = 1.0                                    # NaN in one run only
    r = compare_runs(cols, a, cols, b, default_tol=1e9)
    assert not r.passed and r.failed[0].name == "x" and r.failed[0].max_abs == np.inf
    assert parse_tolerances(["1e-3", "q_*=2"]) == (1e-3, [("q_*", 2.0)])
    with pytest.raises(ValueError, match="--tol"):
        parse_tolerances(["q_*=abc"])
    with pytest.raises(ValueError, match=">= 0"):
        parse_tolerances(["-1"])


def test_a_missing_event_fails_a_test_saying_which_events_the_run_had(tmp_path):
    from hil.logs.runlog import MissingEvent, RunLog
    from runlogs import write_synthetic_log
    path = tmp_path / "run.msgpack"
    write_synthetic_log(path, duration_s=1.2, optional=True)
    log = RunLog.read(path)
    with pytest.raises(MissingEvent) as missing:
        log.event_time("watchdog_cleared")
    assert isinstance(missing.value, AssertionError)
    text = str(missing.value)
    assert text == ("the run had no 'watchdog_cleared' event (its events: inject elbow_encoder at 0.700 s, "
                    "watchdog_tripped at 0.722 s, clear elbow_encoder at 0.900 s)")
    assert log.event_time(log.events[0]["event"]) == float(log.events[0]["t"])
