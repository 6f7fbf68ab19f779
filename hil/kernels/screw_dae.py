"""Forward dynamics as seed 000's screw-theoretic DAE: interaction wrenches as algebraic unknowns.

A second formulation of the plant's equations of motion, independent of the articulated-body
algorithm (hil.kernels.aba) except for the joint laws they share (prescribed profiles, drive,
friction and spring torques, the rotor equation). Seed 000 (docs/references.md) writes each link
in body-fixed twists V = [omega; v] and wrenches W = [moment; force] (eqs. 1-4), joins the links by
screw-compatibility constraints (eqs. 25, 30-33) and stacks per link one block row of unknowns
[interaction wrench; twist derivative; modal accelerations] (eqs. 35-36, 43, 62-63), giving the
near-tridiagonal system M_sys q_sys + H_sys = W_sys (eqs. 42, 72-73) solved once per evaluation
(eq. 79). Here, per body k (its joint is joint k, its parent p):

* unknowns z_k = [f_k; a_k; eta_ddot_k]: f_k the wrench the parent exerts on body k through the
  joint, in body k's frame at its origin (the joint point); a_k = [omega_dot; v_dot] its twist
  derivative in body coordinates (eq. 102; gravity is a force, not a base acceleration);
* joint rows (eq. 33, projected as eq. 26 in the joint's own frame): with
  delta = a_k - Phi_k [a_p; eta_ddot_p] - kappa_k the acceleration of body k relative to the
  deformed station frame on the parent, P delta = 0 removes all but the rotation about the axis s,
  and the axis row carries the joint's torque balance s^T f_k + J_arm s^T delta = tau_k (drive
  minus friction, or the Spong spring); a prescribed joint has delta = s q_ddot instead;
* link rows (eqs. 27 and 61): the Newton-Euler equation of the extended body,
  M_k [a_k; eta_ddot_k] + h_k = [f_k; 0] - sum over children c of Phi_c^T f_c,
  with M_k the inertia operator (eqs. 10, 11, 64, 65: rigid, coupling and modal blocks) and h_k the
  velocity, gravity and elastic terms (eqs. 12, 66), summed over the lumped nodes of the body
  (hil.kernels.screw_dae_arrays), exact for their Lagrangian (foreshortening and node rotary
  inertia included), so the same physics as the ABA kernel.

The stacked matrix couples block k only to its parent's block (joint rows) and its children's
wrenches (link rows): block tridiagonal for a chain. It is factorised tip to base by dense LU with
partial pivoting of each diagonal block and Schur complements into the parent block, then solved
base to tip. The joint acceleration is read from delta (Table 1, step vii). Two printed
equations do not work as written and are corrected here (docs/model.md "The dynamics"):
eq. 26's projection P_i acts on the twist difference in the inertial frame (eq. 25), where the
linear rows also contain p x s q_dot for a joint at p away from the origin; applied in the
joint's frame it is exact. And with P_i as printed the constraint row along s is zero, so
M_sys is singular; the joint's torque balance fills that row.
"""
import numpy as np

from .jit import kernel
from .joints import impose_prescribed_motion, joint_friction_torques, link_torques, rotor_accelerations
from .layout import DAE_MO, DAE_NM, DAE_NMP, DAE_NODE0, DAE_NODE1, DAE_PARENT, JOINT_PRESCRIBED
from .screw_dae_arrays import views
from .spatial import axis_rotation, lu_factor, lu_solve, xyz_rotation


