"""O(n) articulated-body forward dynamics of a flexible multibody tree.

Jain & Rodriguez (seed 002 in docs/references.md), Section 7, in Featherstone's
body-coordinate form (docs/references.md: RBDA, Table 7.1), with two errors of the printed
equations corrected (each checked against the composite-body mass matrix of kernels/oracle.py
in tests/test_dynamics_algebra.py):

* per body, the modal coordinates are eliminated first with a Cholesky factor of
  the n_m x n_m block P_ff (no Woodbury step: eq. 7.10 inverts Gamma(k), which is
  always singular), then the hinge coordinate;
* the modal acceleration is eta_ddot = -P_ff^-1 (P_fr a + p_f), where p_f holds
  the Coriolis term once (eq. 7.12 as printed subtracts it twice).

forward_dynamics runs the passes:

  prepare, joint_torques            the state with prescribed motion imposed; joint laws (joints.py),
                                    friction at the reference rates el_vel, implicit by cD
  kinematics_base_to_tip            poses, twists V, kap, Psi of every body (bodies.py)
  body_inertias                     M_m(k), b_m(k) of every body; P(k), p(k) start from them (with an
                                    implicit integrator's added modal mass, less the generalized force
                                    of the output stations' external wrenches: station_loads.py)
  articulated_inertias_tip_to_base  per body eliminate_modes, eliminate_hinge, add_to_parent
  accelerations_base_to_tip         joint and modal accelerations, joint wrenches
  rotor_accelerations               Spong rotors (joints.py)

Cost linear in the number of bodies, cubic in modes per body. Gravity enters as the base
acceleration -g, so body accelerations returned here are specific forces (what an
accelerometer senses) in their linear part.

Symbols: work blocks of hil.kernels.layout for body k (s = [axis; 0] its joint's motion
subspace, "parent" the inboard body, f the modal and r the rigid rows and columns). Seed 002
numbers bodies tip to base (its k + 1 is our parent) and orders modal vectors modes first;
here the rigid part comes first.

  here    holds                                             seed 002 (eq.)             RBDA Table 7.1
  Mb, bb  extended body inertia, velocity-product force    M_m(k) 3.25, b_m(k) 3.39   I_i, p_i
  P, p    extended articulated inertia and bias force      P(k) 7.10, z(k) 7.11       -
          (body, children, K eta + D eta_dot)
  Lff     Cholesky factor of P_ff                           D_f(k) = P^ff (7.10)       -
  Z, z    Lff^-1 P_fr, Lff^-1 p_f: P_rf P_ff^-1 P_fr       g(k) mu*(k) = Z^T Z,       -
          = Z^T Z                                           nu_f(k) = -Lff^-T z (7.11)
  IA, pA  P_rr - Z^T Z, p_r - Z^T z (in P's and p's rigid  P_R(k), z_R(k)             I^A_i, p^A_i
          rows: the modes eliminated)
  U       IA s                                              G_R(k) D_R(k)              U_i
  D       s^T IA s + n^2 J_r (the armature)                 D_R(k)                     D_i
          + cD s_f (the implicit friction's slope)
  u       tau - s^T pA                                      eps_R(k)                   u_i
  Ia, pa  IA - U U^T / D, pA + U u / D: passed inboard      P_R+(k), z_R+(k)           I^a_i, p^a_i - I^a_i c_i
  X, Psi  the parent's extended acceleration to body k's:   phi*(t_k+1, k) A*(k+1)     iX_lambda(i)
          a_k = X a_parent + Psi eta_ddot_parent + ...      (7.12)
  kap     velocity-product acceleration of the joint       a_mR(k) 3.27               c_i
  nud     extended acceleration [a_k; eta_ddot_k]           alpha_m(k) 3.26, 7.12      a_i

The pass inboard is Featherstone's: P(parent) += Phi^T Ia Phi, p(parent) += Phi^T (pa + Ia kap)
with Phi = [X, Psi]; seed 002 instead carries P a_mR in z(k), the printed 7.12 then subtracts it
a second time.
"""
from .bodies import body_inertia, joint_kinematics
from .jit import kernel
from .joints import impose_prescribed_motion, joint_friction_torques, link_torques, rotor_accelerations
from .layout import (DIM_NB, DIM_NM, FIT_C, JOINT_PRESCRIBED, MF_AXIS, MF_DMOD, MF_FITTED, MF_GRAVITY,
                     MF_KMOD, W_ARM, W_BB, W_D, W_FJ, W_F_INBOARD, W_IA_HINGE, W_IA_PSI, W_KAP, W_LFF, W_LFF_INV, W_MB, W_NUD,
                     W_P, W_PA_HINGE, W_PB, W_POS, W_PPC, W_PSI, W_QDD_PRES, W_RPC, W_TAUJ, W_TAU_JOINT, W_U, W_UJ,
                     W_VEL, W_Z, W_ZB, at, drive_of, first_mode, modes_of, parent_of)
