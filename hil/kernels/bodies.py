"""Per-body kinematics and inertia of flexible bodies in the floating frame of reference.

Each body k carries a frame at its inboard joint (cantilever modes, clamped there)
and n_m(k) modal coordinates eta(k). Its extended velocity is
nu(k) = [omega; v; eta_dot] (6 + n_m), body coordinates, the "modal spatial
velocity" of Jain & Rodriguez (seed 002, eq. 3.13) reordered rigid-part first.

The mass of a body is a set of lumped nodes (seed 002, eq. 3.1): node j sits at
r_j(eta) = p0_j + Gamma_j eta + e_x (eta^T S_j eta) / 2 in the body frame, where
S_j is the foreshortening matrix of seed 003's high-order coupling model (zero
in the zero-order model); the node's small rotation is Lambda_j eta. Node
kinetic energy: 1/2 m_j |v + omega x r_j + r_j_dot|^2
+ 1/2 (omega + Lambda_j eta_dot)^T J_j (omega + Lambda_j eta_dot).
Projecting each node's Newton-Euler equation onto its velocity Jacobian gives
the extended body equation M(eta) nu_dot + b(eta, nu) = F exactly for that
Lagrangian, so energy is conserved up to integration error.

A child joint sits on a station of its parent whose frame moves with the
deformed cross-section: position p0 + Gamma eta + e_x eta^T S eta / 2, rotation
Rxyz(Lambda eta) R0 (see spatial.xyz_rotation).

Arrays are the flat model (mi, mf) and work w of hil.kernels.layout.
"""
import numpy as np

from .jit import kernel
from .layout import (DIM_NB, DIM_NM, MF_AXIS, MF_JL, MF_JSUM, MF_MFF0, MF_MG, MF_MS, MF_ND_G, MF_ND_M, MF_ND_P0,
                     MF_ND_S, MF_OS_G, MF_OS_L, MF_OS_P0, MF_OS_R0, MF_OS_S, MF_ST_G, MF_ST_L, MF_ST_P0, MF_ST_R0,
                     MF_ST_S, MI_AXIAL, MI_NODE_OFF, W_BB, W_GHAT, W_KAP, W_MB, W_POS, W_PPC, W_PSI, W_PW, W_RPC, W_RW,
                     W_SEP, W_STATION, W_STATION_R, W_V, W_VEL, at, first_mode, modes_of, parent_of)
from .spatial import axis_rotation, load3, load9, matmul3, mul3, mul3t, store3, store9, xyz_rotation

# station tables of station_kinematics
JOINT_STATIONS = 0      # the frame of joint k on its parent
OUTPUT_STATIONS = 1     # an output station (sensors, tip)

# rows of W_STATION (3 each): the station's pose and rates in its body's axes
ST_POS, ST_THETA, ST_THETA_DOT, ST_W_REL, ST_V_REL, ST_W_BIAS, ST_V_BIAS = range(7)
# matrices of W_STATION_R (9 each): R = Rxyz(L eta) R0, Rxyz(L eta), its rate matrix E, the joint rotation
SR_R, SR_DEF, SR_E, SR_JOINT = range(4)


