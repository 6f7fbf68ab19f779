"""Two runs compared signal by signal: the largest deviation of every common column, against a
tolerance per signal (for regression tests of firmware versions in CI).

Rows are matched by ``cycle`` when both logs have it, else by position. A signal passes when
max |a - b| <= its tolerance over the matched rows (NaN in both at the same row is equal, NaN in
one is an infinite deviation). Wall-clock columns (``*_us``: lateness, compute, I/O, command
age) differ between any two runs and are ignored unless named with ``include``. The comparison
fails when any signal exceeds its tolerance or the logs have a different number of rows (a run
that stops early is a regression); columns only one log has are reported, not failed (a newer
version may log more).
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

import numpy as np

from config_schema import UserError

__all__ = ["Deviation", "Comparison", "compare_runs", "parse_tolerances", "DEFAULT_IGNORE"]

DEFAULT_IGNORE = ("*_us",)


@dataclass
class Deviation:
    name: str
    max_abs: float           # largest |a - b| over the matched rows (inf: NaN in one only)
    t: float | None          # time of the largest deviation (None when equal everywhere)
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.max_abs <= self.tolerance


@dataclass
class Comparison:
    rows_a: int
    rows_b: int
    matched: int
    signals: list[Deviation] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[Deviation]:
        return [d for d in self.signals if not d.passed]

    @property
    def passed(self) -> bool:
        return not self.failed and self.rows_a == self.rows_b == self.matched

    def as_dict(self) -> dict:
        return {"passed": self.passed, "rows_a": self.rows_a, "rows_b": self.rows_b, "matched": self.matched,
                "failed": [d.name for d in self.failed], "only_a": self.only_a, "only_b": self.only_b,
                "ignored": self.ignored,
                "signals": {d.name: {"max_abs": d.max_abs, "t": d.t, "tolerance": d.tolerance, "passed": d.passed}
                            for d in self.signals}}


def parse_tolerances(specs: list[str]) -> tuple[float, list[tuple[str, float]]]:
    """``--tol`` values: a number is the default tolerance, ``GLOB=number`` one for matching
    signals (the first matching glob wins). Raises ValueError naming a bad one."""
    default, per_glob = 0.0, []
    for spec in specs:
        glob, sep, value = spec.rpartition("=")
        try:
            tol = float(value)
        except ValueError:
            raise UserError(f"--tol {spec!r}: expected a number or GLOB=number (e.g. 'q_*=1e-6')") from None
        if not tol >= 0:
            raise UserError(f"--tol {spec!r}: a tolerance is a number >= 0")
        if sep:
            per_glob.append((glob, tol))
        else:
            default = tol
    return default, per_glob


def _matched_rows(cols_a: list[str], a: np.ndarray, cols_b: list[str], b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if "cycle" in cols_a and "cycle" in cols_b:
        ca, cb = a[:, cols_a.index("cycle")], b[:, cols_b.index("cycle")]
        _, ia, ib = np.intersect1d(ca, cb, assume_unique=False, return_indices=True)
        return ia, ib
    n = min(len(a), len(b))
    return np.arange(n), np.arange(n)


def compare_runs(cols_a: list[str], a: np.ndarray, cols_b: list[str], b: np.ndarray, default_tol: float = 0.0,
                 tolerances: list[tuple[str, float]] = (), ignore: tuple[str, ...] = DEFAULT_IGNORE,
                 include: tuple[str, ...] = ()) -> Comparison:
    """Compare run B against run A (module docstring)."""
    ia, ib = _matched_rows(cols_a, a, cols_b, b)
    out = Comparison(len(a), len(b), len(ia))
    index_b = {c: i for i, c in enumerate(cols_b)}
    out.only_a = [c for c in cols_a if c not in index_b]
    out.only_b = [c for c in cols_b if c not in set(cols_a)]
    t = a[ia, cols_a.index("t")] if "t" in cols_a else ia.astype(float)
    for i, name in enumerate(cols_a):
        if name not in index_b:
            continue
        if any(fnmatch.fnmatchcase(name, g) for g in ignore) and not any(fnmatch.fnmatchcase(name, g) for g in include):
            out.ignored.append(name)
            continue
        tol = next((v for g, v in tolerances if fnmatch.fnmatchcase(name, g)), default_tol)
        out.signals.append(_deviation(name, a[ia, i], b[ib, index_b[name]], t, tol))
    return out


def _deviation(name: str, x: np.ndarray, y: np.ndarray, t: np.ndarray, tol: float) -> Deviation:
    with np.errstate(invalid="ignore"):
        d = np.abs(x - y)
    d[(x == y) | (np.isnan(x) & np.isnan(y))] = 0.0     # equal infinities, NaN in both
    d[np.isnan(d)] = np.inf                              # NaN in one only, opposite infinities
    if len(d) == 0 or not np.any(d > 0):
        return Deviation(name, 0.0, None, tol)
    k = int(np.argmax(d))
    return Deviation(name, float(d[k]), float(t[k]), tol)
