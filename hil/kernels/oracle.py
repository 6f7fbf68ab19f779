"""Independent forward dynamics: composite-body mass matrix, Newton-Euler bias, Cholesky.

Seed 002 eq. (5.5) (composite bodies) and eq. (4.1)/(4.2) (Newton-Euler with zero
generalized accelerations), solved densely: O(n^2) to build, O(n^3) to solve.
It shares the per-body model (bodies.py) with the articulated-body algorithm but
none of its recursion, so agreement of the two checks the O(n) algebra: it builds each
body's dense Phi = [X, Psi] (6 x (6 + nm of the parent)) from the kinematics and multiplies
with it, where the articulated-body algorithm uses the structure of X.
Prescribed joints are moved to the right-hand side. Not for the real-time path: its buffers
grow with nq^2.
"""

from .aba import forward_kinematics, joint_torques, prepare
from .jit import kernel
from .joints import rotor_accelerations
from .layout import (DIM_NB, DIM_NETA, DIM_NM, DIM_NQ, JOINT_PRESCRIBED, MF_ARMATURE, MF_AXIS, MF_DMOD, MF_GRAVITY,
                     MF_KMOD, MF_MOT_INERTIA, MI_DRIVE, MI_MO, MI_MOT, MI_NM, MI_PARENT, W_AQ, W_ARM, W_BB, W_DIR,
                     W_DQ, W_F6, W_G6, W_HQ, W_KAP, W_MB, W_MQ, W_NUD, W_P, W_PB, W_PHI, W_PPC, W_PSI, W_QDD_PRES,
                     W_RPC, W_RQ, W_TAUJ, W_VEL, at)
from .spatial import cholesky_inplace, cholesky_solve


@kernel
def phi_matrix(mi, w, k):
    """Phi(k) = [X, Psi] (W_PHI): X = [[R^T, 0], [-R^T skew(p), R^T]] from Rpc, ppc, and the
    parent's modal columns Psi; for a root body X maps the base acceleration."""
    NM = mi[DIM_NM]
    NX = 6 + NM
    Phi = mi[W_PHI] + 6 * NX * k
    R = mi[W_RPC] + 9 * k
    p = mi[W_PPC] + 3 * k
    p0, p1, p2 = w[at(p)], w[at(p + 1)], w[at(p + 2)]
    for i in range(6):
        for c in range(NX):
            w[at(Phi + i * NX + c)] = 0.0
    for i in range(3):
        r0, r1, r2 = w[at(R + i)], w[at(R + 3 + i)], w[at(R + 6 + i)]     # column i of R = row i of R^T
        for j in range(3):
            w[at(Phi + i * NX + j)] = w[at(R + 3 * j + i)]
            w[at(Phi + (i + 3) * NX + j + 3)] = w[at(R + 3 * j + i)]
        w[at(Phi + (i + 3) * NX)] = -(r1 * p2 - r2 * p1)
        w[at(Phi + (i + 3) * NX + 1)] = -(r2 * p0 - r0 * p2)
        w[at(Phi + (i + 3) * NX + 2)] = -(r0 * p1 - r1 * p0)
    par = mi[at(mi[MI_PARENT] + k)]
    if par >= 0:
        psi = mi[W_PSI] + 6 * NM * k
        for i in range(6):
            for a in range(mi[at(mi[MI_NM] + par)]):
                w[at(Phi + i * NX + 6 + a)] = w[at(psi + i * NM + a)]


@kernel
def dof_index(mi, k, e):
    """Generalized coordinate index of body k's joint (e < 0) or its mode e."""
    if e < 0:
        return k
    return mi[DIM_NB] + mi[at(mi[MI_MO] + k)] + e


@kernel
def composite_inertias(mi, mf, w, cK, cD):
    """C(k) = M(k) + sum_children Phi^T C_rr(child) Phi, plus the implicit added modal mass (in W_P)."""
    nb = mi[DIM_NB]
    NM = mi[DIM_NM]
    NX = 6 + NM
    for k in range(nb):
        n = 6 + mi[at(mi[MI_NM] + k)]
        P = mi[W_P] + NX * NX * k
        Mb = mi[W_MB] + NX * NX * k
        for i in range(n):
            for j in range(n):
                w[at(P + i * NX + j)] = w[at(Mb + i * NX + j)]
        K = mi[MF_KMOD] + NM * NM * k
        D = mi[MF_DMOD] + NM * NM * k
        for a in range(n - 6):
            for b in range(n - 6):
                w[at(P + (6 + a) * NX + 6 + b)] += cK * mf[at(K + a * NM + b)] + cD * mf[at(D + a * NM + b)]
        phi_matrix(mi, w, k)
    for k in range(nb - 1, -1, -1):
        par = mi[at(mi[MI_PARENT] + k)]
        if par < 0:
            continue
        Phi = mi[W_PHI] + 6 * NX * k
        C = mi[W_P] + NX * NX * k
        Pp = mi[W_P] + NX * NX * par
        npx = 6 + mi[at(mi[MI_NM] + par)]
        for r in range(npx):
            for c in range(npx):
                s = 0.0
                for i in range(6):
                    for j in range(6):
                        s += w[at(Phi + i * NX + r)] * w[at(C + i * NX + j)] * w[at(Phi + j * NX + c)]
                w[at(Pp + r * NX + c)] += s


