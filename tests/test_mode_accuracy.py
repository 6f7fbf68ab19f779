"""How faithfully the integrators keep each mode's frequency, and the automatic plan that chooses by it.

* the fitted midpoint's coefficient against closed forms: an undamped mode alone is stepped at its exact
  frequency with |lambda| = 1 and its exact static deflection (the IMEX coefficient 1/4 warps it to
  2/h atan(omega h / 2), 1/12 misses it);
* the discrete-map analysis (hil.dynamics.integrator_plan) of a clamped cantilever, whose 184.37 Hz mode
  is isolated, against the closed forms of RK4 (182.81 Hz at 1 ms; 182.80 damped), the implicit midpoint rule
  (167.11 Hz) and the fitted midpoint (exact);
* integrated frequencies from a zero-crossing count of a free oscillation of the production plant
  against the discrete-map prediction and the true frequency, for RK4, IMEX, the fitted midpoint and
  auto: the cantilever's 184.37 Hz mode and ELLA's 84 Hz mode (the one IMEX moved -2.2 %);
* auto: chooses the cheapest plan accurate in its modes (ELLA without the motion tolerance: fitted midpoint,
  2 substeps; every cheaper plan is off), says so when the time budget allows none, judges only the modes
  below a set bandwidth.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from hil.dynamics.integrator_plan import (FREQUENCY_TOLERANCE, IntegratorAccuracyWarning, LinearisedPlant,
                                          mode_accuracy, plan_integrator)
from hil.dynamics.plant import Plant
from hil.model import spec as md
from hil.model.assembly import assemble
from hil.model.config import load_model
from hil.model.midpoint_fit import beta_fitted

from test_energy import conservative

CANTILEVER_HZ = 184.36932299           # second clamped-free bending root of ELLA's link 1 (test_beam_physics)


def midpoint_map(theta: float, beta: float) -> np.ndarray:
    """The midpoint scheme's step of x'' = -omega^2 x on (x, v / omega): q_m = q + h/2 v + h^2 beta a_m."""
    d = 1.0 + beta * theta ** 2
    return np.array([[1 - theta ** 2 / (2 * d), theta * (1 - theta ** 2 / (4 * d))],
                     [-theta / d, 1 - theta ** 2 / (2 * d)]])


def midpoint_step(x: float, v: float, theta: float, beta: float, load: float) -> tuple[float, float]:
    """One step h = theta of x'' = -x + load (omega = 1) by the midpoint scheme with coefficient beta."""
    h = theta
    x_m = (x + h / 2 * v + h * h * beta * load) / (1 + beta * h * h)
    a_m = load - x_m
    return x + h * v + h * h / 2 * a_m, v + h * a_m


@pytest.mark.parametrize("theta", [1e-3, 0.05, 0.3, 0.8, 1.2, 1.6, 2.0, 2.6])
def test_fitted_coefficient_steps_an_isolated_mode_at_its_exact_frequency(theta):
    fitted = midpoint_map(theta, float(beta_fitted(theta)))
    assert np.trace(fitted) / 2 == pytest.approx(math.cos(theta), abs=1e-13)
    assert np.linalg.det(fitted) == pytest.approx(1.0, abs=1e-13)            # |lambda| = 1: no numerical damping
    imex = midpoint_map(theta, 0.25)
    assert math.acos(np.trace(imex) / 2) == pytest.approx(2 * math.atan(theta / 2), rel=1e-12)
    if theta >= 1.2:                          # a coefficient that must miss (1/12 is unstable beyond sqrt 6)
        c = np.trace(midpoint_map(theta, 1 / 12)) / 2
        assert abs(c) > 1 or abs(math.acos(c) / theta - 1) > 1e-3
    # under a constant load the static deflection is a fixed point of the step for any coefficient
    for beta in (float(beta_fitted(theta)), 0.25, 0.1):
        assert midpoint_step(0.37, 0.0, theta, beta, load=0.37) == pytest.approx((0.37, 0.0), abs=1e-15)
    assert midpoint_step(0.37, 0.0, theta, 0.1, load=0.0)[0] < 0.37        # not merely a frozen step


def test_fitted_coefficient_series_meets_the_closed_form():
    lo, hi = beta_fitted(np.array([0.1 - 1e-12, 0.1 + 1e-12]))
    assert abs(hi - lo) < 1e-12 and lo == pytest.approx(1 / 12 + 1e-2 / 240 + 1e-4 / 6048, rel=1e-9)


