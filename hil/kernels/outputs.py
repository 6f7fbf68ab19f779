"""Quantities derived from a solved state: world poses, station kinematics, energy and power.

They read the state the last evaluation prepared (work blocks pos, vel) and what it solved.
"""

from .jit import kernel
from .aba import forward_dynamics
from .bodies import (OUTPUT_STATIONS, SR_E, SR_R, ST_POS, ST_V_BIAS, ST_V_REL, ST_W_BIAS, ST_W_REL, station_kinematics,
                     world_poses)
from .joints import dead_band, joint_friction, spring_torque
from .spatial import load3, load9, matmul3, mul3
from .station_loads import station_power
from .layout import (DIM_NB, DIM_NETA, DIM_NM, JOINT_PRESCRIBED, JP_BACKLASH, MF_ARMATURE, MF_DMOD, MF_DSPRING,
                     MF_GRAVITY, MF_JPAR, MF_KMOD, MF_KSPRING, MF_MOT_INERTIA, MF_ND_G, MF_ND_M, MF_ND_P0, MF_ND_S,
                     MF_OS_L, MI_DRIVE, MI_MO, MI_MOT, MI_NM, MI_NODE_OFF, MI_OS_BODY, N_JP, W_GHAT, W_MB, W_NU,
                     W_NUD, W_POS, W_PW, W_RW, W_STATION, W_STATION_R, W_SV, W_TAU_JOINT, W_V, W_VEL,
                     at)


STATION_FIELDS = 24   # station_state: position 3, rotation 9, velocity 3, angular velocity 3, specific force 3,
                      # angular acceleration 3


@kernel
def station_state(mi, mf, w, s, out):
    """World kinematics of output station s after forward_dynamics and world_poses.

    out (24,): position (3), rotation matrix row-major (9), velocity (3),
    angular velocity (3), specific force (acceleration minus gravity, 3),
    angular acceleration (3); all in world axes. Allocation-free.
    """
    nb = mi[DIM_NB]
    NM = mi[DIM_NM]
    k = mi[at(mi[MI_OS_BODY] + s)]
    nm = mi[at(mi[MI_NM] + k)]
    e = nb + mi[at(mi[MI_MO] + k)]
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
    rdd0, rdd1, rdd2 = w[at(vb)], w[at(vb + 1)], w[at(vb + 2)]
    for f in range(nm):
        dd = w[at(a + 6 + f)]
        l0, l1, l2 = mf[at(L + f)], mf[at(L + NM + f)], mf[at(L + 2 * NM + f)]
        el0 += (w[at(E)] * l0 + w[at(E + 1)] * l1 + w[at(E + 2)] * l2) * dd
        el1 += (w[at(E + 3)] * l0 + w[at(E + 4)] * l1 + w[at(E + 5)] * l2) * dd
        el2 += (w[at(E + 6)] * l0 + w[at(E + 7)] * l1 + w[at(E + 8)] * l2) * dd
        rdd0 += w[at(gh + f)] * dd
        rdd1 += w[at(gh + NM + f)] * dd
        rdd2 += w[at(gh + 2 * NM + f)] * dd
    o0, o1, o2 = w[at(V)], w[at(V + 1)], w[at(V + 2)]
    r0, r1, r2 = w[at(r)], w[at(r + 1)], w[at(r + 2)]
    wr = _cross(o0, o1, o2, r0, r1, r2)
    wv = _cross(o0, o1, o2, w[at(V + 3)], w[at(V + 4)], w[at(V + 5)])
    wwr = _cross(o0, o1, o2, wr[0], wr[1], wr[2])
    ar = _cross(w[at(a)], w[at(a + 1)], w[at(a + 2)], r0, r1, r2)
    wrd = _cross(o0, o1, o2, w[at(vrel)], w[at(vrel + 1)], w[at(vrel + 2)])
    wwrel = _cross(o0, o1, o2, w[at(wrel)], w[at(wrel + 1)], w[at(wrel + 2)])
    rdd = (rdd0, rdd1, rdd2)
    el = (el0, el1, el2)
    body = mi[W_SV]   # velocity, angular velocity, specific force, angular acceleration in body axes
    for i in range(3):
        w[at(body + i)] = w[at(V + 3 + i)] + wr[i] + w[at(vrel + i)]
        w[at(body + 3 + i)] = w[at(V + i)] + w[at(wrel + i)]
        w[at(body + 6 + i)] = w[at(a + 3 + i)] + wv[i] + ar[i] + wwr[i] + 2.0 * wrd[i] + rdd[i]
        w[at(body + 9 + i)] = w[at(a + i)] + el[i] + w[at(wb + i)] + wwrel[i]
    Rk = load9(w, mi[W_RW] + 9 * k)
    pw = load3(w, mi[W_PW] + 3 * k)
    x = mul3(Rk, load3(w, r))
    out[0], out[1], out[2] = pw[0] + x[0], pw[1] + x[1], pw[2] + x[2]
    Rs = matmul3(Rk, load9(w, R))
    for i in range(9):
        out[3 + i] = Rs[i]
    for q in range(4):
        x = mul3(Rk, load3(w, body + 3 * q))
        out[12 + 3 * q], out[13 + 3 * q], out[14 + 3 * q] = x


@kernel
def _cross(a0, a1, a2, b0, b1, b2):
    return a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0


