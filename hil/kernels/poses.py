"""Configuration-only kinematics for logged states: body and station poses at given coordinates.

A run log holds joint angles and modal coordinates per row; reports and scene exports need where
the bodies and stations were, row by row, without the rates, inertias or dynamics. These kernels
run only the joints' pose recursion (bodies.joint_kinematics with zero rates) and the world poses.
"""

from .jit import kernel
from .aba import kinematics_base_to_tip, prepare
from .bodies import OUTPUT_STATIONS, SR_R, ST_POS, station_kinematics
from .layout import DIM_NB, MI_MO, MI_NM, MI_OS_BODY, W_POS, W_PW, W_RW, W_STATION, W_STATION_R, W_VEL, at
from .outputs import world_poses
from .spatial import load3, load9, matmul3, mul3


@kernel
def body_poses(mi, mf, w, t, pos, vel):
    """World rotation Rw[k] and origin pw[k] of every body at coordinates pos (time t: the
    prescribed joints' profiles; pass zero rates in vel)."""
    prepare(mi, mf, w, t, pos, vel)
    kinematics_base_to_tip(mi, mf, w)
    world_poses(mi, mf, w)


@kernel
def station_frame(mi, mf, w, s, out):
    """out (12,): world position (3) and rotation matrix row-major (9) of output station s, after
    body_poses."""
    k = mi[at(mi[MI_OS_BODY] + s)]
    e = mi[DIM_NB] + mi[at(mi[MI_MO] + k)]
    station_kinematics(mi, mf, w, OUTPUT_STATIONS, s, mi[W_POS] + e, mi[W_VEL] + e, mi[at(mi[MI_NM] + k)])
    Rk = load9(w, mi[W_RW] + 9 * k)
    pw = load3(w, mi[W_PW] + 3 * k)
    x = mul3(Rk, load3(w, mi[W_STATION] + 3 * ST_POS))
    out[0], out[1], out[2] = pw[0] + x[0], pw[1] + x[1], pw[2] + x[2]
    Rs = matmul3(Rk, load9(w, mi[W_STATION_R] + 9 * SR_R))
    for i in range(9):
        out[3 + i] = Rs[i]


@kernel
def station_trajectory(mi, mf, w, t, rows, vel, stations, out):
    """out[i, j] (12,) = station_frame of station stations[j] at coordinates rows[i], time t[i]."""
    for i in range(rows.shape[0]):
        body_poses(mi, mf, w, t[i], rows[i], vel)
        for j in range(stations.shape[0]):
            station_frame(mi, mf, w, stations[j], out[i, j])
