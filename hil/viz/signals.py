"""Signal processing for the report: min/max decimation for display, Welch amplitude spectra,
log-spaced histograms.

Decimation is for drawing only: every statistic and spectrum is computed from the full data.
Min/max decimation keeps, per bucket of consecutive samples, the smallest and the largest value
in their time order, so a one-sample spike or a vibration's envelope survives at any zoom.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["minmax_decimate", "welch_amplitude", "log_histogram"]


def minmax_decimate(t: np.ndarray, values: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    """(t', values') with at most max_points rows: the rows unchanged if they fit, else per bucket
    of b samples two rows, at the bucket's first sample time and its middle, holding each column's
    extremes in the order they occurred. values: (n, k). A bucket with a NaN gives NaN (a gap)."""
    n = len(t)
    if n <= max_points:
        return t, values
    b = math.ceil(n / (max_points // 2))
    nb = math.ceil(n / b)
    pad = nb * b - n
    v = np.concatenate([values, np.repeat(values[-1:], pad, axis=0)]) if pad else values
    v = v.reshape(nb, b, values.shape[1])
    i_min, i_max = np.argmin(v, axis=1), np.argmax(v, axis=1)
    lo = np.take_along_axis(v, i_min[:, None, :], axis=1)[:, 0]
    hi = np.take_along_axis(v, i_max[:, None, :], axis=1)[:, 0]
    first = np.where(i_min <= i_max, lo, hi)
    second = np.where(i_min <= i_max, hi, lo)
    starts = np.arange(nb) * b
    mids = np.minimum(starts + b // 2, n - 1)
    t_out = np.column_stack([t[starts], t[mids]]).ravel()
    v_out = np.stack([first, second], axis=1).reshape(2 * nb, values.shape[1])
    return t_out, v_out


def welch_amplitude(x: np.ndarray, fs: float, segment_s: float = 2.0) -> tuple[np.ndarray, np.ndarray]:
    """Amplitude spectrum by Welch's method: Hann-windowed segments of segment_s (at most the
    whole signal), half overlapping, each with its mean removed; the magnitudes averaged as
    power and scaled so that a sine of amplitude A reads A at its frequency. Returns (f [Hz],
    amplitude [unit of x]); empty for fewer than 16 finite samples."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    n = min(len(x), max(16, int(round(segment_s * fs))))
    if len(x) < 16:
        return np.zeros(0), np.zeros(0)
    window = np.hanning(n)
    step = n // 2
    starts = range(0, len(x) - n + 1, step)
    power = np.zeros(n // 2 + 1)
    for s in starts:
        seg = x[s:s + n]
        power += np.abs(np.fft.rfft((seg - seg.mean()) * window)) ** 2
    amplitude = 2.0 * np.sqrt(power / len(starts)) / window.sum()
    return np.fft.rfftfreq(n, 1.0 / fs), amplitude


def log_histogram(values: np.ndarray, bins: int = 80, floor: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(bin edges, counts) over log-spaced bins from `floor` (or half the smallest positive value,
    if larger) to the largest value; values at or below the first edge count in the first bin. A heavy tail (a few
    late wake-ups among a million punctual ones) stays visible beside the bulk."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return np.zeros(0), np.zeros(0)
    positive = v[v > 0]
    lo = max(floor, 0.5 * float(positive.min())) if positive.size else floor
    hi = float(v.max()) if v.max() > lo else 10 * lo
    edges = np.geomspace(lo, hi, bins + 1)
    counts, _ = np.histogram(np.clip(v, lo, hi), edges)
    return edges, counts
