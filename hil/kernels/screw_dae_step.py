"""The plant's step with the screw-theoretic DAE kernel: the integrators of hil.kernels.integrate
with this formulation (hil.kernels.formulation.DaePlant), and the output stations from its solution."""

from .jit import kernel
from .formulation import DaePlant
from .integrate import steps
from .layout import DAE_MO, DAE_NM
from .screw_dae import solve, station_frame
from .screw_dae_arrays import views


@kernel
def advance(mi, mf, w, t, pos, vel, tau, dt, nsub, method):
    """Advance (pos, vel) in place from t to t + dt with nsub substeps of `method` (the integrators of
    hil.kernels.integrate with this formulation); False on a singular block or a non-finite state."""
    dm, dw = views(mi, mf, w)
    return steps(DaePlant(mi, mf, w, dm, dw), t, pos, vel, tau, dt, nsub, method)


@kernel
def station_state(mi, mf, w, s, out):
    """World kinematics of output station s after forward_dynamics, in the layout of
    hil.kernels.outputs.station_state: position, rotation (row-major), velocity, angular
    velocity, specific force (acceleration minus gravity), angular acceleration, world axes."""
    dm, dw = views(mi, mf, w)
    _station_state(dm, dw, s, out)


@kernel
def _station_state(dm, dw, s, out):
    nb = dm.nb
    NM = dm.NM
    st = nb + s
    k = dm.stat_body[st]
    nm = dm.body[k, DAE_NM]
    e0 = nb + dm.body[k, DAE_MO]
    M33, V3, G, so = dw.M33, dw.V3, dw.Ghat, dw.so
    station_frame(dm.stat, st, NM, dw.pos, dw.vel, e0, nm, M33, V3, G)
    V, z, g = dw.V, dw.z, dm.gravity
    o0, o1, o2 = V[k, 0], V[k, 1], V[k, 2]
    r0, r1, r2 = V3[0, 0], V3[0, 1], V3[0, 2]
    d0, d1, d2 = V3[4, 0], V3[4, 1], V3[4, 2]
    w0, w1, w2 = V3[3, 0], V3[3, 1], V3[3, 2]
    # relative accelerations of the station: Ghat eta_ddot + e_x eta_dot^T S eta_dot, E Lambda eta_ddot + dE/dt theta_dot
    for i in range(3):
        so[0, i] = V3[6, i]
        so[1, i] = V3[5, i]
        for a in range(nm):
            dd = z[k, 12 + a]
            so[0, i] += G[i, a] * dd
            el = 0.0
            for j in range(3):
                el += M33[18 + 3 * i + j] * dm.stat[st, 12 + 3 * NM + j * NM + a]
            so[1, i] += el * dd
    c0, c1, c2 = o1 * r2 - o2 * r1, o2 * r0 - o0 * r2, o0 * r1 - o1 * r0                   # omega x r
    a0, a1, a2 = z[k, 6], z[k, 7], z[k, 8]
    so[2, 0] = V[k, 3] + c0 + d0
    so[2, 1] = V[k, 4] + c1 + d1
    so[2, 2] = V[k, 5] + c2 + d2
    so[3, 0] = o0 + w0
    so[3, 1] = o1 + w1
    so[3, 2] = o2 + w2
    # acceleration of the point: v_dot + omega x v + omega_dot x r + omega x (omega x r) + 2 omega x r_dot + rel.
    so[4, 0] = z[k, 9] + o1 * V[k, 5] - o2 * V[k, 4] + a1 * r2 - a2 * r1 + o1 * c2 - o2 * c1 \
        + 2.0 * (o1 * d2 - o2 * d1) + so[0, 0]
    so[4, 1] = z[k, 10] + o2 * V[k, 3] - o0 * V[k, 5] + a2 * r0 - a0 * r2 + o2 * c0 - o0 * c2 \
        + 2.0 * (o2 * d0 - o0 * d2) + so[0, 1]
    so[4, 2] = z[k, 11] + o0 * V[k, 4] - o1 * V[k, 3] + a0 * r1 - a1 * r0 + o0 * c1 - o1 * c0 \
        + 2.0 * (o0 * d1 - o1 * d0) + so[0, 2]
    so[5, 0] = a0 + so[1, 0] + o1 * w2 - o2 * w1
    so[5, 1] = a1 + so[1, 1] + o2 * w0 - o0 * w2
    so[5, 2] = a2 + so[1, 2] + o0 * w1 - o1 * w0
    R = dw.Rw
    for i in range(3):
        p = dw.pw[k, i]
        for j in range(3):
            p += R[k, i, j] * V3[0, j]
            out[3 + 3 * i + j] = R[k, i, 0] * M33[j] + R[k, i, 1] * M33[3 + j] + R[k, i, 2] * M33[6 + j]
        out[i] = p
        for q in range(4):
            out[12 + 3 * q + i] = R[k, i, 0] * so[2 + q, 0] + R[k, i, 1] * so[2 + q, 1] + R[k, i, 2] * so[2 + q, 2]
        out[18 + i] -= g[i]


@kernel
def step_and_sample(mi, mf, w, t, pos, vel, tau, dt, nsub, method, stations, out):
    """Advance from t to t + dt, solve the DAE at the new state (wrenches and accelerations there)
    and write the world kinematics of each output station in `stations` to out[i]."""
    dm, dw = views(mi, mf, w)
    ok = steps(DaePlant(mi, mf, w, dm, dw), t, pos, vel, tau, dt, nsub, method)
    ok &= solve(dm, dw, t + dt, pos, vel, tau, pos, vel, 0.0, 0.0, False, dw.acc)
    for i in range(stations.shape[0]):
        _station_state(dm, dw, stations[i], out[i])
    return ok
