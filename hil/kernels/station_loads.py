"""External wrenches at output stations as generalized forces on the flexible bodies.

A wrench [M; F] (world axes, moment about the station's point: W_F_EXT, held over a step) at output
station s of body k does the virtual work M . dtheta_s + F . dr_s. The station sits at
r = p0 + G eta + e_x eta^T S eta / 2 in body k's frame, turned by Rxyz(L eta) R0 (hil.kernels.bodies),
so it moves with v + omega x r + Ghat eta_dot and turns with omega + E L eta_dot (body axes); the force
on body k's extended coordinates nu(k) = [omega; v; eta_dot] (seed 002 eq. 3.13) is that map's transpose:

  Q(k) = [m + r x f;  f;  Ghat^T f + (E L)^T m],   m = R_k^T M, f = R_k^T F,  R_k body k's world axes.

An applied force, it enters the bias force p(k) = b_m(k) + K eta + D eta_dot of the articulated-body
passes (hil.kernels.aba) with a minus sign. Q is kept in W_Q_EXT for the power balance
(hil.kernels.outputs.power: Q(k) . nu(k) is the wrenches' power).
"""
from .bodies import OUTPUT_STATIONS, SR_E, ST_POS, station_kinematics, world_poses
from .jit import kernel
from .layout import (DIM_NB, DIM_NM, DIM_NS, MF_OS_L, MI_OS_BODY, W_F_EXT, W_GHAT, W_PB, W_POS, W_Q_EXT, W_RW,
                     W_STATION, W_STATION_R, W_V, W_VEL, at, first_mode, modes_of)
from .spatial import load3, load9, mul3, mul3t


@kernel
def station_loaded(mi, w, s):
    """Whether output station s carries a nonzero wrench."""
    f = mi[W_F_EXT] + 6 * s
    for i in range(6):
        if w[at(f + i)] != 0.0:
            return True
    return False


@kernel
def any_station_loaded(mi, w):
    """Whether any output station carries a nonzero wrench."""
    for s in range(mi[DIM_NS]):
        if station_loaded(mi, w, s):
            return True
    return False


@kernel
def station_loads(mi, mf, w):
    """Q(k) of every body into W_Q_EXT and subtracted from p(k) (W_PB), at the prepared state, after the
    kinematics and body_inertias; nothing when no station is loaded (module docstring)."""
    if not any_station_loaded(mi, w):
        return
    NX = 6 + mi[DIM_NM]
    nb = mi[DIM_NB]
    for i in range(NX * nb):
        w[at(mi[W_Q_EXT] + i)] = 0.0
    world_poses(mi, mf, w)
    for s in range(mi[DIM_NS]):
        if station_loaded(mi, w, s):
            add_station_force(mi, mf, w, s)
    for i in range(NX * nb):
        w[at(mi[W_PB] + i)] -= w[at(mi[W_Q_EXT] + i)]


@kernel
def add_station_force(mi, mf, w, s):
    """Q(k) += the generalized force of station s's wrench on its body k."""
    NM = mi[DIM_NM]
    k = mi[at(mi[MI_OS_BODY] + s)]
    nm = modes_of(mi, k)
    e = first_mode(mi, k)
    station_kinematics(mi, mf, w, OUTPUT_STATIONS, s, mi[W_POS] + e, mi[W_VEL] + e, nm)
    Rk = load9(w, mi[W_RW] + 9 * k)
    m = mul3t(Rk, load3(w, mi[W_F_EXT] + 6 * s))
    f = mul3t(Rk, load3(w, mi[W_F_EXT] + 6 * s + 3))
    r = load3(w, mi[W_STATION] + 3 * ST_POS)
    q = mi[W_Q_EXT] + (6 + NM) * k
    w[at(q)] += m[0] + r[1] * f[2] - r[2] * f[1]
    w[at(q + 1)] += m[1] + r[2] * f[0] - r[0] * f[2]
    w[at(q + 2)] += m[2] + r[0] * f[1] - r[1] * f[0]
    for i in range(3):
        w[at(q + 3 + i)] += f[i]
    E = load9(w, mi[W_STATION_R] + 9 * SR_E)
    L = mi[MF_OS_L] + 3 * NM * s
    gh = mi[W_GHAT]
    for a in range(nm):
        el = mul3(E, (mf[at(L + a)], mf[at(L + NM + a)], mf[at(L + 2 * NM + a)]))
        g = (w[at(gh + a)], w[at(gh + NM + a)], w[at(gh + 2 * NM + a)])
        w[at(q + 6 + a)] += g[0] * f[0] + g[1] * f[1] + g[2] * f[2] + el[0] * m[0] + el[1] * m[1] + el[2] * m[2]


@kernel
def station_power(mi, w):
    """The power of the stations' wrenches, sum over bodies of Q(k) . nu(k), at the state of the last
    forward dynamics (0 when no station is loaded)."""
    if not any_station_loaded(mi, w):
        return 0.0
    NX = 6 + mi[DIM_NM]
    out = 0.0
    for k in range(mi[DIM_NB]):
        q = mi[W_Q_EXT] + NX * k
        for i in range(6):
            out += w[at(q + i)] * w[at(mi[W_V] + 6 * k + i)]
        e = first_mode(mi, k)
        for a in range(modes_of(mi, k)):
            out += w[at(q + 6 + a)] * w[at(mi[W_VEL] + e + a)]
    return out