from .spatial import cholesky_inplace, force_to_parent, inertia_to_parent
from .station_loads import station_loads


@kernel
def forward_dynamics(mi, mf, w, t, pos, vel, tau, el_pos, el_vel, cK, cD, acc):
    """Generalized accelerations acc (joints, modes, rotors) of the state (pos, vel) at time t.

    tau: drive torque per joint (link side; for a Spong joint, the rotor-side torque
    referred to the link). Elastic modal forces and joint friction use (el_pos, el_vel); pass pos, vel
    for a fully explicit evaluation. cK, cD: implicit coefficients (cK K + cD D added to each body's
    modal mass, cD times the friction's slope to each joint's armature: hil.kernels.joints).
    Returns False if an articulated inertia lost positive definiteness.
    """
    return forward_dynamics_blocks(mi, mf, w, t, pos, vel, tau, el_pos, el_vel, (cK, cD, False), acc)


@kernel
def forward_dynamics_blocks(mi, mf, w, t, pos, vel, tau, el_pos, el_vel, implicit, acc):
    """forward_dynamics with its implicit operator implicit = (cK, cD, fitted): with `fitted`, the
    model's fitted blocks C (MF_FITTED, FIT_C; symmetric n_m x n_m) added to each body's modal mass
    too, an integrator's implicit modal operator that is not a multiple of K and D
    (hil.kernels.fitted_midpoint)."""
    cK, cD, fitted = implicit
    prepare(mi, mf, w, t, pos, vel)
    joint_torques(mi, mf, w, tau, el_vel, cD)
    kinematics_base_to_tip(mi, mf, w)
    body_inertias(mi, mf, w, el_pos, el_vel, cK, cD, fitted)
    if not articulated_inertias_tip_to_base(mi, mf, w):
        return False
    accelerations_base_to_tip(mi, mf, w, acc)
    rotor_accelerations(mi, mf, el_vel, w, mi[W_VEL], cD, tau, w, mi[W_TAUJ], acc)
    return True


@kernel
def prepare(mi, mf, w, t, pos, vel):
    """Copy the state into the work buffers, imposing prescribed joint motion at time t."""
    impose_prescribed_motion(mi, mf, t, pos, vel, w, mi[W_POS], w, mi[W_VEL], w, mi[W_QDD_PRES])


@kernel
def joint_torques(mi, mf, w, tau, rates, cD):
    """Link-side torque each joint receives (drive minus friction, or the Spong spring) at the prepared
    state, the friction at `rates` and implicit by cD, and the armature with its slope (W_ARM)."""
    link_torques(mi, mf, w, mi[W_POS], w, mi[W_VEL], tau, w, mi[W_TAUJ])
    joint_friction_torques(mi, mf, rates, w, mi[W_VEL], cD, w, mi[W_TAUJ], w, mi[W_ARM])


@kernel
def kinematics_base_to_tip(mi, mf, w):
    """Joint transforms, twists, velocity-product accelerations and modal maps of every body."""
    for k in range(mi[DIM_NB]):
        joint_kinematics(mi, mf, w, k)


@kernel
def forward_kinematics(mi, mf, w):
    """kinematics_base_to_tip and each body's M_m(k), b_m(k) (Mb, bb): what the energy and the oracle read."""
    for k in range(mi[DIM_NB]):
        joint_kinematics(mi, mf, w, k)
        body_inertia(mi, mf, w, k)


