"""Motor drives: a permanent-magnet DC motor and gear behind every joint, updated once per cycle.

Model of one drive (motor quantities at the motor shaft, torques at the joint, link side)::

    L di/dt = u - R i - s Ke w_m        winding; w_m = n v, the motor speed
    tau_m   = s Kt i                     electromagnetic motor torque
    tau     = n tau_m eta^(+1 | -1)      link-side torque through the gear

plus, on tau, the joint's external load torque (``load``, 0 unless a co-simulated FMU sets it).
n is the gear ratio (motor angle / joint angle), v the rate of the motor coordinate: the joint
rate, or the rotor rate of a Spong elastic joint (stored referred to the link side). s is
``kt_scale`` (1 nominal; a demagnetised motor loses flux, which lowers Kt and Ke alike).
Positive current, motor torque and link torque all accelerate the joint positively (docs/model.md
"Conventions").

Gear efficiency eta depends on the direction of the power flow: the link receives n tau_m eta
when the motor drives the load (tau_m v > 0) and n tau_m / eta when the load drives the motor
(tau_m v < 0; the gear losses then add to the motor's braking torque). The switch at v = 0 is
smoothed: the factor is eta^tanh(v / v_eta), v_eta = n tau_m |ln eta| dt / J (signed like tau_m;
J the apparent inertia of the motor coordinate, dt the step). Near rest the loss then acts like a
friction of slope J / dt, half the stability bound 2 J / dt of a torque held over the step; a
sharp switch would chatter at rest under load. At standstill the gear passes n tau_m.

Command interfaces, one value per joint and cycle (``DriveSpec.interface``):

* ``torque``: an ideal link-side torque source, tau = s * command whatever the power flow; only
  the limits apply (the current limit as the torque n eta Kt i_max). `current` is then the
  current the drive would send, command / (n eta Kt).
* ``current``: a drive in cyclic synchronous torque mode. The link-side torque command becomes a
  current reference i_ref = command / (n eta Kt) (nominal Kt, the drive's own conversion),
  clamped to the current limit; the current loop is first order, di/dt = 2 pi f_bw (i_ref - i).
* ``voltage``: the command is a PWM duty in [-1, 1] of ``supply_V`` across the winding.

The current follows i(t) = i_inf + (i0 - i_inf) exp(-t / tau_e) over the step, integrated
exactly: tau_e = 1 / (2 pi f_bw), i_inf = i_ref (current); tau_e = L / R, i_inf = (u - s Ke w_m) / R
with w_m frozen at the step start (voltage), so the electrical part is stable for any tau_e,
also tau_e << dt. The step-average current gives the torque held over the plant step; `current`
is the end-of-step current (the truth a current sensor samples). The back-EMF couples the motor
speed explicitly: a damping c = n^2 s^2 Kt Ke / R at the joint, held over the step, stable while
c dt / J < 2 (a warning on construction above 1).

Limits: the torque limit (link side) clamps the command (torque), or becomes the current
tau_max / (n eta Kt) (current, voltage); the current limit clamps the current reference
(current) or the winding current (voltage: the bridge's chopper). Both are stated for the motor
driving the load: back-driven, the gear passes up to tau_max / eta^2. `torque_limited` says
whether any joint was clamped this cycle.

Joint friction acts inside the plant's substeps (hil.kernels.joints.friction); the bank scales it by
writing the kernel's arrays in place (``KernelModel.viscous``, ``coulomb``, the columns of ``jpar``).
The smoothed Coulomb (and Stribeck) friction is a damper of slope c + (F_c + F_st) / v_s at rest: RK4
integrates it explicitly in every substep h, the midpoint schemes linearly implicitly (which chatters
only beyond (F_c + F_st) h / (J v_s) of about 18). Its smoothing velocity is therefore at least
(F_c + F_st) h / (kappa J - c h) under RK4, (F_c + F_st) h / (kappa J) under the midpoint schemes
(kappa: the integrator's safety fraction times hil.dynamics.integrator_plan.FRICTION_BOUND, J the
apparent inertia below), which Plant.stabilize_friction applies on the plant's construction, again when
the bank is built (at the bank's pose) and after every set_friction_scale (ten times the friction needs
a ten times wider floor). The configured ``coulomb_smoothing_rad_s`` is a lower bound, kept where it
is already stable: below v_s the smoothed model creeps under loads below its Coulomb level instead of
sticking (Plant.stabilize_friction). ELLA under its plan (the fitted midpoint, 3 substeps of 333 us)
keeps its configured 1 mrad/s, and 1.2, 1.3 and 1.7 mrad/s for yaw, pitch and elbow at ten times the
friction; RK4 pinned to one 1 ms substep needs 1.97, 2.14 and 2.72 mrad/s, and 20.0, 21.9 and 27.8 at
ten times. The floor scales with h: should the plant's substeps change at run time (a payload fault,
hil.faults.engine), restabilize() recomputes it, and the brake ramps below, for the new h.

Holding brake: a stick-slip brake on the motor coordinate (the joint angle, or the rotor angle of a
Spong joint), link side: it holds up to F_s (``brake_torque_N_m``) and slips with the kinetic torque
F_k <= F_s (``brake_kinetic_N_m``, default F_s). Signs: the brake torque T_b acts on the motor
coordinate like the drive torque tau, positive accelerating it positively. Let R be the torque the
coordinate must receive from drive and brake together to stay at rest (gravity, the arm's motion,
elastic forces; joint friction is zero at rest); held, the brake supplies T_b = R - tau, so it holds
the motor torque commanded while held besides the load. update() decides once per cycle, after the
drive torques and before the step, from the previous step:

* stick: an engaged brake holds its coordinate when it is slower than v_b and not speeding up away
  from rest (|v| <= |v| of the previous cycle, or v changed sign): it stops it, and holds the angle
  exactly. A stiff joint is stopped by an impulsive torque, a perfectly inelastic stop: every free
  rate jumps by -v_k M^-1 e_k / (M^-1)_kk (M over the free coordinates), the other coordinates keep
  their momenta and the kinetic energy 1/2 v_k^2 / (M^-1)_kk goes. It then becomes a prescribed
  joint of constant angle (``KernelModel.drive`` = JOINT_PRESCRIBED, ``prof_par[k, 0]`` = its
  angle), for which the articulated-body sweep returns R as the joint's link torque
  ``Work.tau_joint``. A Spong joint's rotor, coupled to the rest by its spring only, just stops
  (JOINT_ROTOR_HELD) while its link moves on the spring, whose torque is R (also ``Work.tau_joint``).
* slip: every cycle while held, T_b is formed from the last step's R and this cycle's tau;
  |T_b| > F_s frees the coordinate, and so does releasing the brake (at once). A slipping engaged
  brake is the kinetic friction F_k clip(v / v_b, -1, 1) inside the substeps.

The kinetic ramp is linear below v_b, a damper F_k / v_b integrated explicitly in every substep h;
beyond the method's real-axis stability bound (F_k h / (v_b J) > 2.785 for RK4, 2 for the midpoint
predictor) the rate chatters. The default v_b = F_k h / (safety x bound x J) (safety: the
integrator's safety fraction) is the stiffest stable ramp and the speed the brake alone takes out
in about one substep, so stopping a slower coordinate at once stands for the brake stopping it
within the step. A ramp rather than a tanh: a load |L| < F_k slows a slipping coordinate to its
creep v_b |L| / F_k < v_b, where it sticks, whereas a tanh would let loads above tanh(1) F_k creep
faster than v_b for ever. A load F_k < |L| <= F_s is held from rest but not caught while slipping
(static above kinetic friction).

Consequences of looking back one step: a brake that locks under a load above F_s holds for that one
step, and in the cycle that locks R is not known yet (``brake_reaction`` reads 0). A held coordinate
has zero rate, so the power bookkeeping (hil.kernels.outputs.power) sees no work from its drive or
brake; the stop at locking takes out kinetic energy outside the integrated power (at most
1/2 J v_b^2, J the apparent inertia), and never adds any. Stopping a stiff joint costs two
articulated-body solves in that cycle (about 30 us for ELLA). ELLA (its plan: 3 substeps of 333 us):
the pitch brake (F_s = F_k = 160 N m, J = 0.34 kg m^2, v_b = 0.16 rad/s, a stop taking out at most
0.004 J) holds the horizontal arm (R = 98 N m) with no creep at all.
"""
from __future__ import annotations

