"""The arrays of the screw-theoretic DAE kernel (hil.kernels.screw_dae), built from the kernel model.

The DAE kernel keeps its own copy of the link geometry and inertia (nodes, joint and output
stations) in a few flat arrays with fixed row widths, so that it shares no buffer with the
articulated-body kernel; it refers to the kernel model's flat arrays for the run-time joint data
(drive state, profiles, friction, rotor and spring data, modal stiffness and damping) which the
drives and the fault engine change in place while the plant runs. ``pack`` refills the copied arrays after a
change of the kernel model's geometry (a payload fault re-assembles the model in place).

Row layouts (NM = the largest number of modes of one body; offsets from the helpers below):

* ``body[k]``: parent (-1: the base), modes nm, offset of its modes in eta, first and
  one-past-last node, the parent's nm.
* ``node[j]``: mass, p0 (3), Gamma (3 x NM, row-major), S (NM x NM): the lumped node j sits at
  p0 + Gamma eta + e_x eta^T S eta / 2 in its body frame.
* ``rot[k]``: sum J, sum J Lambda (3 x NM), sum Lambda^T J Lambda (NM x NM) of the node rotary
  inertias (constant in the body frame).
* ``stat[s]``: p0 (3), R0 (3 x 3), Gamma, Lambda (3 x NM each), S (NM x NM) of a station: s < nb
  the joint frame of body s on its parent, s >= nb the output station s - nb; ``stat_body[s]`` the
  body that carries it (-1: the base).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .layout import DIM_NB, DIM_NETA, DIM_NM, DIM_NQ, DIM_NS

# DaeModel.dims
D_NB, D_NM, D_NQ, D_NETA, D_NST = range(5)
# DaeModel.body columns
B_PARENT, B_NM, B_MO, B_NODE0, B_NODE1, B_NMP = range(6)
N_BODY_COLS = 6

DaeModel = namedtuple("DaeModel", [
    "dims", "body", "node", "rot", "stat", "stat_body", "axis", "gravity",
    # the kernel model's flat arrays (the joint laws of hil.kernels.joints read them) and views of its
    # run-time joint arrays, shared: the drives and faults write them
    "mi", "mf", "drive", "armature", "Kmod", "Dmod", "fitted",
])

DaeWork = namedtuple("DaeWork", [
    "pos", "vel", "qdd_pres", "tauj", "tau_joint", "Rpc", "ppc", "Rw", "pw", "V", "kap", "Phi",
    "Mk", "hk", "A", "r", "piv", "W", "y", "z", "wrench", "Ghat", "M33", "V3", "cols", "QPhi",
    "k1", "k2", "k3", "k4", "ps", "vs", "pe", "acc", "so",
])


def node_width(NM: int) -> int:
    return 4 + 3 * NM + NM * NM


def rot_width(NM: int) -> int:
    return 9 + 3 * NM + NM * NM


def stat_width(NM: int) -> int:
    return 12 + 6 * NM + NM * NM


def block_size(NM: int) -> int:
    """Unknowns of one link's block: its inboard interaction wrench (6), its spatial
    acceleration (6) and its modal accelerations (up to NM)."""
    return 12 + NM


def _station_row(row: np.ndarray, p0, R0, G, L, S, NM: int) -> None:
    row[0:3] = p0
    row[3:12] = np.asarray(R0).reshape(9)
    row[12:12 + 3 * NM] = np.asarray(G)[:, :NM].reshape(3 * NM)
    row[12 + 3 * NM:12 + 6 * NM] = np.asarray(L)[:, :NM].reshape(3 * NM)
    row[12 + 6 * NM:] = np.asarray(S)[:NM, :NM].reshape(NM * NM)


def build(km) -> DaeModel:
    """The DAE model arrays of a kernel model (hil.model.assembly.KernelModel)."""
    nb, NM = int(km.dims[DIM_NB]), int(km.dims[DIM_NM])
    n_nodes = int(km.node_off[nb]) if nb else 0
    n_st = nb + int(km.dims[DIM_NS])
    dims = np.array([nb, NM, int(km.dims[DIM_NQ]), int(km.dims[DIM_NETA]), n_st], np.int64)
    dm = DaeModel(
        dims=dims, body=np.zeros((max(nb, 1), N_BODY_COLS), np.int64),
        node=np.zeros((max(n_nodes, 1), node_width(NM))), rot=np.zeros((max(nb, 1), rot_width(NM))),
        stat=np.zeros((max(n_st, 1), stat_width(NM))), stat_body=-np.ones(max(n_st, 1), np.int64),
        axis=np.zeros((max(nb, 1), 3)), gravity=np.zeros(3),
        mi=km.mi, mf=km.mf, drive=km.drive, armature=km.armature, Kmod=km.Kmod, Dmod=km.Dmod, fitted=km.fitted)
    pack(dm, km)
    return dm


def pack(dm: DaeModel, km) -> None:
    """Copy the geometry and inertia of the kernel model `km` into the DAE arrays, in place."""
    nb, NM = int(dm.dims[D_NB]), int(dm.dims[D_NM])
    for k in range(nb):
        par = int(km.parent[k])
        dm.body[k] = (par, km.nm[k], km.mo[k], km.node_off[k], km.node_off[k + 1], km.nm[par] if par >= 0 else 0)
        dm.axis[k] = km.axis[k]
        row = dm.rot[k]
        row[0:9] = km.Jsum[k].reshape(9)
        row[9:9 + 3 * NM] = km.JL[k].reshape(3 * NM)
        row[9 + 3 * NM:] = km.LJL[k].reshape(NM * NM)
        _station_row(dm.stat[k], km.st_p0[k], km.st_R0[k], km.st_G[k], km.st_L[k], km.st_S[k], NM)
        dm.stat_body[k] = par
    for j in range(int(km.node_off[nb]) if nb else 0):
        row = dm.node[j]
        row[0] = km.nd_m[j]
        row[1:4] = km.nd_p0[j]
        row[4:4 + 3 * NM] = km.nd_G[j].reshape(3 * NM)
        row[4 + 3 * NM:] = km.nd_S[j].reshape(NM * NM)
    for s in range(int(dm.dims[D_NST]) - nb):
        _station_row(dm.stat[nb + s], km.os_p0[s], km.os_R0[s], km.os_G[s], km.os_L[s], km.os_S[s], NM)
        dm.stat_body[nb + s] = km.os_body[s]
    dm.gravity[:] = km.gravity


def make_work(dm: DaeModel) -> DaeWork:
    """Every scratch buffer of the DAE kernel for this model (nothing is allocated per evaluation)."""
    nb, NM, nq = int(dm.dims[D_NB]), int(dm.dims[D_NM]), int(dm.dims[D_NQ])
    nb1 = max(nb, 1)
    nx = 6 + NM
    n = block_size(NM)
    z = np.zeros
    return DaeWork(
        pos=z(nq), vel=z(nq), qdd_pres=z(nb1), tauj=z(nb1), tau_joint=z(nb1),
        Rpc=z((nb1, 3, 3)), ppc=z((nb1, 3)), Rw=z((nb1, 3, 3)), pw=z((nb1, 3)), V=z((nb1, 6)), kap=z((nb1, 6)),
        Phi=z((nb1, 6, nx)), Mk=z((nb1, nx, nx)), hk=z((nb1, nx)), A=z((nb1, n, n)), r=z((nb1, n)),
        piv=np.zeros((nb1, n), np.int64), W=z((nb1, n, nx)), y=z((nb1, n)), z=z((nb1, n)), wrench=z((nb1, 6)),
        Ghat=z((3, NM)), M33=z(39), V3=z((8, 3)), cols=z((6, n)), QPhi=z((6, nx)),
        k1=z(nq), k2=z(nq), k3=z(nq), k4=z(nq), ps=z(nq), vs=z(nq), pe=z(nq), acc=z(nq), so=z((8, 3)),
    )
