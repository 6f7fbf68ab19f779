"""O(n) articulated-body forward dynamics of a flexible multibody tree.

Jain & Rodriguez (seed 002 in the README's References), Section 7, in Featherstone's
body-coordinate form, with two errors of the printed equations corrected (each checked
against the composite-body mass matrix of kernels/oracle.py in tests/test_dynamics_algebra.py):

* per body, the modal coordinates are eliminated first with a Cholesky solve of
  the n_m x n_m block P_ff (no Woodbury step: eq. 7.10 inverts Gamma(k), which is
  always singular), then the hinge coordinate;
* the modal acceleration is eta_ddot = -P_ff^-1 (P_fr a + p_f), where p_f holds
  the Coriolis term once (eq. 7.12 as printed subtracts it twice).

Sweeps: kinematics base-to-tip, articulated inertias tip-to-base, accelerations
base-to-tip; cost linear in the number of bodies, cubic in modes per body.
Gravity enters as the base acceleration -g, so body accelerations returned here
are specific forces (what an accelerometer senses) in their linear part.
"""
import numpy as np
from numba import njit

from . import profiles
from .bodies import body_inertia, joint_kinematics
from .spatial import cholesky_inplace, cholesky_solve
from .layout import (DIM_NB, DIM_NETA, DIM_NM, DIM_NQ, JOINT_PRESCRIBED, JOINT_ROTOR_HELD, JP_COUL_VS,
                     JP_STRIBECK, JP_STRIB_VS, JP_BRAKE, JP_BRAKE_VS, JP_BACKLASH)


@njit(cache=True)
def prepare(m, w, t, pos, vel):
    """Copy the state into the work buffers, imposing prescribed joint motion at time t."""
    prepare_arrays(m.dims[DIM_NQ], m.dims[DIM_NB], m.drive, m.prof_kind, m.prof_par, m.tab_off, m.tab_n, m.tab_t,
                   m.tab_c, t, pos, vel, w.pos, w.vel, w.qdd_pres)


@njit(cache=True)
def prepare_arrays(nq, nj, drive, prof_kind, prof_par, tab_off, tab_n, tab_t, tab_c, t, pos, vel, wpos, wvel,
                   qdd_pres):
    for i in range(nq):
        wpos[i] = pos[i]
        wvel[i] = vel[i]
    for k in range(nj):
        if drive[k] == JOINT_PRESCRIBED:
            q, qd, qdd = profiles.evaluate(prof_kind, prof_par, tab_off, tab_n, tab_t, tab_c, k, t)
            wpos[k] = q
            wvel[k] = qd
            qdd_pres[k] = qdd


@njit(cache=True)
def joint_torques(m, w, tau):
    """Link-side torque each torque-driven joint receives (drive minus friction, or the Spong spring)."""
    joint_torques_arrays(m.dims[DIM_NB], m.dims[DIM_NB] + m.dims[DIM_NETA], m.mot, m.kspring, m.dspring, m.viscous, m.coulomb, m.jpar,
                         w.pos, w.vel, tau, w.tauj)


@njit(cache=True)
def joint_torques_arrays(nj, off, mot, kspring, dspring, viscous, coulomb, jpar, wpos, wvel, tau, tauj):
    for k in range(nj):
        qd = wvel[k]
        mi = mot[k]
        if mi >= 0:
            tauj[k] = spring_torque(kspring[k], dspring[k], jpar[k, JP_BACKLASH], wpos[off + mi] - wpos[k],
                                    wvel[off + mi] - qd)
        else:
            tauj[k] = tau[k] - joint_friction(viscous, coulomb, jpar, k, qd)


@njit(cache=True)
def dead_band(deflection, backlash):
    """Spring deflection beyond a dead band of total width `backlash` (0 inside, continuous at its edges)."""
    half = 0.5 * backlash
    if deflection > half:
        return deflection - half
    if deflection < -half:
        return deflection + half
    return 0.0


@njit(cache=True)
def spring_torque(stiffness, damping, backlash, deflection, rate):
    """Spong joint torque k dz(phi - q) + d (phi_dot - q_dot) on the link. With backlash the gear teeth
    are apart inside the dead band: neither spring nor damper transmits torque there."""
    if backlash > 0.0 and abs(deflection) <= 0.5 * backlash:
        return 0.0
    return stiffness * dead_band(deflection, backlash) + damping * rate


