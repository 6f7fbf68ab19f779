"""End-of-run measures stream over the log in bounded memory and equal the whole-log computation."""
from __future__ import annotations

import numpy as np
import pytest

from hil.logs import streaming
from hil.logs.runlog import MsgpackRunWriter, RunLogReader


def whole_log_residual(t, tip, window_s=1.0):
    last = tip[t >= t[-1] - window_s]
    return float(np.linalg.norm(last.max(axis=0) - last.min(axis=0)) * 1e3)


def whole_log_settling(t, tip, move_end_s, band_m=2e-4, window_s=0.1):
    n = max(1, int(round(window_s / (t[1] - t[0]))))
    kernel = np.ones(n) / n
    trend = np.column_stack([np.convolve(tip[:, c], kernel, mode="same") for c in range(3)])
    osc = np.linalg.norm(tip - trend, axis=1)
    valid = (t > move_end_s) & (np.arange(len(t)) >= n) & (np.arange(len(t)) < len(t) - n)
    outside = np.nonzero(valid & (osc > band_m))[0]
    return float(t[outside[-1]] - move_end_s) if len(outside) else 0.0


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("stream") / "run.msgpack"
    t = np.arange(1, 12001) * 1e-3
    decay = np.exp(-np.clip(t - 1.2, 0, None) / 0.8) * (t > 0.3)
    tip = np.column_stack([0.5 + 0.002 * decay * np.sin(2 * np.pi * 3.0 * t), 0.1 + 0.0005 * t,
                           -0.2 + 0.001 * decay * np.cos(2 * np.pi * 7.0 * t)])
    with MsgpackRunWriter(path, {"columns": ["cycle", "t", "tip_x", "tip_y", "tip_z"]}) as w:
        for k in range(len(t)):
            w.write(np.r_[k + 1, t[k], tip[k]])
    return path, t, tip


def test_the_streamed_tip_measures_equal_the_whole_log_ones(log):
    path, t, tip = log
    assert streaming.tip_residual_mm(path) == pytest.approx(whole_log_residual(t, tip), rel=1e-12)
    for move_end, band in ((1.2, 2e-4), (0.5, 1e-5), (1.2, 1.0)):
        assert streaming.tip_settling_s(path, move_end, band) == pytest.approx(
            whole_log_settling(t, tip, move_end, band), abs=1e-12)


def test_the_passes_keep_bounded_windows(log, monkeypatch):
    path, t, tip = log
    sizes = []
    real = np.concatenate

    def watched(arrays, *a, **k):
        out = real(arrays, *a, **k)
        sizes.append(len(out))
        return out
    monkeypatch.setattr(streaming.np, "concatenate", watched)
    streaming.tip_residual_mm(path)
    streaming.tip_settling_s(path, 1.2)
    assert max(sizes) <= 2 * 4096 + 1000          # blocks of the reader plus a window, not the 12000 rows


def test_short_runs_give_no_measure(tmp_path):
    path = tmp_path / "short.msgpack"
    with MsgpackRunWriter(path, {"columns": ["cycle", "t", "tip_x", "tip_y", "tip_z"]}) as w:
        w.write(np.array([1.0, 1e-3, 0.0, 0.0, 0.0]))
    assert streaming.tip_residual_mm(path) is None and streaming.tip_settling_s(path, 0.0) is None
    assert len(list(RunLogReader(path).blocks())) == 1