@kernel
def mass_matrix(mi, mf, w, cK, cD, M):
    """Joint-and-modal mass matrix M (nq x nq; rotor rows/columns diagonal) at the prepared state."""
    nb = mi[DIM_NB]
    nq = mi[DIM_NQ]
    NM = mi[DIM_NM]
    NX = 6 + NM
    for i in range(nq):
        for j in range(nq):
            M[i, j] = 0.0
    composite_inertias(mi, mf, w, cK, cD)
    F = mi[W_F6]
    G = mi[W_G6]
    d = mi[W_DIR]
    for k in range(nb):
        nk = 6 + mi[at(mi[MI_NM] + k)]
        for e in range(-1, nk - 6):
            col = dof_index(mi, k, e)
            for i in range(nk):
                w[at(d + i)] = 0.0
            if e < 0:
                for i in range(3):
                    w[at(d + i)] = mf[at(mi[MF_AXIS] + 3 * k + i)]
            else:
                w[at(d + 6 + e)] = 1.0
            C = mi[W_P] + NX * NX * k
            for i in range(nk):
                s = 0.0
                for j in range(nk):
                    s += w[at(C + i * NX + j)] * w[at(d + j)]
                w[at(F + i)] = s
            # walk to the base, reading off rows of the column
            b = k
            while True:
                ax = mi[MF_AXIS] + 3 * b
                row = dof_index(mi, b, -1)
                v = w[at(F)] * mf[at(ax)] + w[at(F + 1)] * mf[at(ax + 1)] + w[at(F + 2)] * mf[at(ax + 2)]
                M[row, col] = v
                M[col, row] = v
                for e2 in range(mi[at(mi[MI_NM] + b)]):
                    row = dof_index(mi, b, e2)
                    M[row, col] = w[at(F + 6 + e2)]
                    M[col, row] = w[at(F + 6 + e2)]
                par = mi[at(mi[MI_PARENT] + b)]
                if par < 0:
                    break
                Phi = mi[W_PHI] + 6 * NX * b
                npx = 6 + mi[at(mi[MI_NM] + par)]
                for r in range(npx):
                    s = 0.0
                    for i in range(6):
                        s += w[at(Phi + i * NX + r)] * w[at(F + i)]
                    w[at(G + r)] = s
                for r in range(npx):
                    w[at(F + r)] = w[at(G + r)]
                b = par
    rotors = nb + mi[DIM_NETA]
    for k in range(nb):
        rotor = mi[at(mi[MI_MOT] + k)]
        if rotor >= 0:
            M[rotors + rotor, rotors + rotor] = mf[at(mi[MF_MOT_INERTIA] + k)]
        else:
            M[k, k] += mf[at(mi[MF_ARMATURE] + k)]


@kernel
def bias_forces(mi, mf, w, el_pos, el_vel, h):
    """Newton-Euler generalized forces h = C(q, qd) + K eta + D eta_dot + gravity - drive,
    at zero free accelerations (prescribed joints at their prescribed acceleration)."""
    nb = mi[DIM_NB]
    nq = mi[DIM_NQ]
    NM = mi[DIM_NM]
    NX = 6 + NM
    g = mi[MF_GRAVITY]
    for i in range(nq):
        h[i] = 0.0
    for k in range(nb):
        phi_matrix(mi, w, k)
        par = mi[at(mi[MI_PARENT] + k)]
        Phi = mi[W_PHI] + 6 * NX * k
        a = mi[W_NUD] + NX * k
        kap = mi[W_KAP] + 6 * k
        for i in range(NX):
            w[at(a + i)] = 0.0
        for i in range(6):
            s = w[at(kap + i)]
            if par >= 0:
                ap = mi[W_NUD] + NX * par
                for c in range(6 + mi[at(mi[MI_NM] + par)]):
                    s += w[at(Phi + i * NX + c)] * w[at(ap + c)]
            else:
                for c in range(3):
                    s -= w[at(Phi + i * NX + 3 + c)] * mf[at(g + c)]
            w[at(a + i)] = s
        if mi[at(mi[MI_DRIVE] + k)] == JOINT_PRESCRIBED:
            for i in range(3):
                w[at(a + i)] += mf[at(mi[MF_AXIS] + 3 * k + i)] * w[at(mi[W_QDD_PRES] + k)]
    for k in range(nb):
        n = 6 + mi[at(mi[MI_NM] + k)]
        F = mi[W_PB] + NX * k
        Mb = mi[W_MB] + NX * NX * k
        bb = mi[W_BB] + NX * k
        a = mi[W_NUD] + NX * k
        for i in range(n):
            s = w[at(bb + i)]
            for j in range(n):
                s += w[at(Mb + i * NX + j)] * w[at(a + j)]
            w[at(F + i)] = s
        K = mi[MF_KMOD] + NM * NM * k
        D = mi[MF_DMOD] + NM * NM * k
        e = nb + mi[at(mi[MI_MO] + k)]
        for x in range(n - 6):
            s = 0.0
            for y in range(n - 6):
                s += mf[at(K + x * NM + y)] * el_pos[e + y] + mf[at(D + x * NM + y)] * el_vel[e + y]
            w[at(F + 6 + x)] += s
    for k in range(nb - 1, -1, -1):
        F = mi[W_PB] + NX * k
        ax = mi[MF_AXIS] + 3 * k
        h[k] = (w[at(F)] * mf[at(ax)] + w[at(F + 1)] * mf[at(ax + 1)] + w[at(F + 2)] * mf[at(ax + 2)]
                - w[at(mi[W_TAUJ] + k)])
        for e in range(mi[at(mi[MI_NM] + k)]):
            h[dof_index(mi, k, e)] = w[at(F + 6 + e)]
        par = mi[at(mi[MI_PARENT] + k)]
        if par >= 0:
            Phi = mi[W_PHI] + 6 * NX * k
            Fp = mi[W_PB] + NX * par
            for r in range(6 + mi[at(mi[MI_NM] + par)]):
                s = 0.0
                for i in range(6):
                    s += w[at(Phi + i * NX + r)] * w[at(F + i)]
                w[at(Fp + r)] += s


