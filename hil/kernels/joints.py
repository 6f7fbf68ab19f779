"""Joint laws shared by both forward-dynamics kernels (hil.kernels.aba, hil.kernels.screw_dae):
prescribed motion, the link torque a joint receives (drive minus friction, or the Spong spring),
and the rotor equation of a Spong elastic joint.

Friction is linearly implicit where an integrator asks for it: taken at reference rates v* (the
``rates`` argument) with a slope s (at least 0) times the integrator's damping coefficient cD added to
the inertia the drive meets (a stiff joint's armature, a rotor's inertia), so that the solve meets
tau_f(v*) + s cD qdd ~ tau_f(v* + cD qdd). The midpoint schemes pass v* = the substep's start rates and
cD = h/2: the friction at the midpoint rates, as they take the modal damping; an explicit evaluation
passes the state's rates and cD = 0. The slope is the secant from v* to the rates of the state being
solved (the scheme's predicted midpoint rates in its second pass), the tangent at v* where they are the
same (its first pass): a joint sliding fast (the tanh flat, its tangent 0) that comes to rest within the
substep meets the steep part it crosses, where a tangent at v* would overshoot into a chatter of period
two. Linearised, the friction still chatters once its breakaway slope (F_c + F_st) h / (J v_s) passes
about 18 (a joint stopping from rates of 0.1 mrad/s to 1 rad/s under loads up to 0.9 of its Coulomb torque:
tools.friction_chatter):
hil.dynamics.plant.Plant.stabilize_friction keeps the smoothing v_s above that. ELLA's configured
friction stays below it at every plan, also at one 1 ms substep (7.7).

The model is read from the flat arrays (mi, mf) of hil.kernels.layout. Each function writes into
buffers given as (array, offset) pairs, so the articulated-body kernel passes its one work array
and the DAE kernel its own buffers without either creating views.
"""
import numpy as np

from .jit import kernel
from . import profiles
from .layout import (DIM_NB, DIM_NETA, DIM_NQ, JOINT_PRESCRIBED, JOINT_ROTOR_HELD, JP_BACKLASH, JP_BRAKE,
                     JP_BRAKE_VS, JP_COUL_VS, JP_STRIBECK, JP_STRIB_VS, MF_ARMATURE, MF_COULOMB, MF_DSPRING, MF_JPAR,
                     MF_KSPRING, MF_MOT_INERTIA, MF_VISCOUS, MI_DRIVE, MI_MOT, N_JP, at)


@kernel
def impose_prescribed_motion(mi, mf, t, pos, vel, out_pos, o_pos, out_vel, o_vel, out_qdd, o_qdd):
    """Copy the state (pos, vel) to out_pos[o_pos:], out_vel[o_vel:], with each prescribed joint
    at its profile's angle and rate at time t; its acceleration goes to out_qdd[o_qdd + k]."""
    for i in range(mi[DIM_NQ]):
        out_pos[at(o_pos + i)] = pos[at(i)]
        out_vel[at(o_vel + i)] = vel[at(i)]
    drive = mi[MI_DRIVE]
    for k in range(mi[DIM_NB]):
        if mi[at(drive + k)] == JOINT_PRESCRIBED:
            q, qd, qdd = profiles.evaluate(mi, mf, k, t)
            out_pos[at(o_pos + k)] = q
            out_vel[at(o_vel + k)] = qd
            out_qdd[at(o_qdd + k)] = qdd


@kernel
def link_torques(mi, mf, pos, o_pos, vel, o_vel, tau, tauj, o_tauj):
    """Link-side torque each joint receives before its friction (joint_friction_torques),
    tauj[o_tauj + k]: the drive torque tau[k], or for a Spong joint its spring torque (state at
    pos[o_pos:], vel[o_vel:])."""
    nb = mi[DIM_NB]
    rotors = nb + mi[DIM_NETA]
    mot = mi[MI_MOT]
    for k in range(nb):
        qd = vel[at(o_vel + k)]
        r = mi[at(mot + k)]
        if r >= 0:
            jp = mi[MF_JPAR] + k * N_JP
            deflection = pos[at(o_pos + rotors + r)] - pos[at(o_pos + k)]
            tauj[at(o_tauj + k)] = spring_torque(mf[at(mi[MF_KSPRING] + k)], mf[at(mi[MF_DSPRING] + k)],
                                                 mf[at(jp + JP_BACKLASH)], deflection, vel[at(o_vel + rotors + r)] - qd)
        else:
            tauj[at(o_tauj + k)] = tau[k]


@kernel
def joint_friction_torques(mi, mf, rates, vel, o_vel, cD, tauj, o_tauj, arm, o_arm):
    """Each stiff joint's friction at its reference rate rates[k] taken off tauj[o_tauj + k], and the
    inertia its drive meets beyond the link's, arm[o_arm + k] = n^2 J_r + cD s (the module docstring's
    linearly implicit friction, s toward the state's rate vel[o_vel + k]; a Spong joint's friction acts
    on its rotor: rotor_accelerations)."""
    mot = mi[MI_MOT]
    armature = mi[MF_ARMATURE]
    for k in range(mi[DIM_NB]):
        arm[at(o_arm + k)] = mf[at(armature + k)]
        if mi[at(mot + k)] < 0:
            f, cs = implicit_friction(mi, mf, k, rates[k], vel[at(o_vel + k)], cD)
            tauj[at(o_tauj + k)] -= f
            arm[at(o_arm + k)] += cs


