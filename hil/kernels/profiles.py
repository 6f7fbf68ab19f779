"""Prescribed joint-angle laws evaluated inside the kernels (angle, rate, acceleration)."""
import numpy as np
from numba import njit
from .layout import MOTION_SPINUP, MOTION_CYCLOIDAL, MOTION_TABLE


@njit(cache=True)
def spinup(t, omega, T):
    """Smooth spin-up (Kane, Ryan & Banerjee 1987; seed 003 ex. 4.1): rate omega after T."""
    if t < T:
        c = 2.0 * np.pi / T
        q = omega / T * (0.5 * t * t + (np.cos(c * t) - 1.0) / (c * c))
        qd = omega / T * (t - np.sin(c * t) / c)
        qdd = omega / T * (1.0 - np.cos(c * t))
        return q, qd, qdd
    return omega * (t - 0.5 * T), omega, 0.0


@njit(cache=True)
def cycloidal(t, k, T):
    """Seed 004 eq. (44): q = k (t - T/pi sin(pi t / T)), rest to rest on [0, 2T], then held."""
    if t >= 2.0 * T:
        return 2.0 * k * T, 0.0, 0.0
    c = np.pi / T
    return k * (t - np.sin(c * t) / c), k * (1.0 - np.cos(c * t)), k * c * np.sin(c * t)


@njit(cache=True)
def table(t, tt, cc):
    """Piecewise cubic q(t) = c0 + c1 s + c2 s^2 + c3 s^3, s = t - t_i; held outside the table."""
    n = tt.shape[0]
    if t <= tt[0]:
        return cc[0, 0], 0.0, 0.0
    if t >= tt[n - 1]:
        return cc[n - 1, 0], 0.0, 0.0
    lo = 0
    hi = n - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tt[mid] <= t:
            lo = mid
        else:
            hi = mid
    s = t - tt[lo]
    c0, c1, c2, c3 = cc[lo, 0], cc[lo, 1], cc[lo, 2], cc[lo, 3]
    return c0 + s * (c1 + s * (c2 + s * c3)), c1 + s * (2.0 * c2 + 3.0 * s * c3), 2.0 * c2 + 6.0 * s * c3


@njit(cache=True)
def evaluate(prof_kind, prof_par, tab_off, tab_n, tab_t, tab_c, k, t):
    """(q, qd, qdd) of the prescribed joint k at time t."""
    kind = prof_kind[k]
    q0 = prof_par[k, 0]
    if kind == MOTION_SPINUP:
        q, qd, qdd = spinup(t, prof_par[k, 1], prof_par[k, 2])
    elif kind == MOTION_CYCLOIDAL:
        q, qd, qdd = cycloidal(t, prof_par[k, 1], prof_par[k, 2])
    elif kind == MOTION_TABLE:
        a = tab_off[k]
        n = tab_n[k]
        return table(t, tab_t[a:a + n], tab_c[a:a + n])
    else:
        q, qd, qdd = 0.0, 0.0, 0.0
    return q0 + q, qd, qdd