@njit(cache=True)
def friction(viscous, coulomb, smoothing, stribeck, stribeck_vs, brake, brake_vs, rate):
    """Friction torque opposing the rate: viscous, tanh-smoothed Coulomb with an optional Stribeck
    breakaway torque decaying as exp(-(rate / v_st)^2), and a slipping holding brake, whose kinetic
    torque F_b is smoothed by a ramp saturating at v_b (hil.devices.drives states why a ramp):

    tau_f = c v + (F_c + F_s exp(-(v / v_st)^2)) tanh(v / v_s) + F_b clip(v / v_b, -1, 1)

    v_s (jpar JP_COUL_VS) is the effective smoothing: the configured one, widened by
    hil.dynamics.plant.Plant.stabilize_friction where the slope c + (F_c + F_s) / v_s at rest would be beyond
    the substep's stability bound.
    """
    breakaway = coulomb
    if stribeck > 0.0:
        x = rate / stribeck_vs
        breakaway += stribeck * np.exp(-x * x)
    f = viscous * rate + breakaway * np.tanh(rate / smoothing)
    if brake > 0.0:
        f += brake * min(max(rate / brake_vs, -1.0), 1.0)
    return f


@njit(cache=True)
def joint_friction(viscous, coulomb, jpar, k, rate):
    """friction() with joint k's parameters (jpar columns JP_*)."""
    return friction(viscous[k], coulomb[k], jpar[k, JP_COUL_VS], jpar[k, JP_STRIBECK], jpar[k, JP_STRIB_VS],
                    jpar[k, JP_BRAKE], jpar[k, JP_BRAKE_VS], rate)


@njit(cache=True)
def motor_accelerations(m, w, tau, acc):
    """Spong rotor equation B phi_ddot = tau - k (phi - q) - d (phi_dot - q_dot) - friction; a rotor
    held by its brake (JOINT_ROTOR_HELD) does not accelerate."""
    motor_accelerations_arrays(m.dims[DIM_NB], m.dims[DIM_NB] + m.dims[DIM_NETA], m.mot, m.mot_inertia, m.viscous, m.coulomb, m.jpar,
                               m.drive, w.vel, tau, w.tauj, acc)


@njit(cache=True)
def motor_accelerations_arrays(nj, off, mot, mot_inertia, viscous, coulomb, jpar, drive, wvel, tau, tauj, acc):
    for k in range(nj):
        mi = mot[k]
        if mi < 0:
            continue
        if drive[k] == JOINT_ROTOR_HELD:
            acc[off + mi] = 0.0
        else:
            phd = wvel[off + mi]
            acc[off + mi] = (tau[k] - tauj[k] - joint_friction(viscous, coulomb, jpar, k, phd)) / mot_inertia[k]


@njit(cache=True)
def forward_kinematics(m, w):
    """Base-to-tip sweep: joint transforms, twists, biases and body inertias."""
    kinematics_sweep(m.dims[DIM_NB], m.dims[DIM_NM], m.parent, m.nm, m.mo, m.axis, m.st_G, m.st_L, m.st_S, m.st_p0, m.st_R0,
                     m.node_off, m.nd_m, m.nd_p0, m.nd_G, m.nd_S, m.Jsum, m.JL, m.LJL, w.pos, w.vel, w.Rpc, w.ppc,
                     w.Phi, w.V, w.kap, w.Mb, w.bb, w.M33, w.V3, w.V6, w.Ghat, w.Se)


@njit(cache=True)
def kinematics_sweep(nb, NM, parent, nmv, mov, axis, stG, stL, stS, stp0, stR0, node_off, nd_m, nd_p0, nd_G,
                     nd_S, Jsum, JL, LJL, pos, vel, Rpc, ppc, Phi, V, kap, Mb, bb, M33, V3, V6, Ghat, Se):
    for k in range(nb):
        joint_kinematics(k, nb, NM, parent, nmv, mov, axis, stG, stL, stS, stp0, stR0, pos, vel,
                         Rpc, ppc, Phi, V, kap, M33, V3, V6, Ghat)
        body_inertia(k, nb, nmv, mov, node_off, nd_m, nd_p0, nd_G, nd_S, Jsum, JL, LJL, pos, vel, V, Mb, bb,
                     Ghat, Se, V3)


@njit(cache=True)
def elastic_forces(k, nj, nmv, mov, Kmod, Dmod, el_pos, el_vel, p):
    """Add the modal stiffness and damping forces K eta + D eta_dot of body k to p[k, 6:]."""
    nm = nmv[k]
    mo = nj + mov[k]
    for a in range(nm):
        s = 0.0
        for b in range(nm):
            s += Kmod[k, a, b] * el_pos[mo + b] + Dmod[k, a, b] * el_vel[mo + b]
        p[k, 6 + a] += s


