"""Fixed-step integrators; one call advances the plant by one outer step (all substeps).

* RK4 (classical Runge-Kutta), explicit: stable while omega_max h <= 2 sqrt(2).
* IMEX midpoint: the linear modal stiffness and damping are treated with the
  implicit midpoint rule (added modal mass h^2/4 K + h/2 D inside the
  articulated-body sweep), everything else with an explicit two-pass midpoint
  predictor. Exact energy behaviour of the implicit midpoint rule on the linear
  elastic part, so stable for any modal frequency; second order.
* Forward Euler: only to reproduce seed 000 (unstable for undamped oscillators).
"""
import numpy as np
from numba import njit

from . import profiles
from .aba import DRIVE_PRESCRIBED, forward_dynamics

METHOD_RK4 = 0
METHOD_IMEX = 1
METHOD_EULER = 2


@njit(cache=True)
def rk4_step(m, w, t, pos, vel, tau, h):
    nq = m.dims[4]
    k1, k2, k3, k4 = w.k1, w.k2, w.k3, w.k4
    ps, vs = w.ps, w.vs
    ok = forward_dynamics(m, w, t, pos, vel, tau, pos, vel, 0.0, 0.0, k1)
    for i in range(nq):
        ps[i] = pos[i] + 0.5 * h * vel[i]
        vs[i] = vel[i] + 0.5 * h * k1[i]
    ok &= forward_dynamics(m, w, t + 0.5 * h, ps, vs, tau, ps, vs, 0.0, 0.0, k2)
    for i in range(nq):
        ps[i] = pos[i] + 0.5 * h * vel[i] + 0.25 * h * h * k1[i]
        vs[i] = vel[i] + 0.5 * h * k2[i]
    ok &= forward_dynamics(m, w, t + 0.5 * h, ps, vs, tau, ps, vs, 0.0, 0.0, k3)
    for i in range(nq):
        ps[i] = pos[i] + h * vel[i] + 0.5 * h * h * k2[i]
        vs[i] = vel[i] + h * k3[i]
    ok &= forward_dynamics(m, w, t + h, ps, vs, tau, ps, vs, 0.0, 0.0, k4)
    for i in range(nq):
        pos[i] += h * vel[i] + h * h / 6.0 * (k1[i] + k2[i] + k3[i])
        vel[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])
    return ok


@njit(cache=True)
def imex_step(m, w, t, pos, vel, tau, h):
    nq = m.dims[4]
    a1, a2 = w.k1, w.k2
    ps, vs, pe = w.ps, w.vs, w.k3
    for i in range(nq):
        pe[i] = pos[i] + 0.5 * h * vel[i]
        ps[i] = pe[i]
        vs[i] = vel[i]
    cK = 0.25 * h * h
    cD = 0.5 * h
    ok = forward_dynamics(m, w, t + 0.5 * h, ps, vs, tau, pe, vel, cK, cD, a1)
    for i in range(nq):
        ps[i] = pe[i] + 0.125 * h * h * a1[i]
        vs[i] = vel[i] + 0.5 * h * a1[i]
    ok &= forward_dynamics(m, w, t + 0.5 * h, ps, vs, tau, pe, vel, cK, cD, a2)
    for i in range(nq):
        pos[i] += h * vel[i] + 0.5 * h * h * a2[i]
        vel[i] += h * a2[i]
    return ok


@njit(cache=True)
def euler_step(m, w, t, pos, vel, tau, h):
    nq = m.dims[4]
    a = w.k1
    ok = forward_dynamics(m, w, t, pos, vel, tau, pos, vel, 0.0, 0.0, a)
    for i in range(nq):
        pos[i] += h * vel[i]
        vel[i] += h * a[i]
    return ok


@njit(cache=True)
def advance(m, w, t, pos, vel, tau, dt, nsub, method):
    """Advance (pos, vel) in place from t to t + dt with nsub substeps; False on a singular inertia
    or a non-finite state."""
    h = dt / nsub
    ok = True
    for s in range(nsub):
        ts = t + s * h
        if method == METHOD_RK4:
            ok &= rk4_step(m, w, ts, pos, vel, tau, h)
        elif method == METHOD_IMEX:
            ok &= imex_step(m, w, ts, pos, vel, tau, h)
        else:
            ok &= euler_step(m, w, ts, pos, vel, tau, h)
    for k in range(m.dims[0]):
        if m.drive[k] == DRIVE_PRESCRIBED:
            q, qd, qdd = profiles.evaluate(m, k, t + dt)
            pos[k] = q
            vel[k] = qd
    for i in range(m.dims[4]):
        if not (np.isfinite(pos[i]) and np.isfinite(vel[i])):
            ok = False
    return ok