import math
import warnings
from typing import Sequence

import numpy as np

from config_schema import Problem, UserError, raise_problem
from hil.model.kernel_arrays import make_work
from hil.model.spec import (INTERFACE_CURRENT, INTERFACE_TORQUE, INTERFACE_VOLTAGE, INTERFACES, DriveSpec,
                    drive_problems)
from hil.dynamics.plant import REAL_AXIS_STABILITY, Plant, apparent_inertias
from hil.kernels.drive import (MODE_TORQUE, MODE_CURRENT, MODE_VOLTAGE, P_MODE, P_GEAR, P_ETA,
                               P_LN_ETA, P_ETA_BAND, P_AMP_PER_NM, P_KT, P_KE, P_INV_R, P_SUPPLY,
                               P_IMAX, P_TMAX, P_DECAY, P_AVG, P_HOLD, P_STICK, P_LOAD, N_PAR, O_BRAKE,
                               O_RATE, F_LIMITED, F_HELD, BrakeWork, DriveArrays, drives_update)
from hil.kernels.layout import JOINT_PRESCRIBED, JOINT_TORQUE_DRIVEN, JP_STRIBECK, JP_BRAKE, JP_BRAKE_VS

__all__ = ["DriveBank", "DriveSpec", "apparent_inertias", "INTERFACES"]

