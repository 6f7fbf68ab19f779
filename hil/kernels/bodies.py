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
from numba import njit

from .spatial import axis_rotation, xyz_rate_bias, xyz_rotation


@njit(cache=True)
def station_pose(G, L, S, p0, R0, s, pos, e0, nm, P, ip, M, iR, iD, iE, T, ith):
    """Deformed pose of station s in its body's frame, eta = pos[e0:e0 + nm]:
    P[ip] = p0 + G eta + e_x eta^T S eta / 2, M[iR] = Rxyz(L eta) R0, M[iD] = Rxyz(L eta),
    M[iE] = its rate matrix E, T[ith] = L eta. (Station arrays are indexed [s, ...], outputs by
    row, so no views cross the call.)"""
    fs = 0.0
    for a in range(nm):
        sa = 0.0
        for b in range(nm):
            sa += S[s, a, b] * pos[e0 + b]
        fs += sa * pos[e0 + a]
    for i in range(3):
        acc = p0[s, i]
        t = 0.0
        for a in range(nm):
            acc += G[s, i, a] * pos[e0 + a]
            t += L[s, i, a] * pos[e0 + a]
        P[ip, i] = acc
        T[ith, i] = t
    P[ip, 0] += 0.5 * fs
    xyz_rotation(T[ith, 0], T[ith, 1], T[ith, 2], M, iD, iE)
    for i in range(3):
        for j in range(3):
            M[iR, i, j] = M[iD, i, 0] * R0[s, 0, j] + M[iD, i, 1] * R0[s, 1, j] + M[iD, i, 2] * R0[s, 2, j]


@njit(cache=True)
def station_rates(G, L, S, s, pos, vel, e0, nm, M, iE, T, ith, Ghat):
    """Relative twist of station s w.r.t. its body (body axes) and its eta_ddot-free rate bias,
    after station_pose (M[iE] = E, T[ith] = L eta). Fills Ghat = G + e_x (S eta)^T (3 x nm) and
    the rows after ith: T[ith+1] = L eta_dot, T[ith+2] = E L eta_dot (angular rate),
    T[ith+3] = Ghat eta_dot (velocity), T[ith+4] = dE/dt L eta_dot, T[ith+5] = e_x eta_dot^T S eta_dot."""
    thd, w_rel, v_rel, w_b, v_b = ith + 1, ith + 2, ith + 3, ith + 4, ith + 5
    for i in range(3):
        t = 0.0
        for a in range(nm):
            t += L[s, i, a] * vel[e0 + a]
        T[thd, i] = t
    for a in range(nm):
        sa = 0.0
        for b in range(nm):
            sa += S[s, a, b] * pos[e0 + b]
        Ghat[0, a] = G[s, 0, a] + sa
        Ghat[1, a] = G[s, 1, a]
        Ghat[2, a] = G[s, 2, a]
    for i in range(3):
        w = 0.0
        v = 0.0
        for j in range(3):
            w += M[iE, i, j] * T[thd, j]
        for a in range(nm):
            v += Ghat[i, a] * vel[e0 + a]
        T[w_rel, i] = w
        T[v_rel, i] = v
    T[w_b, 0], T[w_b, 1], T[w_b, 2] = xyz_rate_bias(T[ith, 0], T[ith, 1], T[thd, 0], T[thd, 1], T[thd, 2])
    q = 0.0
    for a in range(nm):
        sa = 0.0
        for b in range(nm):
            sa += S[s, a, b] * vel[e0 + b]
        q += sa * vel[e0 + a]
    T[v_b, 0] = q
    T[v_b, 1] = 0.0
    T[v_b, 2] = 0.0


