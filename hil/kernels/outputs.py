"""Quantities derived from a solved state: world poses, station kinematics, energy and power."""
import numpy as np
from numba import njit

from .aba import DRIVE_PRESCRIBED, friction
from .bodies import station_pose, station_rates


@njit(cache=True)
def world_poses(m, w):
    """World rotation w.Rw[k] and origin w.pw[k] of every body frame (after forward_kinematics)."""
    for k in range(m.dims[0]):
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
def station_state(m, w, s, out):
    """World kinematics of output station s after forward_dynamics and world_poses.

    out (24,): position (3), rotation matrix row-major (9), velocity (3),
    angular velocity (3), specific force (acceleration minus gravity, 3),
    angular acceleration (3); all in world axes.
    """
    k = m.os_body[s]
    nm = m.nm[k]
    base = m.dims[0] + m.mo[k]
    etadd = w.nud[k, 6:6 + nm]
    r = np.empty(3)
    R = np.empty((3, 3))
    RE = np.empty((2, 3, 3))
    th = np.empty(3)
    station_pose(m.os_G[s], m.os_L[s], m.os_S[s], m.os_p0[s], m.os_R0[s], w.pos, base, nm, r, R, RE, th)
    E = RE[1]
    w_rel = np.empty(3)
    v_rel = np.empty(3)
    w_b = np.empty(3)
    v_b = np.empty(3)
    Ghat = np.empty((3, max(nm, 1)))
    station_rates(m.os_G[s], m.os_L[s], m.os_S[s], w.pos, w.vel, base, nm, E, th, np.empty(3), w_rel, v_rel, w_b, v_b, Ghat)
    V = w.V[k]
    a = w.nud[k]
    om = V[0:3]
    al = a[0:3]
    vb = np.empty(3)
    ab = np.empty(3)
    wb = np.empty(3)
    alb = np.empty(3)
    ELdd = np.zeros(3)
    osL = m.os_L[s]
    for i in range(3):
        for e in range(nm):
            acc = 0.0
            for j in range(3):
                acc += E[i, j] * osL[j, e]
            ELdd[i] += acc * etadd[e]
    wxr = np.cross(om, r)
    for i in range(3):
        vb[i] = V[3 + i] + wxr[i] + v_rel[i]
        wb[i] = om[i] + w_rel[i]
    wxv = np.cross(om, V[3:6])
    wxwxr = np.cross(om, wxr)
    alxr = np.cross(al, r)
    wxrd = np.cross(om, v_rel)
    wxwrel = np.cross(om, w_rel)
    for i in range(3):
        rdd = v_b[i]
        for e in range(nm):
            rdd += Ghat[i, e] * etadd[e]
        ab[i] = a[3 + i] + wxv[i] + alxr[i] + wxwxr[i] + 2.0 * wxrd[i] + rdd
        alb[i] = al[i] + ELdd[i] + w_b[i] + wxwrel[i]
    Rk = w.Rw[k]
    for i in range(3):
        ps = w.pw[k, i]
        for j in range(3):
            ps += Rk[i, j] * r[j]
        out[i] = ps
        for j in range(3):
            out[3 + 3 * i + j] = Rk[i, 0] * R[0, j] + Rk[i, 1] * R[1, j] + Rk[i, 2] * R[2, j]
        out[12 + i] = Rk[i, 0] * vb[0] + Rk[i, 1] * vb[1] + Rk[i, 2] * vb[2]
        out[15 + i] = Rk[i, 0] * wb[0] + Rk[i, 1] * wb[1] + Rk[i, 2] * wb[2]
        out[18 + i] = Rk[i, 0] * ab[0] + Rk[i, 1] * ab[1] + Rk[i, 2] * ab[2]
        out[21 + i] = Rk[i, 0] * alb[0] + Rk[i, 1] * alb[1] + Rk[i, 2] * alb[2]


@njit(cache=True)
def energy(m, w, out):
    """out = [kinetic, gravity potential, elastic] at the prepared state (after forward_kinematics)."""
    nb = m.dims[0]
    nj = nb
    off = nb + m.dims[1]
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
            el += 0.5 * m.kspring[k] * (w.pos[off + mi] - w.pos[k]) ** 2
        elif m.drive[k] != DRIVE_PRESCRIBED:
            kin += 0.5 * m.armature[k] * w.vel[k] ** 2
    out[0] = kin
    out[1] = grav
    out[2] = el


@njit(cache=True)
def power(m, w, tau, out):
    """out = [drive power in, dissipated power] at the state of the last forward_dynamics.

    Prescribed joints count their required link torque times their rate as input.
    """
    nb = m.dims[0]
    off = nb + m.dims[1]
    pin = 0.0
    pd = 0.0
    for k in range(nb):
        qd = w.vel[k]
        mi = m.mot[k]
        if m.drive[k] == DRIVE_PRESCRIBED:
            pin += w.tau_joint[k] * qd
        elif mi >= 0:
            phd = w.vel[off + mi]
            pin += tau[k] * phd
            pd += friction(m.viscous[k], m.coulomb[k], m.coul_vs[k], phd) * phd + m.dspring[k] * (phd - qd) ** 2
        else:
            pin += tau[k] * qd
            pd += friction(m.viscous[k], m.coulomb[k], m.coul_vs[k], qd) * qd
        nm = m.nm[k]
        base = nb + m.mo[k]
        for e in range(nm):
            s = 0.0
            for f in range(nm):
                s += m.Dmod[k, e, f] * w.vel[base + f]
            pd += w.vel[base + e] * s
    out[0] = pin
    out[1] = pd
