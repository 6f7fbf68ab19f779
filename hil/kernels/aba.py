"""O(n) articulated-body forward dynamics of a flexible multibody tree.

Jain & Rodriguez (seed 002), Section 7, in Featherstone's body-coordinate form
with the published errata fixed (shared/research/seeds_002_004.md):

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

DRIVE_TORQUE = 0
DRIVE_PRESCRIBED = 1


@njit(cache=True)
def prepare(m, w, t, pos, vel):
    """Copy the state into the work buffers, imposing prescribed joint motion at time t."""
    nq = m.dims[4]
    for i in range(nq):
        w.pos[i] = pos[i]
        w.vel[i] = vel[i]
    for k in range(m.dims[0]):
        if m.drive[k] == DRIVE_PRESCRIBED:
            q, qd, qdd = profiles.evaluate(m, k, t)
            w.pos[k] = q
            w.vel[k] = qd
            w.qdd_pres[k] = qdd


@njit(cache=True)
def joint_torques(m, w, tau):
    """Link-side torque each torque-driven joint receives (drive minus friction, or the Spong spring)."""
    nj = m.dims[0]
    off = nj + m.dims[1]
    for k in range(nj):
        qd = w.vel[k]
        mi = m.mot[k]
        if mi >= 0:
            e = w.pos[off + mi] - w.pos[k]
            ed = w.vel[off + mi] - qd
            w.tauj[k] = m.kspring[k] * e + m.dspring[k] * ed
        else:
            w.tauj[k] = tau[k] - friction(m, k, qd)


@njit(cache=True)
def friction(m, k, rate):
    """Viscous plus tanh-smoothed Coulomb friction torque opposing the rate."""
    return m.viscous[k] * rate + m.coulomb[k] * np.tanh(rate / m.coul_vs[k])


@njit(cache=True)
def motor_accelerations(m, w, tau, acc):
    """Spong rotor equation B phi_ddot = tau - k (phi - q) - d (phi_dot - q_dot) - friction."""
    nj = m.dims[0]
    off = nj + m.dims[1]
    for k in range(nj):
        mi = m.mot[k]
        if mi >= 0:
            phd = w.vel[off + mi]
            acc[off + mi] = (tau[k] - w.tauj[k] - friction(m, k, phd)) / m.mot_inertia[k]


@njit(cache=True)
def forward_kinematics(m, w):
    """Base-to-tip sweep: joint transforms, twists, biases and body inertias."""
    for k in range(m.dims[0]):
        joint_kinematics(m, w, k)
        body_inertia(m, w, k)


@njit(cache=True)
def elastic_forces(m, k, el_pos, el_vel, p):
    """Add the modal stiffness and damping forces K eta + D eta_dot of body k to p[6:]."""
    nm = m.nm[k]
    mo = m.dims[0] + m.mo[k]
    K = m.Kmod[k]
    D = m.Dmod[k]
    for a in range(nm):
        s = 0.0
        for b in range(nm):
            s += K[a, b] * el_pos[mo + b] + D[a, b] * el_vel[mo + b]
        p[6 + a] += s


@njit(cache=True)
def added_mass(m, k, cK, cD, P):
    """Add cK K + cD D, the implicit integrator's added modal mass, to P[6:, 6:]."""
    K = m.Kmod[k]
    D = m.Dmod[k]
    for a in range(m.nm[k]):
        for b in range(m.nm[k]):
            P[6 + a, 6 + b] += cK * K[a, b] + cD * D[a, b]


