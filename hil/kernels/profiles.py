"""Prescribed joint-angle laws evaluated inside the kernels (angle, rate, acceleration)."""
import numpy as np
from .jit import kernel
from .layout import (DIM_NB, DIM_NQ, JOINT_PRESCRIBED, MF_PROF_PAR, MF_TAB_C, MF_TAB_T, MI_PROF_KIND, MI_TAB_N,
                     MI_TAB_OFF, MOTION_CYCLOIDAL, MOTION_SPINUP, MOTION_TABLE, at, drive_of)


@kernel
def spinup(t, omega, T):
    """Smooth spin-up (Kane, Ryan & Banerjee 1987; seed 003 ex. 4.1): rate omega after T."""
    if t < T:
        c = 2.0 * np.pi / T
        q = omega / T * (0.5 * t * t + (np.cos(c * t) - 1.0) / (c * c))
        qd = omega / T * (t - np.sin(c * t) / c)
        qdd = omega / T * (1.0 - np.cos(c * t))
        return q, qd, qdd
    return omega * (t - 0.5 * T), omega, 0.0


@kernel
def cycloidal(t, k, T):
    """Seed 004 eq. (44): q = k (t - T/pi sin(pi t / T)), rest to rest on [0, 2T], then held."""
    if t >= 2.0 * T:
        return 2.0 * k * T, 0.0, 0.0
    c = np.pi / T
    return k * (t - np.sin(c * t) / c), k * (1.0 - np.cos(c * t)), k * c * np.sin(c * t)


@kernel
def table(t, mf, ot, oc, n):
    """Piecewise cubic q(t) = c0 + c1 s + c2 s^2 + c3 s^3, s = t - t_i, of the n samples with times at
    mf[ot:] and coefficient rows (4 each) at mf[oc:]; held outside the table."""
    if t <= mf[at(ot)]:
        return mf[at(oc)], 0.0, 0.0
    if t >= mf[at(ot + n - 1)]:
        return mf[at(oc + 4 * (n - 1))], 0.0, 0.0
    lo = 0
    hi = n - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mf[at(ot + mid)] <= t:
            lo = mid
        else:
            hi = mid
    s = t - mf[at(ot + lo)]
    c = oc + 4 * lo
    c0, c1, c2, c3 = mf[at(c)], mf[at(c + 1)], mf[at(c + 2)], mf[at(c + 3)]
    return c0 + s * (c1 + s * (c2 + s * c3)), c1 + s * (2.0 * c2 + 3.0 * s * c3), 2.0 * c2 + 6.0 * s * c3


@kernel
def evaluate(mi, mf, k, t):
    """(q, qd, qdd) of the prescribed joint k at time t."""
    kind = mi[at(mi[MI_PROF_KIND] + k)]
    par = mi[MF_PROF_PAR] + 4 * k
    q0 = mf[at(par)]
    if kind == MOTION_SPINUP:
        q, qd, qdd = spinup(t, mf[at(par + 1)], mf[at(par + 2)])
    elif kind == MOTION_CYCLOIDAL:
        q, qd, qdd = cycloidal(t, mf[at(par + 1)], mf[at(par + 2)])
    elif kind == MOTION_TABLE:
        a = mi[at(mi[MI_TAB_OFF] + k)]
        return table(t, mf, mi[MF_TAB_T] + a, mi[MF_TAB_C] + 4 * a, mi[at(mi[MI_TAB_N] + k)])
    else:
        q, qd, qdd = 0.0, 0.0, 0.0
    return q0 + q, qd, qdd


@kernel
def end_of_step(mi, mf, t, pos, vel):
    """The tail of every step: the prescribed joints put on their profile at t; False on a non-finite state."""
    for k in range(mi[DIM_NB]):
        if drive_of(mi, k) == JOINT_PRESCRIBED:
            q, qd, _ = evaluate(mi, mf, k, t)
            pos[k] = q
            vel[k] = qd
    ok = True
    for i in range(mi[DIM_NQ]):
        if not (np.isfinite(pos[i]) and np.isfinite(vel[i])):
            ok = False
    return ok