def cantilever() -> md.Model:
    """ELLA's link 1 alone, clamped (a prescribed, constant joint), in-plane bending, undamped, no gravity."""
    beam = md.Beam(length_m=0.95, E_Pa=2.1e11, G_Pa=8.1e10, rho_kg_m3=7800.0, area_m2=2.09e-4, Iy_m4=1.00952e-8,
                   Iz_m4=1.74762e-8, torsion_constant_m4=1.89794e-8, n_bending_y=2, n_bending_z=0, rotary_inertia=False)
    joint = md.Joint("clamp", axis=np.array([0.0, 0.0, 1.0]), drive=md.DRIVE_PRESCRIBED,
                     profile=md.Profile(md.PROFILE_CONSTANT))
    return md.Model("cantilever", [md.Body("beam", md.BASE, joint, beam=beam)], gravity_m_s2=np.zeros(3))


def rk4_frequency(theta: float) -> float:
    lam = 1 - theta ** 2 / 2 + theta ** 4 / 24 + 1j * (theta - theta ** 3 / 6)
    return abs(np.log(lam))


def test_discrete_map_of_an_isolated_mode_equals_the_closed_forms():
    asm = assemble(cantilever())
    lp = LinearisedPlant(asm)
    assert [m.true_hz for m in lp.accuracy("rk4", 1, 1e-3, None).modes] == pytest.approx([29.41957398, CANTILEVER_HZ],
                                                                                           rel=1e-9)
    theta = 2 * math.pi * CANTILEVER_HZ * 1e-3
    expected = {"rk4": rk4_frequency(theta), "imex_midpoint": 2 * math.atan(theta / 2), "fitted_midpoint": theta}
    for method, omega_h in expected.items():
        mode = lp.accuracy(method, 1, 1e-3, None).modes[1]
        print(f"\n{method}: {mode.integrated_hz:.3f} Hz (closed form {omega_h / (2e-3 * math.pi):.3f}), "
              f"numerical damping {mode.numerical_damping:+.1e}")
        assert mode.integrated_hz == pytest.approx(omega_h / (2e-3 * math.pi), rel=1e-8)
    assert lp.accuracy("rk4", 1, 1e-3, None).modes[1].integrated_hz == pytest.approx(182.81, abs=0.01)
    assert lp.accuracy("imex_midpoint", 1, 1e-3, None).modes[1].integrated_hz == pytest.approx(167.11, abs=0.01)


# ---------------------------------------------------------------- zero crossings of a free oscillation


def crossing_frequency(y: np.ndarray, dt: float) -> float:
    """1 / (2 s), s the slope of a straight line through the linearly interpolated zero crossings of the
    samples y against their count (the interpolation errors of a sampled sine average out along the line
    rather than deciding the result through the first and last crossing)."""
    i = np.nonzero(np.signbit(y[:-1]) != np.signbit(y[1:]))[0]
    t = (i + y[i] / (y[i] - y[i + 1])) * dt
    slope = np.polyfit(np.arange(t.size), t, 1)[0]
    return 1.0 / (2.0 * slope)


def free_oscillation(model: md.Model, method: str, target_hz: float, periods: int = 250):
    """Run the plant from its rest state displaced along the mode nearest target_hz, project the state on
    the mode's left eigenvector and count zero crossings. Returns (crossing Hz, predicted Hz, true Hz)."""
    plant = Plant(model, method=None if method == "auto" else method, substeps=None if method == "auto" else 1)
    lp = LinearisedPlant(plant.asm)
    A = lp.rates_jacobian()
    mu, right = np.linalg.eig(A)
    k = int(np.argmin(np.abs(mu - 2j * math.pi * target_hz)))
    nu, left = np.linalg.eig(A.T)
    w = left[:, int(np.argmin(np.abs(nu - mu[k])))]
    w /= w @ right[:, k]
    free, nq = lp.free, plant.layout.nq
    x0 = lp.x0
    r = right[:, k] / right[int(np.argmax(np.abs(right[: free.size, k]))), k]   # largest position entry 1
    dx = 1e-7 * np.real(r)
    plant.pos[:], plant.vel[:] = x0[:nq], x0[nq:]
    plant.tau[:] = lp.tau
    plant.pos[free] += dx[: free.size]
    plant.vel[free] += dx[free.size:]
    plant.evaluate()
    n = int(periods / target_hz / plant.dt)
    y = np.zeros(n)
    for i in range(n):
        plant.step()
        x = np.concatenate([plant.pos[free] - x0[free], plant.vel[free] - x0[nq + free]])
        y[i] = np.real(w @ x)
    mode = min(mode_accuracy(plant.asm, plant.plan).modes, key=lambda m: abs(m.true_hz - target_hz))
    zeta_hat = mode.damping_ratio + mode.numerical_damping
    predicted = mode.integrated_hz * math.sqrt(1 - zeta_hat ** 2)
    return crossing_frequency(y, plant.dt), predicted, abs(mu[k]) / (2 * math.pi), plant.plan


