"""Quantities derived from a solved state: world poses, station kinematics, energy and power.

They read the state the last evaluation prepared (work blocks pos, vel) and what it solved.
"""
from numba import njit

from .bodies import OUTPUT_STATIONS, SR_E, SR_R, ST_POS, ST_V_BIAS, ST_V_REL, ST_W_BIAS, ST_W_REL, station_kinematics
from .joints import dead_band, joint_friction, spring_torque
from .layout import (DIM_NB, DIM_NETA, DIM_NM, JOINT_PRESCRIBED, JP_BACKLASH, MF_ARMATURE, MF_DSPRING, MF_DMOD,
                     MF_GRAVITY, MF_JPAR, MF_KMOD, MF_KSPRING, MF_MOT_INERTIA, MF_ND_G, MF_ND_M, MF_ND_P0, MF_ND_S,
                     MF_OS_L, MI_DRIVE, MI_MO, MI_MOT, MI_NM, MI_NODE_OFF, MI_OS_BODY, MI_PARENT, N_JP, W_GHAT, W_MB,
                     W_NU, W_NUD, W_POS, W_PPC, W_PW, W_RPC, W_RW, W_STATION, W_STATION_R, W_SV, W_TAU_JOINT, W_V,
                     W_VEL)


@njit(cache=True)
def world_poses(mi, mf, w):
    """World rotation Rw[k] and origin pw[k] of every body frame (after the kinematics)."""
    Rw0 = mi[W_RW]
    pw0 = mi[W_PW]
    for k in range(mi[DIM_NB]):
        par = mi[mi[MI_PARENT] + k]
        Rpc = mi[W_RPC] + 9 * k
        ppc = mi[W_PPC] + 3 * k
        Rw = Rw0 + 9 * k
        pw = pw0 + 3 * k
        if par < 0:
            for i in range(3):
                w[pw + i] = w[ppc + i]
                for j in range(3):
                    w[Rw + 3 * i + j] = w[Rpc + 3 * i + j]
        else:
            Rp = Rw0 + 9 * par
            for i in range(3):
                w[pw + i] = (w[pw0 + 3 * par + i] + w[Rp + 3 * i] * w[ppc] + w[Rp + 3 * i + 1] * w[ppc + 1]
                             + w[Rp + 3 * i + 2] * w[ppc + 2])
                for j in range(3):
                    w[Rw + 3 * i + j] = (w[Rp + 3 * i] * w[Rpc + j] + w[Rp + 3 * i + 1] * w[Rpc + 3 + j]
                                         + w[Rp + 3 * i + 2] * w[Rpc + 6 + j])


STATION_FIELDS = 24   # station_state: position 3, rotation 9, velocity 3, angular velocity 3, specific force 3,
                      # angular acceleration 3


