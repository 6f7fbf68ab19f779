"""End-of-run measures of a run log in constant memory: passes over the log's blocks
(hil.logs.runlog.RunLogReader; a RunLog already in memory serves as one block) that keep a
bounded window of rows, never the whole run.

A 10-minute log at 1 kHz holds 6e5 rows of ~70 columns (380 MB); these passes keep the last
window (a second: 1000 rows) and one block (at most 4096 rows) of the few columns they read.
``tail`` gives the last stretch of the run (final values, residual vibration); ``scan`` feeds one
pass over the run to trackers such as ``Settling`` (since when a signal stays within a band of
its final value, and how far it strayed) and ``Peak`` (the largest magnitude of a column).
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from hil.logs.runlog import RunLog, RunLogReader

TIP = ("tip_x", "tip_y", "tip_z")
Log = str | Path | RunLog


def open_log(log: Log) -> RunLogReader | RunLog:
    """A new reader of a log file (one per pass: its events fill as it reads), or the RunLog itself."""
    return log if isinstance(log, RunLog) else RunLogReader(log)


def tail(log: Log, columns: Sequence[str], window_s: float) -> np.ndarray:
    """The rows (t first, then `columns`) of the last `window_s` seconds of the run."""
    kept: deque[np.ndarray] = deque()
    for block in open_log(log).blocks(["t", *columns]):
        kept.append(block)
        while len(kept) > 1 and kept[0][-1, 0] < block[-1, 0] - window_s and kept[1][0, 0] <= block[-1, 0] - window_s:
            kept.popleft()
    if not kept:
        return np.zeros((0, 1 + len(columns)))
    rows = np.concatenate(kept)
    return rows[rows[:, 0] >= rows[-1, 0] - window_s]


def scan(log: Log, feeds: Sequence[tuple[Sequence[str], Callable[[np.ndarray], None]]]) -> tuple[int, list[dict]]:
    """One pass over the run: each block's rows (t, then the feed's columns) go to every feed of
    ``(columns, feed)``; returns the number of rows and the log's events."""
    reader = open_log(log)
    names = list(dict.fromkeys(c for columns, _ in feeds for c in columns))
    picks = [[0, *(1 + names.index(c) for c in columns)] for columns, _ in feeds]
    rows = 0
    for block in reader.blocks(["t", *names]):
        rows += len(block)
        for pick, (_, feed) in zip(picks, feeds):
            feed(block[:, pick])
    return rows, reader.events


class Settling:
    """Since when a signal stays within `band` of `reference` from `from_s` on, and how far it
    strays from it there: fed rows (t, then the signal's columns) block by block, in order."""

    def __init__(self, reference: np.ndarray, band: float, from_s: float = -np.inf):
        self.reference = np.asarray(reference, float)
        self.band, self.from_s = band, from_s
        self.first_s: float | None = None           # the first row at or after from_s
        self.last_outside_s: float | None = None    # the last row outside the band
        self.back_s: float | None = None            # the row after it (None while it is the last row read)
        self.peak: float | None = None              # the largest distance from the reference
        self.end_s: float | None = None             # the last row

    def feed(self, rows: np.ndarray) -> None:
        if not len(rows):
            return
        self.end_s = float(rows[-1, 0])
        rows = rows[rows[:, 0] >= self.from_s]
        if not len(rows):
            return
        t = rows[:, 0]
        if self.first_s is None:
            self.first_s = float(t[0])
        if self.last_outside_s is not None and self.back_s is None:
            self.back_s = float(t[0])
        distance = np.linalg.norm(rows[:, 1:] - self.reference, axis=1)
        self.peak = max(float(distance.max()), self.peak or 0.0)
        outside = np.flatnonzero(distance > self.band)
        if outside.size:
            k = outside[-1]
            self.last_outside_s = float(t[k])
            self.back_s = float(t[k + 1]) if k + 1 < len(t) else None

    def settled_at(self, window_s: float) -> float | None:
        """The first time >= from_s after which the signal stays within the band to the end; None
        if it never does, or does only within the last `window_s` (the final value's own window)."""
        if self.first_s is None:
            return None
        if self.last_outside_s is None:
            return self.first_s
        if self.back_s is None:
            return None
        return self.back_s if self.end_s - self.back_s > window_s else None


class Steps:
    """The largest and the root-mean-square change of each column from one row to the next: fed rows
    (t, then the columns) block by block, in order."""

    def __init__(self, columns: int):
        self.largest = np.zeros(columns)
        self._squares = np.zeros(columns)
        self.count = 0
        self._last: np.ndarray | None = None

    def feed(self, rows: np.ndarray) -> None:
        if not len(rows):
            return
        values = rows[:, 1:] if self._last is None else np.vstack([self._last, rows[:, 1:]])
        change = np.abs(np.diff(values, axis=0))
        if len(change):
            np.maximum(self.largest, change.max(axis=0), out=self.largest)
            self._squares += (change ** 2).sum(axis=0)
            self.count += len(change)
        self._last = values[-1:].copy()

    @property
    def rms(self) -> np.ndarray:
        return np.sqrt(self._squares / self.count) if self.count else np.zeros_like(self.largest)


class Peak:
    """The largest magnitude of one column: fed rows (t, then the column)."""

    def __init__(self) -> None:
        self.value: float | None = None

    def feed(self, rows: np.ndarray) -> None:
        if len(rows):
            peak = float(np.abs(rows[:, 1]).max())
            self.value = peak if self.value is None else max(self.value, peak)
