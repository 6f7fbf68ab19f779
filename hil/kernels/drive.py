"""One cycle of the motor drives and their brakes on flat arrays (the model: hil.devices.drives, whose
DriveBank builds the parameter array and calls drives_update; hil.kernels.cycle calls it before the plant
step)."""
from collections import namedtuple

import numpy as np

from .aba import forward_dynamics
from .jit import kernel
from .layout import JOINT_PRESCRIBED, JOINT_ROTOR_HELD, JOINT_TORQUE_DRIVEN

MODE_TORQUE, MODE_CURRENT, MODE_VOLTAGE = 0, 1, 2

# columns of the per-joint parameter array the step kernels read (P_HOLD: the engaged brake's holding
# torque, 0 while released; P_STICK: its stick velocity v_b; P_LOAD: an external load torque on the joint's
# drive coordinate, link side, added to the drive's: a co-simulated FMU's, hil.runtime.cosim)
(P_MODE, P_GEAR, P_ETA, P_LN_ETA, P_ETA_BAND, P_AMP_PER_NM, P_KT, P_KE, P_INV_R, P_SUPPLY, P_IMAX, P_TMAX,
 P_DECAY, P_AVG, P_HOLD, P_STICK, P_LOAD) = range(17)
N_PAR = 17
# rows of the output array: link torque, end-of-step current, step-average motor torque, brake torque
# while held, and the brake's memory of the motor coordinate's rate at the last update
O_TAU, O_CURRENT, O_MOTOR, O_BRAKE, O_RATE = range(5)
# rows of the flag array: clamped by a limit this cycle, held by the brake, a stiff joint to stop and hold
F_LIMITED, F_HELD, F_STOP = range(3)

# What the engaged brakes read and write besides the drives' own arrays: the joints' drive kinds and
# held angles (KernelModel.drive, prof_par: a stopped stiff joint is held as a prescribed one), the
# torques the joints transmit (the plant's), stop_joint's own work array, each brake's slipping
# torque (its probe) and scratch for two accelerations and the drive torques.
BrakeWork = namedtuple("BrakeWork", "drive prof_par tau_joint w kinetic acc tau")


# One bank of drives: the per-joint parameters (P_* columns), the index of each joint's motor
# coordinate in vel, the torque-constant multipliers, the outputs (O_* rows), the flags (F_* rows) and
# the brakes' work (BrakeWork).
DriveArrays = namedtuple("DriveArrays", "par vidx kt_scale out flags brakes")


@kernel
def drives_update(d, command, braking, mi, mf, t, pos, vel):
    """One cycle of every drive of the DriveArrays `d` (drive_step); while `braking` (any brake
    engaged) the brakes then stick or slip (brake_step) and each stiff joint a brake stops is stopped
    (stop_joint) and held at its angle as a prescribed joint. Returns any(limited)."""
    par, vidx, out, flags, brakes = d.par, d.vidx, d.out, d.flags, d.brakes
    if not braking:
        return drive_step(par, command, vel, vidx, d.kt_scale, out, flags[F_LIMITED])
    any_limited = drive_step(par, command, vel, vidx, d.kt_scale, out, flags[F_LIMITED])
    if brake_step(par, vel, vidx, out, flags, brakes.drive, brakes.tau_joint):
        for k in range(command.shape[0]):
            if flags[F_STOP, k]:
                for j in range(command.shape[0]):
                    brakes.tau[j] = out[O_TAU, j]
                stop_joint(mi, mf, brakes.w, t, pos, vel, brakes.tau, k, brakes.kinetic[k], brakes.acc[0],
                           brakes.acc[1])
                brakes.prof_par[k, 0] = pos[k]
                brakes.drive[k] = JOINT_PRESCRIBED
                flags[F_STOP, k] = False
    return any_limited


@kernel
def _clamp(x, limit):
    if x > limit:
        return limit, True
    if x < -limit:
        return -limit, True
    return x, False


