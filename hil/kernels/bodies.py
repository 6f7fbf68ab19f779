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
"""
import numpy as np
from numba import njit

from .spatial import axis_rotation, cross_motion, motion_transform, xyz_rate_bias, xyz_rotation


@njit(cache=True)
def station_pose(G, L, S, p0, R0, eta, nm, p, R, Rdef, E, th):
    """Deformed pose (p, R) of a station frame in its body's frame."""
    for i in range(3):
        acc = p0[i]
        t = 0.0
        for a in range(nm):
            acc += G[i, a] * eta[a]
            t += L[i, a] * eta[a]
        p[i] = acc
        th[i] = t
    fs = 0.0
    for a in range(nm):
        sa = 0.0
        for b in range(nm):
            sa += S[a, b] * eta[b]
        fs += sa * eta[a]
    p[0] += 0.5 * fs
    xyz_rotation(th, Rdef, E)
    for i in range(3):
        for j in range(3):
            R[i, j] = Rdef[i, 0] * R0[0, j] + Rdef[i, 1] * R0[1, j] + Rdef[i, 2] * R0[2, j]


@njit(cache=True)
def station_rates(G, L, S, eta, etad, nm, E, th, thd, w_rel, v_rel, w_bias, v_bias, Ghat):
    """Relative twist of a station w.r.t. its body (body axes) and its eta_ddot-free rate bias.

    Fills Ghat = Gamma + e_x (S eta)^T (3 x nm), w_rel = E Lambda eta_dot,
    v_rel = Ghat eta_dot, w_bias = dE/dt Lambda eta_dot, v_bias = e_x eta_dot^T S eta_dot;
    thd receives Lambda eta_dot.
    """
    for i in range(3):
        t = 0.0
        for a in range(nm):
            t += L[i, a] * etad[a]
        thd[i] = t
    for a in range(nm):
        sa = 0.0
        for b in range(nm):
            sa += S[a, b] * eta[b]
        Ghat[0, a] = G[0, a] + sa
        Ghat[1, a] = G[1, a]
        Ghat[2, a] = G[2, a]
    for i in range(3):
        w = 0.0
        v = 0.0
        for j in range(3):
            w += E[i, j] * thd[j]
        for a in range(nm):
            v += Ghat[i, a] * etad[a]
        w_rel[i] = w
        v_rel[i] = v
    xyz_rate_bias(th, thd, w_bias)
    q = 0.0
    for a in range(nm):
        sa = 0.0
        for b in range(nm):
            sa += S[a, b] * etad[b]
        q += sa * etad[a]
    v_bias[0] = q
    v_bias[1] = 0.0
    v_bias[2] = 0.0