_MODES = {INTERFACE_TORQUE: MODE_TORQUE, INTERFACE_CURRENT: MODE_CURRENT, INTERFACE_VOLTAGE: MODE_VOLTAGE}


def _parameters(spec: DriveSpec, gear: float, inertia: float, dt: float) -> np.ndarray:
    """One row of the step kernel's parameter array."""
    p = np.zeros(N_PAR)
    eta, kt = spec.gear_efficiency, spec.torque_constant_N_m_A
    p[P_MODE] = _MODES[spec.interface]
    p[P_GEAR] = gear
    p[P_ETA] = eta
    p[P_LN_ETA] = math.log(eta)
    p[P_ETA_BAND] = inertia / (gear * abs(math.log(eta)) * dt) if eta < 1 else 0.0
    p[P_KT] = kt
    p[P_KE] = spec.back_emf_V_s_rad
    p[P_INV_R] = 1.0 / spec.resistance_ohm if spec.resistance_ohm > 0 else 0.0
    p[P_SUPPLY] = spec.supply_V
    per_amp = gear * eta * kt                        # link torque per ampere, motor driving
    if per_amp > 0:
        p[P_AMP_PER_NM] = 1.0 / per_amp
        p[P_IMAX] = min(spec.current_limit_A, spec.torque_limit_N_m / per_amp)
        p[P_TMAX] = min(spec.torque_limit_N_m, per_amp * spec.current_limit_A)
    else:                                            # no Kt: no current limit either (drive_problems)
        p[P_IMAX] = spec.current_limit_A
        p[P_TMAX] = spec.torque_limit_N_m
    if spec.interface == INTERFACE_CURRENT:
        tau_e = 1.0 / (2.0 * math.pi * spec.current_bandwidth_hz)
    elif spec.interface == INTERFACE_VOLTAGE:
        tau_e = spec.inductance_H / spec.resistance_ohm
    else:
        tau_e = 0.0                                  # the ideal source follows at once
    p[P_DECAY] = math.exp(-dt / tau_e) if tau_e > 0 else 0.0
    p[P_AVG] = tau_e / dt * -math.expm1(-dt / tau_e) if tau_e > 0 else 0.0
    return p