@kernel
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
        nm = mi[at(mi[MI_NM] + k)]
        n = 6 + nm
        e = nb + mi[at(mi[MI_MO] + k)]
        V = mi[W_V] + 6 * k
        Mb = mi[W_MB] + NX * NX * k
        for i in range(6):
            w[at(nu + i)] = w[at(V + i)]
        for f in range(nm):
            w[at(nu + 6 + f)] = w[at(ivel + e + f)]
        for i in range(n):
            s = 0.0
            for j in range(n):
                s += w[at(Mb + i * NX + j)] * w[at(nu + j)]
            kin += 0.5 * w[at(nu + i)] * s
        K = mi[MF_KMOD] + NM * NM * k
        for a in range(nm):
            s = 0.0
            for f in range(nm):
                s += mf[at(K + a * NM + f)] * w[at(ipos + e + f)]
            el += 0.5 * w[at(ipos + e + a)] * s
        Rk = mi[W_RW] + 9 * k
        pw = mi[W_PW] + 3 * k
        for j in range(mi[at(mi[MI_NODE_OFF] + k)], mi[at(mi[MI_NODE_OFF] + k + 1)]):
            G = mi[MF_ND_G] + 3 * NM * j
            S = mi[MF_ND_S] + NM * NM * j
            fs = 0.0
            for a in range(nm):
                s = 0.0
                for f in range(nm):
                    s += mf[at(S + a * NM + f)] * w[at(ipos + e + f)]
                fs += s * w[at(ipos + e + a)]
            r0 = mf[at(mi[MF_ND_P0] + 3 * j)] + 0.5 * fs
            r1 = mf[at(mi[MF_ND_P0] + 3 * j + 1)]
            r2 = mf[at(mi[MF_ND_P0] + 3 * j + 2)]
            for a in range(nm):
                x = w[at(ipos + e + a)]
                r0 += mf[at(G + a)] * x
                r1 += mf[at(G + NM + a)] * x
                r2 += mf[at(G + 2 * NM + a)] * x
            mj = mf[at(mi[MF_ND_M] + j)]
            for i in range(3):
                pw_i = w[at(pw + i)] + w[at(Rk + 3 * i)] * r0 + w[at(Rk + 3 * i + 1)] * r1 + w[at(Rk + 3 * i + 2)] * r2
                grav -= mj * mf[at(g + i)] * pw_i
        rotor = mi[at(mi[MI_MOT] + k)]
        if rotor >= 0:
            ir = rotors + rotor
            kin += 0.5 * mf[at(mi[MF_MOT_INERTIA] + k)] * w[at(ivel + ir)] ** 2
            backlash = mf[at(mi[MF_JPAR] + N_JP * k + JP_BACKLASH)]
            el += 0.5 * mf[at(mi[MF_KSPRING] + k)] * dead_band(w[at(ipos + ir)] - w[at(ipos + k)], backlash) ** 2
        elif mi[at(mi[MI_DRIVE] + k)] != JOINT_PRESCRIBED:
            kin += 0.5 * mf[at(mi[MF_ARMATURE] + k)] * w[at(ivel + k)] ** 2
    out[0] = kin
    out[1] = grav
    out[2] = el


@kernel
def power(mi, mf, w, tau, out):
    """out = [power in (drives and the stations' external wrenches), dissipated power] at the state of the
    last forward_dynamics.

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
        qd = w[at(ivel + k)]
        rotor = mi[at(mi[MI_MOT] + k)]
        if mi[at(mi[MI_DRIVE] + k)] == JOINT_PRESCRIBED:
            pin += w[at(mi[W_TAU_JOINT] + k)] * qd
        elif rotor >= 0:   # friction and brake act on the rotor; the damper only in contact (backlash)
            ir = rotors + rotor
            phd = w[at(ivel + ir)]
            pin += tau[k] * phd
            backlash = mf[at(mi[MF_JPAR] + N_JP * k + JP_BACKLASH)]
            damper = spring_torque(0.0, mf[at(mi[MF_DSPRING] + k)], backlash, w[at(ipos + ir)] - w[at(ipos + k)],
                                   phd - qd)
            pd += joint_friction(mi, mf, k, phd)[0] * phd + damper * (phd - qd)
        else:
            pin += tau[k] * qd
            pd += joint_friction(mi, mf, k, qd)[0] * qd
        nm = mi[at(mi[MI_NM] + k)]
        e = nb + mi[at(mi[MI_MO] + k)]
        D = mi[MF_DMOD] + NM * NM * k
        for a in range(nm):
            s = 0.0
            for f in range(nm):
                s += mf[at(D + a * NM + f)] * w[at(ivel + e + f)]
            pd += w[at(ivel + e + a)] * s
    out[0] = pin + station_power(mi, w)
    out[1] = pd


@kernel
def evaluate(mi, mf, w, t, pos, vel, tau, acc):
    """The state solved in one call: forward_dynamics at (pos, vel) with the drive torques tau
    (accelerations into acc, reactions and kinematics into the work), world_poses, and the
    prescribed joints' angles and rates at time t written back into pos and vel. False as
    forward_dynamics."""
    ok = forward_dynamics(mi, mf, w, t, pos, vel, tau, pos, vel, 0.0, 0.0, acc)
    world_poses(mi, mf, w)
    for k in range(mi[DIM_NB]):
        pos[k] = w[at(mi[W_POS] + k)]
        vel[k] = w[at(mi[W_VEL] + k)]
    return ok