@njit(cache=True)
def joint_kinematics(k, nj, NM, parent, nmv, mov, axis, stG, stL, stS, stp0, stR0, pos, vel,
                     Rpc, ppc, Phi, V, kap, M33, V3, V6, Ghat):
    """Pose, twist, Phi and bias of body k from its parent (parent quantities must be done).

    Phi(k) maps the parent's extended acceleration to the acceleration of body k's
    frame before the joint's own q_ddot: a_k = Phi(k) nud(parent) + kap(k) + s_k q_ddot_k.
    For a root body Phi(k)[:, :6] maps the base acceleration.
    Arrays are passed and indexed whole: views or model tuples crossing a call cost
    numba an atomic reference count per array. M33[0:4] hold RS, Rdef, E, Rj;
    V3[0:6] the station rows of station_pose/station_rates; V6[0:2] vrel, bias.
    """
    par = parent[k]
    nmp = 0
    e0 = nj
    if par >= 0:
        nmp = nmv[par]
        e0 += mov[par]
    # station frame on the parent (station_pose, station_rates): ppc[k], M33[0] = RS, M33[2] = E
    station_pose(stG, stL, stS, stp0, stR0, k, pos, e0, nmp, ppc, k, M33, 0, 1, 2, V3, 0)
    station_rates(stG, stL, stS, k, pos, vel, e0, nmp, M33, 2, V3, 0, Ghat)
    axis_rotation(axis[k, 0], axis[k, 1], axis[k, 2], pos[k], M33, 3)
    for i in range(3):
        for j in range(3):
            Rpc[k, i, j] = M33[0, i, 0] * M33[3, 0, j] + M33[0, i, 1] * M33[3, 1, j] + M33[0, i, 2] * M33[3, 2, j]
    # X = [[R^T, 0], [-R^T skew(p), R^T]] into Phi[:, :6]
    p0_, p1_, p2_ = ppc[k, 0], ppc[k, 1], ppc[k, 2]
    for i in range(3):
        r0, r1, r2 = Rpc[k, 0, i], Rpc[k, 1, i], Rpc[k, 2, i]
        for j in range(3):
            Phi[k, i, j] = Rpc[k, j, i]
            Phi[k, i + 3, j + 3] = Rpc[k, j, i]
            Phi[k, i, j + 3] = 0.0
        Phi[k, i + 3, 0] = -(r1 * p2_ - r2 * p1_)
        Phi[k, i + 3, 1] = -(r2 * p0_ - r0 * p2_)
        Phi[k, i + 3, 2] = -(r0 * p1_ - r1 * p0_)
    for i in range(6):
        for j in range(6, 6 + NM):
            Phi[k, i, j] = 0.0
    # modal columns of Phi, in child axes: [R^T E L; R^T Ghat]
    for a in range(nmp):
        el0 = M33[2, 0, 0] * stL[k, 0, a] + M33[2, 0, 1] * stL[k, 1, a] + M33[2, 0, 2] * stL[k, 2, a]
        el1 = M33[2, 1, 0] * stL[k, 0, a] + M33[2, 1, 1] * stL[k, 1, a] + M33[2, 1, 2] * stL[k, 2, a]
        el2 = M33[2, 2, 0] * stL[k, 0, a] + M33[2, 2, 1] * stL[k, 1, a] + M33[2, 2, 2] * stL[k, 2, a]
        for i in range(3):
            Phi[k, i, 6 + a] = Rpc[k, 0, i] * el0 + Rpc[k, 1, i] * el1 + Rpc[k, 2, i] * el2
            Phi[k, i + 3, 6 + a] = Rpc[k, 0, i] * Ghat[0, a] + Rpc[k, 1, i] * Ghat[1, a] + Rpc[k, 2, i] * Ghat[2, a]
    # relative twist vrel and its eta_ddot-free rate bias, in child axes
    for i in range(3):
        r0, r1, r2 = Rpc[k, 0, i], Rpc[k, 1, i], Rpc[k, 2, i]
        V6[0, i] = r0 * V3[2, 0] + r1 * V3[2, 1] + r2 * V3[2, 2]
        V6[0, i + 3] = r0 * V3[3, 0] + r1 * V3[3, 1] + r2 * V3[3, 2]
        V6[1, i] = r0 * V3[4, 0] + r1 * V3[4, 1] + r2 * V3[4, 2]
        V6[1, i + 3] = r0 * V3[5, 0]
    # twist of body k: V = X V_parent + vrel + s qd
    qd = vel[k]
    for i in range(6):
        s = V6[0, i]
        if par >= 0:
            for j in range(6):
                s += Phi[k, i, j] * V[par, j]
        V[k, i] = s
    ax0, ax1, ax2 = axis[k, 0], axis[k, 1], axis[k, 2]
    V[k, 0] += ax0 * qd
    V[k, 1] += ax1 * qd
    V[k, 2] += ax2 * qd
    # bias = apparent derivative of vrel (its linear part less omega_rel x v_rel)
    #        + (V - s qd) x vrel + V x (s qd)
    w0, w1, w2, u0, u1, u2 = V6[0, 0], V6[0, 1], V6[0, 2], V6[0, 3], V6[0, 4], V6[0, 5]
    V6[1, 3] -= w1 * u2 - w2 * u1
    V6[1, 4] -= w2 * u0 - w0 * u2
    V6[1, 5] -= w0 * u1 - w1 * u0
    o0 = V[k, 0] - ax0 * qd
    o1 = V[k, 1] - ax1 * qd
    o2 = V[k, 2] - ax2 * qd
    l0, l1, l2 = V[k, 3], V[k, 4], V[k, 5]
    kap[k, 0] = V6[1, 0] + o1 * w2 - o2 * w1
    kap[k, 1] = V6[1, 1] + o2 * w0 - o0 * w2
    kap[k, 2] = V6[1, 2] + o0 * w1 - o1 * w0
    kap[k, 3] = V6[1, 3] + o1 * u2 - o2 * u1 + l1 * w2 - l2 * w1
    kap[k, 4] = V6[1, 4] + o2 * u0 - o0 * u2 + l2 * w0 - l0 * w2
    kap[k, 5] = V6[1, 5] + o0 * u1 - o1 * u0 + l0 * w1 - l1 * w0
    s0, s1, s2 = ax0 * qd, ax1 * qd, ax2 * qd
    W0, W1, W2 = V[k, 0], V[k, 1], V[k, 2]
    kap[k, 0] += W1 * s2 - W2 * s1
    kap[k, 1] += W2 * s0 - W0 * s2
    kap[k, 2] += W0 * s1 - W1 * s0
    kap[k, 3] += l1 * s2 - l2 * s1
    kap[k, 4] += l2 * s0 - l0 * s2
    kap[k, 5] += l0 * s1 - l1 * s0