class DriveBank:
    """The motor drives of a plant's joints. Call update(command) once per cycle, before the plant
    step, and pass the returned link-side torques to ``Plant.step``.

    Arrays (preallocated, updated in place, one entry per joint):
      tau           link-side torque of the last update [N m]
      current       motor current at the end of the step [A] (the current sensor's truth)
      motor_torque  step-average electromagnetic motor torque [N m, motor shaft]
      limited       the joint's command or current was clamped by a limit this cycle
      kt_scale      torque-constant multiplier (fault "torque constant loss"), 1.0 nominal;
                    write it in place
      load          an external load torque on the joint's drive coordinate [N m, link side],
                    added to the drive's (a co-simulated FMU's: hil.runtime.cosim), 0 nominal;
                    write it in place
      brake_held    the brake holds the joint's motor coordinate at rest over the coming step
      brake_reaction  torque the brake exerts to hold it, T_b = R - tau [N m, link side, signed
                    like tau]; 0 while not held and in the cycle that locks (module docstring)
      friction_scale, brake_engaged   as set by set_friction_scale() and set_brake()
      gear, inertia   gear ratio, apparent inertia of the motor coordinate at the joint [kg m^2]
      brake_torque, brake_kinetic, brake_velocity   holding torque F_s, slipping torque F_k
                    [N m, link side] and stick velocity v_b [rad/s] (read only)
      coulomb_smoothing  effective smoothing velocity v_s of each joint's Coulomb and Stribeck
                    friction [rad/s] at the current friction scale (a copy; module docstring)
    ``torque_limited`` is any(limited) of the last update; ``names``, ``interfaces`` and ``specs``
    follow the joint order.
    """

    def __init__(self, plant: Plant, specs: Sequence[DriveSpec | None] | None = None):
        """`specs`: one DriveSpec (or None: an ideal torque drive without limits) per joint;
        default: each joint's ``Joint.motor`` from the plant's model."""
        lay = plant.layout
        nj = lay.n_joints
        joints = [b.joint for b in plant.asm.model.bodies]
        specs = [j.motor for j in joints] if specs is None else list(specs)
        if len(specs) != nj:
            raise ValueError(f"{len(specs)} drive specs for {nj} joints ({', '.join(lay.joint_names)})")
        self.specs = [s if s is not None else DriveSpec() for s in specs]
        self._check_specs(plant)
        self.plant = plant
        self.names = list(lay.joint_names)
        self.interfaces = tuple(s.interface for s in self.specs)
        self.gear = np.array([j.gear_ratio for j in joints], float)
        self.inertia = apparent_inertias(plant)
        self.vidx = np.array([lay.motor_index(k) if lay.motor_of_joint[k] >= 0 else k for k in range(nj)], np.int64)
        self.par = np.array([_parameters(s, self.gear[k], self.inertia[k], plant.dt)
                              for k, s in enumerate(self.specs)]).reshape(nj, N_PAR)
        self.outputs = np.zeros((5, nj))
        self.tau, self.current, self.motor_torque, self.brake_reaction = self.outputs[:O_RATE]
        self.flags = np.zeros((3, nj), bool)
        self.limited, self.brake_held = self.flags[F_LIMITED], self.flags[F_HELD]
        self.torque_limited = False
        self.kt_scale = np.ones(nj)
        self.friction_scale = np.ones(nj)
        self.brake_engaged = np.zeros(nj, bool)
        self.braking = False                   # any brake engaged: update() lets the brakes stick or slip
        self.brake_torque = np.array([s.brake_torque_N_m for s in self.specs], float)
        self.brake_kinetic = np.array([s.brake_torque_N_m if s.brake_kinetic_N_m is None else s.brake_kinetic_N_m
                                       for s in self.specs], float)
        self.brake_velocity = self._brake_smoothing()
        self.par[:, P_STICK] = self.brake_velocity
        self.load = self.par[:, P_LOAD]
        km = plant.km
        self._drive = km.drive
        # stop_joint's work array is its own, so that the plant's keeps its reactions
        self.brake_work = BrakeWork(drive=km.drive, prof_par=km.prof_par, tau_joint=plant.joint_torques,
                                    w=make_work(km).w, kinetic=self.brake_kinetic, acc=np.zeros((2, lay.nq)),
                                    tau=np.zeros(nj))
        self.arrays = DriveArrays(self.par, self.vidx, self.kt_scale, self.outputs, self.flags, self.brake_work)
        self._nominal_friction = np.column_stack([km.viscous, km.coulomb, km.jpar[:, JP_STRIBECK]])
        km.jpar[:, JP_BRAKE] = 0.0
        km.jpar[:, JP_BRAKE_VS] = self.brake_velocity
        plant.stabilize_friction(self.inertia)          # at this bank's pose (the plant's: at its construction)
        self._check_back_emf_coupling()

    # ------------------------------------------------------------------ per cycle
    def update(self, command: np.ndarray) -> np.ndarray:
        """Advance every drive over one step with `command` (per joint: link-side torque [N m] for
        the torque and current interfaces, PWM duty in [-1, 1] for voltage), the motor speed taken
        from the plant at the step start; then let each engaged brake stick or slip (module
        docstring). Returns `tau`, the link-side torques for the plant step."""
        plant = self.plant
        self.torque_limited = drives_update(self.arrays, command, self.braking, *plant.kernel_args[:2], plant.t,
                                            plant.pos, plant.vel)
        return self.tau

    def reset(self) -> None:
        """Zero the currents and outputs (the electrical state) and free the held joints; engaged
        brakes stay engaged and hold again from the next update. With Plant.reset(), call it first:
        the plant's reset would keep a stiff joint the brake holds at its held angle."""
        for k in np.flatnonzero(self.brake_held):
            self._free(k)
        self.outputs[:] = 0.0
        self.limited[:] = False
        self.torque_limited = False

    # ------------------------------------------------------------------ run-time switches
    def set_brake(self, joint: int | str, engaged: bool) -> None:
        """Engage a brake (from the next update it holds the motor coordinate when slow, and slips
        with its kinetic torque) or release it (a held coordinate is free at once)."""
        k = self._index(joint)
        if engaged and not self.brake_torque[k] > 0:
            raise UserError(f"joint {self.names[k]!r} has no brake (brake_torque_N_m = 0)")
        self.brake_engaged[k] = engaged
        self.braking = bool(self.brake_engaged.any())
        self.par[k, P_HOLD] = self.brake_torque[k] if engaged else 0.0
        self.plant.km.jpar[k, JP_BRAKE] = self.brake_kinetic[k] if engaged else 0.0
        if engaged:
            self.outputs[O_RATE, k] = self.plant.vel[self.vidx[k]]    # a slow coordinate sticks at the next update
        elif self.brake_held[k]:
            self._free(k)

    def _free(self, k: int) -> None:
        """Let go of a held motor coordinate (at rest; the plant integrates it again)."""
        self.brake_held[k] = False
        self._drive[k] = JOINT_TORQUE_DRIVEN
        self.outputs[O_BRAKE, k] = 0.0

    def command_for_torque(self, tau: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Each drive's command for the link-side torques `tau` (the emulator's safe states): the
        torque itself for the torque and current interfaces, for a voltage drive the duty that
        gives it at the present motor speed with the motor driving the load,
        (R tau / (n eta Kt) + Ke n v) / supply_V, clipped to [-1, 1]. `out` may be `tau`."""
        out[:] = tau
        for k, spec in enumerate(self.specs):
            if spec.interface == INTERFACE_VOLTAGE:
                n, v = self.gear[k], self.plant.vel[self.vidx[k]]
                volts = (spec.resistance_ohm * tau[k] / (n * spec.gear_efficiency * spec.torque_constant_N_m_A)
                         + spec.back_emf_V_s_rad * n * v)
                out[k] = min(max(volts / spec.supply_V, -1.0), 1.0)
        return out

    def set_friction_scale(self, joint: int | str, factor: float) -> None:
        """Scale the joint's viscous, Coulomb and Stribeck friction to `factor` x nominal, and widen
        (or narrow back) its Coulomb smoothing to the stable floor for the scaled friction
        (``coulomb_smoothing``; module docstring)."""
        if not factor >= 0:
            raise UserError(f"friction scale {factor}: expected a factor >= 0")
        k = self._index(joint)
        km = self.plant.km
        km.viscous[k], km.coulomb[k], km.jpar[k, JP_STRIBECK] = factor * self._nominal_friction[k]
        self.friction_scale[k] = factor
        self.plant.stabilize_friction(self.inertia)

    @property
    def coulomb_smoothing(self) -> np.ndarray:
        """Effective smoothing velocity v_s of each joint's Coulomb and Stribeck friction [rad/s]."""
        return self.plant.coulomb_smoothing

    def restabilize(self) -> None:
        """Recompute what the substep h = dt / substeps sets, after the plant's substeps changed (a
        payload fault raising them while it lasts, hil.faults.engine): each brake's ramp width and stick
        velocity v_b (``brake_velocity``, in place; a configured brake_smoothing_rad_s stays) and each
        joint's Coulomb smoothing floor at the current friction scales (Plant.stabilize_friction at
        this bank's inertias). Allocates a few small arrays; no compilation."""
        self.brake_velocity[:] = self._brake_smoothing()
        self.par[:, P_STICK] = self.brake_velocity
        self.plant.km.jpar[:, JP_BRAKE_VS] = self.brake_velocity
        self.plant.stabilize_friction(self.inertia)

    def _index(self, joint: int | str) -> int:
        if isinstance(joint, str):
            return self.names.index(joint)
        if not 0 <= joint < len(self.names):
            raise IndexError(f"joint index {joint}: expected 0 .. {len(self.names) - 1}")
        return int(joint)

    # ------------------------------------------------------------------ set-up
    def _brake_smoothing(self) -> np.ndarray:
        """Ramp width and stick velocity v_b of each brake: the configured one, or the stiffest ramp that
        the substep integration keeps stable, F_k h / (safety x bound x J) (module docstring)."""
        plan = self.plant.plan
        h = plan.dt_s / plan.substeps
        kappa = self.plant.asm.model.integrator.safety * REAL_AXIS_STABILITY[plan.method]
        out = np.ones(len(self.specs))
        for k, spec in enumerate(self.specs):
            if spec.brake_smoothing_rad_s is not None:
                out[k] = spec.brake_smoothing_rad_s
            elif spec.brake_torque_N_m > 0:
                out[k] = self.brake_kinetic[k] * h / (kappa * self.inertia[k])
        return out

    def _check_specs(self, plant: Plant) -> None:
        """Refuse an invalid spec (hil.model.spec.drive_problems) or a brake on a prescribed joint with the
        ConfigError (a ValueError) a preset with those values gets."""
        model = plant.asm.model
        for body, spec, kind in zip(model.bodies, self.specs, plant.km.drive):
            problems = drive_problems(spec)
            if spec.brake_torque_N_m > 0 and kind == JOINT_PRESCRIBED:
                problems.append(Problem("brake_torque_N_m", spec.brake_torque_N_m,
                                        "expected no brake on a prescribed joint (its profile moves it)"))
            raise_problem(model.source, f"body[{body.name}].joint.motor", problems)

    def _check_back_emf_coupling(self) -> None:
        """Voltage drives: the back-EMF damping n^2 Kt Ke / R, held over a step, must stay below 2 J / dt."""
        for k, spec in enumerate(self.specs):
            if spec.interface != INTERFACE_VOLTAGE:
                continue
            c = self.gear[k] ** 2 * spec.torque_constant_N_m_A * spec.back_emf_V_s_rad / spec.resistance_ohm
            ratio = c * self.plant.dt / self.inertia[k]
            if ratio > 1.0:
                warnings.warn(f"joint {self.names[k]!r}: back-EMF damping n^2 Kt Ke / R = {c:.3g} N m s/rad gives "
                              f"c dt / J = {ratio:.2f} (J = {self.inertia[k]:.3g} kg m^2); the frozen-speed coupling "
                              "is unstable above 2", RuntimeWarning, stacklevel=3)
