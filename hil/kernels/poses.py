"""Configuration-only kinematics for logged states: body and station poses at given coordinates.

A run log holds joint angles and modal coordinates per row; reports and scene exports need where
the bodies and stations were, row by row, without the rates, inertias or dynamics. These kernels
run only the joints' pose recursion (bodies.joint_kinematics with zero rates) and the world poses.
"""
from numba import njit

from .aba import prepare
from .bodies import joint_kinematics, station_pose
from .layout import DIM_NB, DIM_NM
from .outputs import world_poses


@njit(cache=True)
def body_poses(m, w, t, pos, vel):
    """World rotation w.Rw[k] and origin w.pw[k] of every body at coordinates pos (time t: the
    prescribed joints' profiles; pass zero rates in vel)."""
    prepare(m, w, t, pos, vel)
    nb = m.dims[DIM_NB]
    for k in range(nb):
        joint_kinematics(k, nb, m.dims[DIM_NM], m.parent, m.nm, m.mo, m.axis, m.st_G, m.st_L, m.st_S, m.st_p0,
                         m.st_R0, w.pos, w.vel, w.Rpc, w.ppc, w.Phi, w.V, w.kap, w.M33, w.V3, w.V6, w.Ghat)
    world_poses(m, w)


@njit(cache=True)
def station_frame(m, w, s, out):
    """out (12,): world position (3) and rotation matrix row-major (9) of output station s, after
    body_poses."""
    k = m.os_body[s]
    base = m.dims[DIM_NB] + m.mo[k]
    SV = w.SV
    SM = w.SM
    station_pose(m.os_G, m.os_L, m.os_S, m.os_p0, m.os_R0, s, w.pos, base, m.nm[k], SV, 0, SM, 0, 1, 2, SV, 1)
    r = SV[0]
    R = SM[0]
    Rk = w.Rw[k]
    for i in range(3):
        p = w.pw[k, i]
        for j in range(3):
            p += Rk[i, j] * r[j]
            out[3 + 3 * i + j] = Rk[i, 0] * R[0, j] + Rk[i, 1] * R[1, j] + Rk[i, 2] * R[2, j]
        out[i] = p


@njit(cache=True)
def station_trajectory(m, w, t, rows, vel, stations, out):
    """out[i, j] (12,) = station_frame of station stations[j] at coordinates rows[i], time t[i]."""
    for i in range(rows.shape[0]):
        body_poses(m, w, t[i], rows[i], vel)
        for j in range(stations.shape[0]):
            station_frame(m, w, stations[j], out[i, j])
