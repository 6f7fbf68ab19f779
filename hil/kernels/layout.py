"""Layout of the kernel model and work arrays, the one place it is defined.

A model is two flat arrays, ``mi`` (int64) and ``mf`` (float64); the scratch of the kernels is one
flat float64 array ``w``. Every kernel takes them as its first arguments, ``(mi, mf, w, ...)``:
three arrays cross each Python-to-numba call (unboxing a tuple of ~100 arrays cost 10 us a call)
and no kernel creates views (each view costs numba an atomic reference count; slicing in the hot
path cost a third of the forward dynamics).

``mi`` starts with a header: the model's sizes (DIM_*), then one slot per named block holding the
block's offset: MF_* into mf, MI_* into mi, W_* into w. The blocks follow the header, each a
C-ordered array of the shape its entry below gives, so element [k, i, j] of a block of shape
(n, a, b) sits at offset + (k * a + i) * b + j. Python reads and writes the blocks through named
views (hil.model.assembly.KernelModel.view, Work.view), so the drives and fault effects change
them in place while the kernels run.

Indices into the flat arrays go through ``at`` (np.uintp): numba wraps a negative signed index
around the array end, a compare and select on every access LLVM can only drop when it proves the
index non-negative, which it cannot for an offset read from mi; unsigned indices skip it (40 % of
the forward dynamics). The module-level integers are compile-time constants for numba.
"""
from __future__ import annotations

import functools
from types import MappingProxyType
from typing import Callable, Mapping, NamedTuple

import numpy as np
from numba.extending import register_jitable

from .jit import kernel

at = np.uintp     # an index into a flat array: w[at(offset + i)]


class Sizes(NamedTuple):
    """A model's sizes, from which every block's shape follows."""

    nb: int        # bodies (= joints)
    neta: int      # modal coordinates of all bodies
    nmot: int      # rotor coordinates (Spong elastic joints)
    NM: int        # largest number of modes of one body (at least 1)
    nq: int        # generalized coordinates: joints, modes, rotors
    ns: int        # output stations (at least 1)
    nnode: int     # lumped mass nodes of all bodies
    ntab: int      # samples of all prescribed-motion tables (at least 1)

    @property
    def nb1(self) -> int:
        return max(self.nb, 1)

    @property
    def NX(self) -> int:
        """Size of a body's extended (rigid + modal) vectors: 6 + NM."""
        return 6 + self.NM


Shape = Callable[[Sizes], tuple]

# mi[DIM_*]: the sizes
DIM_NB, DIM_NETA, DIM_NMOT, DIM_NM, DIM_NQ, DIM_NS, DIM_NNODE, DIM_NTAB = range(8)
N_DIMS = 8

MODEL_FLOATS: list[tuple[str, Shape]] = []
MODEL_INTS: list[tuple[str, Shape]] = []
WORK: list[tuple[str, Shape]] = []
_SLOTS: list[str] = []


def _slot(table: list, name: str, shape: Shape) -> int:
    """Register a block and return its slot in the mi header."""
    table.append((name, shape))
    _SLOTS.append(name)
    return N_DIMS + len(_SLOTS) - 1


def _mf(name: str, shape: Shape) -> int:
    return _slot(MODEL_FLOATS, name, shape)


def _mi(name: str, shape: Shape) -> int:
    return _slot(MODEL_INTS, name, shape)


def _w(name: str, shape: Shape) -> int:
    return _slot(WORK, name, shape)