@kernel
def drive_step(par, command, vel, vidx, kt_scale, out, limited):
    """One cycle of every drive (the model: hil.devices.drives). out rows: link torque (with the external
    load P_LOAD), end-of-step current, step-average motor torque; limited[k]: joint k was clamped. Returns
    any(limited)."""
    any_limited = False
    for k in range(command.shape[0]):
        mode = par[k, P_MODE]
        n = par[k, P_GEAR]
        s = kt_scale[k]
        v = vel[vidx[k]]
        if mode == MODE_TORQUE:
            t, lim = _clamp(command[k], par[k, P_TMAX])
            tau = s * t
            out[O_CURRENT, k] = t * par[k, P_AMP_PER_NM]
            out[O_MOTOR, k] = tau / (n * par[k, P_ETA])
        else:
            imax = par[k, P_IMAX]
            if mode == MODE_CURRENT:
                i_inf, lim = _clamp(command[k] * par[k, P_AMP_PER_NM], imax)
            else:
                duty, _ = _clamp(command[k], 1.0)
                i_inf = (duty * par[k, P_SUPPLY] - s * par[k, P_KE] * n * v) * par[k, P_INV_R]
                lim = False
            i0 = out[O_CURRENT, k]
            i_end = i_inf + (i0 - i_inf) * par[k, P_DECAY]
            i_avg = i_inf + (i0 - i_inf) * par[k, P_AVG]
            if mode == MODE_VOLTAGE:
                i_end, lim_end = _clamp(i_end, imax)
                i_avg, lim_avg = _clamp(i_avg, imax)
                lim = lim_end or lim_avg
            tm = s * par[k, P_KT] * i_avg
            factor = 1.0
            if tm != 0.0 and par[k, P_LN_ETA] != 0.0:
                factor = np.exp(par[k, P_LN_ETA] * np.tanh(v * par[k, P_ETA_BAND] / tm))
            tau = n * tm * factor
            out[O_CURRENT, k] = i_end
            out[O_MOTOR, k] = tm
        out[O_TAU, k] = tau + par[k, P_LOAD]
        limited[k] = lim
        any_limited |= lim
    return any_limited


@kernel
def brake_step(par, vel, vidx, out, flags, drive, tau_joint):
    """Stick or slip every engaged brake for the coming step (hil.devices.drives' docstring), after drive_step
    wrote this cycle's torques. flags[F_HELD, k]: joint k's motor coordinate is held; out[O_BRAKE]
    the brake torque T_b = R - tau holding it. A Spong rotor is stopped and held here (it has no
    inertial coupling); a stiff joint to be held is marked in flags[F_STOP] for stop_joint, and the
    return value says whether there is one."""
    held = flags[F_HELD]
    any_stop = False
    for k in range(held.shape[0]):
        hold = par[k, P_HOLD]
        if hold == 0.0:
            continue
        i = vidx[k]
        if held[k]:
            t_b = tau_joint[k] - out[O_TAU, k]
            if abs(t_b) <= hold:
                out[O_BRAKE, k] = t_b
            else:
                held[k] = False
                drive[k] = JOINT_TORQUE_DRIVEN
                out[O_BRAKE, k] = 0.0
            continue
        v = vel[i]
        v_prev = out[O_RATE, k]
        out[O_RATE, k] = v
        if abs(v) < par[k, P_STICK] and (abs(v) <= abs(v_prev) or v * v_prev < 0.0):
            held[k] = True
            out[O_RATE, k] = 0.0     # a coordinate freed from rest then speeds up away from 0
            out[O_BRAKE, k] = 0.0
            if i == k:
                flags[F_STOP, k] = True
                any_stop = True
            else:
                vel[i] = 0.0
                drive[k] = JOINT_ROTOR_HELD
    return any_stop


@kernel
def stop_joint(mi, mf, w, t, pos, vel, tau, k, probe, acc0, acc1):
    """Stop free stiff joint k by an impulsive torque at the joint: every free rate jumps by
    -v_k c / c_k, c = M^-1 e_k the arm's acceleration per unit torque at the joint (the difference of
    two articulated-body solves `probe` N m apart; held joints stay held). A perfectly inelastic
    stop: it keeps the momenta of the other free coordinates and takes out the kinetic energy
    1/2 v_k^2 / c_k. tau: a scratch copy of the drive torques; w: a work array of its own (the
    plant's holds the last step's reactions)."""
    forward_dynamics(mi, mf, w, t, pos, vel, tau, pos, vel, 0.0, 0.0, acc0)
    tau[k] += probe
    forward_dynamics(mi, mf, w, t, pos, vel, tau, pos, vel, 0.0, 0.0, acc1)
    scale = -vel[k] / (acc1[k] - acc0[k])
    for i in range(vel.shape[0]):
        vel[i] += scale * (acc1[i] - acc0[i])
    vel[k] = 0.0
