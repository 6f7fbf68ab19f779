"""Fixed-step integrators; one call advances the plant by one outer step (all substeps).

* RK4 (classical Runge-Kutta), explicit: stable while omega_max h <= 2 sqrt(2).
* IMEX midpoint: the linear modal stiffness and damping are treated with the
  implicit midpoint rule (added modal mass h^2/4 K + h/2 D inside the
  articulated-body sweep), the joint friction linearly implicitly (hil.kernels.joints),
  everything else with an explicit two-pass midpoint predictor. Exact energy behaviour of
  the implicit midpoint rule on the linear elastic part, so stable for any modal
  frequency; second order.
* Forward Euler: only to reproduce seed 000 (unstable for undamped oscillators).
* Fitted midpoint (hil.kernels.fitted_midpoint): the IMEX scheme with each mode's added mass fitted so
  that it keeps its frequency.

Every method is written once, as stages around a single call of the forward dynamics, for either
formulation (the plant record of hil.kernels.formulation picks it when the kernel compiles).
"""

from .jit import kernel
from . import fitted_midpoint, profiles
from .formulation import AbaPlant, accelerations
from .layout import (DIM_NQ, METHOD_FITTED, METHOD_IMEX, METHOD_RK4, W_ACC, W_K1,
                     W_K2, W_K3, W_K4, W_PE, W_PS, W_VS)


STAGES = (4, 2, 1)


@kernel
def stage_state(method, stage, h, nq, pos, vel, acc_prev, k1, k2, ps, vs, pe):
    """State, time offset and implicit coefficients at which stage `stage` evaluates."""
    if method == METHOD_RK4:
        if stage == 0:
            for i in range(nq):
                ps[i] = pos[i]
                vs[i] = vel[i]
            return 0.0
        if stage == 1:
            for i in range(nq):
                ps[i] = pos[i] + 0.5 * h * vel[i]
                vs[i] = vel[i] + 0.5 * h * k1[i]
            return 0.5 * h
        if stage == 2:
            for i in range(nq):
                ps[i] = pos[i] + 0.5 * h * vel[i] + 0.25 * h * h * k1[i]
                vs[i] = vel[i] + 0.5 * h * acc_prev[i]
            return 0.5 * h
        for i in range(nq):
            ps[i] = pos[i] + h * vel[i] + 0.5 * h * h * k2[i]
            vs[i] = vel[i] + h * acc_prev[i]
        return h
    if method == METHOD_IMEX:
        if stage == 0:
            for i in range(nq):
                pe[i] = pos[i] + 0.5 * h * vel[i]
                ps[i] = pe[i]
                vs[i] = vel[i]
        else:
            # implicit-midpoint predictor: x_m = x + h/2 v + h^2/4 a_m, v_m = v + h/2 a_m
            for i in range(nq):
                ps[i] = pe[i] + 0.25 * h * h * acc_prev[i]
                vs[i] = vel[i] + 0.5 * h * acc_prev[i]
        return 0.5 * h
    for i in range(nq):
        ps[i] = pos[i]
        vs[i] = vel[i]
    return 0.0


@kernel
def advance(mi, mf, w, t, pos, vel, tau, dt, nsub, method):
    """Advance (pos, vel) in place from t to t + dt with nsub substeps of `method`; False on a singular
    inertia or a non-finite state. One call per outer step:
    the model (mi, mf) and work w of hil.kernels.layout, the state and the drive torques held over the
    step; the articulated-body formulation (steps, for either)."""
    return steps(AbaPlant(mi, mf, w), t, pos, vel, tau, dt, nsub, method)


@kernel
def steps(plant, t, pos, vel, tau, dt, nsub, method):
    """advance for the plant record of either formulation (hil.kernels.formulation)."""
    if method == METHOD_FITTED:
        return fitted_midpoint.steps(plant, t, pos, vel, tau, dt, nsub)
    h = dt / nsub
    ok = True
    for s in range(nsub):
        ok &= substep(plant, t + s * h, h, pos, vel, tau, method)
    return profiles.end_of_step(plant.mi, plant.mf, t + dt, pos, vel) and ok


@kernel
def substep(plant, ts, h, pos, vel, tau, method):
    """One substep of RK4, IMEX midpoint or forward Euler from ts to ts + h with the drive torques tau
    (the offline stepper's too, hil.kernels.offline)."""
    mi, w = plant.mi, plant.w
    nq = mi[DIM_NQ]
    # the stage vectors: views of their work blocks (kernels count no references, so views are free)
    k1, k2 = w[mi[W_K1]:mi[W_K1] + nq], w[mi[W_K2]:mi[W_K2] + nq]
    k3, k4 = w[mi[W_K3]:mi[W_K3] + nq], w[mi[W_K4]:mi[W_K4] + nq]
    ps, vs = w[mi[W_PS]:mi[W_PS] + nq], w[mi[W_VS]:mi[W_VS] + nq]
    pe, acc = w[mi[W_PE]:mi[W_PE] + nq], w[mi[W_ACC]:mi[W_ACC] + nq]
    imex = method == METHOD_IMEX
    cK = 0.25 * h * h if imex else 0.0
    cD = 0.5 * h if imex else 0.0
    ok = True
    for stage in range(STAGES[method]):
        dts = stage_state(method, stage, h, nq, pos, vel, acc, k1, k2, ps, vs, pe)
        # IMEX evaluates the elastic forces at the explicit midpoint predictor
        el_pos = pe if imex else ps
        el_vel = vel if imex else vs
        ok &= accelerations(plant, ts + dts, ps, vs, tau, el_pos, el_vel, (cK, cD, False), acc)
        if method == METHOD_RK4:
            store_stage(stage, nq, acc, k1, k2, k3, k4)
    if method == METHOD_RK4:
        for i in range(nq):
            pos[i] += h * vel[i] + h * h / 6.0 * (k1[i] + k2[i] + k3[i])
            vel[i] += h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i])
    elif imex:
        for i in range(nq):
            pos[i] += h * vel[i] + 0.5 * h * h * acc[i]
            vel[i] += h * acc[i]
    else:
        for i in range(nq):
            pos[i] += h * vel[i]
            vel[i] += h * acc[i]
    return ok


@kernel
def store_stage(stage, nq, acc, k1, k2, k3, k4):
    """RK4: the accelerations of stage `stage` kept as its k (k1..k4)."""
    for i in range(nq):
        if stage == 0:
            k1[i] = acc[i]
        elif stage == 1:
            k2[i] = acc[i]
        elif stage == 2:
            k3[i] = acc[i]
        else:
            k4[i] = acc[i]