@kernel
def station_frame(stat, s, NM, pos, vel, e0, nm, M33, V3, Ghat):
    """Deformed frame of station s relative to the body carrying it (modes pos/vel[e0:e0 + nm]).

    M33 (flat, 3 x 3 matrices at 0, 9, 18, 27 and a 3-vector at 36): M33[0:9] = R_s = Rxyz(Lambda eta) R0
    (the station axes in body axes), M33[9:18] = Rxyz, M33[18:27] = E (rotation-vector rate -> angular
    velocity); V3[0] = r (position), V3[1] = theta = Lambda eta,
    V3[2] = theta_dot, V3[3] = omega_rel = E theta_dot, V3[4] = r_dot = Ghat eta_dot,
    V3[5] = dE/dt theta_dot, V3[6] = e_x eta_dot^T S eta_dot; Ghat = Gamma + e_x (S eta)^T.
    """
    oG = 12
    oL = 12 + 3 * NM
    oS = 12 + 6 * NM
    fs = 0.0
    qs = 0.0
    for a in range(nm):
        se = 0.0
        sd = 0.0
        for b in range(nm):
            sab = stat[s, oS + a * NM + b]
            se += sab * pos[e0 + b]
            sd += sab * vel[e0 + b]
        fs += se * pos[e0 + a]
        qs += sd * vel[e0 + a]
        Ghat[0, a] = stat[s, oG + a] + se
        Ghat[1, a] = stat[s, oG + NM + a]
        Ghat[2, a] = stat[s, oG + 2 * NM + a]
    for i in range(3):
        r = stat[s, i]
        th = 0.0
        thd = 0.0
        rd = 0.0
        for a in range(nm):
            r += stat[s, oG + i * NM + a] * pos[e0 + a]
            th += stat[s, oL + i * NM + a] * pos[e0 + a]
            thd += stat[s, oL + i * NM + a] * vel[e0 + a]
            rd += Ghat[i, a] * vel[e0 + a]
        V3[0, i] = r
        V3[1, i] = th
        V3[2, i] = thd
        V3[4, i] = rd
    V3[0, 0] += 0.5 * fs
    xyz_rotation(V3[1, 0], V3[1, 1], V3[1, 2], M33, 9, 18, 36, V3[2, 0], V3[2, 1], V3[2, 2])
    for i in range(3):
        for j in range(3):
            M33[3 * i + j] = (M33[9 + 3 * i] * stat[s, 3 + j] + M33[9 + 3 * i + 1] * stat[s, 6 + j]
                              + M33[9 + 3 * i + 2] * stat[s, 9 + j])
        V3[3, i] = M33[18 + 3 * i] * V3[2, 0] + M33[18 + 3 * i + 1] * V3[2, 1] + M33[18 + 3 * i + 2] * V3[2, 2]
    V3[5, 0], V3[5, 1], V3[5, 2] = M33[36], M33[37], M33[38]
    V3[6, 0] = qs
    V3[6, 1] = 0.0
    V3[6, 2] = 0.0


