"""How well a plan keeps the arm's motion: its joint angles against a converged solution over a short
probe motion of the model as it is (friction, damping, gravity kept), judged by auto beside the modes.

The probe: from the plan's state (the initial joint angles at rest in their static deflection, held by
the drives, hil.model.linearize.rest_state; or the initial state when the arm starts moving), every
torque-driven joint receives its holding torque plus s_k A_k sin(2 pi t / T), held over each outer step
as the real-time loop holds a command, for PROBE_S (the span integrator.motion_tolerance_rad is stated
over) with T = CYCLE_S: in each cycle joint k speeds up to about its rate limit w_k at T/2 and back,
then the other way: A_k = pi J_k w_k / T (J_k the inertia its torque meets, hil.model.linearize
.motor_inertias), at most its drive's torque limit; w_k the drive's no-load speed at its supply voltage
through the gear, else DEFAULT_RATE; s_k alternates in sign from joint to joint so that the joints load
each other. Prescribed joints follow their profiles. The links swing and vibrate, the friction slides
and reverses, gravity's torque changes with the pose: the rigid, nonlinear motion a plan must integrate
besides the modes, over the whole span, as errors that grow faster than linearly (an undamped arm's
drift) would be missed by a shorter probe scaled up.

The converged solution: the same held input with RK4 at n_ref = twice its stable count (its friction
resolved: hil.model.linearize.substeps_for), or where that is dearer (stiff modes RK4 must resolve), the
fitted midpoint at n_ref = REFERENCE_MIDPOINT_SUBSTEPS; checked against n_ref / 2 by Richardson's
estimate |y(n_ref / 2) - y(n_ref)| / (2^p - 1) of its own error (p its order), n_ref doubled while that is above
REFERENCE_ERROR_RAD (a hundredth of the default tolerance) and the reference's evaluations stay within
REFERENCE_EVALUATIONS (a motion whose solution does not settle by then, a tumbling or stick-slipping
arm, keeps the estimate it reached: it is in every MotionError).

Measured over the probe's outer steps: the largest error of any joint angle or Spong rotor angle
[rad] (``max_error_rad``) and that over the number of steps (``per_step_rad``; tests/test_convergence.py
holds the measure to the recorded manoeuvres of the shipped presets).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hil.dynamics.trial_run import TrialRun
from hil.kernels.layout import JOINT_PRESCRIBED
from hil.model.assembly import Assembled
from hil.model.linearize import motor_inertias, rest_state, step_frequencies_hz

PROBE_S = 2.0                  # the probe motion's length: the span integrator.motion_tolerance_rad is stated over
CYCLE_S = 0.5                  # the period of its torques
DEFAULT_RATE = 1.0             # rad/s: a joint's rate limit without a drive model that gives one
REFERENCE_ERROR_RAD = 1e-8     # the converged solution's own error estimate stays below this
REFERENCE_EVALUATIONS = 1e6    # forward-dynamics evaluations the converged solution may take in all
REFERENCE_MIDPOINT_SUBSTEPS = 64


@dataclass
class MotionError:
    plan: str                  # "<method> x<substeps>"
    max_error_rad: float       # largest joint (or rotor) angle error over the probe, at least the reference's own
    per_step_rad: float        # max_error_rad over the probe's outer steps
    probe_s: float
    reference: str             # the converged solution: "<method> x<n_ref>"
    reference_error_rad: float  # its own error estimate
    joints: int                # the angles compared (0: every joint prescribed, nothing to judge)

    def describe(self) -> str:
        if not self.joints:
            return "every joint prescribed: no joint motion to judge"
        return (f"joint angles within {self.max_error_rad:.1e} rad of a converged solution over the "
                f"{self.probe_s:g} s probe ({self.per_step_rad:.1e} rad per step)")


class MotionProbe:
    """The probe motion of one model and its converged solution (module docstring), made once; the joint
    angle error of any plan measured against it on demand."""

    def __init__(self, asm: Assembled):
        self.asm = asm
        lay, km = asm.layout, asm.km
        cfg = asm.model.integrator
        self.steps = max(1, int(round(PROBE_S / cfg.dt_s)))
        self.pos0, hold = asm.pos0.copy(), np.zeros(lay.n_joints)
        if not np.any(asm.vel0):
            self.pos0, hold = rest_state(asm, asm.pos0)
        self.torques = _probe_torques(asm, self.pos0, hold, self.steps)
        nj = lay.n_joints
        moving = [k for k in range(nj) if km.drive[k] != JOINT_PRESCRIBED]
        self.angles = np.array(moving + [lay.motor_index(k) for k in range(nj) if km.mot[k] >= 0], np.int64)
        self.reference, self.reference_name, self.reference_error = np.zeros((self.steps, 0)), "none", 0.0
        if self.angles.size:
            self._converge(asm)

    def _converge(self, asm: Assembled) -> None:
        """The converged solution and its own error estimate (module docstring)."""
        cfg = asm.model.integrator
        rk4 = 2 * step_frequencies_hz(asm).substeps("rk4", cfg.dt_s, cfg.safety)
        method, n, order = (("rk4", rk4, 4) if 4 * rk4 <= 2 * REFERENCE_MIDPOINT_SUBSTEPS
                            else ("fitted_midpoint", REFERENCE_MIDPOINT_SUBSTEPS, 2))
        per_substep = self.steps * (4 if method == "rk4" else 2)
        coarse = self.run(method, n // 2)
        spent = 1.5 * n * per_substep
        while True:
            fine = self.run(method, n)
            self.reference_error = _largest(coarse, fine) / (2 ** order - 1)
            if self.reference_error <= REFERENCE_ERROR_RAD or spent + 2 * n * per_substep > REFERENCE_EVALUATIONS:
                break
            coarse, n = fine, 2 * n
            spent += n * per_substep
        self.reference, self.reference_name = fine, f"{method} x{n}"

    def run(self, method: str, substeps: int) -> np.ndarray:
        """The probe's joint (and rotor) angles after every outer step with the plan; rows of NaN from where
        the plan diverged."""
        trial = TrialRun(self.asm, method, substeps)
        trial.pos[:] = self.pos0
        out = np.full((self.steps, self.angles.size), np.nan)
        nj = self.asm.layout.n_joints
        for i in range(self.steps):
            trial.tau[:nj] = self.torques[i]
            if not trial.step():
                break
            out[i] = trial.pos[self.angles]
        return out

    def error(self, method: str, substeps: int) -> MotionError:
        """The joint angle error of `method` x `substeps` against the converged solution (no finer than the
        reference's own error: what the measure can resolve)."""
        worst = max(_largest(self.run(method, substeps), self.reference), self.reference_error) \
            if self.angles.size else 0.0
        return MotionError(f"{method} x{substeps}", worst, worst / self.steps,
                           self.steps * self.asm.model.integrator.dt_s, self.reference_name,
                           float(self.reference_error), int(self.angles.size))


def _largest(a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| (inf where either is NaN: a diverged run)."""
    if a.size == 0:
        return 0.0
    d = np.abs(a - b)
    return math.inf if np.isnan(d).any() else float(d.max())


def rate_limits(asm: Assembled) -> np.ndarray:
    """Per joint, the largest rate [rad/s] its drive reaches: the motor's no-load speed at its supply
    voltage through the gear, else DEFAULT_RATE."""
    out = np.full(asm.layout.n_joints, DEFAULT_RATE)
    for k, body in enumerate(asm.model.bodies):
        m = body.joint.motor
        if m is not None and m.supply_V > 0 and m.back_emf_V_s_rad > 0:
            out[k] = m.supply_V / m.back_emf_V_s_rad / body.joint.gear_ratio
    return out


def _probe_torques(asm: Assembled, pos: np.ndarray, hold: np.ndarray, steps: int) -> np.ndarray:
    """The probe's drive torques held over each outer step, (steps, n_joints) (module docstring)."""
    dt = asm.model.integrator.dt_s
    T = CYCLE_S
    inertia = motor_inertias(asm.km, asm.layout, pos)
    limit = np.array([b.joint.motor.torque_limit_N_m if b.joint.motor else math.inf for b in asm.model.bodies])
    amplitude = np.minimum(math.pi * inertia * rate_limits(asm) / T, limit)
    sign = np.where(np.arange(hold.size) % 2 == 0, 1.0, -1.0)
    t = np.arange(steps) * dt
    return hold[None, :] + np.sin(2 * math.pi * t / T)[:, None] * (sign * amplitude)[None, :]
