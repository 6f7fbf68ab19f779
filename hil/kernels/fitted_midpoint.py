"""Fitted implicit midpoint: the IMEX midpoint scheme with each mode's implicit added mass fitted so that
the mode keeps its frequency at a coarse step.

One substep h from (q, v), as the IMEX scheme (hil.kernels.integrate) but for the modal added mass:

    q_e = q + h/2 v
    pass 1: a' = f at (q_e, v), the modal forces K q + D v taken at (q_e + h^2 B a', v + h/2 a')
    pass 2: a_m = f at (q_m, v_m) = (q_e + h^2 B a', v + h/2 a') (joints and rotors: h^2/4 a'), the modal
            forces at (q_e + h^2 B a_m, v + h/2 a_m)
    q <- q + h v + h^2/2 a_m,   v <- v + h a_m

Each pass is one articulated-body solve with C = h^2 K B + h/2 D added to every body's modal mass (the
blocks KernelModel.fitted, hil.model.midpoint_fit). B = I/4 is the IMEX scheme (the implicit midpoint
rule on the linear elastic part, frequency 2/h atan(omega h / 2)). With B = beta(theta) in the body's
mode basis (theta = omega h),

    beta(theta) = (theta^2/2 - 1 + cos theta) / (theta^2 (1 - cos theta)) = 1/12 + theta^2/240 + ...

an undamped mode moving alone is stepped with cos(omega_discrete h) = cos(omega h): its frequency is
exact at any step below pi / omega, the step map keeps |lambda| = 1 (no numerical damping), and the
static deflection is exact (K q = f is a fixed point for any B). The price: the mode's velocity
amplitude is tan(theta/2) / (theta/2) of the true one (1 + theta^2/12), so the energy a free vibration
shows swings up to (tan(theta/2) / (theta/2))^2 - 1 (theta^2/6) above its true value, without drift
(the step conserves omega^2 x^2 + ((theta/2) cot(theta/2))^2 v^2). Modal damping zeta (the h/2 D
part, the implicit midpoint rule's) shifts the frequency by about +0.15 zeta^2 theta^2 (zeta = 0.1 at
theta = 1: +0.17 %) and shrinks the damping ratio by about theta^2/12 of itself. Modes above the fit's
limit keep B = I/4.

Order 2. Stability: the elastic part is linearly stable while M + h^2 K (B - I/4) stays positive
definite (the fit checks it and falls back to I/4 mode by mode); the explicit part (gravity, Coriolis
and centrifugal terms, foreshortening, joint friction and springs) is the explicit midpoint predictor,
real-axis bound |lambda h| <= 2. Cost: two forward-dynamics evaluations per substep (RK4: four) and
O(n_m^2) per body.
"""
import numpy as np
from numba import njit

from . import profiles
from .aba import forward_dynamics_blocks
from .layout import DIM_NB, DIM_NQ, FIT_B, FIT_C, JOINT_PRESCRIBED


@njit(cache=True)
def midpoint_positions(m, h, pe, a, ps):
    """q_m = q_e + h^2/4 a (joints, rotors), q_e + h^2 B a (each body's modes)."""
    nb = m.dims[DIM_NB]
    for i in range(m.dims[DIM_NQ]):
        ps[i] = pe[i] + 0.25 * h * h * a[i]
    B = m.fitted[FIT_B]
    for k in range(nb):
        base = nb + m.mo[k]
        n = m.nm[k]
        for r in range(n):
            s = 0.0
            for c in range(n):
                s += B[k, r, c] * a[base + c]
            ps[base + r] = pe[base + r] + h * h * s


@njit(cache=True)
def substep(m, w, ts, h, pos, vel, tau):
    """One substep from ts to ts + h with the drive torques tau (module docstring)."""
    nq = m.dims[DIM_NQ]
    ps, vs, pe, acc = w.ps, w.vs, w.pe, w.acc
    C = m.fitted[FIT_C]
    tm = ts + 0.5 * h
    for i in range(nq):
        pe[i] = pos[i] + 0.5 * h * vel[i]
    ok = forward_dynamics_blocks(m, w, tm, pe, vel, tau, pe, vel, 0.0, 0.0, C, acc)
    midpoint_positions(m, h, pe, acc, ps)
    for i in range(nq):
        vs[i] = vel[i] + 0.5 * h * acc[i]
    ok &= forward_dynamics_blocks(m, w, tm, ps, vs, tau, pe, vel, 0.0, 0.0, C, acc)
    for i in range(nq):
        pos[i] += h * vel[i] + 0.5 * h * h * acc[i]
        vel[i] += h * acc[i]
    return ok


@njit(cache=True)
def advance(m, w, t, pos, vel, tau, dt, nsub):
    """Advance (pos, vel) in place from t to t + dt with nsub substeps, tau held; False on a singular
    inertia or a non-finite state."""
    h = dt / nsub
    ok = True
    for s in range(nsub):
        ok &= substep(m, w, t + s * h, h, pos, vel, tau)
    return finish(m, t + dt, pos, vel) and ok


@njit(cache=True)
def finish(m, t, pos, vel):
    """Put the prescribed joints on their profile at t; False on a non-finite state."""
    for k in range(m.dims[DIM_NB]):
        if m.drive[k] == JOINT_PRESCRIBED:
            q, qd, _ = profiles.evaluate(m.prof_kind, m.prof_par, m.tab_off, m.tab_n, m.tab_t, m.tab_c, k, t)
            pos[k] = q
            vel[k] = qd
    ok = True
    for i in range(m.dims[DIM_NQ]):
        if not (np.isfinite(pos[i]) and np.isfinite(vel[i])):
            ok = False
    return ok