@kernel
def link_kinematics(k, dm, dw):
    """Pose, twist and acceleration map of body k from its parent's (eqs. 23-24, 31-32, 102):
    a_k = Phi_k [a_p; eta_ddot_p] + kappa_k + s q_ddot, all in body k's axes (the views dm, dw of
    hil.kernels.screw_dae_arrays)."""
    nb, NM, body, stat, axis = dm.nb, dm.NM, dm.body, dm.stat, dm.axis
    pos, vel, Rpc, ppc, Rw, pw, V, kap, Phi = dw.pos, dw.vel, dw.Rpc, dw.ppc, dw.Rw, dw.pw, dw.V, dw.kap, dw.Phi
    M33, V3, Ghat = dw.M33, dw.V3, dw.Ghat
    par = body[k, DAE_PARENT]
    nmp = body[k, DAE_NMP]
    e0 = nb + (body[par, DAE_MO] if par >= 0 else 0)
    oL = 12 + 3 * NM
    station_frame(stat, k, NM, pos, vel, e0, nmp, M33, V3, Ghat)
    ax0, ax1, ax2 = axis[k, 0], axis[k, 1], axis[k, 2]
    axis_rotation(ax0, ax1, ax2, np.cos(pos[k]), np.sin(pos[k]), M33, 27)
    for i in range(3):
        ppc[k, i] = V3[0, i]
        for j in range(3):
            Rpc[k, i, j] = M33[3 * i] * M33[27 + j] + M33[3 * i + 1] * M33[30 + j] + M33[3 * i + 2] * M33[33 + j]
    for i in range(3):
        if par < 0:
            pw[k, i] = ppc[k, i]
            for j in range(3):
                Rw[k, i, j] = Rpc[k, i, j]
        else:
            pw[k, i] = pw[par, i] + Rw[par, i, 0] * ppc[k, 0] + Rw[par, i, 1] * ppc[k, 1] + Rw[par, i, 2] * ppc[k, 2]
            for j in range(3):
                Rw[k, i, j] = Rw[par, i, 0] * Rpc[k, 0, j] + Rw[par, i, 1] * Rpc[k, 1, j] + Rw[par, i, 2] * Rpc[k, 2, j]
    # parent twist (the base is inertial), omega_p + omega_rel and the station's velocity u, parent axes
    wp0 = wp1 = wp2 = vp0 = vp1 = vp2 = 0.0
    if par >= 0:
        wp0, wp1, wp2, vp0, vp1, vp2 = V[par, 0], V[par, 1], V[par, 2], V[par, 3], V[par, 4], V[par, 5]
    r0, r1, r2 = V3[0, 0], V3[0, 1], V3[0, 2]
    rd0, rd1, rd2 = V3[4, 0], V3[4, 1], V3[4, 2]
    o0, o1, o2 = wp0 + V3[3, 0], wp1 + V3[3, 1], wp2 + V3[3, 2]
    u0 = vp0 + wp1 * r2 - wp2 * r1 + rd0
    u1 = vp1 + wp2 * r0 - wp0 * r2 + rd1
    u2 = vp2 + wp0 * r1 - wp1 * r0 + rd2
    # biases in parent axes: dE/dt theta_dot and omega_p x r_dot + e_x eta_dot^T S eta_dot
    ba0, ba1, ba2 = V3[5, 0], V3[5, 1], V3[5, 2]
    bl0 = wp1 * rd2 - wp2 * rd1 + V3[6, 0]
    bl1 = wp2 * rd0 - wp0 * rd2
    bl2 = wp0 * rd1 - wp1 * rd0
    qd = vel[k]
    for i in range(3):
        c0, c1, c2 = Rpc[k, 0, i], Rpc[k, 1, i], Rpc[k, 2, i]     # row i of Rpc^T
        V[k, i] = c0 * o0 + c1 * o1 + c2 * o2 + axis[k, i] * qd
        V[k, 3 + i] = c0 * u0 + c1 * u1 + c2 * u2
        kap[k, i] = c0 * ba0 + c1 * ba1 + c2 * ba2
        kap[k, 3 + i] = c0 * bl0 + c1 * bl1 + c2 * bl2
        for j in range(3):
            Phi[k, i, j] = Rpc[k, j, i]
            Phi[k, i, 3 + j] = 0.0
            Phi[k, 3 + i, 3 + j] = Rpc[k, j, i]
        # -Rpc^T skew(r) (v_dot + omega_dot x r = v_dot - skew(r) omega_dot)
        Phi[k, 3 + i, 0] = -(c1 * r2 - c2 * r1)
        Phi[k, 3 + i, 1] = -(c2 * r0 - c0 * r2)
        Phi[k, 3 + i, 2] = -(c0 * r1 - c1 * r0)
        for a in range(nmp):           # modal columns: Rpc^T E Lambda (angular), Rpc^T Ghat (linear)
            el0 = M33[18] * stat[k, oL + a] + M33[19] * stat[k, oL + NM + a] + M33[20] * stat[k, oL + 2 * NM + a]
            el1 = M33[21] * stat[k, oL + a] + M33[22] * stat[k, oL + NM + a] + M33[23] * stat[k, oL + 2 * NM + a]
            el2 = M33[24] * stat[k, oL + a] + M33[25] * stat[k, oL + NM + a] + M33[26] * stat[k, oL + 2 * NM + a]
            Phi[k, i, 6 + a] = c0 * el0 + c1 * el1 + c2 * el2
            Phi[k, 3 + i, 6 + a] = c0 * Ghat[0, a] + c1 * Ghat[1, a] + c2 * Ghat[2, a]
    # relative angular velocity w_r = Rpc^T omega_rel + s q_dot; kappa += (omega_k - s qd) x w_r, -w_r x v_k
    wr0 = wr1 = wr2 = 0.0
    for j in range(3):
        wr0 += Rpc[k, j, 0] * V3[3, j]
        wr1 += Rpc[k, j, 1] * V3[3, j]
        wr2 += Rpc[k, j, 2] * V3[3, j]
    wr0 += ax0 * qd
    wr1 += ax1 * qd
    wr2 += ax2 * qd
    w0, w1, w2 = V[k, 0] - ax0 * qd, V[k, 1] - ax1 * qd, V[k, 2] - ax2 * qd
    kap[k, 0] += w1 * wr2 - w2 * wr1
    kap[k, 1] += w2 * wr0 - w0 * wr2
    kap[k, 2] += w0 * wr1 - w1 * wr0
    kap[k, 3] -= wr1 * V[k, 5] - wr2 * V[k, 4]
    kap[k, 4] -= wr2 * V[k, 3] - wr0 * V[k, 5]
    kap[k, 5] -= wr0 * V[k, 4] - wr1 * V[k, 3]


