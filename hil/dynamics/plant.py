"""The plant: an assembled model, its state, and a compiled fixed-step integrator.

Plant.step() is one Python-to-numba call that advances one outer step (all
substeps), allocation-free; everything is compiled and warmed up on creation.

Joint friction is integrated in every substep, explicitly by RK4 and linearly implicitly by the midpoint
schemes, so its slope at rest must stay within what the method keeps; the plant widens a joint's Coulomb
smoothing only beyond that (Plant.stabilize_friction; hil.devices.drives.DriveBank calls it again when it
scales the friction).
"""
from __future__ import annotations

import hashlib
import warnings

import numpy as np

from hil.model import spec as md
from hil.model.assembly import Assembled, assemble, make_work
from hil.kernels import fitted_midpoint, integrate, screw_dae, screw_dae_step
from hil.kernels.cycle import step_and_sample
from hil.kernels.aba import forward_kinematics, prepare
from hil.kernels.outputs import STATION_FIELDS, energy, evaluate, power, station_state
from hil.model.linearize import motor_inertias, rest_state
from hil.model import midpoint_fit
from hil.dynamics import plan_cache
from hil.dynamics.integrator_plan import (FRICTION_BOUND, IMPLICIT_FRICTION, METHODS,  # noqa: F401
                                          REAL_AXIS_STABILITY, IntegratorAccuracyWarning, IntegratorPlan,
                                          plan_integrator)
from hil.kernels.layout import JOINT_PRESCRIBED, JP_COUL_VS, JP_STRIBECK
from config_schema import UserError

# the kernel that solves the equations of motion: the O(n) articulated-body algorithm (hil.kernels.aba)
# or seed 000's screw-theoretic DAE with the interaction wrenches as unknowns (hil.kernels.screw_dae)
FORMULATIONS = ("aba", "screw-dae")
WRENCH_AXES = ("mx", "my", "mz", "fx", "fy", "fz")   # the order of Plant.wrenches' six components


def station_load_columns(station: str) -> list[str]:
    """Run-log columns of the external wrench at a station (Plant.station_loads' row): f_ext_<station>_mx .. _fz
    [N m, N], world axes."""
    return [f"f_ext_{station}_{axis}" for axis in WRENCH_AXES]


def wrench_columns(joint_names: list[str]) -> list[str]:
    """Run-log columns of the joint interaction wrenches: w_<joint>_mx ... _fz per joint (Plant.wrenches)."""
    return [f"w_{j}_{a}" for j in joint_names for a in WRENCH_AXES]


class ForwardEulerWarning(UserWarning):
    """Forward Euler is unstable for undamped elastic modes; it exists to reproduce seed 000."""


class SimulationError(RuntimeError):
    pass