# ----------------------------------------------------------------------------- model, floats
# joints
MF_AXIS = _mf("axis", lambda s: (s.nb, 3))                  # unit joint axis in the joint frame
MF_ARMATURE = _mf("armature", lambda s: (s.nb,))            # n^2 J_r on a stiff joint
MF_VISCOUS = _mf("viscous", lambda s: (s.nb,))
MF_COULOMB = _mf("coulomb", lambda s: (s.nb,))
MF_JPAR = _mf("jpar", lambda s: (s.nb, N_JP))               # columns JP_*
MF_PROF_PAR = _mf("prof_par", lambda s: (s.nb, 4))          # q0 and the law's parameters (profiles)
MF_TAB_T = _mf("tab_t", lambda s: (s.ntab,))                # prescribed-motion tables: times
MF_TAB_C = _mf("tab_c", lambda s: (s.ntab, 4))              # and cubic coefficients
MF_MOT_INERTIA = _mf("mot_inertia", lambda s: (s.nb,))      # rotor inertia of a Spong joint
MF_KSPRING = _mf("kspring", lambda s: (s.nb,))
MF_DSPRING = _mf("dspring", lambda s: (s.nb,))
# joint stations on the parent: p0 + G eta + e_x eta^T S eta / 2, rotation Rxyz(L eta) R0
MF_ST_P0 = _mf("st_p0", lambda s: (s.nb, 3))
MF_ST_R0 = _mf("st_R0", lambda s: (s.nb, 3, 3))
MF_ST_G = _mf("st_G", lambda s: (s.nb, 3, s.NM))
MF_ST_L = _mf("st_L", lambda s: (s.nb, 3, s.NM))
MF_ST_S = _mf("st_S", lambda s: (s.nb, s.NM, s.NM))
# lumped nodes (hil.kernels.bodies): mass, position p0 + G eta + e_x eta^T S eta / 2, rotary inertia J
MF_ND_M = _mf("nd_m", lambda s: (s.nnode,))
MF_ND_P0 = _mf("nd_p0", lambda s: (s.nnode, 3))
MF_ND_J = _mf("nd_J", lambda s: (s.nnode, 3, 3))
MF_ND_G = _mf("nd_G", lambda s: (s.nnode, 3, s.NM))
MF_ND_L = _mf("nd_L", lambda s: (s.nnode, 3, s.NM))
MF_ND_S = _mf("nd_S", lambda s: (s.nnode, s.NM, s.NM))
# per body: sum J, sum J L, sum L^T J L of its nodes; modal stiffness and damping
MF_JSUM = _mf("Jsum", lambda s: (s.nb, 3, 3))
MF_JL = _mf("JL", lambda s: (s.nb, 3, s.NM))
MF_LJL = _mf("LJL", lambda s: (s.nb, s.NM, s.NM))
# per body: sum m G, sum m S of its nodes and its modal block at eta = 0, sum m G^T G + sum L^T J L
MF_MG = _mf("mG", lambda s: (s.nb, 3, s.NM))
MF_MS = _mf("mS", lambda s: (s.nb, s.NM, s.NM))
MF_MFF0 = _mf("Mff0", lambda s: (s.nb, s.NM, s.NM))
MF_KMOD = _mf("Kmod", lambda s: (s.nb, s.NM, s.NM))
MF_DMOD = _mf("Dmod", lambda s: (s.nb, s.NM, s.NM))
# the fitted midpoint scheme's blocks FIT_* per body for the plan's substep (hil.model.midpoint_fit; zero until
# a plan uses the scheme)
MF_FITTED = _mf("fitted", lambda s: (N_FIT, s.nb, s.NM, s.NM))
MF_GRAVITY = _mf("gravity", lambda s: (3,))
# output stations, as the joint stations
MF_OS_P0 = _mf("os_p0", lambda s: (s.ns, 3))
MF_OS_R0 = _mf("os_R0", lambda s: (s.ns, 3, 3))
MF_OS_G = _mf("os_G", lambda s: (s.ns, 3, s.NM))
MF_OS_L = _mf("os_L", lambda s: (s.ns, 3, s.NM))
MF_OS_S = _mf("os_S", lambda s: (s.ns, s.NM, s.NM))
# the screw-theoretic DAE kernel's own copy of the geometry and inertia, rows of fixed width
# (hil.kernels.screw_dae_arrays: row layouts; filled by its pack)
MF_DAE_NODE = _mf("dae_node", lambda s: (s.nnode, dae_node_width(s.NM)))
MF_DAE_ROT = _mf("dae_rot", lambda s: (s.nb, dae_rot_width(s.NM)))
MF_DAE_STAT = _mf("dae_stat", lambda s: (s.nb + s.ns, dae_stat_width(s.NM)))   # joint stations, then output ones
MF_DAE_AXIS = _mf("dae_axis", lambda s: (s.nb, 3))
MF_DAE_GRAVITY = _mf("dae_gravity", lambda s: (3,))

# ----------------------------------------------------------------------------- model, integers
MI_PARENT = _mi("parent", lambda s: (s.nb,))                # -1: the base
MI_NM = _mi("nm", lambda s: (s.nb,))                        # modes of the body
MI_MO = _mi("mo", lambda s: (s.nb,))                        # offset of its modes in eta
MI_DRIVE = _mi("drive", lambda s: (s.nb,))                  # JOINT_*
MI_PROF_KIND = _mi("prof_kind", lambda s: (s.nb,))          # MOTION_*
MI_TAB_OFF = _mi("tab_off", lambda s: (s.nb,))
MI_TAB_N = _mi("tab_n", lambda s: (s.nb,))
MI_MOT = _mi("mot", lambda s: (s.nb,))                      # rotor index, -1 for a stiff joint
MI_NODE_OFF = _mi("node_off", lambda s: (s.nb + 1,))        # nodes of body k: node_off[k] .. node_off[k + 1]
MI_OS_BODY = _mi("os_body", lambda s: (s.ns,))              # the body an output station sits on
MI_AXIAL = _mi("axial", lambda s: (s.nb,))                  # 1: a node of the body moves along x with its modes
MI_DAE_BODY = _mi("dae_body", lambda s: (s.nb, DAE_BODY_COLS))     # the DAE kernel's body rows
MI_DAE_STAT_BODY = _mi("dae_stat_body", lambda s: (s.nb + s.ns,))   # the body carrying each station (-1: the base)

