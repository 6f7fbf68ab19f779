"""Fitted implicit midpoint: the IMEX midpoint scheme with each mode's implicit added mass fitted so that
the mode keeps its frequency at a coarse step.

One substep h from (q, v), as the IMEX scheme (hil.kernels.integrate) but for the modal added mass:

    q_e = q + h/2 v
    pass 1: a' = f at (q_e, v), the modal forces K q + D v taken at (q_e + h^2 B a', v + h/2 a')
    pass 2: a_m = f at (q_m, v_m) = (q_e + h^2 B a', v + h/2 a') (joints and rotors: B = 1/12), the
            modal forces at (q_e + h^2 B a_m, v + h/2 a_m)
    q <- q + h v + h^2/2 a_m,   v <- v + h a_m

Each pass is one articulated-body solve with C = h^2 K B added to every body's modal mass (the model
block fitted of hil.kernels.layout, hil.model.midpoint_fit) and the dampers taken implicitly with
cD = h/2 (h/2 D on the modal mass; the joint friction at the substep's start rates with h/2 times its
slope on the joint's inertia, hil.kernels.joints). B = I/4 is the IMEX scheme (the implicit midpoint
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

The joints and rotors take B = beta(0) = 1/12, the family's zero-frequency member (Fox and Goodwin's
Newmark parameter): what moves them explicitly (gravity, the arm's inertial coupling, Spong springs)
is then stepped with a phase error of order 4 instead of the implicit midpoint rule's
-theta^2 / 12 (an explicit spring at theta = 0.6: -1.9e-4 against -3.3e-2), and the explicit spring
stays stable up to theta = 2 sqrt 3 instead of 2 (tests/test_integrators.py). The rigid motion's
local error stays of order 3 (the scheme is of order 2); on ELLA's make run manoeuvre it is 1.5 times
smaller than with 1/4.

Order 2. Stability: the elastic part is linearly stable while M + h^2 K (B - I/4) stays positive
definite (the fit checks it and falls back to I/4 mode by mode); the explicit part (gravity, Coriolis
and centrifugal terms, foreshortening, joint springs) is the explicit predictor above, real-axis bound
|lambda h| <= 2; the joint friction is implicit and needs none. Cost: two forward-dynamics evaluations
per substep (RK4: four) and O(n_m^2) per body.
"""

from .jit import kernel
from . import profiles
from .formulation import AbaPlant, accelerations
from .layout import (DIM_NB, DIM_NM, DIM_NQ, FIT_B, MF_FITTED, W_ACC, W_PE, W_PS, W_VS, at, first_mode, modes_of)


@kernel
def midpoint_positions(mi, mf, h, pe, a, ps):
    """q_m = q_e + h^2/12 a (joints, rotors: B = beta(0)), q_e + h^2 B a (each body's modes)."""
    nb = mi[DIM_NB]
    NM = mi[DIM_NM]
    for i in range(mi[DIM_NQ]):
        ps[i] = pe[i] + h * h / 12.0 * a[i]
    for k in range(nb):
        B = mi[MF_FITTED] + (FIT_B * nb + k) * NM * NM
        base = first_mode(mi, k)
        n = modes_of(mi, k)
        for r in range(n):
            s = 0.0
            for c in range(n):
                s += mf[at(B + r * NM + c)] * a[base + c]
            ps[base + r] = pe[base + r] + h * h * s


@kernel
def substep(plant, ts, h, pos, vel, tau):
    """One substep from ts to ts + h with the drive torques tau (module docstring), for either
    formulation (hil.kernels.formulation)."""
    mi, mf, w = plant.mi, plant.mf, plant.w
    nq = mi[DIM_NQ]
    ps, vs = w[mi[W_PS]:mi[W_PS] + nq], w[mi[W_VS]:mi[W_VS] + nq]
    pe, acc = w[mi[W_PE]:mi[W_PE] + nq], w[mi[W_ACC]:mi[W_ACC] + nq]
    tm = ts + 0.5 * h
    for i in range(nq):
        pe[i] = pos[i] + 0.5 * h * vel[i]
    ok = accelerations(plant, tm, pe, vel, tau, pe, vel, (0.0, 0.5 * h, True), acc)
    midpoint_positions(mi, mf, h, pe, acc, ps)
    for i in range(nq):
        vs[i] = vel[i] + 0.5 * h * acc[i]
    ok &= accelerations(plant, tm, ps, vs, tau, pe, vel, (0.0, 0.5 * h, True), acc)
    for i in range(nq):
        pos[i] += h * vel[i] + 0.5 * h * h * acc[i]
        vel[i] += h * acc[i]
    return ok


@kernel
def advance(mi, mf, w, t, pos, vel, tau, dt, nsub):
    """Advance (pos, vel) in place from t to t + dt with nsub substeps, tau held; False on a singular
    inertia or a non-finite state (the articulated-body formulation; steps, for either)."""
    return steps(AbaPlant(mi, mf, w), t, pos, vel, tau, dt, nsub)


@kernel
def steps(plant, t, pos, vel, tau, dt, nsub):
    """advance for the plant record of either formulation (hil.kernels.formulation)."""
    h = dt / nsub
    ok = True
    for s in range(nsub):
        ok &= substep(plant, t + s * h, h, pos, vel, tau)
    return profiles.end_of_step(plant.mi, plant.mf, t + dt, pos, vel) and ok
