"""One cycle of the motor drives on flat arrays (the model: hil.devices.drives, whose DriveBank
builds the parameter array and calls drive_step, or hil.kernels.cycle fuses it with the plant step)."""
import numpy as np
from numba import njit

MODE_TORQUE, MODE_CURRENT, MODE_VOLTAGE = 0, 1, 2

# columns of the per-joint parameter array the step kernels read (P_HOLD: the engaged brake's holding
# torque, 0 while released; P_STICK: its stick velocity v_b)
(P_MODE, P_GEAR, P_ETA, P_LN_ETA, P_ETA_BAND, P_AMP_PER_NM, P_KT, P_KE, P_INV_R, P_SUPPLY, P_IMAX, P_TMAX,
 P_DECAY, P_AVG, P_HOLD, P_STICK) = range(16)
N_PAR = 16
# rows of the output array: link torque, end-of-step current, step-average motor torque, brake torque
# while held, and the brake's memory of the motor coordinate's rate at the last update
O_TAU, O_CURRENT, O_MOTOR, O_BRAKE, O_RATE = range(5)
# rows of the flag array: clamped by a limit this cycle, held by the brake, a stiff joint to stop and hold
F_LIMITED, F_HELD, F_STOP = range(3)


@njit(cache=True)
def _clamp(x, limit):
    if x > limit:
        return limit, True
    if x < -limit:
        return -limit, True
    return x, False


@njit(cache=True)
def drive_step(par, command, vel, vidx, kt_scale, out, limited):
    """One cycle of every drive (the model: hil.devices.drives). out rows: link torque, end-of-step
    current, step-average motor torque; limited[k]: joint k was clamped. Returns any(limited)."""
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
        out[O_TAU, k] = tau
        limited[k] = lim
        any_limited |= lim
    return any_limited