@kernel
def body_inertias(mi, mf, w, el_pos, el_vel, cK, cD, fitted):
    """Mb, bb of every body, and the articulated quantities the tip-to-base pass starts from:
    P(k) = M_m(k) + cK K + cD D (+ C, the fitted block, when `fitted`: the implicit integrator's added
    modal mass), p(k) = b_m(k) + K eta + D eta_dot at (el_pos, el_vel) - Q(k), the stations' external
    wrenches (hil.kernels.station_loads)."""
    nb = mi[DIM_NB]
    NM = mi[DIM_NM]
    NX = 6 + NM
    for k in range(nb):
        body_inertia(mi, mf, w, k)
        nm = modes_of(mi, k)
        n = 6 + nm
        Mb = mi[W_MB] + NX * NX * k
        P = mi[W_P] + NX * NX * k
        bb = mi[W_BB] + NX * k
        p = mi[W_PB] + NX * k
        for i in range(n):
            w[at(p + i)] = w[at(bb + i)]
            for j in range(n):
                w[at(P + i * NX + j)] = w[at(Mb + i * NX + j)]
        K = mi[MF_KMOD] + NM * NM * k
        D = mi[MF_DMOD] + NM * NM * k
        e = first_mode(mi, k)
        for a in range(nm):
            s = 0.0
            for b in range(nm):
                s += mf[at(K + a * NM + b)] * el_pos[e + b] + mf[at(D + a * NM + b)] * el_vel[e + b]
            w[at(p + 6 + a)] += s
        if cK != 0.0 or cD != 0.0:
            for a in range(nm):
                for b in range(nm):
                    w[at(P + (6 + a) * NX + 6 + b)] += cK * mf[at(K + a * NM + b)] + cD * mf[at(D + a * NM + b)]
        if fitted:
            C = mi[MF_FITTED] + ((FIT_C * nb + k) * NM) * NM
            for a in range(nm):
                for b in range(nm):
                    w[at(P + (6 + a) * NX + 6 + b)] += mf[at(C + a * NM + b)]
    station_loads(mi, mf, w)


@kernel
def articulated_inertias_tip_to_base(mi, mf, w):
    """Seed 002 eqs. 7.10 and 7.11 (with the errata of the module docstring), tip to base: each
    body's modes, then its hinge, eliminated, and what is left passed to its parent. False if an
    articulated inertia is not positive definite."""
    for k in range(mi[DIM_NB] - 1, -1, -1):
        if not eliminate_modes(mi, w, k):
            return False
        if not eliminate_hinge(mi, mf, w, k):
            return False
        if parent_of(mi, k) >= 0:
            add_to_parent(mi, w, k)
    return True