@kernel
def link_terms(k, dm, dw, el_pos, el_vel, implicit):
    """Inertia operator M_k (6 + nm square) and the velocity, gravity and elastic terms h_k of body k
    (seed 000 eqs. 10-12 and 64-66 for lumped nodes). Node j at r_j has the acceleration
    v_dot + omega_dot x r_j + Ghat_j eta_ddot + beta_j, beta_j = omega x v + omega x (omega x r_j)
    + 2 omega x r_dot_j + e_x eta_dot^T S_j eta_dot; its force m_j (acceleration - g) enters as
    [r_j x F; F; Ghat_j^T F]. Node rotary inertia J_j turns with omega + Lambda_j eta_dot. The
    elastic forces at (el_pos, el_vel), implicit = (cK, cD, fitted) as in solve."""
    nb, NM, body, node, rot, gravity, Kmod, Dmod, C = (dm.nb, dm.NM, dm.body, dm.node, dm.rot, dm.gravity, dm.Kmod,
                                                      dm.Dmod, dm.C)
    pos, vel, Rw, V, Mk, hk, Ghat, V3 = dw.pos, dw.vel, dw.Rw, dw.V, dw.Mk, dw.hk, dw.Ghat, dw.V3
    cK, cD, fitted = implicit
    nm = body[k, DAE_NM]
    e0 = nb + body[k, DAE_MO]
    n = 6 + nm
    oG = 4
    oS = 4 + 3 * NM
    for i in range(n):
        hk[k, i] = 0.0
        for j in range(n):
            Mk[k, i, j] = 0.0
    om0, om1, om2 = V[k, 0], V[k, 1], V[k, 2]
    gb0 = Rw[k, 0, 0] * gravity[0] + Rw[k, 1, 0] * gravity[1] + Rw[k, 2, 0] * gravity[2]
    gb1 = Rw[k, 0, 1] * gravity[0] + Rw[k, 1, 1] * gravity[1] + Rw[k, 2, 1] * gravity[2]
    gb2 = Rw[k, 0, 2] * gravity[0] + Rw[k, 1, 2] * gravity[1] + Rw[k, 2, 2] * gravity[2]
    wv0 = om1 * V[k, 5] - om2 * V[k, 4] - gb0
    wv1 = om2 * V[k, 3] - om0 * V[k, 5] - gb1
    wv2 = om0 * V[k, 4] - om1 * V[k, 3] - gb2
    for j in range(body[k, DAE_NODE0], body[k, DAE_NODE1]):
        m = node[j, 0]
        fs = 0.0
        sd = 0.0
        for a in range(nm):
            se = 0.0
            sv = 0.0
            for b in range(nm):
                sab = node[j, oS + a * NM + b]
                se += sab * pos[e0 + b]
                sv += sab * vel[e0 + b]
            fs += se * pos[e0 + a]
            sd += sv * vel[e0 + a]
            Ghat[0, a] = node[j, oG + a] + se
            Ghat[1, a] = node[j, oG + NM + a]
            Ghat[2, a] = node[j, oG + 2 * NM + a]
        for i in range(3):
            r = node[j, 1 + i]
            rd = 0.0
            for a in range(nm):
                r += node[j, oG + i * NM + a] * pos[e0 + a]
                rd += Ghat[i, a] * vel[e0 + a]
            V3[0, i] = r
            V3[1, i] = rd
        V3[0, 0] += 0.5 * fs
        r0, r1, r2 = V3[0, 0], V3[0, 1], V3[0, 2]
        d0, d1, d2 = V3[1, 0], V3[1, 1], V3[1, 2]
        c0 = om1 * r2 - om2 * r1
        c1 = om2 * r0 - om0 * r2
        c2 = om0 * r1 - om1 * r0
        be0 = wv0 + om1 * c2 - om2 * c1 + 2.0 * (om1 * d2 - om2 * d1) + sd
        be1 = wv1 + om2 * c0 - om0 * c2 + 2.0 * (om2 * d0 - om0 * d2)
        be2 = wv2 + om0 * c1 - om1 * c0 + 2.0 * (om0 * d1 - om1 * d0)
        # rigid blocks: m (|r|^2 I - r r^T), m skew(r), m I
        rr = r0 * r0 + r1 * r1 + r2 * r2
        for i in range(3):
            ri = V3[0, i]
            for jj in range(i, 3):
                Mk[k, i, jj] -= m * ri * V3[0, jj]
            Mk[k, i, i] += m * rr
            Mk[k, 3 + i, 3 + i] += m
        Mk[k, 0, 4] -= m * r2
        Mk[k, 0, 5] += m * r1
        Mk[k, 1, 3] += m * r2
        Mk[k, 1, 5] -= m * r0
        Mk[k, 2, 3] -= m * r1
        Mk[k, 2, 4] += m * r0
        # coupling and modal blocks: m skew(r) Ghat, m Ghat, m Ghat^T Ghat
        for a in range(nm):
            g0, g1, g2 = Ghat[0, a], Ghat[1, a], Ghat[2, a]
            Mk[k, 0, 6 + a] += m * (r1 * g2 - r2 * g1)
            Mk[k, 1, 6 + a] += m * (r2 * g0 - r0 * g2)
            Mk[k, 2, 6 + a] += m * (r0 * g1 - r1 * g0)
            Mk[k, 3, 6 + a] += m * g0
            Mk[k, 4, 6 + a] += m * g1
            Mk[k, 5, 6 + a] += m * g2
            for b in range(a, nm):
                Mk[k, 6 + a, 6 + b] += m * (g0 * Ghat[0, b] + g1 * Ghat[1, b] + g2 * Ghat[2, b])
            hk[k, 6 + a] += m * (g0 * be0 + g1 * be1 + g2 * be2)
        hk[k, 0] += m * (r1 * be2 - r2 * be1)
        hk[k, 1] += m * (r2 * be0 - r0 * be2)
        hk[k, 2] += m * (r0 * be1 - r1 * be0)
        hk[k, 3] += m * be0
        hk[k, 4] += m * be1
        hk[k, 5] += m * be2
    # node rotary inertia: sum J, sum J Lambda, sum Lambda^T J Lambda; moment omega x (J omega + J Lambda eta_dot)
    oJL = 9
    oLJL = 9 + 3 * NM
    for i in range(3):
        h = 0.0
        for jj in range(3):
            Mk[k, i, jj] += rot[k, 3 * i + jj] if jj >= i else 0.0
            h += rot[k, 3 * i + jj] * V[k, jj]
        for a in range(nm):
            Mk[k, i, 6 + a] += rot[k, oJL + i * NM + a]
            h += rot[k, oJL + i * NM + a] * vel[e0 + a]
        V3[2, i] = h
    hk[k, 0] += om1 * V3[2, 2] - om2 * V3[2, 1]
    hk[k, 1] += om2 * V3[2, 0] - om0 * V3[2, 2]
    hk[k, 2] += om0 * V3[2, 1] - om1 * V3[2, 0]
    # modal stiffness and damping (eqs. 59-60), with the implicit integrator's added modal mass
    for a in range(nm):
        s = 0.0
        for b in range(nm):
            s += Kmod[k, a, b] * el_pos[e0 + b] + Dmod[k, a, b] * el_vel[e0 + b]
            if b >= a:
                Mk[k, 6 + a, 6 + b] += rot[k, oLJL + a * NM + b] + cK * Kmod[k, a, b] + cD * Dmod[k, a, b]
                if fitted:
                    Mk[k, 6 + a, 6 + b] += C[k, a, b]
        hk[k, 6 + a] += s
    for i in range(n):
        for jj in range(i + 1, n):
            Mk[k, jj, i] = Mk[k, i, jj]