class Plant:
    """State and stepping of one arm model (SI units; see docs/model.md "Conventions")."""

    def __init__(self, model: md.Model | Assembled, method: str | None = None, substeps: int | None = None,
                 formulation: str = "aba"):
        if formulation not in FORMULATIONS:
            raise UserError(f"formulation = {formulation!r}: expected one of {', '.join(FORMULATIONS)}")
        self.formulation = formulation
        self.asm = model if isinstance(model, Assembled) else assemble(model)
        self.km = self.asm.km
        self.layout = self.asm.layout
        self.work = make_work(self.km)
        self.kernel_args = (self.km.mi, self.km.mf, self.work.w)      # what every kernel call takes first
        self.dae = formulation == "screw-dae"    # the DAE kernel: its blocks dae_* of the same arrays
        # the step, the step with output stations, a station's kinematics and the solve, with the plant's
        # formulation
        self._step_and_sample, self._station_state = step_and_sample, station_state
        self._dae_solve = None
        if self.dae:
            self._step_and_sample = screw_dae_step.step_and_sample
            self._station_state, self._dae_solve = screw_dae_step.station_state, screw_dae.forward_dynamics
        self.plan = plan_integrator(self.asm, method, substeps)
        if self.plan.method == "euler":
            warnings.warn("forward Euler amplifies every undamped mode each step; use it only to reproduce seed 000",
                          ForwardEulerWarning, stacklevel=2)
        self.method = METHODS[self.plan.method]
        # the step kernel of the plan's method: the fitted midpoint's own (no method code), so that only its
        # code is loaded (the step of every method is a larger load); the DAE's takes the code
        self._advance, self._method_arg = integrate.advance, (self.method,)
        if self.dae:
            self._advance = screw_dae_step.advance
        elif self.plan.method == "fitted_midpoint":
            self._advance, self._method_arg = fitted_midpoint.advance, ()
        if self.plan.method == "fitted_midpoint":
            self.km.fitted[:] = self.fitted_blocks(self.asm, self.plan.substeps)
        self.tau = np.zeros(max(self.layout.n_joints, 1))
        self.acc = np.zeros(self.layout.nq)
        self._e = np.zeros(3)
        self._p = np.zeros(2)
        self._st = np.zeros(STATION_FIELDS)
        self.out_index: np.ndarray | None = None       # output stations (output_stations)
        self.station_out = np.zeros((0, STATION_FIELDS))
        self.reset()
        # the configured Coulomb smoothing v_s (a lower bound) and the joints whose friction moves them
        self._configured_smoothing = self.km.jpar[:, JP_COUL_VS].copy()
        self._friction_acts = self.km.drive != JOINT_PRESCRIBED
        self.stabilize_friction(plan_cache.remembered(self.asm, "apparent inertias", lambda: apparent_inertias(self)))
        self._warm_up()

    @property
    def dt(self) -> float:
        return self.plan.dt_s

    @property
    def coulomb_smoothing(self) -> np.ndarray:
        """Effective smoothing velocity v_s of each joint's Coulomb and Stribeck friction [rad/s]
        (a copy; see stabilize_friction)."""
        return self.km.jpar[:, JP_COUL_VS].copy()

    def friction_smoothing_floor(self, inertia: np.ndarray | None = None) -> np.ndarray:
        """The smallest Coulomb smoothing v_s each joint's friction, as the kernel holds it now
        (viscous c, Coulomb F_c and Stribeck F_st, any friction scale included), may have for the
        substep integration to keep it (stabilize_friction); 0 where no floor applies."""
        km = self.km
        inertia = apparent_inertias(self) if inertia is None else np.asarray(inertia, float)
        h = self.plan.dt_s / self.plan.substeps
        kappa = self.asm.model.integrator.safety * FRICTION_BOUND[self.plan.method]
        explicit = self.plan.method not in IMPLICIT_FRICTION      # an implicit viscous term costs no margin
        floor = np.zeros(self.layout.n_joints)
        for k in range(floor.size):
            breakaway = km.coulomb[k] + km.jpar[k, JP_STRIBECK]
            if not (self._friction_acts[k] and breakaway > 0.0):
                continue
            budget = kappa * inertia[k] - (km.viscous[k] * h if explicit else 0.0)     # what the viscous slope leaves
            if budget <= 0.0:
                warnings.warn(f"joint {self.layout.joint_names[k]!r}: viscous friction {km.viscous[k]:.3g} N m s/rad "
                              f"alone exceeds the stability bound of the substep ({self.plan.describe()}; apparent "
                              f"inertia {inertia[k]:.3g} kg m^2): the joint rate chatters; add substeps",
                              RuntimeWarning, stacklevel=3)
                budget = kappa * inertia[k]
            floor[k] = breakaway * h / budget
        return floor

    def stabilize_friction(self, inertia: np.ndarray | None = None) -> np.ndarray:
        """Set each joint's effective Coulomb smoothing v_s (the kernel's ``jpar[:, JP_COUL_VS]``) to
        max(configured v_s, floor) and return it (also ``Plant.coulomb_smoothing``).

        The smoothed friction c v + (F_c + F_st exp(-(v / v_st)^2)) tanh(v / v_s) has the slope
        c + (F_c + F_st) / v_s at rest. An explicit method (RK4, Euler) integrates it as a damper in every
        substep h, stable while (c + (F_c + F_st) / v_s) h / J stays within its real-axis bound times the
        integrator's safety fraction, kappa; the midpoint schemes take it linearly implicitly
        (hil.kernels.joints), which chatters only beyond (F_c + F_st) h / (J v_s) of about 18, so there
        kappa is the safety fraction of 15 and the viscous part costs nothing (FRICTION_BOUND). J is the
        apparent inertia of the joint's motor coordinate (hil.devices.drives.apparent_inertias, the same
        rule as the holding brake's default ramp). Hence the floor

            v_s >= (F_c + F_st) h / (kappa J - c h)   (explicit),   (F_c + F_st) h / (kappa J)   (midpoint).

        Under the midpoint schemes ELLA keeps its configured 1 mrad/s at every plan (at one 1 ms substep
        the ratio is 7.7 against 7.5: a 3 % wider smoothing on its elbow), a 10x friction fault widens it
        to 1.4 .. 2.7 mrad/s at its plan (RK4 at one substep would take 20 .. 28 mrad/s). Physically the
        smoothed model has no true stiction: below v_s it is a damper (F_c + F_st) / v_s, so a load |L| <
        F_c + F_st does not hold the joint still but lets it creep at v_s atanh(|L| / (F_c + F_st)), and it
        slides, with ever more of the full Coulomb torque, once faster than v_s. The configured
        ``coulomb_smoothing_rad_s`` is therefore a lower bound, kept where it is already stable; a wider
        v_s also flattens a Stribeck peak narrower than it (v_st). Scaled friction (DriveBank
        .set_friction_scale) may need a wider one: the bank calls this again after scaling. `inertia`:
        per joint apparent inertias (default: at the current pose). Prescribed joints keep theirs
        (friction does not move them)."""
        np.maximum(self._configured_smoothing, self.friction_smoothing_floor(inertia),
                   out=self.km.jpar[:, JP_COUL_VS])
        return self.coulomb_smoothing

    def reset(self) -> None:
        self.t = 0.0
        self.pos = self.asm.pos0.copy()
        self.vel = self.asm.vel0.copy()
        self.evaluate()

    def _warm_up(self) -> None:
        """Compile (or load from the cache) and run the step kernel once, on a copy of the state (the
        step with output stations: output_stations)."""
        p, v = self.pos.copy(), self.vel.copy()
        self._advance(*self.kernel_args, 0.0, p, v, self.tau, self.dt, self.plan.substeps, *self._method_arg)
        self.evaluate()

    def _warm_up_sampled(self) -> None:
        """output_stations' step kernel, as _warm_up (each costs the start-up a cache load)."""
        p, v = self.pos.copy(), self.vel.copy()
        self._step_and_sample(*self.kernel_args, 0.0, p, v, self.tau, self.dt, self.plan.substeps, self.method,
                              np.zeros(1, np.int64), np.zeros((1, STATION_FIELDS)))
        self.evaluate()

    def output_stations(self, stations: np.ndarray) -> np.ndarray:
        """Make the stations with these indices (``layout.station_names``) outputs of every step and
        return their buffer, (n, 24) in the layout of station()'s fields, filled now and after each
        step() within the same kernel call. A later call replaces the set."""
        self.out_index = np.ascontiguousarray(stations, dtype=np.int64)
        self.station_out = np.zeros((len(self.out_index), STATION_FIELDS))
        self._warm_up_sampled()
        for i, s in enumerate(self.out_index):
            self._station_state(*self.kernel_args, s, self.station_out[i])
        return self.station_out

    def step(self, tau: np.ndarray | None = None) -> None:
        """Advance one outer step dt with the drive torques tau (held over the step); with output
        stations, their kinematics at the new instant are computed in the same kernel call."""
        if tau is not None:
            self.tau[:] = tau
        if self.out_index is None:
            ok = self._advance(*self.kernel_args, self.t, self.pos, self.vel, self.tau, self.dt, self.plan.substeps,
                               *self._method_arg)
        else:
            ok = self._step_and_sample(*self.kernel_args, self.t, self.pos, self.vel, self.tau, self.dt,
                                       self.plan.substeps, self.method, self.out_index, self.station_out)
        self.t += self.dt
        if not ok:
            raise SimulationError(self.step_failure())

    def step_failure(self) -> str:
        """What a step that ended at the present time in a non-finite state (or met a singular inertia) says."""
        return (f"t = {self.t:.6f} s: non-finite state or singular inertia ({self.plan.describe()}); reduce dt, "
                "add substeps or use a midpoint scheme (fitted_midpoint, imex_midpoint)")

    def evaluate(self) -> np.ndarray:
        """Solve the accelerations at the current state (with the plant's formulation; the
        articulated-body work buffers that station(), energy() and power() read are filled too)."""
        evaluate(*self.kernel_args, self.t, self.pos, self.vel, self.tau, self.acc)
        if self._dae_solve is not None:
            self._dae_solve(*self.kernel_args, self.t, self.pos, self.vel, self.tau, self.pos,
                                       self.vel, 0.0, 0.0, self.acc)
        return self.acc

    def energy(self) -> tuple[float, float, float]:
        """(kinetic, gravity potential, elastic) energy in J at the current state."""
        prepare(*self.kernel_args, self.t, self.pos, self.vel)
        forward_kinematics(*self.kernel_args)
        energy(*self.kernel_args, self._e)
        return float(self._e[0]), float(self._e[1]), float(self._e[2])

    def power(self) -> tuple[float, float]:
        """(drive power in, dissipated power) in W at the current state."""
        self.evaluate()
        power(*self.kernel_args, self.tau, self._p)
        return float(self._p[0]), float(self._p[1])

    def station(self, name: str) -> dict[str, np.ndarray]:
        """World kinematics of a named station (call evaluate() first for the current state)."""
        s = self.layout.station_names.index(name)
        station_state(*self.kernel_args, s, self._st)
        o = self._st
        return {"position": o[0:3].copy(), "rotation": o[3:12].reshape(3, 3).copy(), "velocity": o[12:15].copy(),
                "angular_velocity": o[15:18].copy(), "specific_force": o[18:21].copy(),
                "angular_acceleration": o[21:24].copy()}

    @property
    def wrenches(self) -> np.ndarray:
        """Interaction wrench of every joint (n_joints x 6, updated in place by evaluate() and by each step
        with output stations): the spatial force [moment; force] the parent exerts on the joint's child
        body, in the child body frame, moment about its origin (the joint point); docs/model.md "Conventions"."""
        return self.work.dae_wrench if self.dae else self.work.fj

    @property
    def station_loads(self) -> np.ndarray:
        """External wrench at each output station (n_stations x 6, rows in layout.station_names' order): the
        spatial force [moment; force] in world axes, moment about the station's point [N m, N], held over each
        step; written in place (a co-simulated FMU's: hil.runtime.cosim), zero for none
        (hil.kernels.station_loads)."""
        return self.work.f_ext

    @property
    def joint_torques(self) -> np.ndarray:
        """Axis component of each joint's wrench (the link torque the joint transmits; a held or
        prescribed joint: the torque holding it), updated in place with wrenches."""
        return self.work.dae_tau_joint if self.dae else self.work.tau_joint

    def joint_wrench(self, joint: str) -> np.ndarray:
        """Spatial force [moment; force] the parent exerts on the joint's child body, in the child frame."""
        return self.wrenches[self.layout.joint_names.index(joint)].copy()

    def kernel_arrays_changed(self) -> None:
        """Take over a change of the kernel model's modal arrays made in place (a payload or stiffness fault):
        the fitted midpoint scheme's implicit blocks follow the modal stiffness."""
        if self.plan.method == "fitted_midpoint":
            midpoint_fit.implicit_blocks(self.km, self.km.fitted, self.plan.dt_s / self.plan.substeps)

    def plan_identity(self) -> dict:
        """What a run log records of the plan, and hil replay checks: the method, substeps, outer step and
        formulation, and a hash of the fitted midpoint's blocks (None for the other methods), which the
        planning code and the model alone decide."""
        fitted = (hashlib.sha256(np.ascontiguousarray(self.km.fitted).tobytes()).hexdigest()[:16]
                  if self.plan.method == "fitted_midpoint" else None)
        return {"method": self.plan.method, "substeps": self.plan.substeps, "dt_s": self.plan.dt_s,
                "formulation": self.formulation, "fitted_blocks_sha256": fitted}

    def fitted_blocks(self, asm: Assembled, substeps: int) -> np.ndarray:
        """The fitted midpoint scheme's blocks (KernelModel.fitted) for `asm` (this plant's model or a
        variant of it) at `substeps` per step, fitted at the initial state."""
        h = self.plan.dt_s / substeps
        return plan_cache.remembered(asm, "fitted", lambda: midpoint_fit.fit(asm, asm.pos0, h).blocks, h)

    def q(self) -> np.ndarray:
        return self.pos[: self.layout.n_joints]

    def eta(self, body: str) -> np.ndarray:
        k = self.layout.body_names.index(body)
        a = self.layout.n_joints + self.layout.mode_offsets[k]
        return self.pos[a: a + int(self.km.nm[k])]

    def equilibrium_eta(self) -> np.ndarray:
        """Put the arm at rest in its static equilibrium under gravity at the current joint angles and
        return the drive torques that hold it there (also held in Plant.tau); see
        hil.model.linearize.rest_state."""
        self.pos[:], hold = rest_state(self.asm, self.pos)
        self.vel[:] = 0.0
        self.tau[:] = hold
        self.evaluate()
        return hold


def apparent_inertias(plant: Plant) -> np.ndarray:
    """Link-side inertia a torque on each joint's motor coordinate accelerates at the plant's current
    pose (hil.model.linearize.motor_inertias of the plant's live arrays)."""
    return motor_inertias(plant.km, plant.layout, plant.pos, plant.t)