@kernel
def eliminate_modes(mi, w, k):
    """Lff = chol(P_ff), Z = Lff^-1 P_fr, z = Lff^-1 p_f, then in place IA = P_rr - Z^T Z and
    pA = p_r - Z^T z (P_rf P_ff^-1 P_fr = Z^T Z): what remains of P(k), p(k) in their rigid rows and
    columns. The six columns of P_fr and p_f are substituted together, in registers."""
    NM = mi[DIM_NM]
    NX = 6 + NM
    nm = modes_of(mi, k)
    if nm == 0:
        return True
    P = mi[W_P] + NX * NX * k
    p = mi[W_PB] + NX * k
    Lff = mi[W_LFF] + NM * NM * k
    Z = mi[W_Z] + 6 * NM * k
    z = mi[W_ZB] + NM * k
    inv = mi[W_LFF_INV] + NM * k
    for a in range(nm):
        for b in range(a + 1):
            w[at(Lff + a * NM + b)] = w[at(P + (6 + a) * NX + 6 + b)]
    if not cholesky_inplace(w, Lff, nm, NM, w, inv):
        return False
    s00 = s01 = s02 = s03 = s04 = s05 = s11 = s12 = s13 = s14 = s15 = 0.0
    s22 = s23 = s24 = s25 = s33 = s34 = s35 = s44 = s45 = s55 = 0.0
    t0 = t1 = t2 = t3 = t4 = t5 = 0.0
    for a in range(nm):
        Pa = P + (6 + a) * NX
        x0, x1, x2, x3, x4, x5 = (w[at(Pa)], w[at(Pa + 1)], w[at(Pa + 2)], w[at(Pa + 3)], w[at(Pa + 4)],
                                  w[at(Pa + 5)])
        xb = w[at(p + 6 + a)]
        for c in range(a):
            lac = w[at(Lff + a * NM + c)]
            Zc = Z + 6 * c
            x0 -= lac * w[at(Zc)]
            x1 -= lac * w[at(Zc + 1)]
            x2 -= lac * w[at(Zc + 2)]
            x3 -= lac * w[at(Zc + 3)]
            x4 -= lac * w[at(Zc + 4)]
            x5 -= lac * w[at(Zc + 5)]
            xb -= lac * w[at(z + c)]
        r = w[at(inv + a)]
        x0, x1, x2, x3, x4, x5, xb = x0 * r, x1 * r, x2 * r, x3 * r, x4 * r, x5 * r, xb * r
        Za = Z + 6 * a
        w[at(Za)], w[at(Za + 1)], w[at(Za + 2)] = x0, x1, x2
        w[at(Za + 3)], w[at(Za + 4)], w[at(Za + 5)] = x3, x4, x5
        w[at(z + a)] = xb
        s00 += x0 * x0
        s01 += x0 * x1
        s02 += x0 * x2
        s03 += x0 * x3
        s04 += x0 * x4
        s05 += x0 * x5
        s11 += x1 * x1
        s12 += x1 * x2
        s13 += x1 * x3
        s14 += x1 * x4
        s15 += x1 * x5
        s22 += x2 * x2
        s23 += x2 * x3
        s24 += x2 * x4
        s25 += x2 * x5
        s33 += x3 * x3
        s34 += x3 * x4
        s35 += x3 * x5
        s44 += x4 * x4
        s45 += x4 * x5
        s55 += x5 * x5
        t0 += x0 * xb
        t1 += x1 * xb
        t2 += x2 * xb
        t3 += x3 * xb
        t4 += x4 * xb
        t5 += x5 * xb
    ztz = (s00, s01, s02, s03, s04, s05, s11, s12, s13, s14, s15, s22, s23, s24, s25, s33, s34, s35, s44, s45, s55)
    n = 0
    for i in range(6):
        for j in range(i, 6):
            w[at(P + i * NX + j)] -= ztz[n]
            if j != i:
                w[at(P + j * NX + i)] -= ztz[n]
            n += 1
    w[at(p)] -= t0
    w[at(p + 1)] -= t1
    w[at(p + 2)] -= t2
    w[at(p + 3)] -= t3
    w[at(p + 4)] -= t4
    w[at(p + 5)] -= t5
    return True


@kernel
def eliminate_hinge(mi, mf, w, k):
    """U = IA s; a torque-driven joint: D = s^T U + armature (W_ARM: with the implicit friction's slope),
    u = tau - s^T pA, Ia = IA - U U^T / D,
    pa = pA + U u / D; a prescribed one: Ia = IA, pa = pA + U q_ddot. False if D <= 0."""
    NX = 6 + mi[DIM_NM]
    ax = mi[MF_AXIS] + 3 * k
    ax0, ax1, ax2 = mf[at(ax)], mf[at(ax + 1)], mf[at(ax + 2)]
    IA = mi[W_P] + NX * NX * k
    pA = mi[W_PB] + NX * k
    U = mi[W_U] + 6 * k
    Ia = mi[W_IA_HINGE]
    pa = mi[W_PA_HINGE]
    for i in range(6):
        w[at(U + i)] = w[at(IA + NX * i)] * ax0 + w[at(IA + NX * i + 1)] * ax1 + w[at(IA + NX * i + 2)] * ax2
    if drive_of(mi, k) == JOINT_PRESCRIBED:
        qdd = w[at(mi[W_QDD_PRES] + k)]
        for i in range(6):
            w[at(pa + i)] = w[at(pA + i)] + w[at(U + i)] * qdd
            for j in range(6):
                w[at(Ia + 6 * i + j)] = w[at(IA + NX * i + j)]
        return True
    d = w[at(U)] * ax0 + w[at(U + 1)] * ax1 + w[at(U + 2)] * ax2 + w[at(mi[W_ARM] + k)]
    if not d > 0.0:
        return False
    u = w[at(mi[W_TAUJ] + k)] - (w[at(pA)] * ax0 + w[at(pA + 1)] * ax1 + w[at(pA + 2)] * ax2)
    w[at(mi[W_D] + k)] = d
    w[at(mi[W_UJ] + k)] = u
    for i in range(6):
        Ui = w[at(U + i)] / d
        w[at(pa + i)] = w[at(pA + i)] + Ui * u
        for j in range(6):
            w[at(Ia + 6 * i + j)] = w[at(IA + NX * i + j)] - Ui * w[at(U + j)]
    return True


