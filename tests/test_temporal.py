"""Temporal assertions (hil.logs.temporal): the grammar's mistakes as one line with the position, the
sliding windows against a brute force, robustness and truth on traces with a known answer, each
operator with a trace that must fail it."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hil.logs.temporal import MAX_FORMULA_CHARS, MAX_NODES, FormulaError, Trace, first_violation, parse, robustness, \
    satisfied, sliding, windows

DT = 1e-3
T = np.arange(1, 5001) * DT                         # 5 s at 1 kHz, as a run log's rows
BRAKE = (T > 2.0).astype(float)                     # the brake closes after 2 s
TAU = np.where(T > 3.0, 350.0, 100.0)               # and the torque rises to 350 N m after 3 s
X = np.sin(2 * np.pi * T)


def trace(**extra) -> Trace:
    values = {"t": T, "x": X, "brake_elbow": BRAKE, "tau_elbow": TAU, **extra}
    return Trace(T, values, {k: float(v[T >= T[-1] - 0.1].mean()) for k, v in values.items()})


def judged(formula: str, tr: Trace | None = None) -> tuple[float, bool, float | None]:
    tree, tr = parse(formula), tr or trace()
    return float(robustness(tree, tr)[0]), bool(satisfied(tree, tr)[0] == 1.0), first_violation(tree, tr)


@pytest.mark.parametrize("formula, rho, held, first", [
    ("always (x <= 1)", 0.0, True, None),
    ("always (x < 0.99)", -0.01, False, 0.228),          # sin(2 pi t) first exceeds 0.99 at t = 0.228 s
    ("eventually[0, 1] x > 0.99", 0.01, True, None),
    ("eventually[0, 0.2] x > 0.99", None, False, DT),    # too early: sin reaches 0.99 only at 0.228 s
    ("always[1.2, inf] abs(x) < 2", 1.0, True, None),
    ("always (brake_elbow >= 1 implies abs(tau_elbow) <= 300)", 0.0, False, 3.001),   # a threshold: truth decides
    ("always (brake_elbow >= 1 implies abs(tau_elbow) <= 400)", 50.0, True, None),
    ("always (rise(brake_elbow > 0.5) implies eventually[0, 0.1] x > 0.5)", math.sin(2 * math.pi * 0.101) - 0.5, True,
     None),                                              # the largest x within 0.1 s of the rise at 2.001 s
    ("always (rise(brake_elbow > 0.5) implies eventually[0, 0.05] x > 0.5)", None, False, 2.001),
    ("always (fall(brake_elbow > 0.5) implies x > 5)", 0.5, True, None),     # the brake never opens again
    ("eventually rise(brake_elbow < 0.5)", -0.5, False, DT),                 # nor does it close at the start
    ("always[0, 1] x < 1 and always x < 0.5", -0.5, False, 0.084),
    ("not always x < 2", -1.0, False, DT),
    ("(x + 1) * 2 < 5 or tau_elbow / 100 > 10", None, True, None),
    ("always norm(x, 0 * x + 1) <= final(tau_elbow) - 349 + 0.5", None, True, None),
    ("always t < 4", None, False, 4.0),
])
def test_a_formula_gives_the_robustness_and_truth_of_its_definition(formula, rho, held, first):
    got_rho, got_held, got_first = judged(formula)
    if rho is not None:
        assert got_rho == pytest.approx(rho, abs=1e-4)
    assert got_held is held and (got_rho >= 0 or not held)
    assert (got_first is None) if first is None else got_first == pytest.approx(first, abs=1e-9)


def test_a_nan_sample_fails_the_windows_that_hold_it():
    x = X.copy()
    x[3000] = np.nan
    assert judged("always x < 2", trace(x=x))[1:] == (False, 3.001)
    assert judged("always[0, 2] x < 2", trace(x=x))[1] is True


def test_sliding_windows_equal_a_brute_force_on_random_traces_and_windows():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 300))
        t = np.cumsum(rng.uniform(0.5, 1.5, n)) * DT       # uneven steps (a log with dropped rows)
        x = rng.normal(size=n)
        a = float(rng.integers(0, 60)) * DT
        b = a + float(rng.integers(0, 120)) * DT if rng.random() < 0.9 else math.inf
        lo, hi = windows(t, (a, b))
        for pick, empty, ref in ((np.minimum, math.inf, np.min), (np.maximum, -math.inf, np.max)):
            got = sliding(x, lo, hi, pick, empty)
            eps = 1e-6 * np.median(np.diff(t)) if n > 1 else 1e-6
            want = [ref(x[m]) if (m := (t >= ti + a - eps) & (t <= ti + b + eps)).any() else empty for ti in t]
            assert np.array_equal(got, want)


@pytest.mark.parametrize("formula, message", [
    ("always (x < ", "at character 13: expected a number, a column or a function, found 'the end'"),
    ("always[2, 1] x < 1", "expected an interval [a, b] with 0 <= a <= b, got [2, 1]"),
    ("x + 1", "expected a comparison (<, <=, >, >=)"),
    ("always (x << 2)", "at character 12: expected a number, a column or a function, found '<'"),
    ("final(1) < 2", "expected a column in final()"),
    ("x < 1 )", "at character 7: expected the end (or and, or, implies), found ')'"),
    ("", "empty; expected a formula"),
    ("always x < 1 $", "at character 14: unexpected '$'"),
    ("always[0, x] x < 1", "expected the interval's end in s (or inf)"),
    ("x" + " + x" * MAX_NODES + " < 1", f"more than {MAX_NODES} operators and operands"),
    ("x < " + "1" * MAX_FORMULA_CHARS, f"at most {MAX_FORMULA_CHARS}"),
])
def test_a_formula_mistake_is_one_line_with_its_position(formula, message):
    with pytest.raises(FormulaError) as info:
        parse(formula)
    assert message in str(info.value) and "\n" not in str(info.value)