@kernel
def implicit_friction(mi, mf, k, reference, state, cD):
    """Joint k's friction at its reference rate and cD times its slope (module docstring): the secant to the
    state's rate, the tangent where they are within 1e-8 of the smoothing apart; (tau_f, 0) with cD = 0."""
    if cD == 0.0:
        return joint_friction(mi, mf, k, reference)[0], 0.0
    f, s = joint_friction(mi, mf, k, reference)
    dv = state - reference
    if abs(dv) > 1e-8 * mf[at(mi[MF_JPAR] + k * N_JP + JP_COUL_VS)]:
        s = max((joint_friction(mi, mf, k, state)[0] - f) / dv, 0.0)
    return f, cD * s


@kernel
def rotor_accelerations(mi, mf, rates, vel, o_vel, cD, tau, tauj, o_tauj, acc):
    """Spong rotor equation (B + cD s) phi_ddot = tau - k (phi - q) - d (phi_dot - q_dot) - friction into
    acc[rotor index], the friction at the reference rates and its slope s toward the state's rotor rates
    vel[o_vel:] (module docstring); a rotor held by its brake (JOINT_ROTOR_HELD) does not accelerate."""
    nb = mi[DIM_NB]
    rotors = nb + mi[DIM_NETA]
    mot = mi[MI_MOT]
    drive = mi[MI_DRIVE]
    for k in range(nb):
        r = mi[at(mot + k)]
        if r < 0:
            continue
        if mi[at(drive + k)] == JOINT_ROTOR_HELD:
            acc[rotors + r] = 0.0
        else:
            f, cs = implicit_friction(mi, mf, k, rates[rotors + r], vel[at(o_vel + rotors + r)], cD)
            acc[rotors + r] = (tau[k] - tauj[at(o_tauj + k)] - f) / (mf[at(mi[MF_MOT_INERTIA] + k)] + cs)


@kernel
def dead_band(deflection, backlash):
    """Spring deflection beyond a dead band of total width `backlash` (0 inside, continuous at its edges)."""
    half = 0.5 * backlash
    if deflection > half:
        return deflection - half
    if deflection < -half:
        return deflection + half
    return 0.0


@kernel
def spring_torque(stiffness, damping, backlash, deflection, rate):
    """Spong joint torque k dz(phi - q) + d (phi_dot - q_dot) on the link. With backlash the gear teeth
    are apart inside the dead band: neither spring nor damper transmits torque there."""
    if backlash > 0.0 and abs(deflection) <= 0.5 * backlash:
        return 0.0
    return stiffness * dead_band(deflection, backlash) + damping * rate


@kernel
def friction(viscous, coulomb, smoothing, stribeck, stribeck_vs, brake, brake_vs, rate):
    """Friction torque opposing the rate and its slope d tau_f / dv (at least 0: the falling Stribeck
    branch is left explicit), (tau_f, s): viscous, tanh-smoothed Coulomb with an optional Stribeck
    breakaway torque decaying as exp(-(rate / v_st)^2), and a slipping holding brake, whose kinetic
    torque F_b is smoothed by a ramp saturating at v_b (hil.devices.drives states why a ramp):

    tau_f = c v + (F_c + F_s exp(-(v / v_st)^2)) tanh(v / v_s) + F_b clip(v / v_b, -1, 1)

    v_s (jpar JP_COUL_VS) is the configured smoothing, widened only where the substep cannot keep the
    slope (F_c + F_s) / v_s at rest stable (hil.dynamics.plant.Plant.stabilize_friction).
    """
    breakaway = coulomb
    d_breakaway = 0.0
    if stribeck > 0.0:
        x = rate / stribeck_vs
        e = stribeck * np.exp(-x * x)
        breakaway += e
        d_breakaway = -2.0 * x / stribeck_vs * e
    th = np.tanh(rate / smoothing)
    f = viscous * rate + breakaway * th
    s = viscous + d_breakaway * th + breakaway * (1.0 - th * th) / smoothing
    if brake > 0.0:
        ramp = rate / brake_vs
        f += brake * min(max(ramp, -1.0), 1.0)
        if -1.0 < ramp < 1.0:
            s += brake / brake_vs
    return f, max(s, 0.0)


@kernel
def joint_friction(mi, mf, k, rate):
    """friction() with joint k's parameters (viscous, coulomb and the jpar columns JP_*): (tau_f, slope)."""
    jp = mi[MF_JPAR] + k * N_JP
    return friction(mf[at(mi[MF_VISCOUS] + k)], mf[at(mi[MF_COULOMB] + k)], mf[at(jp + JP_COUL_VS)],
                    mf[at(jp + JP_STRIBECK)], mf[at(jp + JP_STRIB_VS)], mf[at(jp + JP_BRAKE)], mf[at(jp + JP_BRAKE_VS)],
                    rate)
