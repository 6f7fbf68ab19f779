"""Quantities derived from a solved state: world poses, station kinematics, energy and power."""
from numba import njit

from .aba import dead_band, joint_friction, spring_torque
from .bodies import station_pose, station_rates
from .layout import DIM_NB, DIM_NETA, JOINT_PRESCRIBED, JP_BACKLASH


@njit(cache=True)
def world_poses(m, w):
    """World rotation w.Rw[k] and origin w.pw[k] of every body frame (after forward_kinematics)."""
    for k in range(m.dims[DIM_NB]):
        par = m.parent[k]
        Rpc = w.Rpc[k]
        ppc = w.ppc[k]
        if par < 0:
            for i in range(3):
                w.pw[k, i] = ppc[i]
                for j in range(3):
                    w.Rw[k, i, j] = Rpc[i, j]
        else:
            Rp = w.Rw[par]
            for i in range(3):
                s = w.pw[par, i]
                for j in range(3):
                    s += Rp[i, j] * ppc[j]
                w.pw[k, i] = s
                for j in range(3):
                    w.Rw[k, i, j] = Rp[i, 0] * Rpc[0, j] + Rp[i, 1] * Rpc[1, j] + Rp[i, 2] * Rpc[2, j]


@njit(cache=True)
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


STATION_FIELDS = 24   # station_state: position 3, rotation 9, velocity 3, angular velocity 3, specific force 3,
                      # angular acceleration 3


@njit(cache=True)
def station_state(m, w, s, out):
    """World kinematics of output station s after forward_dynamics and world_poses.

    out (24,): position (3), rotation matrix row-major (9), velocity (3),
    angular velocity (3), specific force (acceleration minus gravity, 3),
    angular acceleration (3); all in world axes. Allocation-free (scratch in w.SV, w.SM).
    """
    k = m.os_body[s]
    nm = m.nm[k]
    base = m.dims[DIM_NB] + m.mo[k]
    SV = w.SV
    SM = w.SM
    station_pose(m.os_G, m.os_L, m.os_S, m.os_p0, m.os_R0, s, w.pos, base, nm, SV, 0, SM, 0, 1, 2, SV, 1)
    Ghat = w.Ghat
    station_rates(m.os_G, m.os_L, m.os_S, s, w.pos, w.vel, base, nm, SM, 2, SV, 1, Ghat)
    r, w_rel, v_rel, w_b, v_b = SV[0], SV[3], SV[4], SV[5], SV[6]
    R = SM[0]
    E = SM[2]
    V = w.V
    a = w.nud
    osL = m.os_L[s]
    el0 = 0.0
    el1 = 0.0
    el2 = 0.0
    rdd0 = v_b[0]
    rdd1 = v_b[1]
    rdd2 = v_b[2]
    for e in range(nm):
        dd = a[k, 6 + e]
        el0 += (E[0, 0] * osL[0, e] + E[0, 1] * osL[1, e] + E[0, 2] * osL[2, e]) * dd
        el1 += (E[1, 0] * osL[0, e] + E[1, 1] * osL[1, e] + E[1, 2] * osL[2, e]) * dd
        el2 += (E[2, 0] * osL[0, e] + E[2, 1] * osL[1, e] + E[2, 2] * osL[2, e]) * dd
        rdd0 += Ghat[0, e] * dd
        rdd1 += Ghat[1, e] * dd
        rdd2 += Ghat[2, e] * dd
    o0, o1, o2 = V[k, 0], V[k, 1], V[k, 2]
    wr = _cross(o0, o1, o2, r[0], r[1], r[2])
    wv = _cross(o0, o1, o2, V[k, 3], V[k, 4], V[k, 5])
    wwr = _cross(o0, o1, o2, wr[0], wr[1], wr[2])
    ar = _cross(a[k, 0], a[k, 1], a[k, 2], r[0], r[1], r[2])
    wrd = _cross(o0, o1, o2, v_rel[0], v_rel[1], v_rel[2])
    wwrel = _cross(o0, o1, o2, w_rel[0], w_rel[1], w_rel[2])
    rdd = (rdd0, rdd1, rdd2)
    el = (el0, el1, el2)
    body = SV[7:11]   # velocity, angular velocity, specific force, angular acceleration in body axes
    for i in range(3):
        body[0, i] = V[k, 3 + i] + wr[i] + v_rel[i]
        body[1, i] = V[k, i] + w_rel[i]
        body[2, i] = a[k, 3 + i] + wv[i] + ar[i] + wwr[i] + 2.0 * wrd[i] + rdd[i]
        body[3, i] = a[k, i] + el[i] + w_b[i] + wwrel[i]
    Rk = w.Rw[k]
    for i in range(3):
        ps = w.pw[k, i]
        for j in range(3):
            ps += Rk[i, j] * r[j]
        out[i] = ps
        for j in range(3):
            out[3 + 3 * i + j] = Rk[i, 0] * R[0, j] + Rk[i, 1] * R[1, j] + Rk[i, 2] * R[2, j]
        for q in range(4):
            out[12 + 3 * q + i] = Rk[i, 0] * body[q, 0] + Rk[i, 1] * body[q, 1] + Rk[i, 2] * body[q, 2]