@kernel
def station_wrenches(k, dm, dw):
    """The output stations' external wrenches on body k (dw.f_ext: world axes, moment about the station's
    point) taken off h_k as their generalized force [m + r x f; f; Ghat^T f + (E Lambda)^T m], with m and f
    the moment and force in body axes (the transpose of the station's velocity map, link_kinematics)."""
    nb, NM, stat, f_ext, Rw, hk, M33, V3, Ghat = dm.nb, dm.NM, dm.stat, dw.f_ext, dw.Rw, dw.hk, dw.M33, dw.V3, dw.Ghat
    nm = dm.body[k, DAE_NM]
    oL = 12 + 3 * NM
    for s in range(f_ext.shape[0]):
        loaded = False
        for i in range(6):
            loaded = loaded or f_ext[s, i] != 0.0
        if dm.stat_body[nb + s] != k or not loaded:
            continue
        station_frame(stat, nb + s, NM, dw.pos, dw.vel, nb + dm.body[k, DAE_MO], nm, M33, V3, Ghat)
        for i in range(3):       # body axes: V3[1] the moment, V3[2] the force (station_frame's rows no longer read)
            V3[1, i] = Rw[k, 0, i] * f_ext[s, 0] + Rw[k, 1, i] * f_ext[s, 1] + Rw[k, 2, i] * f_ext[s, 2]
            V3[2, i] = Rw[k, 0, i] * f_ext[s, 3] + Rw[k, 1, i] * f_ext[s, 4] + Rw[k, 2, i] * f_ext[s, 5]
        for i in range(3):
            j, l = (i + 1) % 3, (i + 2) % 3
            hk[k, i] -= V3[1, i] + V3[0, j] * V3[2, l] - V3[0, l] * V3[2, j]
            hk[k, 3 + i] -= V3[2, i]
        for a in range(nm):
            for i in range(3):
                el = (M33[18 + 3 * i] * stat[nb + s, oL + a] + M33[19 + 3 * i] * stat[nb + s, oL + NM + a]
                      + M33[20 + 3 * i] * stat[nb + s, oL + 2 * NM + a])
                hk[k, 6 + a] -= Ghat[i, a] * V3[2, i] + el * V3[1, i]