# ----------------------------------------------------------------------------- work
# The state the last evaluation solved (the prescribed joints' motion imposed) and its joint laws
W_POS = _w("pos", lambda s: (s.nq,))
W_VEL = _w("vel", lambda s: (s.nq,))
W_QDD_PRES = _w("qdd_pres", lambda s: (s.nb1,))             # prescribed joint accelerations
W_TAUJ = _w("tauj", lambda s: (s.nb1,))                     # link torque each joint receives
W_ARM = _w("arm", lambda s: (s.nb1,))                       # armature + the implicit friction's cD slope
# kinematics_base_to_tip (hil.kernels.bodies)
W_RPC = _w("Rpc", lambda s: (s.nb1, 3, 3))                  # child axes in the parent frame
W_PPC = _w("ppc", lambda s: (s.nb1, 3))                     # child origin in the parent frame
W_PSI = _w("Psi", lambda s: (s.nb1, 6, s.NM))               # the parent's modal columns of Phi, child axes
W_V = _w("V", lambda s: (s.nb1, 6))                         # twist [omega; v], body axes
W_KAP = _w("kap", lambda s: (s.nb1, 6))                     # velocity-product acceleration
W_STATION = _w("station", lambda s: (7, 3))                 # rows of a station's pose and rates (bodies)
W_STATION_R = _w("station_R", lambda s: (4, 3, 3))          # its rotations (bodies)
W_GHAT = _w("Ghat", lambda s: (3, s.NM))                    # a point's modal velocity map
# body_inertias
W_MB = _w("Mb", lambda s: (s.nb1, s.NX, s.NX))              # extended body inertia M_m(k)
W_BB = _w("bb", lambda s: (s.nb1, s.NX))                    # its velocity-product force b_m(k)
W_SEP = _w("S_eta", lambda s: (s.NM,))                      # a node's S eta
# articulated_inertias_tip_to_base
W_P = _w("P", lambda s: (s.nb1, s.NX, s.NX))                # extended articulated inertia P(k); IA after the modes
W_PB = _w("p", lambda s: (s.nb1, s.NX))                     # its bias force z(k); pA after the modes
W_LFF = _w("Lff", lambda s: (s.nb1, s.NM, s.NM))            # Cholesky factor of P_ff(k)
W_Z = _w("Z", lambda s: (s.nb1, s.NM, 6))                   # Lff^-1 P_fr
W_ZB = _w("z", lambda s: (s.nb1, s.NM))                     # Lff^-1 p_f
W_U = _w("U", lambda s: (s.nb1, 6))                         # IA s
W_D = _w("D", lambda s: (s.nb1,))                           # s^T IA s + armature
W_UJ = _w("u", lambda s: (s.nb1,))                          # tau - s^T pA
W_IA_HINGE = _w("Ia", lambda s: (6, 6))                     # articulated inertia passed inboard
W_PA_HINGE = _w("pa", lambda s: (6,))                       # and its bias force
W_F_INBOARD = _w("f_inboard", lambda s: (6,))              # pa + Ia kap, the force passed inboard
W_IA_PSI = _w("Ia_Psi", lambda s: (6, s.NM))                # Ia Psi
W_LFF_INV = _w("Lff_inv", lambda s: (s.nb1, s.NM))         # reciprocals of the diagonal of Lff(k)
# accelerations_base_to_tip
W_NUD = _w("nud", lambda s: (s.nb1, s.NX))                  # extended acceleration [a; eta_ddot]
W_FJ = _w("fj", lambda s: (s.nb1, 6))                       # joint interaction wrench
W_TAU_JOINT = _w("tau_joint", lambda s: (s.nb1,))           # its axis component
# external loads (hil.kernels.station_loads): a wrench [moment; force] at each output station, world axes,
# moment about the station's point, held over a step; its generalized force on each body's nu(k)
W_F_EXT = _w("f_ext", lambda s: (s.ns, 6))
W_Q_EXT = _w("q_ext", lambda s: (s.nb1, s.NX))
# outputs and the oracle (hil.kernels.outputs, hil.kernels.oracle)
W_RW = _w("Rw", lambda s: (s.nb1, 3, 3))                    # world rotation of each body
W_PW = _w("pw", lambda s: (s.nb1, 3))                       # world origin of each body
W_SV = _w("SV", lambda s: (4, 3))                           # station_state's body-axes rows
W_NU = _w("nu", lambda s: (s.NX,))                          # one body's extended velocity (energy)
W_PHI = _w("Phi", lambda s: (s.nb1, 6, s.NX))               # the oracle's dense Phi
W_F6 = _w("F", lambda s: (s.NX,))                           # the oracle's column walk
W_G6 = _w("G", lambda s: (s.NX,))
W_DIR = _w("dir", lambda s: (s.NX,))
W_MQ = _w("Mq", lambda s: (s.nq, s.nq))                     # the oracle's mass matrix
W_HQ = _w("hq", lambda s: (s.nq,))                          # and bias
W_AQ = _w("Aq", lambda s: (s.nq, s.nq))                     # its free block, factorised
W_RQ = _w("rq", lambda s: (s.nq,))
W_DQ = _w("dq", lambda s: (s.nq,))                         # reciprocals of its factor's diagonal
# the integrators' stage vectors (hil.kernels.integrate)
W_K1 = _w("k1", lambda s: (s.nq,))
W_K2 = _w("k2", lambda s: (s.nq,))
W_K3 = _w("k3", lambda s: (s.nq,))
W_K4 = _w("k4", lambda s: (s.nq,))
W_PS = _w("ps", lambda s: (s.nq,))
W_VS = _w("vs", lambda s: (s.nq,))
W_PE = _w("pe", lambda s: (s.nq,))
W_ACC = _w("acc", lambda s: (s.nq,))
# the screw-theoretic DAE kernel (hil.kernels.screw_dae; its integrators use the stage vectors above)
W_DAE_POS = _w("dae_pos", lambda s: (s.nq,))
W_DAE_VEL = _w("dae_vel", lambda s: (s.nq,))
W_DAE_QDD_PRES = _w("dae_qdd_pres", lambda s: (s.nb1,))
W_DAE_TAUJ = _w("dae_tauj", lambda s: (s.nb1,))
W_DAE_ARM = _w("dae_arm", lambda s: (s.nb1,))
W_DAE_TAU_JOINT = _w("dae_tau_joint", lambda s: (s.nb1,))
W_DAE_RPC = _w("dae_Rpc", lambda s: (s.nb1, 3, 3))
W_DAE_PPC = _w("dae_ppc", lambda s: (s.nb1, 3))
W_DAE_RW = _w("dae_Rw", lambda s: (s.nb1, 3, 3))
W_DAE_PW = _w("dae_pw", lambda s: (s.nb1, 3))
W_DAE_V = _w("dae_V", lambda s: (s.nb1, 6))
W_DAE_KAP = _w("dae_kap", lambda s: (s.nb1, 6))
W_DAE_PHI = _w("dae_Phi", lambda s: (s.nb1, 6, s.NX))
W_DAE_MK = _w("dae_Mk", lambda s: (s.nb1, s.NX, s.NX))
W_DAE_HK = _w("dae_hk", lambda s: (s.nb1, s.NX))
W_DAE_A = _w("dae_A", lambda s: (s.nb1, dae_block(s.NM), dae_block(s.NM)))
W_DAE_R = _w("dae_r", lambda s: (s.nb1, dae_block(s.NM)))
W_DAE_PIV = _w("dae_piv", lambda s: (s.nb1, dae_block(s.NM)))       # pivot rows (integers held as floats)
W_DAE_W = _w("dae_W", lambda s: (s.nb1, dae_block(s.NM), s.NX))
W_DAE_Y = _w("dae_y", lambda s: (s.nb1, dae_block(s.NM)))
W_DAE_Z = _w("dae_z", lambda s: (s.nb1, dae_block(s.NM)))
W_DAE_WRENCH = _w("dae_wrench", lambda s: (s.nb1, 6))
W_DAE_GHAT = _w("dae_Ghat", lambda s: (3, s.NM))
W_DAE_M33 = _w("dae_M33", lambda s: (39,))
W_DAE_V3 = _w("dae_V3", lambda s: (8, 3))
W_DAE_COLS = _w("dae_cols", lambda s: (6, dae_block(s.NM)))
W_DAE_QPHI = _w("dae_QPhi", lambda s: (6, s.NX))
W_DAE_SO = _w("dae_so", lambda s: (8, 3))

