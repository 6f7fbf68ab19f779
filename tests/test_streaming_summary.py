"""End-of-run measures stream over the log in bounded memory and equal the whole-log computation,
across the reader's block boundaries."""
from __future__ import annotations

import numpy as np
import pytest

from hil.logs import streaming
from hil.logs.runlog import MsgpackRunWriter, RunLog, RunLogReader
from hil.logs.targets import Targets
from hil.logs.verdicts import evaluate, tip_metrics

COLUMNS = ["cycle", "t", "tip_x", "tip_y", "tip_z", "q_a", "tau_a"]
BLOCK = 4096            # rows per block of the reader


def whole_log_settled_at(t, x, band, from_s, window_s):
    """Since when x stays within band of its final value (the mean over the last window_s), from from_s on."""
    final = x[t >= t[-1] - window_s].mean(axis=0)
    after = t >= from_s
    if not after.any():
        return None
    outside = np.flatnonzero(after & (np.linalg.norm(x - final, axis=1) > band))
    if not outside.size:
        return float(t[after][0])
    if outside[-1] + 1 >= len(t):
        return None
    settled = float(t[outside[-1] + 1])
    return settled if t[-1] - settled > window_s else None


def write(path, t, tip, q=None, tau=None):
    q = np.zeros(len(t)) if q is None else q
    tau = np.zeros(len(t)) if tau is None else tau
    with MsgpackRunWriter(path, {"columns": COLUMNS}) as w:
        for k in range(len(t)):
            w.write(np.r_[k + 1, t[k], tip[k], q[k], tau[k]])
    return path


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("stream") / "run.msgpack"
    t = np.arange(1, 12001) * 1e-3
    decay = np.exp(-np.clip(t - 1.2, 0, None) / 0.8) * (t > 0.3)
    tip = np.column_stack([0.5 + 0.002 * decay * np.sin(2 * np.pi * 3.0 * t), 0.1 + 0.00005 * np.minimum(t, 6.0),
                           -0.2 + 0.001 * decay * np.cos(2 * np.pi * 7.0 * t)])
    q = 0.4 * (1 - np.exp(-t))
    tau = 30 * np.sin(2 * np.pi * 0.5 * t) * np.exp(-t / 3)
    return write(path, t, tip, q, tau), t, tip, q, tau


def test_the_streamed_tip_measures_equal_the_whole_log_ones(log):
    path, t, tip, _, _ = log
    assert len(list(RunLogReader(path).blocks())) == 3                       # the pass crosses block boundaries
    m = tip_metrics(path)
    last = tip[t >= t[-1] - 1.0]
    assert m["residual_pp_mm"] == pytest.approx(np.linalg.norm(last.max(axis=0) - last.min(axis=0)) * 1e3, rel=1e-12)
    assert m["final_m"] == pytest.approx(tip[t >= t[-1] - 0.1].mean(axis=0), rel=1e-12)
    assert m["settled_at_s"] == whole_log_settled_at(t, tip, 2e-4, -np.inf, 0.1) is not None
    for band, from_s in ((2e-4, 1.2), (1e-5, 0.5), (1.0, 1.2), (2e-4, 11.95)):
        targets = Targets(settling_band_m=band, settling_time_s=1.0, settling_from_s=from_s)
        got = {v["name"]: v for v in evaluate(targets, path, ["a"])}["settling_time"]
        expected = whole_log_settled_at(t, tip, band, from_s, 0.1)
        assert got["value"] == (None if expected is None else pytest.approx(expected - from_s, abs=1e-12))


def test_streamed_verdicts_equal_those_of_the_log_in_memory(log):
    path, t, tip, q, tau = log
    targets = Targets(setpoints_rad={"a": 0.4}, tolerance_rad=1e-3, settling_band_m=2e-4, settling_time_s=2.0,
                      settling_from_s=1.2, max_tip_deflection_m=1e-3, max_torque_N_m=20.0)
    streamed = evaluate(targets, path, ["a"])
    assert streamed == evaluate(targets, RunLog.read(path), ["a"])
    got = {v["name"]: v for v in streamed}
    assert got["max_torque_a"]["value"] == pytest.approx(np.abs(tau).max(), rel=1e-12)
    after = t >= 1.2
    final = tip[t >= t[-1] - 0.1].mean(axis=0)
    assert got["max_tip_deflection"]["value"] == pytest.approx(np.linalg.norm(tip[after] - final, axis=1).max())
    assert got["setpoint_a"]["value"] == pytest.approx(abs(q[t >= t[-1] - 0.1].mean() - 0.4), rel=1e-12)


def test_the_last_excursion_on_a_block_boundary_settles_on_the_next_blocks_first_row(tmp_path):
    t = np.arange(1, 10001) * 1e-3
    tip = np.zeros((len(t), 3))
    tip[:BLOCK, 0] = 0.01                                   # outside up to the last row of the first block
    path = write(tmp_path / "edge.msgpack", t, tip)
    assert tip_metrics(path)["settled_at_s"] == t[BLOCK] == whole_log_settled_at(t, tip, 2e-4, -np.inf, 0.1)
    assert tip_metrics(path)["last_outside_band_s"] == t[BLOCK - 1]


def test_the_passes_keep_bounded_windows(log, monkeypatch):
    path, t, *_ = log
    sizes = []
    real = np.concatenate

    def watched(arrays, *a, **k):
        out = real(arrays, *a, **k)
        sizes.append(len(out))
        return out
    monkeypatch.setattr(streaming.np, "concatenate", watched)
    tip_metrics(path)
    evaluate(Targets(setpoints_rad={"a": 0.4}, tolerance_rad=1e-3, settling_band_m=2e-4, settling_time_s=1.0), path,
             ["a"])
    assert sizes and max(sizes) <= 2 * BLOCK + 1000          # blocks of the reader plus a window, not the 12000 rows


def test_short_runs_give_no_measure(tmp_path):
    path = write(tmp_path / "short.msgpack", np.array([1e-3]), np.zeros((1, 3)))
    assert tip_metrics(path) == {}
    assert [v["name"] for v in evaluate(Targets(max_torque_N_m=1.0), path, ["a"])] == ["run"]
    assert len(list(RunLogReader(path).blocks())) == 1
