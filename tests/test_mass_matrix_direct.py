"""The system mass matrix and generalized gravity without the kernels' recursion.

An independent pure-numpy forward kinematics is written here from the per-body
conventions of ``hil.kernels.bodies`` (lumped nodes at r_j = p0 + Gamma eta +
e_x eta^T S eta / 2, node rotation Lambda eta, joint stations at p0 + Gamma eta +
e_x eta^T S eta / 2 turned by Rx(a) Ry(b) Rz(c) R0 with (a, b, c) = Lambda eta,
child frame = station frame turned by q about the joint axis). It reads nothing
but the KernelModel arrays. Velocities come from the complex-step derivative of
that kinematics (exact to rounding, no finite-difference truncation), the kinetic
energy T(q, qd) is built node by node and the mass matrix is recovered by
polarisation, M_ij = T(e_i + e_j) - T(e_i) - T(e_j). The composite-body oracle
(``oracle.mass_matrix``) must agree to rounding. Likewise dV/dq of the node
potential must equal the oracle's ``bias_forces`` at rest with the elastic forces
and drive removed.
"""
from __future__ import annotations

import numpy as np
import pytest

from hil.model.assembly import assemble, make_work
from hil.model.config import load_model
from hil.kernels.aba import forward_kinematics, joint_torques, prepare
from hil.kernels.oracle import bias_forces, mass_matrix
from hil.kernels.outputs import energy

from chains import random_flexible_chain, random_state
from hil.kernels.layout import DIM_NB, DIM_NETA

CS = 1e-30   # complex-step size


# ---------------------------------------------------------------- independent kinematics


def rot_x(a):
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]], dtype=np.result_type(a, float))


def rot_y(b):
    c, s = np.cos(b), np.sin(b)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]], dtype=np.result_type(b, float))


def rot_z(c_):
    c, s = np.cos(c_), np.sin(c_)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=np.result_type(c_, float))


def rot_xyz(th):
    """Cross-section rotation Rx(a) Ry(b) Rz(c) of th = (a, b, c)."""
    return rot_x(th[0]) @ rot_y(th[1]) @ rot_z(th[2])


def rot_axis(a, q):
    """Rotation by q about the unit axis a (Rodrigues), complex-step safe."""
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]], dtype=float)
    return np.eye(3) + np.sin(q) * K + (1 - np.cos(q)) * (K @ K)


def deformed_point(p0, G, S, eta):
    """p0 + Gamma eta + e_x eta^T S eta / 2."""
    p = p0 + G @ eta
    return p + np.array([0.5 * eta @ S @ eta, 0.0, 0.0])


def split(km, q):
    """Joint angles, per-body modal coordinates, rotor angles of the generalized vector q."""
    nb, neta = int(km.dims[DIM_NB]), int(km.dims[DIM_NETA])
    etas = [q[nb + km.mo[k]: nb + km.mo[k] + km.nm[k]] for k in range(nb)]
    return q[:nb], etas, q[nb + neta:]


def body_frames(km, q):
    """World rotation R_k and origin p_k of every body frame (complex-step safe)."""
    nb = int(km.dims[DIM_NB])
    qj, etas, _ = split(km, q)
    R, p = [], []
    for k in range(nb):
        par = int(km.parent[k])
        if par < 0:
            Rp, pp, eta_p, n = np.eye(3), np.zeros(3), np.zeros(0), 0
        else:
            Rp, pp, eta_p, n = R[par], p[par], etas[par], int(km.nm[par])
        ps = deformed_point(km.st_p0[k], km.st_G[k][:, :n], km.st_S[k][:n, :n], eta_p)
        Rs = rot_xyz(km.st_L[k][:, :n] @ eta_p) @ km.st_R0[k]
        R.append(Rp @ Rs @ rot_axis(km.axis[k], qj[k]))
        p.append(pp + Rp @ ps)
    return R, p


def node_positions(km, q):
    """World position of every lumped node and the body it belongs to."""
    R, p = body_frames(km, q)
    _, etas, _ = split(km, q)
    xs, owner = [], []
    for k in range(int(km.dims[DIM_NB])):
        n = int(km.nm[k])
        for j in range(km.node_off[k], km.node_off[k + 1]):
            r = deformed_point(km.nd_p0[j], km.nd_G[j][:, :n], km.nd_S[j][:n, :n], etas[k])
            xs.append(p[k] + R[k] @ r)
            owner.append(k)
    return np.array(xs), owner


def vee(W):
    return np.array([W[2, 1], W[0, 2], W[1, 0]])


def kinetic_energy(km, q, qd):
    """T(q, qd) summed over the lumped nodes, plus joint armature and rotor inertia."""
    qc = q + 1j * CS * qd
    R, _ = body_frames(km, qc)
    x, owner = node_positions(km, qc)
    xd = x.imag / CS
    _, etads, rotor_rates = split(km, qd)
    T = 0.0
    nb = int(km.dims[DIM_NB])
    om = []
    for k in range(nb):
        Rk = R[k].real
        Rd = R[k].imag / CS
        W = Rk.T @ Rd                       # skew(omega) in body axes
        om.append(vee(0.5 * (W - W.T)))
    for j, k in enumerate(owner):
        n = int(km.nm[k])
        w = om[k] + km.nd_L[j][:, :n] @ etads[k]
        T += 0.5 * km.nd_m[j] * xd[j] @ xd[j] + 0.5 * w @ km.nd_J[j] @ w
    for k in range(nb):
        if km.mot[k] >= 0:
            T += 0.5 * km.mot_inertia[k] * rotor_rates[km.mot[k]] ** 2
        else:
            T += 0.5 * km.armature[k] * qd[k] ** 2
    return T