@njit(cache=True)
def station_state(mi, mf, w, s, out):
    """World kinematics of output station s after forward_dynamics and world_poses.

    out (24,): position (3), rotation matrix row-major (9), velocity (3),
    angular velocity (3), specific force (acceleration minus gravity, 3),
    angular acceleration (3); all in world axes. Allocation-free.
    """
    nb = mi[DIM_NB]
    NM = mi[DIM_NM]
    k = mi[mi[MI_OS_BODY] + s]
    nm = mi[mi[MI_NM] + k]
    e = nb + mi[mi[MI_MO] + k]
    station_kinematics(mi, mf, w, OUTPUT_STATIONS, s, mi[W_POS] + e, mi[W_VEL] + e, nm)
    row = mi[W_STATION]
    r = row + 3 * ST_POS
    wrel = row + 3 * ST_W_REL
    vrel = row + 3 * ST_V_REL
    wb = row + 3 * ST_W_BIAS
    vb = row + 3 * ST_V_BIAS
    R = mi[W_STATION_R] + 9 * SR_R
    E = mi[W_STATION_R] + 9 * SR_E
    gh = mi[W_GHAT]
    V = mi[W_V] + 6 * k
    a = mi[W_NUD] + (6 + NM) * k
    L = mi[MF_OS_L] + 3 * NM * s
    el0 = el1 = el2 = 0.0
    rdd0, rdd1, rdd2 = w[vb], w[vb + 1], w[vb + 2]
    for f in range(nm):
        dd = w[a + 6 + f]
        l0, l1, l2 = mf[L + f], mf[L + NM + f], mf[L + 2 * NM + f]
        el0 += (w[E] * l0 + w[E + 1] * l1 + w[E + 2] * l2) * dd
        el1 += (w[E + 3] * l0 + w[E + 4] * l1 + w[E + 5] * l2) * dd
        el2 += (w[E + 6] * l0 + w[E + 7] * l1 + w[E + 8] * l2) * dd
        rdd0 += w[gh + f] * dd
        rdd1 += w[gh + NM + f] * dd
        rdd2 += w[gh + 2 * NM + f] * dd
    o0, o1, o2 = w[V], w[V + 1], w[V + 2]
    r0, r1, r2 = w[r], w[r + 1], w[r + 2]
    wr = _cross(o0, o1, o2, r0, r1, r2)
    wv = _cross(o0, o1, o2, w[V + 3], w[V + 4], w[V + 5])
    wwr = _cross(o0, o1, o2, wr[0], wr[1], wr[2])
    ar = _cross(w[a], w[a + 1], w[a + 2], r0, r1, r2)
    wrd = _cross(o0, o1, o2, w[vrel], w[vrel + 1], w[vrel + 2])
    wwrel = _cross(o0, o1, o2, w[wrel], w[wrel + 1], w[wrel + 2])
    rdd = (rdd0, rdd1, rdd2)
    el = (el0, el1, el2)
    body = mi[W_SV]   # velocity, angular velocity, specific force, angular acceleration in body axes
    for i in range(3):
        w[body + i] = w[V + 3 + i] + wr[i] + w[vrel + i]
        w[body + 3 + i] = w[V + i] + w[wrel + i]
        w[body + 6 + i] = w[a + 3 + i] + wv[i] + ar[i] + wwr[i] + 2.0 * wrd[i] + rdd[i]
        w[body + 9 + i] = w[a + i] + el[i] + w[wb + i] + wwrel[i]
    Rk = mi[W_RW] + 9 * k
    pw = mi[W_PW] + 3 * k
    for i in range(3):
        ps = w[pw + i]
        for j in range(3):
            ps += w[Rk + 3 * i + j] * w[r + j]
        out[i] = ps
        for j in range(3):
            out[3 + 3 * i + j] = w[Rk + 3 * i] * w[R + j] + w[Rk + 3 * i + 1] * w[R + 3 + j] + w[Rk + 3 * i + 2] * w[R + 6 + j]
        for q in range(4):
            out[12 + 3 * q + i] = (w[Rk + 3 * i] * w[body + 3 * q] + w[Rk + 3 * i + 1] * w[body + 3 * q + 1]
                                   + w[Rk + 3 * i + 2] * w[body + 3 * q + 2])