@kernel
def joint_operator(drive, armature, axis, k, i, j):
    """Q_k[i, j]: the joint rows act on delta through Q = diag(I - (1 - J_arm) s s^T, I) for a
    torque-driven joint (the projection P of eq. 26 plus the axis row's rotor inertia), I for a
    prescribed one."""
    q = 1.0 if i == j else 0.0
    if i < 3 and j < 3 and drive[k] != JOINT_PRESCRIBED:
        q -= (1.0 - armature[k]) * axis[k, i] * axis[k, j]
    return q


@kernel
def stack_block(k, body, axis, drive, armature, tauj, qdd_pres, kap, Mk, hk, A, r):
    """Block row k of the stacked system (eqs. 35-36, 42, 72): joint rows 0-5, link rows 6.. .
    Columns: f_k (0-5), a_k (6-11), eta_ddot_k (12..)."""
    nm = body[k, DAE_NM]
    n = 12 + nm
    for i in range(n):
        r[k, i] = 0.0
        for j in range(n):
            A[k, i, j] = 0.0
    for i in range(6 + nm):
        r[k, 6 + i] = -hk[k, i]
        for j in range(6 + nm):
            A[k, 6 + i, 6 + j] = Mk[k, i, j]
    for i in range(6):
        A[k, 6 + i, i] = -1.0
    for i in range(6):
        s = kap[k, i] if i >= 3 else 0.0
        for j in range(6):
            qij = joint_operator(drive, armature, axis, k, i, j)
            A[k, i, 6 + j] = qij
            if i < 3 and j < 3:
                s += qij * kap[k, j]
        r[k, i] = s
    if drive[k] == JOINT_PRESCRIBED:
        for i in range(3):
            r[k, i] += axis[k, i] * qdd_pres[k]
    else:
        for i in range(3):
            r[k, i] += axis[k, i] * tauj[k]
            for j in range(3):
                A[k, i, j] = axis[k, i] * axis[k, j]


