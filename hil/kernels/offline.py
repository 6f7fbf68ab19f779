"""Offline steps (``hil simulate``): drive torques from a torque table at every stage's time, and RK4 with
an embedded error estimate for an error-controlled substep count. The real-time loop keeps the
zero-order hold of hil.kernels.integrate (a DAC holds its output over the period).

Input: over the outer step from t to t + dt the torque at a stage time s is tau0 (zero-order hold: an
empty table) or the torque table's own linear interpolation at s (held constant outside the table),
whatever the table's resolution: a table finer than the step is seen in full, one no finer than the
step is the linear interpolation between the step's ends.

Error estimate: classical RK4 with its stages k1..k4 and k5 = f(y_n+1) (the first stage of the next
substep, which reuses it: first same as last) gives the embedded third-order solution
y + h/6 (k1 + 2 k2 + 2 k3 + k5); its difference to the fourth-order one,

    e = h/6 (k4 - k5)      (positions: h/6 (v + h k3 - v_n+1); rates: h/6 (a_4 - a_5)),

is O(h^4): the local error of the third-order solution, which bounds that of the fourth-order one.
Five evaluations per substep, four when the next substep of the same step reuses k5.

The midpoint schemes take their substeps from the real-time loop's integrators (hil.kernels.integrate
.substep, hil.kernels.fitted_midpoint.substep) with the torque at each substep's midpoint; RK4 has
its own substep here, for the torque at each stage's time, the stored k5 and the error estimate.
"""
from collections import namedtuple

import numpy as np

from .jit import kernel
from . import fitted_midpoint, profiles
from .aba import forward_dynamics
from .formulation import AbaPlant
from . import integrate
from .integrate import stage_state, store_stage
from .layout import (DIM_NQ, METHOD_FITTED, METHOD_IMEX, METHOD_RK4, W_ACC, W_K1, W_K2, W_K3, W_K4, W_PE, W_PS,
                     W_VS)

TAU, V4, K5, OUT = range(4)       # rows of the scratch array (make_scratch)


# The drive torques over a step: tau0 held, or (table_t not empty) the table's rows table_tau[i] at
# times table_t[i], interpolated (torque_at).
TorqueInput = namedtuple("TorqueInput", "tau0 table_t table_tau")


def make_scratch(nq: int, nj: int) -> np.ndarray:
    """Buffers for advance (allocated once per run): the torque at a stage, the stage-4 velocity
    v + h k3, k5's accelerations, and OUT[0]: the largest scaled error estimate of the last step, OUT[1]
    the substeps it took."""
    return np.zeros((4, max(nq, nj, 2)))


@kernel
def torque_at(u, t, out):
    """The drive torque of the TorqueInput `u` at time t into out: tau0 held (an empty table), or the
    table's linear interpolation at t, held constant outside the table (rows table_tau[i] at times
    table_t[i])."""
    tau0, table_t, table_tau = u.tau0, u.table_t, u.table_tau
    n = table_t.shape[0]
    if n == 0:
        _copy_row(tau0, out)
        return
    i = _first_after(table_t, t)
    if i == 0 or i == n:
        _copy_row(table_tau[min(i, n - 1)], out)
        return
    f = (t - table_t[i - 1]) / (table_t[i] - table_t[i - 1])
    for k in range(out.shape[0]):
        out[k] = table_tau[i - 1, k] + f * (table_tau[i, k] - table_tau[i - 1, k])


@kernel
def _copy_row(src, out):
    for k in range(out.shape[0]):
        out[k] = src[k]