@njit(cache=True)
def joint_kinematics(m, w, k):
    """Pose, twist, Phi and bias of body k from its parent (parent quantities must be done).

    Phi(k) maps the parent's extended acceleration to the acceleration of body k's
    frame before the joint's own q_ddot: a_k = Phi(k) nud(parent) + kap(k) + s_k q_ddot_k.
    For a root body Phi(k)[:, :6] maps the base acceleration.
    """
    par = m.parent[k]
    nmp = m.nm[par] if par >= 0 else 0
    mo = m.mo[par] if par >= 0 else 0
    nj = m.dims[0]
    eta = w.pos[nj + mo: nj + mo + nmp]
    etad = w.vel[nj + mo: nj + mo + nmp]
    pS = w.t3a
    RS = w.t33a
    Rdef = w.t33b
    E = w.t33c
    th = w.t3b
    station_pose(m.st_G[k], m.st_L[k], m.st_S[k], m.st_p0[k], m.st_R0[k], eta, nmp, pS, RS, Rdef, E, th)
    Rj = w.t33d
    axis_rotation(m.axis[k], w.pos[k], Rj)
    Rpc = w.Rpc[k]
    for i in range(3):
        for j in range(3):
            Rpc[i, j] = RS[i, 0] * Rj[0, j] + RS[i, 1] * Rj[1, j] + RS[i, 2] * Rj[2, j]
        w.ppc[k, i] = pS[i]
    X = w.X6
    motion_transform(Rpc, pS, X)
    Phi = w.Phi[k]
    for i in range(6):
        for j in range(6):
            Phi[i, j] = X[i, j]
        for j in range(6, 6 + m.dims[3]):
            Phi[i, j] = 0.0
    # relative motion of the station frame (parent axes), then into child axes
    w_rel = w.t3c
    v_rel = w.t3d
    w_b = w.t3e
    v_b = w.t3f
    Ghat = w.Ghat
    station_rates(m.st_G[k], m.st_L[k], m.st_S[k], eta, etad, nmp, E, th, w.t3g, w_rel, v_rel, w_b, v_b, Ghat)
    EL = w.EL
    stL = m.st_L[k]
    for i in range(3):
        for a in range(nmp):
            s = 0.0
            for j in range(3):
                s += E[i, j] * stL[j, a]
            EL[i, a] = s
    for i in range(3):
        for a in range(nmp):
            s_w = 0.0
            s_v = 0.0
            for j in range(3):
                s_w += Rpc[j, i] * EL[j, a]
                s_v += Rpc[j, i] * Ghat[j, a]
            Phi[i, 6 + a] = s_w
            Phi[i + 3, 6 + a] = s_v
    vrel = w.t6a
    bias = w.t6b
    for i in range(3):
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        s4 = 0.0
        for j in range(3):
            s1 += Rpc[j, i] * w_rel[j]
            s2 += Rpc[j, i] * v_rel[j]
            s3 += Rpc[j, i] * w_b[j]
            s4 += Rpc[j, i] * v_b[j]
        vrel[i] = s1
        vrel[i + 3] = s2
        bias[i] = s3
        bias[i + 3] = s4
    # twist of body k: V = X V_parent + vrel + s qd
    V = w.V[k]
    qd = w.vel[k]
    ax = m.axis[k]
    for i in range(6):
        s = vrel[i]
        if par >= 0:
            for j in range(6):
                s += X[i, j] * w.V[par, j]
        V[i] = s
    for i in range(3):
        V[i] += ax[i] * qd
    # bias: apparent derivative of vrel (minus omega_rel x v_rel), + (V - s qd) x vrel + V x s qd
    # the station-frame term omega_rel x v_rel is subtracted from the linear part
    wr0, wr1, wr2 = vrel[0], vrel[1], vrel[2]
    vr0, vr1, vr2 = vrel[3], vrel[4], vrel[5]
    bias[3] -= wr1 * vr2 - wr2 * vr1
    bias[4] -= wr2 * vr0 - wr0 * vr2
    bias[5] -= wr0 * vr1 - wr1 * vr0
    Vs = w.t6c
    for i in range(6):
        Vs[i] = V[i]
    for i in range(3):
        Vs[i] -= ax[i] * qd
    tmp = w.t6d
    cross_motion(Vs, vrel, tmp)
    kap = w.kap[k]
    for i in range(6):
        kap[i] = bias[i] + tmp[i]
    sq = w.t6e
    for i in range(3):
        sq[i] = ax[i] * qd
        sq[i + 3] = 0.0
    cross_motion(V, sq, tmp)
    for i in range(6):
        kap[i] += tmp[i]