N_HEADER = N_DIMS + len(_SLOTS)

# ----------------------------------------------------------------------------- codes
# mi[MI_DRIVE + k], per joint: how its coordinate moves in the kernel (the model's "torque" joints start
# as JOINT_TORQUE_DRIVEN, its "prescribed" joints as JOINT_PRESCRIBED)
JOINT_TORQUE_DRIVEN = 0   # free under the drive (or Spong spring) torque
JOINT_PRESCRIBED = 1      # the profile's angle, rate and acceleration (a braked stiff joint: held constant)
JOINT_ROTOR_HELD = 2      # a Spong joint whose holding brake holds the rotor at rest; the link moves on its spring

# columns of the jpar block: per-joint friction smoothing, Stribeck, the kinetic torque and ramp width of a
# slipping holding brake (hil.devices.drives), backlash
JP_COUL_VS, JP_STRIBECK, JP_STRIB_VS, JP_BRAKE, JP_BRAKE_VS, JP_BACKLASH = range(6)
N_JP = 6

# integrators (hil.kernels.integrate)
METHOD_RK4 = 0
METHOD_IMEX = 1
METHOD_EULER = 2
METHOD_FITTED = 3      # the fitted implicit midpoint (hil.kernels.fitted_midpoint)

# fitted[i, k] (MF_FITTED): the fitted midpoint scheme's n_m x n_m blocks of body k for the plan's substep h
FIT_B = 0     # B: the modes' midpoint position q_e + h^2 B a
FIT_C = 1     # C = h^2 K B (symmetrised): the implicit stiffness added to the modal mass (h/2 D: cD)
N_FIT = 2

