"""Cycle statistics of the loop: ring buffers of each cycle's lateness, compute, I/O and total time,
their percentiles and histograms."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CycleStats", "SERIES", "HIST_EDGES_NS", "series_summary"]

SERIES = ("lateness", "compute", "io", "total")
HIST_EDGES_NS = np.round(np.logspace(3, 7, 21)).astype(np.int64)  # 1 us..10 ms, 5 per decade
_QUANTILES = (("min", 0.0), ("p50", 50.0), ("p99", 99.0), ("p99.9", 99.9), ("max", 100.0))


class CycleStats:
    """Ring buffers (int64 ns) of the last `capacity` cycles' lateness, compute, I/O and total time.

    Summaries (in us) cover the retained samples; `count` is every record ever made.
    Histogram counts use HIST_EDGES_NS: entry 0 is below 1 us, entry -1 is 10 ms or more,
    entry j counts [edge j-1, edge j).
    """

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be > 0")
        self.capacity = capacity
        self.count = 0
        # cycle-major, read only up to count: a cycle's four values share a page, so a run touches (and the
        # kernel zeroes) only the pages of its own cycles, not four of a 600,000-cycle ring's at once
        self._buf = np.empty((capacity, len(SERIES)), np.int64)
        self._lateness, self._compute, self._io, self._total = self._buf.T

    def record(self, lateness_ns: int, compute_ns: int, io_ns: int, total_ns: int) -> None:
        """Store one cycle (no allocation: index arithmetic and in-place stores)."""
        i = self.count % self.capacity
        self._lateness[i] = lateness_ns
        self._compute[i] = compute_ns
        self._io[i] = io_ns
        self._total[i] = total_ns
        self.count += 1

    def retained(self) -> np.ndarray:
        """View (series x samples) of the retained samples, in buffer (not time) order."""
        return self._buf[:min(self.count, self.capacity)].T

    def summary(self) -> dict[str, Any]:
        """min/p50/p99/p99.9/max/mean (us) per series, counts and histograms; plain Python."""
        data = self.retained()
        out: dict[str, Any] = {"unit": "us", "count": self.count, "retained": data.shape[1]}
        hist: dict[str, Any] = {"edges_us": (HIST_EDGES_NS / 1e3).tolist()}
        for name, values in zip(SERIES, data):
            out[name] = series_summary(values)
            hist[name] = np.bincount(np.searchsorted(HIST_EDGES_NS, values, side="right"),
                                     minlength=len(HIST_EDGES_NS) + 1).tolist()
        out["histogram"] = hist
        return out

    def format_summary(self) -> str:
        """Text table of the per-series summary."""
        s = self.summary()
        keys = [k for k, _ in _QUANTILES] + ["mean"]
        lines = [f"cycles {s['count']} ({s['retained']} retained), times in us",
                 f"{'series':<9}" + "".join(f"{k:>10}" for k in keys)]
        for name in SERIES:
            cells = (s[name][k] for k in keys)
            lines.append(f"{name:<9}" + "".join(
                f"{'-':>10}" if v is None else f"{v:10.1f}" for v in cells))
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """Summary plus capacity, for the log."""
        return {"capacity": self.capacity, **self.summary()}


def series_summary(values_ns: np.ndarray) -> dict[str, float | None]:
    if values_ns.size == 0:
        return {k: None for k, _ in _QUANTILES} | {"mean": None}
    qs = np.percentile(values_ns, [q for _, q in _QUANTILES]) / 1e3
    return {k: float(v) for (k, _), v in zip(_QUANTILES, qs)} | {
        "mean": float(values_ns.mean() / 1e3)}