@kernel
def eliminate(dm, dw):
    """Tip-to-base block elimination: factor each diagonal block, y_k = A_k^-1 r_k and
    W_k = A_k^-1 B_k with B_k = -Q_k Phi_k the coupling of the joint rows to the parent's
    accelerations; the parent's link rows receive the Schur complement -Phi_k^T (W_k, y_k)
    of the child's wrench (eq. 79 by block Gaussian elimination). False on a singular block."""
    nb, body, axis, drive = dm.nb, dm.body, dm.axis, dm.drive
    armature, Phi, A, r, piv, W, y, cols, QPhi = dw.arm, dw.Phi, dw.A, dw.r, dw.piv, dw.W, dw.y, dw.cols, dw.QPhi
    for k in range(nb - 1, -1, -1):
        n = 12 + body[k, DAE_NM]
        if not lu_factor(A, k, n, piv):
            return False
        for i in range(n):
            y[k, i] = r[k, i]
        lu_solve(A, k, n, piv, y, k)
        par = body[k, DAE_PARENT]
        if par < 0:
            continue
        npx = 6 + body[k, DAE_NMP]
        for c in range(6):
            for i in range(n):
                cols[c, i] = 0.0
            cols[c, c] = 1.0
            lu_solve(A, k, n, piv, cols, c)
        for rr in range(6):                 # B_k = -Q_k Phi_k, in the first six rows of W's scratch
            for c in range(npx):
                b = 0.0
                for j in range(6):
                    b -= joint_operator(drive, armature, axis, k, rr, j) * Phi[k, j, c]
                QPhi[rr, c] = b
        for c in range(npx):
            for i in range(n):
                s = 0.0
                for rr in range(6):
                    s += cols[rr, i] * QPhi[rr, c]
                W[k, i, c] = s
        for i in range(npx):
            s = 0.0
            for f in range(6):
                s += Phi[k, f, i] * y[k, f]
            r[par, 6 + i] -= s
            for c in range(npx):
                s = 0.0
                for f in range(6):
                    s += Phi[k, f, i] * W[k, f, c]
                A[par, 6 + i, 6 + c] -= s
    return True