@kernel
def add_to_parent(mi, w, k):
    """P(parent) += Phi^T Ia Phi, p(parent) += Phi^T (pa + Ia kap), Phi = [X, Psi]: the rigid block
    by the structured transform X^T Ia X (inertia_to_parent), the modal rows and columns through
    Ia Psi."""
    NM = mi[DIM_NM]
    NX = 6 + NM
    par = parent_of(mi, k)
    nmp = modes_of(mi, par)
    R = mi[W_RPC] + 9 * k
    origin = mi[W_PPC] + 3 * k
    Ia = mi[W_IA_HINGE]
    pa = mi[W_PA_HINGE]
    kap = mi[W_KAP] + 6 * k
    f = mi[W_F_INBOARD]
    P = mi[W_P] + NX * NX * par
    p = mi[W_PB] + NX * par
    for i in range(6):
        s = w[at(pa + i)]
        for j in range(6):
            s += w[at(Ia + 6 * i + j)] * w[at(kap + j)]
        w[at(f + i)] = s
    force_to_parent(w, R, origin, f, 1, p, 1)
    inertia_to_parent(w, R, origin, Ia, P, NX)
    if nmp == 0:
        return
    psi = mi[W_PSI] + 6 * NM * k
    IaPsi = mi[W_IA_PSI]
    for i in range(6):
        for a in range(nmp):
            s = 0.0
            for j in range(6):
                s += w[at(Ia + 6 * i + j)] * w[at(psi + j * NM + a)]
            w[at(IaPsi + i * NM + a)] = s
    for a in range(nmp):
        # the modal rows of the bias, and the modal block (upper half, mirrored)
        s = 0.0
        for i in range(6):
            s += w[at(psi + i * NM + a)] * w[at(f + i)]
        w[at(p + 6 + a)] += s
        for b in range(a, nmp):
            s = 0.0
            for i in range(6):
                s += w[at(psi + i * NM + a)] * w[at(IaPsi + i * NM + b)]
            w[at(P + (6 + a) * NX + 6 + b)] += s
            if b != a:
                w[at(P + (6 + b) * NX + 6 + a)] += s
    # the coupling block X^T Ia Psi, column by column, and its transpose
    for a in range(nmp):
        force_to_parent(w, R, origin, IaPsi + a, NM, P + 6 + a, NX)
        for i in range(6):
            w[at(P + (6 + a) * NX + i)] = w[at(P + i * NX + 6 + a)]