@njit(cache=True)
def energy(m, w, out):
    """out = [kinetic, gravity potential, elastic] at the prepared state (after forward_kinematics)."""
    nb = m.dims[DIM_NB]
    nj = nb
    off = nb + m.dims[DIM_NETA]
    world_poses(m, w)
    kin = 0.0
    grav = 0.0
    el = 0.0
    g = m.gravity
    for k in range(nb):
        nm = m.nm[k]
        n = 6 + nm
        base = nj + m.mo[k]
        nu = w.tx
        for i in range(6):
            nu[i] = w.V[k, i]
        for e in range(nm):
            nu[6 + e] = w.vel[base + e]
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += w.Mb[k, i, j] * nu[j]
            kin += 0.5 * nu[i] * s
        eta = w.pos[base:base + nm]
        for e in range(nm):
            s = 0.0
            for f in range(nm):
                s += m.Kmod[k, e, f] * eta[f]
            el += 0.5 * eta[e] * s
        Rk = w.Rw[k]
        for j in range(m.node_off[k], m.node_off[k + 1]):
            r = w.t3a
            fs = 0.0
            for e in range(nm):
                s = 0.0
                for f in range(nm):
                    s += m.nd_S[j, e, f] * eta[f]
                fs += s * eta[e]
            for i in range(3):
                s = m.nd_p0[j, i]
                for e in range(nm):
                    s += m.nd_G[j, i, e] * eta[e]
                r[i] = s
            r[0] += 0.5 * fs
            for i in range(3):
                pw = w.pw[k, i] + Rk[i, 0] * r[0] + Rk[i, 1] * r[1] + Rk[i, 2] * r[2]
                grav -= m.nd_m[j] * g[i] * pw
        mi = m.mot[k]
        if mi >= 0:
            kin += 0.5 * m.mot_inertia[k] * w.vel[off + mi] ** 2
            el += 0.5 * m.kspring[k] * dead_band(w.pos[off + mi] - w.pos[k], m.jpar[k, JP_BACKLASH]) ** 2
        elif m.drive[k] != JOINT_PRESCRIBED:
            kin += 0.5 * m.armature[k] * w.vel[k] ** 2
    out[0] = kin
    out[1] = grav
    out[2] = el


@njit(cache=True)
def power(m, w, tau, out):
    """out = [drive power in, dissipated power] at the state of the last forward_dynamics.

    Prescribed joints count their required link torque times their rate as input. A joint or rotor
    held by its brake has zero rate: neither its drive nor the brake does work.
    """
    nb = m.dims[DIM_NB]
    off = nb + m.dims[DIM_NETA]
    pin = 0.0
    pd = 0.0
    for k in range(nb):
        qd = w.vel[k]
        mi = m.mot[k]
        if m.drive[k] == JOINT_PRESCRIBED:
            pin += w.tau_joint[k] * qd
        elif mi >= 0:   # friction and brake act on the rotor; the damper only in contact (backlash)
            phd = w.vel[off + mi]
            pin += tau[k] * phd
            damper = spring_torque(0.0, m.dspring[k], m.jpar[k, JP_BACKLASH], w.pos[off + mi] - w.pos[k], phd - qd)
            pd += joint_friction(m.viscous, m.coulomb, m.jpar, k, phd) * phd + damper * (phd - qd)
        else:
            pin += tau[k] * qd
            pd += joint_friction(m.viscous, m.coulomb, m.jpar, k, qd) * qd
        nm = m.nm[k]
        base = nb + m.mo[k]
        for e in range(nm):
            s = 0.0
            for f in range(nm):
                s += m.Dmod[k, e, f] * w.vel[base + f]
            pd += w.vel[base + e] * s
    out[0] = pin
    out[1] = pd