@kernel
def advance(mi, mf, w, t, pos, vel, u, dt, nsub, method, tol, scratch):
    """Advance (pos, vel) in place from t to t + dt with nsub substeps of `method` (RK4, IMEX or fitted
    midpoint), the TorqueInput u's torque tau0 held (table_t empty) or the table's at each stage's
    time (torque_at).
    RK4 steps each stretch between the table's times inside the step on its own (its share of the nsub
    substeps, at least one), so that no substep straddles a kink of the interpolated torque (its order
    holds, and its error estimate with it); the midpoint schemes keep nsub equal substeps, the length
    their fitted blocks are made for. RK4 with tol > 0 leaves in scratch[OUT, 0] the largest scaled error
    estimate of the substeps, max_i |e_i| / (tol (1 + |y_i|)) over positions and rates. False on a
    singular inertia or a non-finite state."""
    table_t = u.table_t
    ok = True
    worst = 0.0
    taken = nsub
    if method == METHOD_RK4:
        start, end = t, t + dt
        knot = _first_after(table_t, t + 1e-9 * dt)
        taken = 0
        while start < end:
            stop = end
            if knot < table_t.shape[0] and table_t[knot] < end - 1e-9 * dt:
                stop = table_t[knot]
                knot += 1
            m = max(1, int(np.ceil(nsub * (stop - start) / dt - 1e-9)))
            ok &= _rk4_stretch(mi, mf, w, start, (stop - start) / m, m, pos, vel, u, tol, scratch)
            worst = max(worst, scratch[OUT, 0])
            taken += m
            start = stop
    else:
        h = dt / nsub
        tau_s = scratch[TAU, :u.tau0.shape[0]]
        plant = AbaPlant(mi, mf, w)
        for s in range(nsub):
            ts = t + s * h
            torque_at(u, ts + 0.5 * h, tau_s)
            if method == METHOD_FITTED:
                ok &= fitted_midpoint.substep(plant, ts, h, pos, vel, tau_s)
            else:
                ok &= integrate.substep(plant, ts, h, pos, vel, tau_s, METHOD_IMEX)
    scratch[OUT, 0] = worst
    scratch[OUT, 1] = taken
    return profiles.end_of_step(mi, mf, t + dt, pos, vel) and ok


@kernel
def _first_after(table_t, t):
    """The index of the table's first time after t (its length if none)."""
    lo, hi = 0, table_t.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if table_t[mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel
def _rk4_stretch(mi, mf, w, t, h, m, pos, vel, u, tol, scratch):
    """m RK4 substeps of h from t; with tol > 0 the largest scaled error estimate into scratch[OUT, 0]."""
    tau_s = scratch[TAU, :u.tau0.shape[0]]
    ok = True
    worst = 0.0
    for s in range(m):
        ts = t + s * h
        ok &= _rk4_substep(mi, mf, w, ts, h, pos, vel, u, tol > 0.0 and s > 0, scratch)
        if tol > 0.0:
            torque_at(u, ts + h, tau_s)
            ok &= forward_dynamics(mi, mf, w, ts + h, pos, vel, tau_s, pos, vel, 0.0, 0.0, scratch[K5])
            worst = max(worst, _scaled_error(mi, w, h, pos, vel, tol, scratch))
    scratch[OUT, 0] = worst
    return ok


@kernel
def _rk4_substep(mi, mf, w, ts, h, pos, vel, u, reuse_k5, scratch):
    """Classical RK4 over one substep (hil.kernels.integrate's stages), its first stage the previous
    substep's k5 when reuse_k5; leaves the stage-4 velocity v + h k3 in scratch[V4]."""
    nq = mi[DIM_NQ]
    k1, k2 = w[mi[W_K1]:mi[W_K1] + nq], w[mi[W_K2]:mi[W_K2] + nq]
    k3, k4 = w[mi[W_K3]:mi[W_K3] + nq], w[mi[W_K4]:mi[W_K4] + nq]
    ps, vs = w[mi[W_PS]:mi[W_PS] + nq], w[mi[W_VS]:mi[W_VS] + nq]
    pe, acc = w[mi[W_PE]:mi[W_PE] + nq], w[mi[W_ACC]:mi[W_ACC] + nq]
    tau_s = scratch[TAU, :u.tau0.shape[0]]
    ok = True
    for stage in range(4):
        dts = stage_state(METHOD_RK4, stage, h, nq, pos, vel, acc, k1, k2, ps, vs, pe)
        if stage == 0 and reuse_k5:
            for i in range(nq):
                acc[i] = scratch[K5, i]
        else:
            torque_at(u, ts + dts, tau_s)
            ok &= forward_dynamics(mi, mf, w, ts + dts, ps, vs, tau_s, ps, vs, 0.0, 0.0, acc)
        store_stage(stage, nq, acc, k1, k2, k3, k4)
    for i in range(nq):
        scratch[V4, i] = vel[i] + h * k3[i]
        pos[i] += h * vel[i] + h * h / 6.0 * (k1[i] + k2[i] + k3[i])
        vel[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])
    return ok


@kernel
def _scaled_error(mi, w, h, pos, vel, tol, scratch):
    """max_i of |h/6 (k4 - k5)_i| / (tol (1 + |y_i|)) over positions and rates at the substep's end."""
    worst = 0.0
    k4 = mi[W_K4]
    for i in range(mi[DIM_NQ]):
        e_q = h / 6.0 * (scratch[V4, i] - vel[i])
        e_v = h / 6.0 * (w[k4 + i] - scratch[K5, i])
        worst = max(worst, abs(e_q) / (tol * (1.0 + abs(pos[i]))), abs(e_v) / (tol * (1.0 + abs(vel[i]))))
    return worst