@kernel
def back_substitute(dm, dw, acc):
    """Base-to-tip: z_k = y_k - W_k [a_p; eta_ddot_p]; joint acceleration s^T delta, modal
    accelerations and the interaction wrench f_k out of z_k (Table 1, step vii)."""
    nb, body, axis, drive = dm.nb, dm.body, dm.axis, dm.drive
    qdd_pres, Phi, kap, W, y, z, wrench, tau_joint = dw.qdd_pres, dw.Phi, dw.kap, dw.W, dw.y, dw.z, dw.wrench, \
        dw.tau_joint
    for k in range(nb):
        nm = body[k, DAE_NM]
        n = 12 + nm
        par = body[k, DAE_PARENT]
        npx = 6 + body[k, DAE_NMP] if par >= 0 else 0
        for i in range(n):
            s = y[k, i]
            for c in range(npx):
                s -= W[k, i, c] * z[par, 6 + c]
            z[k, i] = s
        if drive[k] == JOINT_PRESCRIBED:
            qdd = qdd_pres[k]
        else:
            qdd = 0.0
            for i in range(3):
                d = z[k, 6 + i] - kap[k, i]
                for c in range(npx):
                    d -= Phi[k, i, c] * z[par, 6 + c]
                qdd += axis[k, i] * d
        acc[k] = qdd
        base = nb + body[k, DAE_MO]
        for e in range(nm):
            acc[base + e] = z[k, 12 + e]
        for i in range(6):
            wrench[k, i] = z[k, i]
        tau_joint[k] = axis[k, 0] * z[k, 0] + axis[k, 1] * z[k, 1] + axis[k, 2] * z[k, 2]


@kernel
def forward_dynamics(mi, mf, w, t, pos, vel, tau, el_pos, el_vel, cK, cD, acc):
    """Generalized accelerations acc (joints, modes, rotors) at the state (pos, vel) and time t,
    with the interaction wrenches in the work block dae_wrench; the same contract as
    hil.kernels.aba.forward_dynamics (tau: drive torque per joint; elastic forces and joint friction at
    (el_pos, el_vel); cK, cD: the implicit integrator's coefficients). False on a singular block."""
    dm, dw = views(mi, mf, w)
    return solve(dm, dw, t, pos, vel, tau, el_pos, el_vel, cK, cD, False, acc)


@kernel
def solve(dm, dw, t, pos, vel, tau, el_pos, el_vel, cK, cD, fitted, acc):
    """forward_dynamics on the views of hil.kernels.screw_dae_arrays; with `fitted`, the fitted midpoint
    scheme's blocks C added to each body's modal mass (hil.kernels.aba.forward_dynamics_blocks)."""
    nb = dm.nb
    impose_prescribed_motion(dm.mi, dm.mf, t, pos, vel, dw.pos, 0, dw.vel, 0, dw.qdd_pres, 0)
    link_torques(dm.mi, dm.mf, dw.pos, 0, dw.vel, 0, tau, dw.tauj, 0)
    joint_friction_torques(dm.mi, dm.mf, el_vel, dw.vel, 0, cD, dw.tauj, 0, dw.arm, 0)
    for k in range(nb):
        link_kinematics(k, dm, dw)
        link_terms(k, dm, dw, el_pos, el_vel, (cK, cD, fitted))
        station_wrenches(k, dm, dw)
        stack_block(k, dm.body, dm.axis, dm.drive, dw.arm, dw.tauj, dw.qdd_pres, dw.kap, dw.Mk, dw.hk, dw.A,
                    dw.r)
    if not eliminate(dm, dw):
        return False
    back_substitute(dm, dw, acc)
    rotor_accelerations(dm.mi, dm.mf, el_vel, dw.vel, 0, cD, tau, dw.tauj, 0, acc)
    return True