@njit(cache=True)
def body_inertia(k, nj, nmv, mov, node_off, nd_m, nd_p0, nd_G, nd_S, Jsum, JL, LJL, pos, vel, V, Mb, bb, Gh, Se, T3):
    """Extended mass matrix M(k) (6+nm square) and velocity-product bias b(k) of body k.

    Sums the lumped nodes (see module docstring); b holds the node Coriolis,
    centrifugal and foreshortening-rate terms, not gravity (gravity enters as the
    base acceleration) nor elastic forces.
    """
    nm = nmv[k]
    n = 6 + nm
    for i in range(n):
        bb[k, i] = 0.0
        for j in range(n):
            Mb[k, i, j] = 0.0
    om0, om1, om2 = V[k, 0], V[k, 1], V[k, 2]
    e0 = nj + mov[k]
    wxv0 = om1 * V[k, 5] - om2 * V[k, 4]
    wxv1 = om2 * V[k, 3] - om0 * V[k, 5]
    wxv2 = om0 * V[k, 4] - om1 * V[k, 3]
    ndG = nd_G
    ndS = nd_S
    ndp0 = nd_p0
    for j in range(node_off[k], node_off[k + 1]):
        mj = nd_m[j]
        fs = 0.0
        sd = 0.0
        for a in range(nm):
            s1 = 0.0
            s2 = 0.0
            for f in range(nm):
                s1 += ndS[j, a, f] * pos[e0 + f]
                s2 += ndS[j, a, f] * vel[e0 + f]
            Se[a] = s1
            fs += s1 * pos[e0 + a]
            sd += s2 * vel[e0 + a]
        for i in range(3):
            acc = ndp0[j, i]
            for a in range(nm):
                acc += ndG[j, i, a] * pos[e0 + a]
            T3[0, i] = acc
        T3[0, 0] += 0.5 * fs
        for a in range(nm):
            Gh[0, a] = ndG[j, 0, a] + Se[a]
            Gh[1, a] = ndG[j, 1, a]
            Gh[2, a] = ndG[j, 2, a]
        for i in range(3):
            acc = 0.0
            for a in range(nm):
                acc += Gh[i, a] * vel[e0 + a]
            T3[1, i] = acc
        # classical acceleration bias of the node: w x v + w x (w x r) + 2 w x rd + e_x sd
        wr0 = om1 * T3[0, 2] - om2 * T3[0, 1]
        wr1 = om2 * T3[0, 0] - om0 * T3[0, 2]
        wr2 = om0 * T3[0, 1] - om1 * T3[0, 0]
        T3[2, 0] = wxv0 + om1 * wr2 - om2 * wr1 + 2.0 * (om1 * T3[1, 2] - om2 * T3[1, 1]) + sd
        T3[2, 1] = wxv1 + om2 * wr0 - om0 * wr2 + 2.0 * (om2 * T3[1, 0] - om0 * T3[1, 2])
        T3[2, 2] = wxv2 + om0 * wr1 - om1 * wr0 + 2.0 * (om0 * T3[1, 1] - om1 * T3[1, 0])
        # rotational block: sum m (|r|^2 I - r r^T)
        rr = T3[0, 0] * T3[0, 0] + T3[0, 1] * T3[0, 1] + T3[0, 2] * T3[0, 2]
        for i in range(3):
            for jj in range(3):
                Mb[k, i, jj] -= mj * T3[0, i] * T3[0, jj]
            Mb[k, i, i] += mj * rr
        # omega-v block: m skew(r)  (moment = m r x a)
        Mb[k, 0, 4] += -mj * T3[0, 2]
        Mb[k, 0, 5] += mj * T3[0, 1]
        Mb[k, 1, 3] += mj * T3[0, 2]
        Mb[k, 1, 5] += -mj * T3[0, 0]
        Mb[k, 2, 3] += -mj * T3[0, 1]
        Mb[k, 2, 4] += mj * T3[0, 0]
        for i in range(3):
            Mb[k, 3 + i, 3 + i] += mj
        # modal columns: omega rows m r x Ghat, v rows m Ghat, modal rows m Ghat^T Ghat
        for a in range(nm):
            g0, g1, g2 = Gh[0, a], Gh[1, a], Gh[2, a]
            Mb[k, 0, 6 + a] += mj * (T3[0, 1] * g2 - T3[0, 2] * g1)
            Mb[k, 1, 6 + a] += mj * (T3[0, 2] * g0 - T3[0, 0] * g2)
            Mb[k, 2, 6 + a] += mj * (T3[0, 0] * g1 - T3[0, 1] * g0)
            Mb[k, 3, 6 + a] += mj * g0
            Mb[k, 4, 6 + a] += mj * g1
            Mb[k, 5, 6 + a] += mj * g2
            for f in range(a, nm):
                Mb[k, 6 + a, 6 + f] += mj * (g0 * Gh[0, f] + g1 * Gh[1, f] + g2 * Gh[2, f])
            bb[k, 6 + a] += mj * (g0 * T3[2, 0] + g1 * T3[2, 1] + g2 * T3[2, 2])
        bb[k, 0] += mj * (T3[0, 1] * T3[2, 2] - T3[0, 2] * T3[2, 1])
        bb[k, 1] += mj * (T3[0, 2] * T3[2, 0] - T3[0, 0] * T3[2, 2])
        bb[k, 2] += mj * (T3[0, 0] * T3[2, 1] - T3[0, 1] * T3[2, 0])
        bb[k, 3] += mj * T3[2, 0]
        bb[k, 4] += mj * T3[2, 1]
        bb[k, 5] += mj * T3[2, 2]
    # node rotary inertia (constant in the body frame): sum J, sum J Lambda, sum Lambda^T J Lambda
    for i in range(3):
        for jj in range(3):
            Mb[k, i, jj] += Jsum[k, i, jj]
        for a in range(nm):
            Mb[k, i, 6 + a] += JL[k, i, a]
    for a in range(nm):
        for f in range(a, nm):
            Mb[k, 6 + a, 6 + f] += LJL[k, a, f]
    # h = J omega + JL eta_dot; moment bias omega x h
    for i in range(3):
        s = Jsum[k, i, 0] * om0 + Jsum[k, i, 1] * om1 + Jsum[k, i, 2] * om2
        for a in range(nm):
            s += JL[k, i, a] * vel[e0 + a]
        T3[3, i] = s
    bb[k, 0] += om1 * T3[3, 2] - om2 * T3[3, 1]
    bb[k, 1] += om2 * T3[3, 0] - om0 * T3[3, 2]
    bb[k, 2] += om0 * T3[3, 1] - om1 * T3[3, 0]
    # symmetrize
    for i in range(n):
        for jj in range(i + 1, n):
            Mb[k, jj, i] = Mb[k, i, jj]