@kernel
def station_kinematics(mi, mf, w, table, s, ieta, ietad, nm):
    """Deformed pose and rates of station s of `table`, on a body whose nm modal coordinates sit at
    w[ieta:] and their rates at w[ietad:], in that body's axes (W_STATION rows ST_*, W_STATION_R
    matrices SR_*, and Ghat = G + e_x (S eta)^T in W_GHAT):

    position p0 + G eta + e_x eta^T S eta / 2, rotation Rxyz(L eta) R0, angular rate E L eta_dot,
    velocity Ghat eta_dot, and their eta_ddot-free rate biases dE/dt L eta_dot, e_x eta_dot^T S eta_dot."""
    NM = mi[DIM_NM]
    if table == JOINT_STATIONS:
        p0, R0, G, L, S = mi[MF_ST_P0], mi[MF_ST_R0], mi[MF_ST_G], mi[MF_ST_L], mi[MF_ST_S]
    else:
        p0, R0, G, L, S = mi[MF_OS_P0], mi[MF_OS_R0], mi[MF_OS_G], mi[MF_OS_L], mi[MF_OS_S]
    p0 += 3 * s
    R0 += 9 * s
    G += 3 * NM * s
    L += 3 * NM * s
    S += NM * NM * s
    row = mi[W_STATION]
    rot = mi[W_STATION_R]
    gh = mi[W_GHAT]
    fs = 0.0
    sd = 0.0
    for a in range(nm):
        se = 0.0
        sv = 0.0
        for b in range(nm):
            sab = mf[at(S + a * NM + b)]
            se += sab * w[at(ieta + b)]
            sv += sab * w[at(ietad + b)]
        fs += se * w[at(ieta + a)]
        sd += sv * w[at(ietad + a)]
        w[at(gh + a)] = mf[at(G + a)] + se
        w[at(gh + NM + a)] = mf[at(G + NM + a)]
        w[at(gh + 2 * NM + a)] = mf[at(G + 2 * NM + a)]
    for i in range(3):
        p = mf[at(p0 + i)]
        th = 0.0
        thd = 0.0
        v = 0.0
        for a in range(nm):
            p += mf[at(G + i * NM + a)] * w[at(ieta + a)]
            th += mf[at(L + i * NM + a)] * w[at(ieta + a)]
            thd += mf[at(L + i * NM + a)] * w[at(ietad + a)]
            v += w[at(gh + i * NM + a)] * w[at(ietad + a)]
        w[at(row + 3 * ST_POS + i)] = p
        w[at(row + 3 * ST_THETA + i)] = th
        w[at(row + 3 * ST_THETA_DOT + i)] = thd
        w[at(row + 3 * ST_V_REL + i)] = v
    w[at(row + 3 * ST_POS)] += 0.5 * fs
    th = load3(w, row + 3 * ST_THETA)
    thd = load3(w, row + 3 * ST_THETA_DOT)
    xyz_rotation(th[0], th[1], th[2], w, rot + 9 * SR_DEF, rot + 9 * SR_E, row + 3 * ST_W_BIAS, thd[0], thd[1], thd[2])
    store3(w, row + 3 * ST_W_REL, mul3(load9(w, rot + 9 * SR_E), thd))
    store9(w, rot + 9 * SR_R, matmul3(load9(w, rot + 9 * SR_DEF), load9(mf, R0)))
    store3(w, row + 3 * ST_V_BIAS, (sd, 0.0, 0.0))