@kernel(refcount=True)       # it allocates: the list of free coordinates
def forward_dynamics_dense(mi, mf, w, t, pos, vel, tau, el_pos, el_vel, cK, cD, acc):
    """Same contract as aba.forward_dynamics, via M qdd = -h solved by Cholesky."""
    nb = mi[DIM_NB]
    nq = mi[DIM_NQ]
    prepare(mi, mf, w, t, pos, vel)
    joint_torques(mi, mf, w, tau, el_vel, cD)
    forward_kinematics(mi, mf, w)
    Mq = mi[W_MQ]
    h = mi[W_HQ]
    bias_forces(mi, mf, w, el_pos, el_vel, w[h:h + nq])
    mass_matrix(mi, mf, w, cK, cD, w[Mq:Mq + nq * nq].reshape((nq, nq)))
    for k in range(nb):     # the implicit friction's slope (joint_torques: W_ARM beyond the armature)
        w[at(Mq + k * nq + k)] += w[at(mi[W_ARM] + k)] - mf[at(mi[MF_ARMATURE] + k)]
    # free coordinates: all but prescribed joints (and rotors, solved separately)
    free = []
    for i in range(nb + mi[DIM_NETA]):
        if i < nb and mi[at(mi[MI_DRIVE] + i)] == JOINT_PRESCRIBED:
            continue
        free.append(i)
    nf = len(free)
    A = mi[W_AQ]
    rhs = mi[W_RQ]
    for r in range(nf):
        w[at(rhs + r)] = -w[at(h + free[r])]
        for c in range(nf):
            w[at(A + r * nf + c)] = w[at(Mq + free[r] * nq + free[c])]
    if not cholesky_inplace(w, A, nf, nf, w, mi[W_DQ]):
        return False
    cholesky_solve(w, A, nf, nf, w, rhs, 1)
    for i in range(nq):
        acc[i] = 0.0
    for k in range(nb):
        if mi[at(mi[MI_DRIVE] + k)] == JOINT_PRESCRIBED:
            acc[k] = w[at(mi[W_QDD_PRES] + k)]
    for r in range(nf):
        acc[free[r]] = w[at(rhs + r)]
    rotor_accelerations(mi, mf, el_vel, w, mi[W_VEL], cD, tau, w, mi[W_TAUJ], acc)
    return True


@kernel
def rest_forces(mi, mf, w, pos, zero, h):
    """h = the generalized forces at rest at pos with zero drive torque (bias_forces at zero rates,
    elastic forces at pos, gravity), with each rotor row the Spong spring acting on it; zero: nq
    zeros (rates and torques). One call for hil.model.linearize."""
    prepare(mi, mf, w, 0.0, pos, zero)
    joint_torques(mi, mf, w, zero, zero, 0.0)
    forward_kinematics(mi, mf, w)
    bias_forces(mi, mf, w, pos, zero, h)
    rotors = mi[DIM_NB] + mi[DIM_NETA]
    for k in range(mi[DIM_NB]):
        r = mi[at(mi[MI_MOT] + k)]
        if r >= 0:
            h[rotors + r] = w[at(mi[W_TAUJ] + k)]


@kernel
def mass_matrix_at(mi, mf, w, t, pos, zero, M):
    """M = mass_matrix at the configuration pos, time t (zero: nq zero rates)."""
    prepare(mi, mf, w, t, pos, zero)
    forward_kinematics(mi, mf, w)
    mass_matrix(mi, mf, w, 0.0, 0.0, M)