# measured at 1 ms (crossings / predicted / true, Hz): cantilever RK4 182.7952 / 182.7952, IMEX 167.1108 / 167.1111,
# fitted and auto 184.3693 / 184.3693 / 184.3693; ELLA's 84 Hz mode (undamped, gravity, at rest) RK4 x1
# 83.7271 (-0.058 %), IMEX x1 81.9178 (-2.217 %), fitted x1 83.7707 (-0.006 %), auto (fitted x2) 83.7752, true 83.7755
CASES = {
    "cantilever": (cantilever, CANTILEVER_HZ, {"rk4": -8.4e-3, "imex_midpoint": -9.3e-2, "fitted_midpoint": 0.0,
                                               "auto": 0.0}),
    "ella_84hz": (lambda: conservative(load_model("configs/ella.toml")), 83.79,
                  {"rk4": -6.0e-4, "imex_midpoint": -2.2e-2, "fitted_midpoint": 0.0, "auto": 0.0}),
}


@pytest.mark.parametrize("method", ["rk4", "imex_midpoint", "fitted_midpoint", "auto"])
@pytest.mark.parametrize("case", list(CASES))
def test_zero_crossings_of_a_free_oscillation_match_the_discrete_map(case, method):
    make, target, shift = CASES[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error", IntegratorAccuracyWarning)
        counted, predicted, true, plan = free_oscillation(make(), method, target)
    print(f"\n[{case}] {plan.describe()}: zero crossings {counted:.4f} Hz, discrete map {predicted:.4f} Hz, "
          f"true {true:.4f} Hz ({counted / true - 1:+.3%})")
    assert counted == pytest.approx(predicted, rel=2e-5)
    assert counted / true - 1 == pytest.approx(shift[method], abs=0.05 * abs(shift[method]) + 2e-4)
    if method == "auto":
        assert plan.method == "fitted_midpoint" and plan.accurate


# ---------------------------------------------------------------- auto: by accuracy, within the budget


def test_auto_takes_the_cheapest_plan_that_keeps_every_mode_accurate():
    model = load_model("configs/ella.toml")
    model.integrator.motion_tolerance_rad = 0.0          # the modes alone (the motion: tests/test_convergence.py)
    asm = assemble(model)
    plan = plan_integrator(asm)
    print("\n" + plan.describe())
    assert (plan.method, plan.substeps) == ("fitted_midpoint", 2) and plan.accurate and not plan.note
    assert len(plan.modes) == 11 and all(abs(m["error"]) <= FREQUENCY_TOLERANCE for m in plan.modes)
    lp = LinearisedPlant(asm)
    for method, n in (("fitted_midpoint", 1), ("imex_midpoint", 1), ("rk4", 1)):   # the cheaper or as cheap
        report = lp.accuracy(method, n, 1e-3, None)
        off = [m for m in report.modes if not m.ok]
        print(f"{method} x{n}: off {[m.describe() for m in off]}")
        assert not report.accurate and off


def test_auto_says_so_when_the_time_budget_allows_no_accurate_plan():
    model = load_model("configs/ella.toml")
    model.integrator.budget_fraction = 1e-6                    # not one evaluation per step fits
    with pytest.warns(IntegratorAccuracyWarning, match="time budget"):
        plant = Plant(model)
    assert plant.plan.accurate is False and "203" in plant.plan.note
    summary = plant.plan.summary()
    assert summary["accurate"] is False and summary["note"] == plant.plan.note
    assert "NOT all within" in plant.plan.describe()


def test_bandwidth_limits_the_modes_auto_keeps_accurate():
    model = load_model("configs/seed001_arm.toml")
    full = plan_integrator(assemble(model))
    model.integrator.bandwidth_hz = 400.0
    banded = plan_integrator(assemble(model))
    print(f"\nall modes: {full.describe()}\nbelow 400 Hz: {banded.describe()}")
    assert full.accurate and banded.accurate and banded.substeps < full.substeps
    above = [m for m in banded.modes if not m["in_band"]]
    assert [round(m["true_hz"]) for m in above] == [821, 976]
    assert all(m["in_band"] for m in full.modes)