@kernel
def joint_kinematics(mi, mf, w, k):
    """Pose, twist, velocity-product acceleration and modal map of body k from its parent's (parent
    quantities must be done): Rpc, ppc (child axes and origin in the parent frame), V, kap and Psi.

    The acceleration of body k's frame is a_k = X a_parent + Psi eta_ddot_parent + kap + s q_ddot,
    X = [[E, 0], [-E skew(p), E]] with E = Rpc^T, p = ppc (Featherstone's motion transform from the
    parent), Psi (6 x nm of the parent) the parent's modes moving the joint station, in child axes;
    for a root body a_parent is the base acceleration [0; -g]."""
    NM = mi[DIM_NM]
    par = parent_of(mi, k)
    nmp = 0 if par < 0 else modes_of(mi, par)
    row = mi[W_STATION]
    rot = mi[W_STATION_R]
    s = load3(mf, mi[MF_AXIS] + 3 * k)
    q = w[at(mi[W_POS] + k)]
    qd = w[at(mi[W_VEL] + k)]
    axis_rotation(s[0], s[1], s[2], np.cos(q), np.sin(q), w, rot + 9 * SR_JOINT)
    Rj = load9(w, rot + 9 * SR_JOINT)
    Rpc = mi[W_RPC] + 9 * k
    ppc = mi[W_PPC] + 3 * k
    if nmp > 0:       # the station frame moves with the parent's deformed cross-section
        e = first_mode(mi, par)
        station_kinematics(mi, mf, w, JOINT_STATIONS, k, mi[W_POS] + e, mi[W_VEL] + e, nmp)
        R = matmul3(load9(w, rot + 9 * SR_R), Rj)
        p = load3(w, row + 3 * ST_POS)
    else:
        R = matmul3(load9(mf, mi[MF_ST_R0] + 9 * k), Rj)
        p = load3(mf, mi[MF_ST_P0] + 3 * k)
    store9(w, Rpc, R)
    store3(w, ppc, p)
    # twist: V = X V_parent + vrel + s qd, X V_parent = [R^T w; R^T (v + w x p)]
    o0 = o1 = o2 = l0 = l1 = l2 = 0.0
    if par >= 0:
        Vp = mi[W_V] + 6 * par
        wp = load3(w, Vp)
        vp = load3(w, Vp + 3)
        o0, o1, o2 = mul3t(R, wp)
        l0, l1, l2 = mul3t(R, (vp[0] + wp[1] * p[2] - wp[2] * p[1], vp[1] + wp[2] * p[0] - wp[0] * p[2],
                               vp[2] + wp[0] * p[1] - wp[1] * p[0]))
    kap = mi[W_KAP] + 6 * k
    if nmp > 0:
        # relative twist of the station (wr, vr) and its eta_ddot-free rate bias, in child axes
        wr0, wr1, wr2 = mul3t(R, load3(w, row + 3 * ST_W_REL))
        vr0, vr1, vr2 = mul3t(R, load3(w, row + 3 * ST_V_REL))
        b0, b1, b2 = mul3t(R, load3(w, row + 3 * ST_W_BIAS))
        b3, b4, b5 = mul3t(R, load3(w, row + 3 * ST_V_BIAS))
        # the apparent derivative of the relative twist: its linear part less omega_rel x v_rel
        b3 -= wr1 * vr2 - wr2 * vr1
        b4 -= wr2 * vr0 - wr0 * vr2
        b5 -= wr0 * vr1 - wr1 * vr0
        # kap = bias + (V - s qd) x vrel (the motion cross product)
        o0, o1, o2, l0, l1, l2 = o0 + wr0, o1 + wr1, o2 + wr2, l0 + vr0, l1 + vr1, l2 + vr2
        w[at(kap)] = b0 + o1 * wr2 - o2 * wr1
        w[at(kap + 1)] = b1 + o2 * wr0 - o0 * wr2
        w[at(kap + 2)] = b2 + o0 * wr1 - o1 * wr0
        w[at(kap + 3)] = b3 + o1 * vr2 - o2 * vr1 + l1 * wr2 - l2 * wr1
        w[at(kap + 4)] = b4 + o2 * vr0 - o0 * vr2 + l2 * wr0 - l0 * wr2
        w[at(kap + 5)] = b5 + o0 * vr1 - o1 * vr0 + l0 * wr1 - l1 * wr0
        # the parent's modal columns [R^T E L; R^T Ghat] in child axes
        E = load9(w, rot + 9 * SR_E)
        L = mi[MF_ST_L] + 3 * NM * k
        gh = mi[W_GHAT]
        psi = mi[W_PSI] + 6 * NM * k
        for a in range(nmp):
            ang = mul3t(R, mul3(E, (mf[at(L + a)], mf[at(L + NM + a)], mf[at(L + 2 * NM + a)])))
            lin = mul3t(R, (w[at(gh + a)], w[at(gh + NM + a)], w[at(gh + 2 * NM + a)]))
            for i in range(3):
                w[at(psi + i * NM + a)] = ang[i]
                w[at(psi + (3 + i) * NM + a)] = lin[i]
    else:
        for i in range(6):
            w[at(kap + i)] = 0.0
    s0, s1, s2 = s[0] * qd, s[1] * qd, s[2] * qd
    W0, W1, W2 = o0 + s0, o1 + s1, o2 + s2
    V = mi[W_V] + 6 * k
    store3(w, V, (W0, W1, W2))
    store3(w, V + 3, (l0, l1, l2))
    # + V x (s qd)
    w[at(kap)] += W1 * s2 - W2 * s1
    w[at(kap + 1)] += W2 * s0 - W0 * s2
    w[at(kap + 2)] += W0 * s1 - W1 * s0
    w[at(kap + 3)] += l1 * s2 - l2 * s1
    w[at(kap + 4)] += l2 * s0 - l0 * s2
    w[at(kap + 5)] += l0 * s1 - l1 * s0