@njit(cache=True)
def added_mass(k, nmv, Kmod, Dmod, cK, cD, P):
    """Add cK K + cD D, the implicit integrator's added modal mass, to P[k, 6:, 6:]."""
    for a in range(nmv[k]):
        for b in range(nmv[k]):
            P[k, 6 + a, 6 + b] += cK * Kmod[k, a, b] + cD * Dmod[k, a, b]


_NO_BLOCKS = np.zeros((0, 0, 0))


@njit(cache=True)
def forward_dynamics(m, w, t, pos, vel, tau, el_pos, el_vel, cK, cD, acc):
    """Generalized accelerations acc (joints, modes, rotors) of the state (pos, vel) at time t.

    tau: drive torque per joint (link side; for a Spong joint, the rotor-side torque
    referred to the link). Elastic modal forces use (el_pos, el_vel); pass pos, vel
    for a fully explicit evaluation. cK, cD: implicit added-mass coefficients
    (cK K + cD D added to each body's modal mass).
    Returns False if an articulated inertia lost positive definiteness.
    """
    return forward_dynamics_blocks(m, w, t, pos, vel, tau, el_pos, el_vel, cK, cD, _NO_BLOCKS, acc)


@njit(cache=True)
def forward_dynamics_blocks(m, w, t, pos, vel, tau, el_pos, el_vel, cK, cD, blocks, acc):
    """forward_dynamics with, in addition, blocks[k] (n_m x n_m, symmetric) added to body k's modal
    mass: an integrator's implicit modal operator that is not a multiple of K and D (an empty
    array: none).
    The model and work tuples are unpacked here once; helpers take arrays (passing a tuple
    of ~100 arrays across a call costs numba an atomic reference count per array).
    """
    nb = m.dims[DIM_NB]
    NM = m.dims[DIM_NM]
    nq = m.dims[DIM_NQ]
    off = nb + m.dims[DIM_NETA]
    prepare_arrays(nq, nb, m.drive, m.prof_kind, m.prof_par, m.tab_off, m.tab_n, m.tab_t, m.tab_c, t, pos, vel,
                   w.pos, w.vel, w.qdd_pres)
    joint_torques_arrays(nb, off, m.mot, m.kspring, m.dspring, m.viscous, m.coulomb, m.jpar, w.pos, w.vel, tau,
                         w.tauj)
    kinematics_sweep(nb, NM, m.parent, m.nm, m.mo, m.axis, m.st_G, m.st_L, m.st_S, m.st_p0, m.st_R0,
                     m.node_off, m.nd_m, m.nd_p0, m.nd_G, m.nd_S, m.Jsum, m.JL, m.LJL, w.pos, w.vel, w.Rpc, w.ppc,
                     w.Phi, w.V, w.kap, w.Mb, w.bb, w.M33, w.V3, w.V6, w.Ghat, w.Se)
    P = w.P
    p = w.p
    Lff = w.Lff
    Y = w.Y
    y = w.y
    IA = w.IA
    pA = w.pA
    U = w.U
    Ia = w.Ia
    pa = w.t6a
    Phi = w.Phi
    kap = w.kap
    nud = w.nud
    col = w.tn
    tmp6 = w.t6b
    a6 = w.t6c
    IaPhi = w.IaPhi
    bb = w.bb
    Mb = w.Mb
    qdd_pres = w.qdd_pres
    tauj = w.tauj
    Dj = w.Dj
    uj = w.uj
    fj = w.fj
    tau_joint = w.tau_joint
    axis = m.axis
    parent = m.parent
    nmv = m.nm
    mo = m.mo
    drive = m.drive
    armature = m.armature
    g = m.gravity
    for k in range(nb):
        n = 6 + nmv[k]
        for i in range(n):
            p[k, i] = bb[k, i]
            for j in range(n):
                P[k, i, j] = Mb[k, i, j]
        elastic_forces(k, nb, nmv, mo, m.Kmod, m.Dmod, el_pos, el_vel, p)
        added_mass(k, nmv, m.Kmod, m.Dmod, cK, cD, P)
        if blocks.shape[0] > 0:
            for a in range(nmv[k]):
                for b in range(nmv[k]):
                    P[k, 6 + a, 6 + b] += blocks[k, a, b]
    # tip-to-base: articulated inertias (modes eliminated first, then the hinge)
    for k in range(nb - 1, -1, -1):
        nm = nmv[k]
        for a in range(nm):
            for b in range(nm):
                Lff[k, a, b] = P[k, 6 + a, 6 + b]
        if not cholesky_inplace(Lff, k, nm):
            return False
        for i in range(6):
            for a in range(nm):
                col[a] = P[k, 6 + a, i]
            cholesky_solve(Lff, k, nm, col)
            for a in range(nm):
                Y[k, a, i] = col[a]
        for a in range(nm):
            col[a] = p[k, 6 + a]
        cholesky_solve(Lff, k, nm, col)
        for a in range(nm):
            y[k, a] = col[a]
        for i in range(6):
            s = p[k, i]
            for a in range(nm):
                s -= P[k, i, 6 + a] * y[k, a]
            pA[k, i] = s
            for j in range(6):
                s = P[k, i, j]
                for a in range(nm):
                    s -= P[k, i, 6 + a] * Y[k, a, j]
                IA[k, i, j] = s
        ax0, ax1, ax2 = axis[k, 0], axis[k, 1], axis[k, 2]
        for i in range(6):
            U[k, i] = IA[k, i, 0] * ax0 + IA[k, i, 1] * ax1 + IA[k, i, 2] * ax2
        if drive[k] == JOINT_PRESCRIBED:
            qdd = qdd_pres[k]
            for i in range(6):
                pa[i] = pA[k, i] + U[k, i] * qdd
                for j in range(6):
                    Ia[i, j] = IA[k, i, j]
        else:
            d = U[k, 0] * ax0 + U[k, 1] * ax1 + U[k, 2] * ax2 + armature[k]
            if not d > 0.0:
                return False
            u = tauj[k] - (pA[k, 0] * ax0 + pA[k, 1] * ax1 + pA[k, 2] * ax2)
            Dj[k] = d
            uj[k] = u
            for i in range(6):
                pa[i] = pA[k, i] + U[k, i] * u / d
                for j in range(6):
                    Ia[i, j] = IA[k, i, j] - U[k, i] * U[k, j] / d
        par = parent[k]
        if par >= 0:
            # parent += Phi^T Ia Phi and Phi^T (pa + Ia kap)
            npx = 6 + nmv[par]
            for i in range(6):
                s = pa[i]
                for j in range(6):
                    s += Ia[i, j] * kap[k, j]
                tmp6[i] = s
                for c in range(npx):
                    s = 0.0
                    for j in range(6):
                        s += Ia[i, j] * Phi[k, j, c]
                    IaPhi[i, c] = s
            for r in range(npx):
                s = 0.0
                for i in range(6):
                    s += Phi[k, i, r] * tmp6[i]
                p[par, r] += s
                for c in range(r, npx):
                    s = 0.0
                    for i in range(6):
                        s += Phi[k, i, r] * IaPhi[i, c]
                    P[par, r, c] += s
                    if c != r:
                        P[par, c, r] += s
    # base-to-tip: accelerations
    for k in range(nb):
        par = parent[k]
        for i in range(6):
            s = kap[k, i]
            if par >= 0:
                for c in range(6 + nmv[par]):
                    s += Phi[k, i, c] * nud[par, c]
            else:
                s -= Phi[k, i, 3] * g[0] + Phi[k, i, 4] * g[1] + Phi[k, i, 5] * g[2]
            a6[i] = s
        ax0, ax1, ax2 = axis[k, 0], axis[k, 1], axis[k, 2]
        if drive[k] == JOINT_PRESCRIBED:
            qdd = qdd_pres[k]
        else:
            s = uj[k]
            for i in range(6):
                s -= U[k, i] * a6[i]
            qdd = s / Dj[k]
        acc[k] = qdd
        a6[0] += ax0 * qdd
        a6[1] += ax1 * qdd
        a6[2] += ax2 * qdd
        for i in range(6):
            nud[k, i] = a6[i]
        nm = nmv[k]
        base = nb + mo[k]
        for e in range(nm):
            s = y[k, e]
            for i in range(6):
                s += Y[k, e, i] * a6[i]
            nud[k, 6 + e] = -s
            acc[base + e] = -s
        for e in range(nm, NM):
            nud[k, 6 + e] = 0.0
        for i in range(6):
            s = pA[k, i]
            for j in range(6):
                s += IA[k, i, j] * a6[j]
            fj[k, i] = s
        tau_joint[k] = fj[k, 0] * ax0 + fj[k, 1] * ax1 + fj[k, 2] * ax2
    motor_accelerations_arrays(nb, off, m.mot, m.mot_inertia, m.viscous, m.coulomb, m.jpar, drive, w.vel, tau, tauj,
                               acc)
    return True
