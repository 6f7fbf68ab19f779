"""End-of-run measures of a run log in constant memory: passes over the log's blocks
(hil.logs.runlog.RunLogReader) that keep a bounded window of rows, never the whole run.

A 10-minute log at 1 kHz holds 6e5 rows of ~70 columns (380 MB); these passes keep the last
window (a second: 1000 rows) and one block (at most 4096 rows) of the few columns they read.
"""
from __future__ import annotations

from collections import deque
from pathlib import Path

import numpy as np

from hil.logs.runlog import RunLogReader

TIP = ("tip_x", "tip_y", "tip_z")


def tail(path: str | Path, columns: list[str], window_s: float) -> np.ndarray:
    """The rows (t first, then `columns`) of the last `window_s` seconds of the run."""
    kept: deque[np.ndarray] = deque()
    for block in RunLogReader(path).blocks(["t", *columns]):
        kept.append(block)
        while len(kept) > 1 and kept[0][-1, 0] < block[-1, 0] - window_s and kept[1][0, 0] <= block[-1, 0] - window_s:
            kept.popleft()
    if not kept:
        return np.zeros((0, 1 + len(columns)))
    rows = np.concatenate(kept)
    return rows[rows[:, 0] >= rows[-1, 0] - window_s]


def tip_residual_mm(path: str | Path, window_s: float = 1.0) -> float | None:
    """Peak-to-peak tip excursion [mm] over the last window of the run (residual vibration)."""
    last = tail(path, list(TIP), window_s)
    if len(last) < 2:
        return None
    tip = last[:, 1:]
    return float(np.linalg.norm(tip.max(axis=0) - tip.min(axis=0)) * 1e3)


def tip_settling_s(path: str | Path, move_end_s: float, band_m: float = 2e-4, window_s: float = 0.1) -> float | None:
    """Seconds after the end of the manoeuvre until the tip's oscillation (its deviation from the
    centred `window_s` moving average, rows at least one window from either end) stays within
    `band_m`; None for a run shorter than three windows."""
    reader = RunLogReader(path)
    n = None
    carry = np.zeros((0, 4))
    start = 0                       # index of carry[0] in the run
    outside: deque[tuple[int, float]] = deque()   # the latest rows outside the band (index, t)
    for block in reader.blocks(["t", *TIP]):
        if n is None:
            rows = np.concatenate([carry, block])
            if len(rows) < 2:
                carry = rows
                continue
            n = max(1, int(round(window_s / (rows[1, 0] - rows[0, 0]))))
            block, carry = rows, np.zeros((0, 4))
        rows = np.concatenate([carry, block])
        lo, hi = n // 2, (n - 1) // 2               # the moving average of row i spans i - lo .. i + hi
        if len(rows) > lo + hi:
            csum = np.concatenate([np.zeros((1, 3)), np.cumsum(rows[:, 1:], axis=0)])
            centre = np.arange(lo, len(rows) - hi)
            trend = (csum[centre + hi + 1] - csum[centre - lo]) / n
            osc = np.linalg.norm(rows[centre, 1:] - trend, axis=1)
            index = start + centre
            bad = (rows[centre, 0] > move_end_s) & (index >= n) & (osc > band_m)
            for i, t in zip(index[bad][-(n + 1):], rows[centre, 0][bad][-(n + 1):]):
                outside.append((int(i), float(t)))
            while len(outside) > n + 1:
                outside.popleft()
        keep = min(len(rows), lo + hi)
        start += len(rows) - keep
        carry = rows[len(rows) - keep:]
    total = start + len(carry)
    if n is None or total < 3 * n:
        return None
    valid = [t for i, t in outside if i < total - n]
    return float(valid[-1] - move_end_s) if valid else 0.0
