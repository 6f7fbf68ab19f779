"""Independent forward dynamics: composite-body mass matrix, Newton-Euler bias, Cholesky.

Seed 002 eq. (5.5) (composite bodies) and eq. (4.1)/(4.2) (Newton-Euler with zero
generalized accelerations), solved densely: O(n^2) to build, O(n^3) to solve.
It shares the per-body model (bodies.py) with the articulated-body algorithm but
none of its recursion, so agreement of the two checks the O(n) algebra.
Prescribed joints are moved to the right-hand side.
"""
from numba import njit

from .aba import added_mass, elastic_forces, forward_kinematics, joint_torques, motor_accelerations, prepare
from .spatial import cholesky_inplace, cholesky_solve
from .layout import DIM_NB, DIM_NETA, DIM_NM, DIM_NQ, JOINT_PRESCRIBED


@njit(cache=True)
def dof_index(m, k, e):
    """Generalized coordinate index of body k's joint (e < 0) or its mode e."""
    if e < 0:
        return k
    return m.dims[DIM_NB] + m.mo[k] + e


@njit(cache=True)
def composite_inertias(m, w, cK, cD):
    """C(k) = M(k) + sum_children Phi^T C_rr(child) Phi, plus the implicit added modal mass."""
    nb = m.dims[DIM_NB]
    for k in range(nb):
        n = 6 + m.nm[k]
        for i in range(n):
            for j in range(n):
                w.P[k, i, j] = w.Mb[k, i, j]
        added_mass(k, m.nm, m.Kmod, m.Dmod, cK, cD, w.P)
    for k in range(nb - 1, -1, -1):
        par = m.parent[k]
        if par < 0:
            continue
        Phi = w.Phi[k]
        C = w.P[k]
        npx = 6 + m.nm[par]
        for r in range(npx):
            for c in range(npx):
                s = 0.0
                for i in range(6):
                    for j in range(6):
                        s += Phi[i, r] * C[i, j] * Phi[j, c]
                w.P[par, r, c] += s


@njit(cache=True)
def mass_matrix(m, w, cK, cD, M):
    """Joint-and-modal mass matrix M (nq x nq; rotor rows/columns diagonal) at the prepared state."""
    nb = m.dims[DIM_NB]
    nq = m.dims[DIM_NQ]
    for i in range(nq):
        for j in range(nq):
            M[i, j] = 0.0
    composite_inertias(m, w, cK, cD)
    F = w.tx
    G = w.tx2
    for k in range(nb):
        nk = 6 + m.nm[k]
        for e in range(-1, m.nm[k]):
            col = dof_index(m, k, e)
            d = w.tx3
            for i in range(nk):
                d[i] = 0.0
            if e < 0:
                for i in range(3):
                    d[i] = m.axis[k, i]
            else:
                d[6 + e] = 1.0
            C = w.P[k]
            for i in range(nk):
                s = 0.0
                for j in range(nk):
                    s += C[i, j] * d[j]
                F[i] = s
            # walk to the base, reading off rows of the column
            b = k
            while True:
                ax = m.axis[b]
                row = dof_index(m, b, -1)
                v = F[0] * ax[0] + F[1] * ax[1] + F[2] * ax[2]
                M[row, col] = v
                M[col, row] = v
                for e2 in range(m.nm[b]):
                    row = dof_index(m, b, e2)
                    M[row, col] = F[6 + e2]
                    M[col, row] = F[6 + e2]
                par = m.parent[b]
                if par < 0:
                    break
                Phi = w.Phi[b]
                for r in range(6 + m.nm[par]):
                    s = 0.0
                    for i in range(6):
                        s += Phi[i, r] * F[i]
                    G[r] = s
                for r in range(6 + m.nm[par]):
                    F[r] = G[r]
                b = par
    off = nb + m.dims[DIM_NETA]
    for k in range(nb):
        if m.mot[k] >= 0:
            M[off + m.mot[k], off + m.mot[k]] = m.mot_inertia[k]
        else:
            M[k, k] += m.armature[k]


@njit(cache=True)
def bias_forces(m, w, el_pos, el_vel, h):
    """Newton-Euler generalized forces h = C(q, qd) + K eta + D eta_dot + gravity - drive,
    at zero free accelerations (prescribed joints at their prescribed acceleration)."""
    nb = m.dims[DIM_NB]
    nq = m.dims[DIM_NQ]
    g = m.gravity
    for i in range(nq):
        h[i] = 0.0
    for k in range(nb):
        par = m.parent[k]
        Phi = w.Phi[k]
        a = w.nud[k]
        for i in range(6 + m.dims[DIM_NM]):
            a[i] = 0.0
        for i in range(6):
            s = w.kap[k, i]
            if par >= 0:
                for c in range(6 + m.nm[par]):
                    s += Phi[i, c] * w.nud[par, c]
            else:
                for c in range(3):
                    s -= Phi[i, 3 + c] * g[c]
            a[i] = s
        if m.drive[k] == JOINT_PRESCRIBED:
            for i in range(3):
                a[i] += m.axis[k, i] * w.qdd_pres[k]
    for k in range(nb):
        n = 6 + m.nm[k]
        F = w.p[k]
        for i in range(n):
            s = w.bb[k, i]
            for j in range(n):
                s += w.Mb[k, i, j] * w.nud[k, j]
            F[i] = s
        elastic_forces(k, m.dims[DIM_NB], m.nm, m.mo, m.Kmod, m.Dmod, el_pos, el_vel, w.p)
    for k in range(nb - 1, -1, -1):
        F = w.p[k]
        ax = m.axis[k]
        h[k] = F[0] * ax[0] + F[1] * ax[1] + F[2] * ax[2] - w.tauj[k]
        for e in range(m.nm[k]):
            h[dof_index(m, k, e)] = F[6 + e]
        par = m.parent[k]
        if par >= 0:
            Phi = w.Phi[k]
            for r in range(6 + m.nm[par]):
                s = 0.0
                for i in range(6):
                    s += Phi[i, r] * F[i]
                w.p[par, r] += s


@njit(cache=True)
def forward_dynamics_dense(m, w, t, pos, vel, tau, el_pos, el_vel, cK, cD, acc):
    """Same contract as aba.forward_dynamics, via M qdd = -h solved by Cholesky."""
    nb = m.dims[DIM_NB]
    nq = m.dims[DIM_NQ]
    prepare(m, w, t, pos, vel)
    joint_torques(m, w, tau)
    forward_kinematics(m, w)
    M = w.Mq
    h = w.hq
    bias_forces(m, w, el_pos, el_vel, h)
    mass_matrix(m, w, cK, cD, M)
    # free coordinates: all but prescribed joints (and rotors, solved separately)
    idx = w.iq
    nf = 0
    for i in range(nb + m.dims[DIM_NETA]):
        if i < nb and m.drive[i] == JOINT_PRESCRIBED:
            continue
        idx[nf] = i
        nf += 1
    A = w.Aq
    rhs = w.rq
    for r in range(nf):
        rhs[r] = -h[idx[r]]
        for c in range(nf):
            A[0, r, c] = M[idx[r], idx[c]]
    if not cholesky_inplace(A, 0, nf):
        return False
    cholesky_solve(A, 0, nf, rhs)
    for i in range(nq):
        acc[i] = 0.0
    for k in range(nb):
        if m.drive[k] == JOINT_PRESCRIBED:
            acc[k] = w.qdd_pres[k]
    for r in range(nf):
        acc[idx[r]] = rhs[r]
    motor_accelerations(m, w, tau, acc)
    return True