@njit(cache=True)
def forward_dynamics(m, w, t, pos, vel, tau, el_pos, el_vel, cK, cD, acc):
    """Generalized accelerations acc (joints, modes, rotors) of the state (pos, vel) at time t.

    tau: drive torque per joint (link side; for a Spong joint, the rotor-side torque
    referred to the link). Elastic modal forces use (el_pos, el_vel); pass pos, vel
    for a fully explicit evaluation. cK, cD: implicit added-mass coefficients.
    Returns False if an articulated inertia lost positive definiteness.
    """
    nb = m.dims[0]
    prepare(m, w, t, pos, vel)
    joint_torques(m, w, tau)
    forward_kinematics(m, w)
    nx = 6 + m.dims[3]
    for k in range(nb):
        n = 6 + m.nm[k]
        P = w.P[k]
        p = w.p[k]
        for i in range(n):
            p[i] = w.bb[k, i]
            for j in range(n):
                P[i, j] = w.Mb[k, i, j]
        elastic_forces(m, k, el_pos, el_vel, p)
        added_mass(m, k, cK, cD, P)
    # tip-to-base: articulated inertias
    for k in range(nb - 1, -1, -1):
        nm = m.nm[k]
        P = w.P[k]
        p = w.p[k]
        IA = w.IA[k]
        pA = w.pA[k]
        L = w.Lff[k]
        Y = w.Y[k]
        y = w.y[k]
        for a in range(nm):
            for b in range(nm):
                L[a, b] = P[6 + a, 6 + b]
        if not cholesky_inplace(L, nm):
            return False
        col = w.tn
        for i in range(6):
            for a in range(nm):
                col[a] = P[6 + a, i]
            cholesky_solve(L, nm, col)
            for a in range(nm):
                Y[a, i] = col[a]
        for a in range(nm):
            y[a] = p[6 + a]
        cholesky_solve(L, nm, y)
        for i in range(6):
            s = p[i]
            for a in range(nm):
                s -= P[i, 6 + a] * y[a]
            pA[i] = s
            for j in range(6):
                s = P[i, j]
                for a in range(nm):
                    s -= P[i, 6 + a] * Y[a, j]
                IA[i, j] = s
        ax = m.axis[k]
        U = w.U[k]
        for i in range(6):
            U[i] = IA[i, 0] * ax[0] + IA[i, 1] * ax[1] + IA[i, 2] * ax[2]
        Ia = w.Ia
        pa = w.t6a
        if m.drive[k] == DRIVE_PRESCRIBED:
            qdd = w.qdd_pres[k]
            for i in range(6):
                pa[i] = pA[i] + U[i] * qdd
                for j in range(6):
                    Ia[i, j] = IA[i, j]
        else:
            d = U[0] * ax[0] + U[1] * ax[1] + U[2] * ax[2] + m.armature[k]
            if not d > 0.0:
                return False
            u = w.tauj[k] - (pA[0] * ax[0] + pA[1] * ax[1] + pA[2] * ax[2])
            w.Dj[k] = d
            w.uj[k] = u
            for i in range(6):
                pa[i] = pA[i] + U[i] * u / d
                for j in range(6):
                    Ia[i, j] = IA[i, j] - U[i] * U[j] / d
        par = m.parent[k]
        if par >= 0:
            # parent += Phi^T Ia Phi, Phi^T (pa + Ia kap)
            Phi = w.Phi[k]
            kap = w.kap[k]
            npx = 6 + m.nm[par]
            IaPhi = w.IaPhi
            for i in range(6):
                s = pa[i]
                for j in range(6):
                    s += Ia[i, j] * kap[j]
                w.t6b[i] = s
                for c in range(npx):
                    s = 0.0
                    for j in range(6):
                        s += Ia[i, j] * Phi[j, c]
                    IaPhi[i, c] = s
            Pp = w.P[par]
            pp = w.p[par]
            for r in range(npx):
                s = 0.0
                for i in range(6):
                    s += Phi[i, r] * w.t6b[i]
                pp[r] += s
                for c in range(r, npx):
                    s = 0.0
                    for i in range(6):
                        s += Phi[i, r] * IaPhi[i, c]
                    Pp[r, c] += s
                    if c != r:
                        Pp[c, r] += s
    # base-to-tip: accelerations
    g = m.gravity
    for k in range(nb):
        par = m.parent[k]
        Phi = w.Phi[k]
        kap = w.kap[k]
        a = w.t6c
        for i in range(6):
            s = kap[i]
            if par >= 0:
                for c in range(6 + m.nm[par]):
                    s += Phi[i, c] * w.nud[par, c]
            else:
                for c in range(3):
                    s -= Phi[i, 3 + c] * g[c]
            a[i] = s
        ax = m.axis[k]
        if m.drive[k] == DRIVE_PRESCRIBED:
            qdd = w.qdd_pres[k]
        else:
            U = w.U[k]
            s = w.uj[k]
            for i in range(6):
                s -= U[i] * a[i]
            qdd = s / w.Dj[k]
        acc[k] = qdd
        nud = w.nud[k]
        for i in range(3):
            a[i] += ax[i] * qdd
        for i in range(6):
            nud[i] = a[i]
        nm = m.nm[k]
        base = nb + m.mo[k]
        for e in range(nm):
            s = w.y[k, e]
            for i in range(6):
                s += w.Y[k, e, i] * a[i]
            nud[6 + e] = -s
            acc[base + e] = -s
        IA = w.IA[k]
        pA = w.pA[k]
        for i in range(6):
            s = pA[i]
            for j in range(6):
                s += IA[i, j] * a[j]
            w.fj[k, i] = s
        w.tau_joint[k] = w.fj[k, 0] * ax[0] + w.fj[k, 1] * ax[1] + w.fj[k, 2] * ax[2]
        for e in range(nx - 6 - nm):
            nud[6 + nm + e] = 0.0
    motor_accelerations(m, w, tau, acc)
    return True
