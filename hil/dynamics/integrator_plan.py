"""The integrator plan: method and substeps, and how faithfully they keep each mode's frequency.

Mode accuracy (``mode_accuracy``) comes from the discrete-time map of the linearised plant: the
production substep (hil.kernels.integrate.advance over h = dt / substeps) is central-differenced
around the initial state, as is the forward dynamics; each oscillatory pole mu of the continuous
linearisation is paired with the substep's eigenvalue lambda nearest to exp(mu h), and
s = log(lambda) / h (its branch the one nearest mu) gives the integrated frequency |s| and damping
ratio -Re s / |s|. Reported per mode: the true frequency |mu| / 2 pi, the integrated one, their
relative error and the numerical damping (integrated minus true damping ratio). The retained
(elastic) modes are the poles with at least half their energy in the elastic springs (modal
stiffness and Spong springs) and at most twice their kinetic energy there (an elastic oscillation has
about as much of either); the rigid-body poles (a gravity pendulum, a joint's drift) are not judged.

The state: the initial joint angles with the links in their static deflection, held by the drives'
holding torques (hil.model.linearize.rest_state: a fixed point of both the flow and the step, so that
the two are compared at the same point), or the initial state itself when the arm starts moving. The
linearisation leaves out the joints' Coulomb, Stribeck and brake friction: their smoothed slope at rest
is a steep damper of the smoothing (a numerical device rather than the arm's dynamics: the friction of
a sliding joint is flat), gone once the joint slides; with them left out the joints are free (viscous
friction stays), the case with the highest frequencies. The friction's own integration is judged by
the probe motion below, where it slides and reverses. A mode above the
substep's Nyquist frequency (omega h >= pi) has no integrated frequency (its samples alias) and does
not count as accurate.

``auto`` chooses by accuracy, judging the whole motion: the cheapest plan (forward-dynamics evaluations
per step) with every retained mode below the bandwidth (integrator.bandwidth_hz; 0: all) within
FREQUENCY_TOLERANCE in frequency and with numerical damping within its damping ratio (at least
DAMPING_RESOLUTION, the analysis' resolution), with the joint angles of a probe motion within
a third of integrator.motion_tolerance_rad of a converged solution over PROBE_S (hil.dynamics.motion_error:
the rigid, nonlinear motion the modal analysis cannot see; 0: not a criterion; the third, MOTION_MARGIN,
for the motions the probe does not cover: make run's manoeuvre errs up to 2.5 times the probe at ELLA's
fitted midpoint x2), within the time budget
(integrator.budget_fraction of the period at the evaluation cost of the model's size, evaluation_cost_s:
the same on every machine, so that two machines choose the same plan). With integrator.energy_tolerance >
0 the plan must also keep the energy of the undamped arm within it (hil.dynamics.energy_error: max |E -
E(0)| over 10 s, released at random joint rates): a measured run, as the linearised map cannot see the
nonlinear exchange between the rigid motion and the vibration that makes the error. A method that
missed a measured tolerance at n substeps is next tried where its order predicts a pass,
n (error / tolerance)^(1 / ORDER). ELLA at 1e-6 rad gets the fitted midpoint x3 (its x2 keeps every mode
but is 2.0e-6 rad off over the 2 s probe); with an energy tolerance of 1e-6, RK4 x4 (order 4; stable
while omega h <= 2 sqrt 2 for undamped modes, |lambda| h <= 2.785 for dampings; 16 evaluations per step;
4.8e-7 over 10 s, a one-signed loss from the numerical damping of its top modes); the second-order plans
would need 32 (IMEX) to 128 (fitted) evaluations (docs/model.md "Energy"). Where none does, it takes the plan
that keeps the modes and says so (IntegratorPlan.note, an IntegratorAccuracyWarning at start-up). The plan
does not depend on the formulation: the screw-theoretic DAE integrates with the same schemes and blocks.
Every plan states its worst modal error and its measured joint angle error (IntegratorPlan.describe; a
pinned method is judged by ``judge``; a plan chosen although it cannot keep the modes is not judged
further).
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np

from hil.dynamics import plan_cache
from hil.dynamics.energy_error import energy_error
from hil.dynamics.motion_error import PROBE_S, MotionProbe
from hil.dynamics.trial_run import METHOD_CODES
from hil.model.assembly import Assembled, make_work
from hil.model.linearize import (RK4_REAL_STABILITY, free_coordinates, mass_matrix_at, rest_state,
                                 step_frequencies_hz)
from hil.model.midpoint_fit import fit as fit_midpoint
from hil.kernels import integrate
from hil.kernels.outputs import evaluate
from hil.kernels.layout import JP_BRAKE, JP_STRIBECK
from config_schema import UserError

METHODS = METHOD_CODES          # name -> the step kernel's method code
EVALUATIONS = {"rk4": 4, "imex_midpoint": 2, "euler": 1, "fitted_midpoint": 2}   # forward dynamics per substep
ORDER = {"rk4": 4, "imex_midpoint": 2, "euler": 1, "fitted_midpoint": 2}
# The largest breakaway slope times the substep over the inertia, (F_c + F_st) h / (J v_s), at which each
# method integrates a joint's friction (and a slipping brake's ramp) without losing it: the real-axis
# stability bound |lambda h| of the explicit ones (classical RK4 2.785, forward Euler 2); for the midpoint
# schemes, whose friction is linearly implicit, the ratio beyond which it chatters (about 18,
# hil.kernels.joints), with a margin.
FRICTION_BOUND = {"rk4": RK4_REAL_STABILITY, "euler": 2.0, "imex_midpoint": 15.0, "fitted_midpoint": 15.0}
# Real-axis stability bounds (|lambda h| for a damping lambda) of the explicit parts: classical RK4 2.785; the
# explicit midpoint predictor of the IMEX and fitted midpoint schemes and forward Euler 2. A holding brake's
# default ramp takes them (hil.devices.drives): about one substep's change of rate wide, so that the
# once-a-cycle stick check catches a brake that stops its joint.
REAL_AXIS_STABILITY = {"rk4": RK4_REAL_STABILITY, "imex_midpoint": 2.0, "euler": 2.0, "fitted_midpoint": 2.0}
IMPLICIT_FRICTION = ("imex_midpoint", "fitted_midpoint")   # take the joint friction implicitly (hil.kernels.joints)
AUTO_METHODS = ("fitted_midpoint", "rk4", "imex_midpoint")   # in order of preference at equal cost
FREQUENCY_TOLERANCE = 1e-3      # |integrated / true frequency - 1| of every mode in band
DAMPING_RESOLUTION = 1e-6       # numerical damping below this counts as none (central-difference noise)
STABILITY_TOLERANCE = 1e-6      # spectral radius above the continuous one's that counts as unstable
MAX_SUBSTEPS = 64
MOTION_MARGIN = 3.0             # the probe's joint angles within integrator.motion_tolerance_rad / MOTION_MARGIN
# the cost of one evaluation (evaluation_cost_s): operations from the model's sizes at a fixed time each
SECONDS_PER_OPERATION = 0.14e-9


class IntegratorAccuracyWarning(UserWarning):
    """The automatic plan cannot keep every mode in band accurate within the time budget."""


@dataclass
class IntegratorPlan:
    method: str
    substeps: int
    dt_s: float
    f_max_hz: float          # highest whole-arm frequency at the initial state
    f_explicit_hz: float     # highest frequency the midpoint schemes treat explicitly (joint springs)
    bandwidth_hz: float | None = None    # modes judged: below this (None: all retained modes)
    accurate: bool | None = None         # every judged mode within the targets (None: not analysed)
    note: str = ""                       # what auto could not meet, and why
    modes: list[dict] = field(default_factory=list)   # ModeAccuracy rows of the plan (mode_accuracy)
    max_substeps: int | None = None      # auto: the most substeps of the method within the time budget
    energy: dict | None = None           # auto with an energy tolerance: the chosen plan's EnergyError
    motion: dict | None = None           # the plan's MotionError (hil.dynamics.motion_error); None: not judged
    judged_by: str = ""                  # the joint motion judged elsewhere (integrator.judged_by): who, how

    @property
    def modal_error(self) -> float | None:
        """The largest relative frequency error of a judged mode (inf: one aliased); None: not judged."""
        if self.accurate is None:
            return None
        return max((math.inf if m["error"] is None else abs(m["error"]) for m in self.modes if m["in_band"]),
                   default=0.0)

    def describe(self) -> str:
        text = (f"{self.method}, {self.substeps} substep(s) of {self.dt_s / self.substeps * 1e6:.1f} us per "
                f"{self.dt_s * 1e3:g} ms step (highest frequency {self.f_max_hz:.1f} Hz)")
        if self.accurate is None:
            return text
        band = f"below {self.bandwidth_hz:g} Hz" if self.bandwidth_hz else "retained"
        verdict = "within" if self.accurate else "NOT all within"
        motion = (f"the joint motion judged by {self.judged_by}" if self.judged_by else
                  "the joint motion not judged" if self.motion is None else
                  "every joint prescribed" if not self.motion.get("joints", 1) else
                  f"joint angles within {self.motion['max_error_rad']:.1e} rad of a converged solution over "
                  f"{self.motion['probe_s']:g} s of the probe motion ({self.motion['per_step_rad']:.1e} rad per step)")
        energy = ("the undamped arm's energy not judged (integrator.energy_tolerance = 0)" if self.energy is None
                  else f"the undamped arm's energy within {self.energy['max_deviation']:.1e} of its largest kinetic "
                       f"energy over {self.energy['duration_s']:g} s")
        return (f"{text}; every {band} mode {verdict} {FREQUENCY_TOLERANCE:.1%} in frequency (worst "
                f"{self.modal_error:.2e}); {motion}; {energy}")

    def summary(self) -> dict:
        """The plan for a run summary: describe(), accurate, its worst modal error, its joint motion error
        (per step and over the horizon, rad), note."""
        motion = self.motion or {}
        return {"plan": self.describe(), "method": self.method, "substeps": self.substeps,
                "accurate": self.accurate, "modal_error": self.modal_error,
                "motion_error_per_step_rad": motion.get("per_step_rad"),
                "motion_error_rad": motion.get("max_error_rad"), "motion_probe_s": motion.get("probe_s"),
                "motion_judged_by": self.judged_by or None, "note": self.note}


@dataclass
class ModeAccuracy:
    true_hz: float
    integrated_hz: float | None        # None: above the substep's Nyquist frequency
    error: float | None                # integrated / true - 1
    damping_ratio: float               # of the continuous pole
    numerical_damping: float | None    # integrated damping ratio minus the true one
    in_band: bool

    @property
    def ok(self) -> bool:
        return (self.error is not None and abs(self.error) <= FREQUENCY_TOLERANCE
                and abs(self.numerical_damping) <= max(self.damping_ratio, DAMPING_RESOLUTION))

    def describe(self) -> str:
        if self.error is None:
            return f"{self.true_hz:.1f} Hz: above the substep's Nyquist frequency"
        return (f"{self.true_hz:.1f} Hz: {self.error:+.3%} in frequency, numerical damping "
                f"{self.numerical_damping:+.1e} (damping ratio {self.damping_ratio:.1e})")


@dataclass
class AccuracyReport:
    modes: list[ModeAccuracy]
    stable: bool

    @property
    def accurate(self) -> bool:
        return self.stable and all(m.ok for m in self.modes if m.in_band)

    def worst(self) -> float:
        """Largest relative frequency error over the modes in band (inf when unstable)."""
        if not self.stable:
            return math.inf
        return max((math.inf if m.error is None else abs(m.error) for m in self.modes if m.in_band), default=0.0)


def plan_integrator(asm: Assembled, method: str | None = None, substeps: int | None = None,
                    evaluation_s: float | None = None) -> IntegratorPlan:
    """Method and substeps from the model's integrator settings; ``auto`` by accuracy (module docstring).
    evaluation_s: the cost of one forward-dynamics evaluation (default: evaluation_cost_s). A plan made
    before for the same arrays, state and settings is taken from hil.dynamics.plan_cache."""
    cache_key = plan_cache.key(asm, "plan", method, substeps, evaluation_s)
    stored = plan_cache.load(cache_key)
    if stored is not None:
        plan = IntegratorPlan(**stored)
        if plan.note:
            warnings.warn(plan.note, IntegratorAccuracyWarning, stacklevel=3)
        return plan
    plan = _make_plan(asm, method, substeps, evaluation_s)
    plan_cache.store(cache_key, asdict(plan))
    return plan


def judge(asm: Assembled, plan: IntegratorPlan) -> IntegratorPlan:
    """A pinned plan (auto's are judged as they are chosen, or not where they cannot keep the modes) with its
    modes' accuracy and joint motion error (or the model's integrator.judged_by: who judged its motion)
    filled in, in place (kept in hil.dynamics.plan_cache like a plan); returns it."""
    if plan.accurate is not None:
        return plan
    if judged_by := asm.model.integrator.judged_by:       # the motion judged elsewhere; the modes (cheap) here
        report = mode_accuracy(asm, plan)
        plan.accurate, plan.modes, plan.judged_by = report.accurate, [vars(m) for m in report.modes], judged_by
        return plan
    cache_key = plan_cache.key(asm, "judged", plan.method, plan.substeps, plan.bandwidth_hz)
    stored = plan_cache.load(cache_key)
    if stored is None:
        report = mode_accuracy(asm, plan)
        stored = {"accurate": report.accurate, "modes": [vars(m) for m in report.modes],
                  "motion": vars(MotionProbe(asm).error(plan.method, plan.substeps))}
        plan_cache.store(cache_key, stored)
    plan.accurate, plan.modes, plan.motion = stored["accurate"], stored["modes"], stored["motion"]
    return plan


def evaluation_cost_s(asm: Assembled) -> float:
    """The cost of one forward-dynamics evaluation from the model's sizes: the articulated-body algorithm's
    operations, 260 per body, 780 more per body with a parent, and per body with n_m modes and n_n mass
    nodes 78 n_n (1 + n_m) + 5 n_n n_m^2 + 5 n_m^3 (a closed form fitted to the operations tools.op_count
    counts: within 10 % on the shipped presets and random chains of 2 to 7 bodies, 35 % low on a single
    rigid body), at SECONDS_PER_OPERATION each (ELLA: 2.3 us, as hil bench kernel measured it inside numba
    on the reference machine). A function of the model only: two machines budget alike."""
    km = asm.km
    ops = 0.0
    for k in range(asm.layout.n_joints):
        nm, nodes = float(km.nm[k]), float(km.node_off[k + 1] - km.node_off[k])
        ops += 260 + (780 if km.parent[k] >= 0 else 0) + 78 * nodes * (1 + nm) + 5 * nodes * nm * nm + 5 * nm ** 3
    return ops * SECONDS_PER_OPERATION


def _make_plan(asm: Assembled, method: str | None, substeps: int | None, evaluation_s: float | None) -> IntegratorPlan:
    cfg = asm.model.integrator
    method = method or cfg.method
    freqs = step_frequencies_hz(asm)
    bandwidth = cfg.bandwidth_hz or None
    n = substeps or cfg.substeps or None
    if method == "auto":
        return _choose(asm, freqs, bandwidth, n, evaluation_cost_s(asm) if evaluation_s is None else evaluation_s)
    if method not in METHODS:
        raise UserError(f"{asm.model.source}: integrator.method = {method!r}: expected auto, "
                         + ", ".join(METHODS))
    n = n or freqs.substeps(method, cfg.dt_s, cfg.safety)
    return IntegratorPlan(method, int(n), cfg.dt_s, freqs.max_hz, freqs.explicit_hz, bandwidth)


def _choose(asm: Assembled, freqs, bandwidth: float | None, substeps: int | None,
            evaluation_s: float) -> IntegratorPlan:
    cfg = asm.model.integrator
    budget = int(cfg.budget_fraction * cfg.dt_s / evaluation_s) if evaluation_s > 0 else 10 ** 6
    methods = list(AUTO_METHODS)
    candidates = []
    for m in methods:
        lowest = freqs.substeps(m, cfg.dt_s, cfg.safety)
        for n in ([substeps] if substeps else range(lowest, MAX_SUBSTEPS + 1)):
            candidates.append((EVALUATIONS[m] * n, methods.index(m), m, n))
    candidates.sort()
    analysis = LinearisedPlant(asm)
    affordable = [c for c in candidates if c[0] <= budget]
    the_probe = functools.cache(lambda: MotionProbe(asm))     # made once, when a plan first needs it
    motion = MeasuredTarget(f"the joint angles over the {PROBE_S:g} s probe (a third of the motion tolerance)",
                            "rad",
                            cfg.motion_tolerance_rad / MOTION_MARGIN,
                            lambda m, n: the_probe().error(m, n), lambda e: e.max_error_rad)
    energy = MeasuredTarget("the undamped arm's energy", "of its largest kinetic energy", cfg.energy_tolerance,
                            lambda m, n: energy_error(asm.model, m, n), lambda e: e.max_deviation)
    frequencies_kept = []
    for _, _, m, n in affordable:
        if not (motion.worth_trying(m, n) and energy.worth_trying(m, n)):
            continue
        report = analysis.accuracy(m, n, cfg.dt_s, bandwidth)
        if not report.accurate:
            continue
        frequencies_kept.append((m, n, report))
        if motion.met(m, n) and energy.met(m, n):
            return _plan(asm, freqs, m, n, bandwidth, report, "", budget, motion.measure(m, n),
                         energy.measured.get((m, n)))
    if frequencies_kept:      # the modes kept, a measured tolerance not within the budget: the cheapest such plan
        m, n, report = frequencies_kept[0]
        missed = " and ".join(t.describe() for t in (motion, energy) if t.missed())
        note = (f"auto: no plan within the time budget ({budget} evaluations per step) keeps every mode accurate "
                f"and {missed}; chosen {m} x{n}, the cheapest that keeps the modes")
        warnings.warn(note, IntegratorAccuracyWarning, stacklevel=5)
        return _plan(asm, freqs, m, n, bandwidth, report, note, budget, motion.measure(m, n),
                     energy.measured.get((m, n)))
    # nothing accurate within the budget: the most accurate of the dearest affordable plan of each method
    pool = affordable or candidates[:1]
    best = {}
    for cost, _, m, n in pool:
        best[m] = (m, n)
    reports = {mn: analysis.accuracy(mn[0], mn[1], cfg.dt_s, bandwidth) for mn in best.values()}
    (m, n), report = min(reports.items(), key=lambda kv: kv[1].worst())
    band = f"below {bandwidth:g} Hz" if bandwidth else "retained"
    limit = (f"the time budget ({budget} evaluations per step: {cfg.budget_fraction:g} of the "
             f"{cfg.dt_s * 1e3:g} ms period at {evaluation_s * 1e6:.1f} us each)")
    off = "; ".join(md.describe() for md in report.modes if md.in_band and not md.ok)
    if not report.stable:
        off = "unstable at the initial state" + (f"; {off}" if off else "")
    note = (f"auto: no plan within {limit} keeps every {band} mode within {FREQUENCY_TOLERANCE:.1%} in "
            f"frequency with numerical damping below its damping ratio; chosen {m} x{n}; off: {off}")
    warnings.warn(note, IntegratorAccuracyWarning, stacklevel=5)
    return _plan(asm, freqs, m, n, bandwidth, report, note, budget)      # modes off: the motion not judged


def _plan(asm, freqs, method, n, bandwidth, report: AccuracyReport, note: str, budget: int,
          motion=None, energy=None) -> IntegratorPlan:
    return IntegratorPlan(method, n, asm.model.integrator.dt_s, freqs.max_hz, freqs.explicit_hz, bandwidth,
                          report.accurate, note, [vars(m) for m in report.modes],
                          max(n, min(MAX_SUBSTEPS, budget // EVALUATIONS[method])),
                          None if energy is None else vars(energy), None if motion is None else vars(motion))


class MeasuredTarget:
    """A tolerance of auto's judged by a measured run (module docstring): each plan measured once, the plans
    a method's order says cannot pass skipped. measure(method, n) -> a result, value(result) -> the number
    held to the tolerance (0: not a criterion; the plan's own value is still measured for its summary)."""

    def __init__(self, what: str, unit: str, tolerance: float, measure: Callable, value: Callable[..., float]):
        self.what, self.unit, self.tolerance = what, unit, tolerance
        self._measure, self._value = measure, value
        self.measured: dict = {}
        self.needed: dict[str, float] = {}      # per method: the substeps its order predicts it needs

    def worth_trying(self, method: str, n: int) -> bool:
        return self.tolerance <= 0 or n >= self.needed.get(method, 0)

    def measure(self, method: str, n: int):
        if (method, n) not in self.measured:
            self.measured[(method, n)] = self._measure(method, n)
        return self.measured[(method, n)]

    def met(self, method: str, n: int) -> bool:
        if self.tolerance <= 0:
            return True
        err = self._value(self.measure(method, n))
        if err <= self.tolerance:
            return True
        # a diverged run (inf) says nothing of the order: the method is tried again at twice the substeps
        self.needed[method] = n * (err / self.tolerance) ** (1.0 / ORDER[method]) if math.isfinite(err) else 2 * n
        return False

    def missed(self) -> bool:
        return self.tolerance > 0 and not any(self._value(e) <= self.tolerance for e in self.measured.values())

    def describe(self) -> str:
        tried = ", ".join(f"{m} x{n} {self._value(e):.1e}" for (m, n), e in self.measured.items())
        return f"{self.what} within {self.tolerance:.2g} {self.unit} (measured: {tried})"


def accurate_substeps(asm: Assembled, plan: IntegratorPlan, lowest: int) -> int | None:
    """The fewest substeps from `lowest` up to plan.max_substeps with which the plan's method keeps every
    mode of `asm` (a variant of the plan's model) accurate; None if none does."""
    analysis = LinearisedPlant(asm)
    for n in range(lowest, (plan.max_substeps or lowest) + 1):
        if analysis.accuracy(plan.method, n, plan.dt_s, plan.bandwidth_hz).accurate:
            return n
    return None


def mode_accuracy(asm: Assembled, plan: IntegratorPlan) -> AccuracyReport:
    """Each retained mode's frequency and damping under the plan's substep (module docstring)."""
    return LinearisedPlant(asm).accuracy(plan.method, plan.substeps, plan.dt_s, plan.bandwidth_hz)


class LinearisedPlant:
    """The plant linearised at its initial state, sliding friction (module docstring): its continuous
    poles once, the discrete map of each plan on demand."""

    def __init__(self, asm: Assembled):
        self.asm = asm
        km = self.km = asm.km.copy()
        km.jpar[:, JP_STRIBECK] = 0.0
        km.jpar[:, JP_BRAKE] = 0.0
        km.coulomb[:] = 0.0
        self.work = make_work(km)
        self.free = free_coordinates(asm)
        self.tau = np.zeros(max(asm.layout.n_joints, 1))
        pos = asm.pos0
        if not np.any(asm.vel0):       # at rest: the static equilibrium, held by the drives (a fixed point)
            pos, self.tau[: asm.layout.n_joints] = rest_state(asm, asm.pos0)
        self.x0 = np.concatenate([pos, asm.vel0])
        free = self.free
        self.M = mass_matrix_at(asm, pos)[np.ix_(free, free)]
        mu, vec = np.linalg.eig(self.rates_jacobian())
        self.all_poles = mu
        X = vec[: free.size]
        share = _energy_ratio(X, _elastic_stiffness(asm)[np.ix_(free, free)], self.M, mu)
        resolved = np.abs(mu) > 1e-6 * np.max(np.abs(mu), initial=0.0)    # not a rigid pole's difference noise
        keep = np.nonzero((mu.imag > 0) & resolved & (share > 0.5) & (share < 2.0))[0]
        keep = keep[np.argsort(np.abs(mu[keep]))]
        self.poles, self.shapes = mu[keep], X[:, keep]

    def rates_jacobian(self) -> np.ndarray:
        """The continuous linearisation d(q_dot, v_dot)/d(q, v) over the free coordinates (self.free:
        their positions, then their velocities) at the state self.x0, drive torques self.tau."""
        return self._jacobian(self._rates, self.km)

    def substep_map(self, method: str, h: float) -> np.ndarray:
        """The production substep of `method` over h, central-differenced like rates_jacobian."""
        km = self.km
        if method == "fitted_midpoint":
            km = km.copy()
            km.fitted[:] = fit_midpoint(self.asm, self.asm.pos0, h).blocks
        code = METHODS[method]
        return self._jacobian(lambda k, x: self._substep(k, x, h, code), km)

    def accuracy(self, method: str, substeps: int, dt: float, bandwidth: float | None) -> AccuracyReport:
        h = dt / substeps
        lam, vec = np.linalg.eig(self.substep_map(method, h))
        radius = max(1.0, float(np.max(np.exp(self.all_poles.real * h)))) if self.all_poles.size else 1.0
        stable = bool(np.max(np.abs(lam), initial=0.0) <= radius + STABILITY_TOLERANCE)
        upper = np.nonzero(lam.imag >= 0)[0]
        modes = []
        for mu, j in zip(self.poles, _pairs(self.shapes, vec[: self.free.size, upper], self.M)):
            s = np.log(complex(lam[upper[j]])) / h
            w, w_hat = abs(mu), abs(s)
            zeta, zeta_hat = -mu.real / w, -s.real / w_hat
            f = float(w / (2 * math.pi))
            in_band = bool(bandwidth is None or f < bandwidth)
            if w * h >= math.pi:
                modes.append(ModeAccuracy(f, None, None, float(zeta), None, in_band))
                continue
            modes.append(ModeAccuracy(f, float(w_hat / (2 * math.pi)), float(w_hat / w - 1.0), float(zeta),
                                      float(zeta_hat - zeta), in_band))
        return AccuracyReport(modes, stable)

    def _rates(self, km, x: np.ndarray) -> np.ndarray:
        nq = self.asm.layout.nq
        acc = np.zeros(nq)
        evaluate(km.mi, km.mf, self.work.w, 0.0, x[:nq].copy(), x[nq:].copy(), self.tau, acc)
        return np.concatenate([x[nq:], acc])

    def _substep(self, km, x: np.ndarray, h: float, code: int) -> np.ndarray:
        nq = self.asm.layout.nq
        pos, vel = x[:nq].copy(), x[nq:].copy()
        integrate.advance(km.mi, km.mf, self.work.w, 0.0, pos, vel, self.tau, h, 1, code)
        return np.concatenate([pos, vel])

    def _jacobian(self, fn, km, eps: float = 1e-7) -> np.ndarray:
        """Central differences of fn over the free positions and velocities."""
        nq = self.asm.layout.nq
        cols = np.concatenate([self.free, nq + self.free])
        J = np.zeros((cols.size, cols.size))
        for c, i in enumerate(cols):
            xp, xm = self.x0.copy(), self.x0.copy()
            xp[i] += eps
            xm[i] -= eps
            J[:, c] = ((fn(km, xp) - fn(km, xm)) / (2 * eps))[cols]
        return J


def _pairs(shapes: np.ndarray, candidates: np.ndarray, M: np.ndarray) -> list[int]:
    """For each continuous mode shape (positions), the index of the discrete eigenvector in `candidates`
    (the upper half-plane's) most alike in the mass metric: the most alike pairs first, each once. Shapes
    rather than eigenvalues: a step that warps stiff modes far moves their eigenvalues past each other."""
    def normed(X):
        return X / np.sqrt(np.abs(np.einsum("ik,ij,jk->k", X.conj(), M, X)))[None, :]
    sim = np.abs(normed(shapes).conj().T @ M @ normed(candidates))
    out = [-1] * shapes.shape[1]
    for _ in range(min(shapes.shape[1], candidates.shape[1])):
        i, j = np.unravel_index(int(np.argmax(sim)), sim.shape)
        out[i] = int(j)
        sim[i, :] = -1.0
        sim[:, j] = -1.0
    return out


def _energy_ratio(X: np.ndarray, K: np.ndarray, M: np.ndarray, mu: np.ndarray) -> np.ndarray:
    """Per eigenvector (positions X, pole mu): elastic spring energy over kinetic energy (1 for a purely
    elastic mode at equipartition, ~0 for a rigid-body one)."""
    kinetic = np.abs(np.einsum("ik,ij,jk->k", X.conj(), M, X)) * np.abs(mu) ** 2
    elastic = np.abs(np.einsum("ik,ij,jk->k", X.conj(), K, X))
    return np.where(kinetic > 0, elastic / np.where(kinetic > 0, kinetic, 1.0), 0.0)


def _elastic_stiffness(asm: Assembled) -> np.ndarray:
    """Stiffness of the elastic springs over all coordinates: each body's modal K and the Spong springs."""
    km, lay = asm.km, asm.layout
    K = np.zeros((lay.nq, lay.nq))
    for k in range(lay.n_joints):
        n = int(km.nm[k])
        a = lay.n_joints + lay.mode_offsets[k]
        K[a:a + n, a:a + n] = km.Kmod[k, :n, :n]
        if km.mot[k] >= 0:
            r = lay.motor_index(k)
            K[np.ix_([k, r], [k, r])] += km.kspring[k] * np.array([[1.0, -1.0], [-1.0, 1.0]])
    return K