@njit(cache=True)
def body_inertia(m, w, k):
    """Extended mass matrix M(k) (6+nm square) and velocity-product bias b(k) of body k.

    Sums the lumped nodes (see module docstring); b holds the node Coriolis,
    centrifugal and foreshortening-rate terms, not gravity (gravity enters as the
    base acceleration) nor elastic forces.
    """
    nj = m.dims[0]
    nm = m.nm[k]
    mo = m.mo[k]
    n = 6 + nm
    M = w.Mb[k]
    b = w.bb[k]
    for i in range(n):
        b[i] = 0.0
        for j in range(n):
            M[i, j] = 0.0
    V = w.V[k]
    om = V[0:3]
    vel = V[3:6]
    eta = w.pos[nj + mo: nj + mo + nm]
    etad = w.vel[nj + mo: nj + mo + nm]
    r = w.t3a
    rd = w.t3b
    c = w.t3c
    t = w.t3d
    Gh = w.Ghat
    Se = w.Se
    wxv0 = om[1] * vel[2] - om[2] * vel[1]
    wxv1 = om[2] * vel[0] - om[0] * vel[2]
    wxv2 = om[0] * vel[1] - om[1] * vel[0]
    for j in range(m.node_off[k], m.node_off[k + 1]):
        mj = m.nd_m[j]
        G = m.nd_G[j]
        S = m.nd_S[j]
        fs = 0.0
        sd = 0.0
        for a in range(nm):
            s1 = 0.0
            s2 = 0.0
            for bb in range(nm):
                s1 += S[a, bb] * eta[bb]
                s2 += S[a, bb] * etad[bb]
            Se[a] = s1
            fs += s1 * eta[a]
            sd += s2 * etad[a]
        for i in range(3):
            acc = m.nd_p0[j, i]
            for a in range(nm):
                acc += G[i, a] * eta[a]
            r[i] = acc
        r[0] += 0.5 * fs
        for a in range(nm):
            Gh[0, a] = G[0, a] + Se[a]
            Gh[1, a] = G[1, a]
            Gh[2, a] = G[2, a]
        for i in range(3):
            acc = 0.0
            for a in range(nm):
                acc += Gh[i, a] * etad[a]
            rd[i] = acc
        # classical acceleration bias of the node: w x v + w x (w x r) + 2 w x rd + e_x sd
        wr0 = om[1] * r[2] - om[2] * r[1]
        wr1 = om[2] * r[0] - om[0] * r[2]
        wr2 = om[0] * r[1] - om[1] * r[0]
        c[0] = wxv0 + om[1] * wr2 - om[2] * wr1 + 2.0 * (om[1] * rd[2] - om[2] * rd[1]) + sd
        c[1] = wxv1 + om[2] * wr0 - om[0] * wr2 + 2.0 * (om[2] * rd[0] - om[0] * rd[2])
        c[2] = wxv2 + om[0] * wr1 - om[1] * wr0 + 2.0 * (om[0] * rd[1] - om[1] * rd[0])
        # rotational block: sum m (|r|^2 I - r r^T)
        rr = r[0] * r[0] + r[1] * r[1] + r[2] * r[2]
        for i in range(3):
            for jj in range(3):
                M[i, jj] -= mj * r[i] * r[jj]
            M[i, i] += mj * rr
        # omega-v block: m skew(r)  (moment = m r x a)
        M[0, 4] += -mj * r[2]
        M[0, 5] += mj * r[1]
        M[1, 3] += mj * r[2]
        M[1, 5] += -mj * r[0]
        M[2, 3] += -mj * r[1]
        M[2, 4] += mj * r[0]
        for i in range(3):
            M[3 + i, 3 + i] += mj
        # modal columns: omega rows m r x Ghat, v rows m Ghat, modal rows m Ghat^T Ghat
        for a in range(nm):
            g0, g1, g2 = Gh[0, a], Gh[1, a], Gh[2, a]
            M[0, 6 + a] += mj * (r[1] * g2 - r[2] * g1)
            M[1, 6 + a] += mj * (r[2] * g0 - r[0] * g2)
            M[2, 6 + a] += mj * (r[0] * g1 - r[1] * g0)
            M[3, 6 + a] += mj * g0
            M[4, 6 + a] += mj * g1
            M[5, 6 + a] += mj * g2
            for bb in range(a, nm):
                M[6 + a, 6 + bb] += mj * (g0 * Gh[0, bb] + g1 * Gh[1, bb] + g2 * Gh[2, bb])
            b[6 + a] += mj * (g0 * c[0] + g1 * c[1] + g2 * c[2])
        b[0] += mj * (r[1] * c[2] - r[2] * c[1])
        b[1] += mj * (r[2] * c[0] - r[0] * c[2])
        b[2] += mj * (r[0] * c[1] - r[1] * c[0])
        b[3] += mj * c[0]
        b[4] += mj * c[1]
        b[5] += mj * c[2]
    # node rotary inertia (constant in the body frame): sum J, sum J Lambda, sum Lambda^T J Lambda
    Js = m.Jsum[k]
    JL = m.JL[k]
    LJL = m.LJL[k]
    for i in range(3):
        for jj in range(3):
            M[i, jj] += Js[i, jj]
        for a in range(nm):
            M[i, 6 + a] += JL[i, a]
    for a in range(nm):
        for bb in range(a, nm):
            M[6 + a, 6 + bb] += LJL[a, bb]
    # h = J omega + JL eta_dot; moment bias omega x h
    for i in range(3):
        s = 0.0
        for jj in range(3):
            s += Js[i, jj] * om[jj]
        for a in range(nm):
            s += JL[i, a] * etad[a]
        t[i] = s
    b[0] += om[1] * t[2] - om[2] * t[1]
    b[1] += om[2] * t[0] - om[0] * t[2]
    b[2] += om[0] * t[1] - om[1] * t[0]
    # symmetrize
    for i in range(n):
        for jj in range(i + 1, n):
            M[jj, i] = M[i, jj]