@kernel
def body_inertia(mi, mf, w, k):
    """Extended mass matrix M(k) (6 + nm square, W_MB) and velocity-product bias b(k) (W_BB) of
    body k, after joint_kinematics.

    Sums the lumped nodes (see module docstring); b holds the node Coriolis,
    centrifugal and foreshortening-rate terms, not gravity (gravity enters as the
    base acceleration) nor elastic forces. The rigid 6 x 6 block and its bias accumulate in
    registers; the modal rows and columns in W_MB.
    """
    NM = mi[DIM_NM]
    NX = 6 + NM
    nm = modes_of(mi, k)
    n = 6 + nm
    Mb = mi[W_MB] + NX * NX * k
    bb = mi[W_BB] + NX * k
    for a in range(nm):       # what the node loop accumulates: modal bias, omega rows and modal block
        w[at(bb + 6 + a)] = 0.0
        for i in range(3):
            w[at(Mb + i * NX + 6 + a)] = 0.0
        for f in range(a, nm):
            w[at(Mb + (6 + a) * NX + 6 + f)] = 0.0
    Vk = mi[W_V] + 6 * k
    om0, om1, om2 = w[at(Vk)], w[at(Vk + 1)], w[at(Vk + 2)]
    eta = mi[W_POS] + first_mode(mi, k)
    etad = mi[W_VEL] + first_mode(mi, k)
    wxv0 = om1 * w[at(Vk + 5)] - om2 * w[at(Vk + 4)]
    wxv1 = om2 * w[at(Vk + 3)] - om0 * w[at(Vk + 5)]
    wxv2 = om0 * w[at(Vk + 4)] - om1 * w[at(Vk + 3)]
    ndm, ndp0, ndG, ndS = mi[MF_ND_M], mi[MF_ND_P0], mi[MF_ND_G], mi[MF_ND_S]
    se = mi[W_SEP]
    axial = mi[at(mi[MI_AXIAL] + k)]      # some node moves along x with the modes (G has an axial row)
    # the rigid block: sum m (|r|^2 I - r r^T), sum m r (the m skew(r) blocks), sum m; its bias force
    I00 = I01 = I02 = I11 = I12 = I22 = 0.0
    c0 = c1 = c2 = 0.0
    mass = 0.0
    f0 = f1 = f2 = n0 = n1 = n2 = 0.0
    for j in range(mi[at(mi[MI_NODE_OFF] + k)], mi[at(mi[MI_NODE_OFF] + k + 1)]):
        mj = mf[at(ndm + j)]
        G = ndG + 3 * NM * j
        S = ndS + NM * NM * j
        # S eta, eta^T S eta (foreshortening) and eta_dot^T S eta_dot (its rate term)
        fs = 0.0
        sd = 0.0
        for a in range(nm):
            s1 = 0.0
            s2 = 0.0
            for f in range(nm):
                sf = mf[at(S + a * NM + f)]
                s1 += sf * w[at(eta + f)]
                s2 += sf * w[at(etad + f)]
            w[at(se + a)] = s1
            fs += s1 * w[at(eta + a)]
            sd += s2 * w[at(etad + a)]
        # position r = p0 + G eta + e_x fs / 2, Ghat = G + e_x (S eta)^T, rate r_dot = Ghat eta_dot
        r0 = mf[at(ndp0 + 3 * j)] + 0.5 * fs
        r1 = mf[at(ndp0 + 3 * j + 1)]
        r2 = mf[at(ndp0 + 3 * j + 2)]
        d0 = d1 = d2 = 0.0
        for a in range(nm):
            e = w[at(eta + a)]
            ed = w[at(etad + a)]
            g0 = mf[at(G + a)]
            g1 = mf[at(G + NM + a)]
            g2 = mf[at(G + 2 * NM + a)]
            r0 += g0 * e
            r1 += g1 * e
            r2 += g2 * e
            d0 += (g0 + w[at(se + a)]) * ed
            d1 += g1 * ed
            d2 += g2 * ed
        # classical acceleration bias of the node: w x v + w x (w x r) + 2 w x rd + e_x sd
        wr0 = om1 * r2 - om2 * r1
        wr1 = om2 * r0 - om0 * r2
        wr2 = om0 * r1 - om1 * r0
        be0 = wxv0 + om1 * wr2 - om2 * wr1 + 2.0 * (om1 * d2 - om2 * d1) + sd
        be1 = wxv1 + om2 * wr0 - om0 * wr2 + 2.0 * (om2 * d0 - om0 * d2)
        be2 = wxv2 + om0 * wr1 - om1 * wr0 + 2.0 * (om0 * d1 - om1 * d0)
        rr = r0 * r0 + r1 * r1 + r2 * r2
        I00 += mj * (rr - r0 * r0)
        I11 += mj * (rr - r1 * r1)
        I22 += mj * (rr - r2 * r2)
        I01 -= mj * r0 * r1
        I02 -= mj * r0 * r2
        I12 -= mj * r1 * r2
        c0 += mj * r0
        c1 += mj * r1
        c2 += mj * r2
        mass += mj
        n0 += mj * (r1 * be2 - r2 * be1)
        n1 += mj * (r2 * be0 - r0 * be2)
        n2 += mj * (r0 * be1 - r1 * be0)
        f0 += mj * be0
        f1 += mj * be1
        f2 += mj * be2
        # modal columns, the node's part: omega rows m r x Ghat, modal rows m Ghat^T beta and
        # m (Ghat^T Ghat - G^T G) = m (u s^T + s u^T + s s^T), u the axial row of G, s = S eta
        for a in range(nm):
            sa = w[at(se + a)]
            ua = mf[at(G + a)]
            g0, g1, g2 = ua + sa, mf[at(G + NM + a)], mf[at(G + 2 * NM + a)]     # Ghat's column a
            w[at(Mb + 6 + a)] += mj * (r1 * g2 - r2 * g1)
            w[at(Mb + NX + 6 + a)] += mj * (r2 * g0 - r0 * g2)
            w[at(Mb + 2 * NX + 6 + a)] += mj * (r0 * g1 - r1 * g0)
            w[at(bb + 6 + a)] += mj * (g0 * be0 + g1 * be1 + g2 * be2)
            row = Mb + (6 + a) * NX + 6
            if axial:
                for f in range(a, nm):
                    sf = w[at(se + f)]
                    w[at(row + f)] += mj * (ua * sf + sa * mf[at(G + f)] + sa * sf)
            else:
                msa = mj * sa
                for f in range(a, nm):
                    w[at(row + f)] += msa * w[at(se + f)]
    # node rotary inertia (constant in the body frame): sum J, sum J Lambda, sum Lambda^T J Lambda
    Js = mi[MF_JSUM] + 9 * k
    JL = mi[MF_JL] + 3 * NM * k
    # the rigid block (upper triangle): sum m (|r|^2 I - r r^T) + sum J, m skew(r) (moment = m r x a), m I
    rigid = (I00 + mf[at(Js)], I01 + mf[at(Js + 1)], I02 + mf[at(Js + 2)], 0.0, -c2, c1,
             I11 + mf[at(Js + 4)], I12 + mf[at(Js + 5)], c2, 0.0, -c0,
             I22 + mf[at(Js + 8)], -c1, c0, 0.0,
             mass, 0.0, 0.0,
             mass, 0.0,
             mass)
    x = 0
    for i in range(6):
        for j in range(i, 6):
            w[at(Mb + i * NX + j)] = rigid[x]
            x += 1
    for i in range(3):
        for a in range(nm):
            w[at(Mb + i * NX + 6 + a)] += mf[at(JL + i * NM + a)]
    # the v rows of the modal columns, sum m Ghat = sum m G + e_x (sum m S eta)^T, and the modal block at
    # eta = 0, sum m G^T G + sum Lambda^T J Lambda (constants of the body)
    mG = mi[MF_MG] + 3 * NM * k
    mS = mi[MF_MS] + NM * NM * k
    Mff0 = mi[MF_MFF0] + NM * NM * k
    for a in range(nm):
        x = 0.0
        for f in range(nm):
            x += mf[at(mS + a * NM + f)] * w[at(eta + f)]
        w[at(Mb + 3 * NX + 6 + a)] = mf[at(mG + a)] + x
        w[at(Mb + 4 * NX + 6 + a)] = mf[at(mG + NM + a)]
        w[at(Mb + 5 * NX + 6 + a)] = mf[at(mG + 2 * NM + a)]
        for f in range(a, nm):
            w[at(Mb + (6 + a) * NX + 6 + f)] += mf[at(Mff0 + a * NM + f)]
    # h = J omega + JL eta_dot; moment bias omega x h
    h0 = mf[at(Js)] * om0 + mf[at(Js + 1)] * om1 + mf[at(Js + 2)] * om2
    h1 = mf[at(Js + 3)] * om0 + mf[at(Js + 4)] * om1 + mf[at(Js + 5)] * om2
    h2 = mf[at(Js + 6)] * om0 + mf[at(Js + 7)] * om1 + mf[at(Js + 8)] * om2
    for a in range(nm):
        ed = w[at(etad + a)]
        h0 += mf[at(JL + a)] * ed
        h1 += mf[at(JL + NM + a)] * ed
        h2 += mf[at(JL + 2 * NM + a)] * ed
    w[at(bb)] = n0 + om1 * h2 - om2 * h1
    w[at(bb + 1)] = n1 + om2 * h0 - om0 * h2
    w[at(bb + 2)] = n2 + om0 * h1 - om1 * h0
    w[at(bb + 3)] = f0
    w[at(bb + 4)] = f1
    w[at(bb + 5)] = f2
    # symmetrize
    for i in range(n):
        for j in range(i + 1, n):
            w[at(Mb + j * NX + i)] = w[at(Mb + i * NX + j)]


@kernel
def world_poses(mi, mf, w):
    """World rotation Rw[k] and origin pw[k] of every body frame (after the kinematics)."""
    for k in range(mi[DIM_NB]):
        par = parent_of(mi, k)
        Rpc = load9(w, mi[W_RPC] + 9 * k)
        ppc = load3(w, mi[W_PPC] + 3 * k)
        if par < 0:
            store9(w, mi[W_RW] + 9 * k, Rpc)
            store3(w, mi[W_PW] + 3 * k, ppc)
        else:
            Rp = load9(w, mi[W_RW] + 9 * par)
            pp = load3(w, mi[W_PW] + 3 * par)
            x = mul3(Rp, ppc)
            store3(w, mi[W_PW] + 3 * k, (pp[0] + x[0], pp[1] + x[1], pp[2] + x[2]))
            store9(w, mi[W_RW] + 9 * k, matmul3(Rp, Rpc))