def mass_matrix_direct(km, q):
    """M_ij by polarisation of T(q, .)."""
    nq = len(q)
    E = np.eye(nq)
    Tii = np.array([kinetic_energy(km, q, E[i]) for i in range(nq)])
    M = np.diag(2.0 * Tii)
    for i in range(nq):
        for j in range(i + 1, nq):
            M[i, j] = M[j, i] = kinetic_energy(km, q, E[i] + E[j]) - Tii[i] - Tii[j]
    return M


def gravity_potential(km, q):
    x, owner = node_positions(km, q)
    return -sum(km.nd_m[j] * km.gravity @ x[j] for j in range(len(owner)))


def gravity_forces_direct(km, q):
    """dV/dq by complex step."""
    nq = len(q)
    return np.array([gravity_potential(km, q + 1j * CS * np.eye(nq)[i]).imag / CS for i in range(nq)])


# ---------------------------------------------------------------- kernel side


def kernel_quantities(asm, pos, vel):
    km = asm.km
    w = make_work(km)
    nq = asm.layout.nq
    tau = np.zeros(max(asm.layout.n_joints, 1))
    zero = np.zeros(nq)
    prepare(km.mi, km.mf, w.w, 0.0, pos, vel)
    joint_torques(km.mi, km.mf, w.w, tau, vel, 0.0)
    forward_kinematics(km.mi, km.mf, w.w)
    M = np.zeros((nq, nq))
    mass_matrix(km.mi, km.mf, w.w, 0.0, 0.0, M)
    e = np.zeros(3)
    energy(km.mi, km.mf, w.w, e)
    # generalized gravity: at rest, zero drive, elastic forces removed (el_pos = el_vel = 0)
    prepare(km.mi, km.mf, w.w, 0.0, pos, zero)
    joint_torques(km.mi, km.mf, w.w, tau, zero, 0.0)
    forward_kinematics(km.mi, km.mf, w.w)
    h = np.zeros(nq)
    bias_forces(km.mi, km.mf, w.w, zero, zero, h)
    return M, e, h


def ella_model():
    return load_model("configs/ella.toml")


CASES = {
    "plain": lambda rng: random_flexible_chain(rng, 4),
    "zero_order": lambda rng: random_flexible_chain(rng, 3, foreshortening=False),
    "elastic_joint": lambda rng: random_flexible_chain(rng, 4, elastic_joint=True),
    "axial": lambda rng: random_flexible_chain(rng, 5, axial=True),
    "ella": lambda rng: ella_model(),
}


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("case", list(CASES))
def test_mass_matrix_and_gravity_from_independent_kinematics(case, seed):
    rng = np.random.default_rng(1000 + seed)
    model = CASES[case](rng)
    asm = assemble(model)
    km, lay = asm.km, asm.layout
    pos, vel = random_state(rng, lay.nq, lay.n_joints, asm.pos0, eta_scale=0.02)
    pos[: lay.n_joints] = rng.uniform(-np.pi, np.pi, lay.n_joints)
    for k in range(lay.n_joints):   # Spong rotors at the link angle: no spring torque in h
        if km.mot[k] >= 0:
            pos[lay.motor_index(k)] = pos[k]
    M_k, e_k, h_k = kernel_quantities(asm, pos, vel)
    M_d = mass_matrix_direct(km, pos)

    scale = np.abs(M_d).max()
    err_M = np.abs(M_k - M_d).max() / scale
    # per-entry relative check on the diagonal (small modal masses next to large joint inertias)
    err_diag = np.max(np.abs(np.diag(M_k) - np.diag(M_d)) / np.abs(np.diag(M_d)))
    T_d = kinetic_energy(km, pos, vel)
    err_T = abs(e_k[0] - T_d) / T_d
    err_T_quad = abs(0.5 * vel @ M_k @ vel - T_d) / T_d

    g_d = gravity_forces_direct(km, pos)
    ng = lay.n_joints + lay.n_eta
    err_g = np.abs(h_k[:ng] - g_d[:ng]).max() / np.abs(g_d).max()
    V_d = gravity_potential(km, pos)
    err_V = abs(e_k[1] - V_d) / max(abs(V_d), 1e-300)
    print(f"\n[{case} seed {seed}] nq={lay.nq}: |M_oracle - M_direct|/max|M| = {err_M:.2e}, diag rel {err_diag:.2e}, "
          f"T rel {err_T:.2e}, qd'Mqd/2 rel {err_T_quad:.2e}, gravity dV/dq rel {err_g:.2e}, V rel {err_V:.2e}")
    assert err_M < 1e-11
    assert err_diag < 1e-10
    assert err_T < 1e-11 and err_T_quad < 1e-11
    assert err_g < 1e-11
    assert err_V < 1e-11
    assert np.all(h_k[ng:] == 0.0)
