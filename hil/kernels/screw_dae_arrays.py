"""The arrays of the screw-theoretic DAE kernel (hil.kernels.screw_dae): blocks dae_* of the kernel model
and work arrays (hil.kernels.layout), so that the DAE kernel is called as the articulated-body one is,
``(mi, mf, w, ...)``.

The DAE kernel keeps its own copy of the link geometry and inertia (nodes, joint and output
stations) in a few blocks with fixed row widths, so that it shares no buffer with the
articulated-body kernel; it reads the kernel model's run-time joint data (drive state, profiles,
friction, rotor and spring data, modal stiffness and damping, the fitted midpoint blocks) which the
drives and the fault engine change in place while the plant runs. ``pack`` fills the copied blocks
when the model is assembled (a payload fault swaps them with the rest of the variant's arrays).

Row layouts (NM = the largest number of modes of one body; widths from hil.kernels.layout):

* ``dae_body[k]``: parent (-1: the base), modes nm, offset of its modes in eta, first and
  one-past-last node, the parent's nm (columns DAE_*).
* ``dae_node[j]``: mass, p0 (3), Gamma (3 x NM, row-major), S (NM x NM): the lumped node j sits at
  p0 + Gamma eta + e_x eta^T S eta / 2 in its body frame.
* ``dae_rot[k]``: sum J, sum J Lambda (3 x NM), sum Lambda^T J Lambda (NM x NM) of the node rotary
  inertias (constant in the body frame).
* ``dae_stat[s]``: p0 (3), R0 (3 x 3), Gamma, Lambda (3 x NM each), S (NM x NM) of a station: s < nb
  the joint frame of body s on its parent, s >= nb the output station s - nb; ``dae_stat_body[s]`` the
  body that carries it (-1: the base).

Inside numba, ``views`` gives the blocks as the arrays of two named tuples, DaeModel and DaeWork (views
cost nothing in kernels compiled without reference counting).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from .jit import kernel
from .layout import (DAE_BODY_COLS, DIM_NB, DIM_NM, DIM_NNODE, DIM_NQ, DIM_NS, FIT_C, MF_DAE_AXIS, MF_DAE_GRAVITY,
                     MF_DAE_NODE, MF_DAE_ROT, MF_DAE_STAT, MF_DMOD, MF_FITTED, MF_KMOD, MI_DAE_BODY, MI_DAE_STAT_BODY,
                     MI_DRIVE, N_FIT, W_ACC, W_DAE_A, W_DAE_ARM, W_DAE_COLS, W_DAE_GHAT, W_DAE_HK, W_DAE_KAP,
                     W_DAE_M33, W_DAE_MK, W_DAE_PHI, W_DAE_PIV, W_DAE_POS, W_DAE_PPC, W_DAE_PW, W_DAE_QDD_PRES,
                     W_DAE_QPHI, W_DAE_R, W_DAE_RPC, W_DAE_RW, W_DAE_SO, W_DAE_TAU_JOINT, W_DAE_TAUJ, W_DAE_V,
                     W_DAE_V3, W_DAE_VEL, W_DAE_W, W_DAE_WRENCH, W_DAE_Y, W_DAE_Z, W_F_EXT, W_K1, W_K2, W_K3, W_K4,
                     W_PE, W_PS, W_VS, dae_block, dae_node_width, dae_rot_width, dae_stat_width)

DaeModel = namedtuple("DaeModel", [
    "nb", "NM", "nq", "body", "node", "rot", "stat", "stat_body", "axis", "gravity",
    # the kernel model's flat arrays (the joint laws of hil.kernels.joints read them) and views of its
    # run-time joint blocks (the drives and faults write them); C: the fitted midpoint's implicit blocks
    "mi", "mf", "drive", "Kmod", "Dmod", "fitted", "C",
])

DaeWork = namedtuple("DaeWork", [
    "pos", "vel", "qdd_pres", "tauj", "arm", "tau_joint", "Rpc", "ppc", "Rw", "pw", "V", "kap", "Phi",
    "Mk", "hk", "A", "r", "piv", "W", "y", "z", "wrench", "Ghat", "M33", "V3", "cols", "QPhi",
    "k1", "k2", "k3", "k4", "ps", "vs", "pe", "acc", "so", "f_ext",
])


def _station_row(row: np.ndarray, p0, R0, G, L, S, NM: int) -> None:
    row[0:3] = p0
    row[3:12] = np.asarray(R0).reshape(9)
    row[12:12 + 3 * NM] = np.asarray(G)[:, :NM].reshape(3 * NM)
    row[12 + 3 * NM:12 + 6 * NM] = np.asarray(L)[:, :NM].reshape(3 * NM)
    row[12 + 6 * NM:] = np.asarray(S)[:NM, :NM].reshape(NM * NM)


def pack(km) -> None:
    """Copy the geometry and inertia of the kernel model `km` (hil.model.assembly.KernelModel) into its
    DAE blocks, in place."""
    nb, NM, ns = int(km.dims[DIM_NB]), int(km.dims[DIM_NM]), int(km.dims[DIM_NS])
    body, stat, stat_body = km.dae_body, km.dae_stat, km.dae_stat_body
    for k in range(nb):
        par = int(km.parent[k])
        body[k] = (par, km.nm[k], km.mo[k], km.node_off[k], km.node_off[k + 1], km.nm[par] if par >= 0 else 0)
        km.dae_axis[k] = km.axis[k]
        row = km.dae_rot[k]
        row[0:9] = km.Jsum[k].reshape(9)
        row[9:9 + 3 * NM] = km.JL[k].reshape(3 * NM)
        row[9 + 3 * NM:] = km.LJL[k].reshape(NM * NM)
        _station_row(stat[k], km.st_p0[k], km.st_R0[k], km.st_G[k], km.st_L[k], km.st_S[k], NM)
        stat_body[k] = par
    for j in range(km.dae_node.shape[0]):
        row = km.dae_node[j]
        row[0] = km.nd_m[j]
        row[1:4] = km.nd_p0[j]
        row[4:4 + 3 * NM] = km.nd_G[j].reshape(3 * NM)
        row[4 + 3 * NM:] = km.nd_S[j].reshape(NM * NM)
    for s in range(ns):
        _station_row(stat[nb + s], km.os_p0[s], km.os_R0[s], km.os_G[s], km.os_L[s], km.os_S[s], NM)
        stat_body[nb + s] = km.os_body[s]
    km.dae_gravity[:] = km.gravity


@njit(inline="always")      # not @kernel: inlined into its callers (a kernel cannot return a view), no entry point
def _block(a, o, n):
    """The n entries of the flat array a from offset o (a 1-d view; inlined into views, so that the view
    is not returned from a compiled function, which kernels without reference counting cannot do)."""
    return a[o:o + n]


@kernel
def views(mi, mf, w):
    """The DAE kernel's model and work (DaeModel, DaeWork) as views of the flat arrays."""
    nb, NM, nq = mi[DIM_NB], mi[DIM_NM], mi[DIM_NQ]
    nb1 = max(nb, 1)
    ns = mi[DIM_NS]
    nst = nb + ns
    nx = 6 + NM
    n = dae_block(NM)
    node_w = dae_node_width(NM)
    nnode = mi[DIM_NNODE]
    fitted = _block(mf, mi[MF_FITTED], N_FIT * nb * NM * NM).reshape((N_FIT, nb, NM, NM))
    dm = DaeModel(
        nb, NM, nq,
        _block(mi, mi[MI_DAE_BODY], nb * DAE_BODY_COLS).reshape((nb, DAE_BODY_COLS)),
        _block(mf, mi[MF_DAE_NODE], nnode * node_w).reshape((nnode, node_w)),
        _block(mf, mi[MF_DAE_ROT], nb * dae_rot_width(NM)).reshape((nb, dae_rot_width(NM))),
        _block(mf, mi[MF_DAE_STAT], nst * dae_stat_width(NM)).reshape((nst, dae_stat_width(NM))),
        _block(mi, mi[MI_DAE_STAT_BODY], nst),
        _block(mf, mi[MF_DAE_AXIS], 3 * nb).reshape((nb, 3)),
        _block(mf, mi[MF_DAE_GRAVITY], 3),
        mi, mf,
        _block(mi, mi[MI_DRIVE], nb),
        _block(mf, mi[MF_KMOD], nb * NM * NM).reshape((nb, NM, NM)),
        _block(mf, mi[MF_DMOD], nb * NM * NM).reshape((nb, NM, NM)),
        fitted, fitted[FIT_C])
    dw = DaeWork(
        _block(w, mi[W_DAE_POS], nq), _block(w, mi[W_DAE_VEL], nq), _block(w, mi[W_DAE_QDD_PRES], nb1),
        _block(w, mi[W_DAE_TAUJ], nb1), _block(w, mi[W_DAE_ARM], nb1), _block(w, mi[W_DAE_TAU_JOINT], nb1),
        _block(w, mi[W_DAE_RPC], 9 * nb1).reshape((nb1, 3, 3)), _block(w, mi[W_DAE_PPC], 3 * nb1).reshape((nb1, 3)),
        _block(w, mi[W_DAE_RW], 9 * nb1).reshape((nb1, 3, 3)), _block(w, mi[W_DAE_PW], 3 * nb1).reshape((nb1, 3)),
        _block(w, mi[W_DAE_V], 6 * nb1).reshape((nb1, 6)), _block(w, mi[W_DAE_KAP], 6 * nb1).reshape((nb1, 6)),
        _block(w, mi[W_DAE_PHI], 6 * nx * nb1).reshape((nb1, 6, nx)),
        _block(w, mi[W_DAE_MK], nx * nx * nb1).reshape((nb1, nx, nx)),
        _block(w, mi[W_DAE_HK], nx * nb1).reshape((nb1, nx)),
        _block(w, mi[W_DAE_A], n * n * nb1).reshape((nb1, n, n)), _block(w, mi[W_DAE_R], n * nb1).reshape((nb1, n)),
        _block(w, mi[W_DAE_PIV], n * nb1).reshape((nb1, n)),
        _block(w, mi[W_DAE_W], n * nx * nb1).reshape((nb1, n, nx)),
        _block(w, mi[W_DAE_Y], n * nb1).reshape((nb1, n)), _block(w, mi[W_DAE_Z], n * nb1).reshape((nb1, n)),
        _block(w, mi[W_DAE_WRENCH], 6 * nb1).reshape((nb1, 6)),
        _block(w, mi[W_DAE_GHAT], 3 * NM).reshape((3, NM)), _block(w, mi[W_DAE_M33], 39),
        _block(w, mi[W_DAE_V3], 24).reshape((8, 3)), _block(w, mi[W_DAE_COLS], 6 * n).reshape((6, n)),
        _block(w, mi[W_DAE_QPHI], 6 * nx).reshape((6, nx)),
        _block(w, mi[W_K1], nq), _block(w, mi[W_K2], nq), _block(w, mi[W_K3], nq), _block(w, mi[W_K4], nq),
        _block(w, mi[W_PS], nq), _block(w, mi[W_VS], nq), _block(w, mi[W_PE], nq), _block(w, mi[W_ACC], nq),
        _block(w, mi[W_DAE_SO], 24).reshape((8, 3)), _block(w, mi[W_F_EXT], 6 * ns).reshape((ns, 6)))
    return dm, dw