# the DAE kernel's rows (hil.kernels.screw_dae_arrays): dae_body columns, the widths of the other rows, and the
# unknowns of one link's block (its inboard interaction wrench, its spatial acceleration, its modal accelerations);
# the widths are plain functions in Python and inlined in the kernels (register_jitable, not @kernel: helpers
# compiled into each kernel that calls them, never entry points of their own)
DAE_PARENT, DAE_NM, DAE_MO, DAE_NODE0, DAE_NODE1, DAE_NMP = range(6)
DAE_BODY_COLS = 6


@register_jitable
def dae_node_width(NM: int) -> int:
    return 4 + 3 * NM + NM * NM


@register_jitable
def dae_rot_width(NM: int) -> int:
    return 9 + 3 * NM + NM * NM


@register_jitable
def dae_stat_width(NM: int) -> int:
    return 12 + 6 * NM + NM * NM


@register_jitable
def dae_block(NM: int) -> int:
    return 12 + NM


# prof_kind: the law of a prescribed joint (hil.kernels.profiles)
MOTION_CONSTANT = 0
MOTION_SPINUP = 1
MOTION_CYCLOIDAL = 2
MOTION_TABLE = 3


@kernel
def parent_of(mi, k):
    """Body k's parent (-1: the base)."""
    return mi[at(mi[MI_PARENT] + k)]


@kernel
def modes_of(mi, k):
    """Number of modes of body k."""
    return mi[at(mi[MI_NM] + k)]


@kernel
def first_mode(mi, k):
    """Index of body k's first modal coordinate in the state vector."""
    return mi[DIM_NB] + mi[at(mi[MI_MO] + k)]


@kernel
def drive_of(mi, k):
    """Joint k's JOINT_* code."""
    return mi[at(mi[MI_DRIVE] + k)]


def block_tables() -> tuple[tuple[str, list], ...]:
    """(array, blocks) for the three arrays: 'mf', 'mi' (after the header) and 'w'."""
    return ("mf", MODEL_FLOATS), ("mi", MODEL_INTS), ("w", WORK)


def slot(name: str) -> int:
    """The header slot of the block `name`."""
    return N_DIMS + _SLOTS.index(name)


@functools.lru_cache(maxsize=16)
def offsets(sizes: Sizes) -> tuple[Mapping[str, tuple[str, int, tuple]], Mapping[str, int]]:
    """Where every block lives for a model of these sizes: name -> (array, offset, shape), and the
    length of each array ('mf', 'mi', 'w'); computed once per sizes (read-only: every model of the
    sizes shares them)."""
    where = {}
    lengths = {}
    for array, blocks in block_tables():
        at = N_HEADER if array == "mi" else 0
        for name, shape in blocks:
            dims = tuple(int(d) for d in shape(sizes))
            where[name] = (array, at, dims)
            n = 1
            for d in dims:
                n *= d
            at += n
        lengths[array] = at
    return MappingProxyType(where), MappingProxyType(lengths)