@njit(cache=True)
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@njit(cache=True)
def energy(mi, mf, w, out):
    """out = [kinetic, gravity potential, elastic] at the prepared state (after forward_kinematics)."""
    nb = mi[DIM_NB]
    NM = mi[DIM_NM]
    NX = 6 + NM
    rotors = nb + mi[DIM_NETA]
    world_poses(mi, mf, w)
    ipos = mi[W_POS]
    ivel = mi[W_VEL]
    g = mi[MF_GRAVITY]
    nu = mi[W_NU]
    kin = 0.0
    grav = 0.0
    el = 0.0
    for k in range(nb):
        nm = mi[mi[MI_NM] + k]
        n = 6 + nm
        e = nb + mi[mi[MI_MO] + k]
        V = mi[W_V] + 6 * k
        Mb = mi[W_MB] + NX * NX * k
        for i in range(6):
            w[nu + i] = w[V + i]
        for f in range(nm):
            w[nu + 6 + f] = w[ivel + e + f]
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += w[Mb + i * NX + j] * w[nu + j]
            kin += 0.5 * w[nu + i] * s
        K = mi[MF_KMOD] + NM * NM * k
        for a in range(nm):
            s = 0.0
            for f in range(nm):
                s += mf[K + a * NM + f] * w[ipos + e + f]
            el += 0.5 * w[ipos + e + a] * s
        Rk = mi[W_RW] + 9 * k
        pw = mi[W_PW] + 3 * k
        for j in range(mi[mi[MI_NODE_OFF] + k], mi[mi[MI_NODE_OFF] + k + 1]):
            G = mi[MF_ND_G] + 3 * NM * j
            S = mi[MF_ND_S] + NM * NM * j
            fs = 0.0
            for a in range(nm):
                s = 0.0
                for f in range(nm):
                    s += mf[S + a * NM + f] * w[ipos + e + f]
                fs += s * w[ipos + e + a]
            r0 = mf[mi[MF_ND_P0] + 3 * j] + 0.5 * fs
            r1 = mf[mi[MF_ND_P0] + 3 * j + 1]
            r2 = mf[mi[MF_ND_P0] + 3 * j + 2]
            for a in range(nm):
                x = w[ipos + e + a]
                r0 += mf[G + a] * x
                r1 += mf[G + NM + a] * x
                r2 += mf[G + 2 * NM + a] * x
            mj = mf[mi[MF_ND_M] + j]
            for i in range(3):
                pw_i = w[pw + i] + w[Rk + 3 * i] * r0 + w[Rk + 3 * i + 1] * r1 + w[Rk + 3 * i + 2] * r2
                grav -= mj * mf[g + i] * pw_i
        rotor = mi[mi[MI_MOT] + k]
        if rotor >= 0:
            ir = rotors + rotor
            kin += 0.5 * mf[mi[MF_MOT_INERTIA] + k] * w[ivel + ir] ** 2
            backlash = mf[mi[MF_JPAR] + N_JP * k + JP_BACKLASH]
            el += 0.5 * mf[mi[MF_KSPRING] + k] * dead_band(w[ipos + ir] - w[ipos + k], backlash) ** 2
        elif mi[mi[MI_DRIVE] + k] != JOINT_PRESCRIBED:
            kin += 0.5 * mf[mi[MF_ARMATURE] + k] * w[ivel + k] ** 2
    out[0] = kin
    out[1] = grav
    out[2] = el


@njit(cache=True)
def power(mi, mf, w, tau, out):
    """out = [drive power in, dissipated power] at the state of the last forward_dynamics.

    Prescribed joints count their required link torque times their rate as input. A joint or rotor
    held by its brake has zero rate: neither its drive nor the brake does work.
    """
    nb = mi[DIM_NB]
    NM = mi[DIM_NM]
    rotors = nb + mi[DIM_NETA]
    ipos = mi[W_POS]
    ivel = mi[W_VEL]
    pin = 0.0
    pd = 0.0
    for k in range(nb):
        qd = w[ivel + k]
        rotor = mi[mi[MI_MOT] + k]
        if mi[mi[MI_DRIVE] + k] == JOINT_PRESCRIBED:
            pin += w[mi[W_TAU_JOINT] + k] * qd
        elif rotor >= 0:   # friction and brake act on the rotor; the damper only in contact (backlash)
            ir = rotors + rotor
            phd = w[ivel + ir]
            pin += tau[k] * phd
            backlash = mf[mi[MF_JPAR] + N_JP * k + JP_BACKLASH]
            damper = spring_torque(0.0, mf[mi[MF_DSPRING] + k], backlash, w[ipos + ir] - w[ipos + k], phd - qd)
            pd += joint_friction(mi, mf, k, phd) * phd + damper * (phd - qd)
        else:
            pin += tau[k] * qd
            pd += joint_friction(mi, mf, k, qd) * qd
        nm = mi[mi[MI_NM] + k]
        e = nb + mi[mi[MI_MO] + k]
        D = mi[MF_DMOD] + NM * NM * k
        for a in range(nm):
            s = 0.0
            for f in range(nm):
                s += mf[D + a * NM + f] * w[ivel + e + f]
            pd += w[ivel + e + a] * s
    out[0] = pin
    out[1] = pd