@kernel
def accelerations_base_to_tip(mi, mf, w, acc):
    """Seed 002 eq. 7.12 (with the erratum of the module docstring), base to tip: each joint's
    acceleration, then its body's modal accelerations; nud(k) = [a_k; eta_ddot_k], the joint wrench
    fj(k) = pA + IA a_k and its axis component tau_joint(k)."""
    nb = mi[DIM_NB]
    NM = mi[DIM_NM]
    NX = 6 + NM
    g = mi[MF_GRAVITY]
    for k in range(nb):
        par = parent_of(mi, k)
        R = mi[W_RPC] + 9 * k
        p = mi[W_PPC] + 3 * k
        kap = mi[W_KAP] + 6 * k
        nud = mi[W_NUD] + NX * k
        # a = X a_parent + Psi eta_ddot_parent + kap; the base accelerates at -g
        if par >= 0:
            ap = mi[W_NUD] + NX * par
            al0, al1, al2 = w[at(ap)], w[at(ap + 1)], w[at(ap + 2)]
            v0 = w[at(ap + 3)] + al1 * w[at(p + 2)] - al2 * w[at(p + 1)]
            v1 = w[at(ap + 4)] + al2 * w[at(p)] - al0 * w[at(p + 2)]
            v2 = w[at(ap + 5)] + al0 * w[at(p + 1)] - al1 * w[at(p)]
        else:
            al0 = al1 = al2 = 0.0
            v0, v1, v2 = -mf[at(g)], -mf[at(g + 1)], -mf[at(g + 2)]
        for i in range(3):
            w[at(nud + i)] = w[at(R + i)] * al0 + w[at(R + 3 + i)] * al1 + w[at(R + 6 + i)] * al2 + w[at(kap + i)]
            w[at(nud + 3 + i)] = w[at(R + i)] * v0 + w[at(R + 3 + i)] * v1 + w[at(R + 6 + i)] * v2 + w[at(kap + 3 + i)]
        if par >= 0:
            nmp = modes_of(mi, par)
            psi = mi[W_PSI] + 6 * NM * k
            ed = mi[W_NUD] + NX * par + 6
            for i in range(6):
                s = 0.0
                for a in range(nmp):
                    s += w[at(psi + i * NM + a)] * w[at(ed + a)]
                w[at(nud + i)] += s
        ax = mi[MF_AXIS] + 3 * k
        ax0, ax1, ax2 = mf[at(ax)], mf[at(ax + 1)], mf[at(ax + 2)]
        U = mi[W_U] + 6 * k
        if drive_of(mi, k) == JOINT_PRESCRIBED:
            qdd = w[at(mi[W_QDD_PRES] + k)]
        else:
            s = w[at(mi[W_UJ] + k)]
            for i in range(6):
                s -= w[at(U + i)] * w[at(nud + i)]
            qdd = s / w[at(mi[W_D] + k)]
        acc[k] = qdd
        w[at(nud)] += ax0 * qdd
        w[at(nud + 1)] += ax1 * qdd
        w[at(nud + 2)] += ax2 * qdd
        # eta_ddot = -P_ff^-1 (p_f + P_fr a) = -Lff^-T (z + Z a)
        nm = modes_of(mi, k)
        Lff = mi[W_LFF] + NM * NM * k
        inv = mi[W_LFF_INV] + NM * k
        Z = mi[W_Z] + 6 * NM * k
        z = mi[W_ZB] + NM * k
        ed = nud + 6
        a0, a1, a2, a3, a4, a5 = (w[at(nud)], w[at(nud + 1)], w[at(nud + 2)], w[at(nud + 3)], w[at(nud + 4)],
                                  w[at(nud + 5)])
        for e in range(nm):
            Ze = Z + 6 * e
            w[at(ed + e)] = -(w[at(z + e)] + w[at(Ze)] * a0 + w[at(Ze + 1)] * a1 + w[at(Ze + 2)] * a2
                              + w[at(Ze + 3)] * a3 + w[at(Ze + 4)] * a4 + w[at(Ze + 5)] * a5)
        for e in range(nm - 1, -1, -1):
            s = w[at(ed + e)]
            for c in range(e + 1, nm):
                s -= w[at(Lff + c * NM + e)] * w[at(ed + c)]
            w[at(ed + e)] = s * w[at(inv + e)]
        base = first_mode(mi, k)
        for e in range(nm):
            acc[base + e] = w[at(ed + e)]
        IA = mi[W_P] + NX * NX * k       # what eliminate_modes left of P(k) and p(k)
        pA = mi[W_PB] + NX * k
        fj = mi[W_FJ] + 6 * k
        for i in range(6):
            s = w[at(pA + i)]
            for j in range(6):
                s += w[at(IA + NX * i + j)] * w[at(nud + j)]
            w[at(fj + i)] = s
        w[at(mi[W_TAU_JOINT] + k)] = w[at(fj)] * ax0 + w[at(fj + 1)] * ax1 + w[at(fj + 2)] * ax2
