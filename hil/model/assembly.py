"""Turn a Model (hil.model.spec) into the flat arrays the numba kernels read (hil.model.kernel_arrays):
the beams' modes, the joints' data and profiles, the lumped nodes of every body with their modal
stiffness and damping, the joint and output stations, and the initial state.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from config_schema import UserError, raise_problem
from hil.model import spec as md
from hil.model.kernel_arrays import KernelModel, Work, make_work
from hil.model.modal import BeamModes, beam_modes
from hil.kernels import layout as lay_
from hil.kernels import screw_dae_arrays
from hil.kernels.layout import (JOINT_PRESCRIBED, JOINT_TORQUE_DRIVEN, JP_COUL_VS, JP_STRIBECK, JP_STRIB_VS, JP_BRAKE_VS,
                                JP_BACKLASH, N_JP, N_FIT, MOTION_CONSTANT, MOTION_SPINUP, MOTION_CYCLOIDAL,
                                MOTION_TABLE)

# KernelModel, Work and make_work live in hil.model.kernel_arrays; they stay importable from here
__all__ = ["Assembled", "KernelModel", "Layout", "Work", "assemble", "axis_matrix", "make_work", "rpy_matrix"]


def rpy_matrix(rpy: np.ndarray) -> np.ndarray:
    """R = Rz(yaw) Ry(pitch) Rx(roll), fixed-axis roll-pitch-yaw."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def axis_matrix(axis: np.ndarray, q: float) -> np.ndarray:
    a = np.asarray(axis, float)
    K = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + np.sin(q) * K + (1 - np.cos(q)) * K @ K


@dataclass
class Layout:
    """Where each generalized coordinate lives in the state vector."""

    joint_names: list[str]
    body_names: list[str]
    mode_labels: list[list[str]]      # per body
    mode_offsets: list[int]           # per body, into eta
    motor_of_joint: list[int]         # -1 for a stiff joint
    station_names: list[str]
    n_joints: int
    n_eta: int
    n_motors: int

    @property
    def nq(self) -> int:
        return self.n_joints + self.n_eta + self.n_motors

    def eta_index(self, body: int, mode: int) -> int:
        return self.n_joints + self.mode_offsets[body] + mode

    def motor_index(self, joint: int) -> int:
        return self.n_joints + self.n_eta + self.motor_of_joint[joint]


@dataclass
class Assembled:
    model: md.Model
    km: KernelModel
    layout: Layout
    modes: list[BeamModes | None]
    pos0: np.ndarray
    vel0: np.ndarray


def _rigid_props(body: md.Body) -> tuple[float, np.ndarray, np.ndarray]:
    """Mass, CoM and inertia about the CoM of a body, undeformed (for tip-body estimates)."""
    parts = []
    if body.rigid is not None:
        parts.append((body.rigid.mass_kg, np.asarray(body.rigid.com_m, float), np.asarray(body.rigid.inertia_kg_m2, float)))
    if body.beam is not None:
        b = body.beam
        mb = b.rho_kg_m3 * b.area_m2 * b.length_m
        Ixx = b.rho_kg_m3 * b.length_m * (b.polar_moment_m4 or b.Iy_m4 + b.Iz_m4)
        Iyy = mb * b.length_m ** 2 / 12 + b.rho_kg_m3 * b.length_m * b.Iy_m4
        Izz = mb * b.length_m ** 2 / 12 + b.rho_kg_m3 * b.length_m * b.Iz_m4
        parts.append((mb, np.array([b.length_m / 2, 0, 0]), np.diag([Ixx, Iyy, Izz])))
    for a in body.attachments:
        parts.append((a.mass_kg, np.array([a.station_m, 0, 0]) + a.offset_m, np.asarray(a.inertia_kg_m2, float)))
    return _combine(parts)


def _combine(parts):
    mt = sum(p[0] for p in parts)
    if mt <= 0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    c = sum(p[0] * p[1] for p in parts) / mt
    I = np.zeros((3, 3))
    for m_, c_, I_ in parts:
        d = c_ - c
        I += I_ + m_ * (d @ d * np.eye(3) - np.outer(d, d))
    return mt, c, I


def _subtree_about(model: md.Model, index: int, station: float) -> tuple[float, np.ndarray]:
    """Mass and inertia (about the point at `station` on body `index`'s axis, its axes) of
    everything carried at that station: attachments there and the child subtrees, undeformed, at q0."""
    body = model.bodies[index]
    point = np.array([station, 0.0, 0.0])
    parts = [(a.mass_kg, np.array([a.station_m, 0, 0]) + a.offset_m, np.asarray(a.inertia_kg_m2, float))
             for a in body.attachments if abs(a.station_m - station) < 1e-9]

    def collect(ci: int, R: np.ndarray, p: np.ndarray):
        child = model.bodies[ci]
        mc, cc, Ic = _rigid_props(child)
        if mc > 0:
            parts.append((mc, p + R @ cc, R @ Ic @ R.T))
        for gi, g in enumerate(model.bodies):
            if g.parent == child.name:
                Rj = rpy_matrix(g.joint.rpy_rad) @ axis_matrix(g.joint.axis, g.joint.q0_rad)
                pj = np.array([g.joint.station_m, 0, 0]) + g.joint.offset_m
                collect(gi, R @ Rj, p + R @ pj)

    for ci, c in enumerate(model.bodies):
        if c.parent == body.name and abs(c.joint.station_m - station) < 1e-9:
            Rj = rpy_matrix(c.joint.rpy_rad) @ axis_matrix(c.joint.axis, c.joint.q0_rad)
            collect(ci, Rj, np.array([station, 0, 0]) + c.joint.offset_m)
    mt, c, I = _combine(parts)
    if mt <= 0:
        return 0.0, np.zeros((3, 3))
    d = c - point
    return mt, I + mt * (d @ d * np.eye(3) - np.outer(d, d))


def _body_modes(model: md.Model, index: int) -> BeamModes | None:
    body = model.bodies[index]
    if body.beam is None:
        return None
    tip_m, tip_J = 0.0, np.zeros((3, 3))
    if body.beam.family == "clamped_mass":
        tip_m, tip_J = _subtree_about(model, index, body.beam.length_m)
    return beam_modes(body.beam, tip_m, tip_J)


def _station_arrays(modes: BeamModes | None, station: float, offset: np.ndarray, NM: int, foreshortening: bool):
    G = np.zeros((3, NM))
    L = np.zeros((3, NM))
    S = np.zeros((NM, NM))
    if modes is not None:
        g, lam, s = modes.at(station, offset)
        n = modes.nm
        G[:, :n] = g
        L[:, :n] = lam
        if foreshortening:
            S[:n, :n] = s
    return np.array([station, 0.0, 0.0]) + np.asarray(offset, float), G, L, S


def _damping_matrix(K: np.ndarray, Mff: np.ndarray, zeta: np.ndarray) -> np.ndarray:
    """D = M Phi diag(2 zeta_i omega_i) Phi^T M for M-normalised component modes (ascending omega)."""
    if K.shape[0] == 0 or not np.any(zeta):
        return np.zeros_like(K)
    Lc = np.linalg.cholesky(Mff)
    Li = np.linalg.inv(Lc)
    lam, V = np.linalg.eigh(Li @ K @ Li.T)
    Phi = Li.T @ V
    om = np.sqrt(np.maximum(lam, 0.0))
    MPhi = Mff @ Phi
    return MPhi @ np.diag(2.0 * zeta * om) @ MPhi.T


def _spline_coefficients(t: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Cubic spline through (t, q) with zero end slopes; rows c0..c3 per interval (last row holds q_end).
    The second-derivative system is tridiagonal and diagonally dominant: solved in O(n) (a table of
    a recorded run has 10^4 samples)."""
    n = len(t)
    h = np.diff(t)
    slope = np.diff(q) / h
    lower, diag, upper, r = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    diag[0], upper[0], r[0] = 2 * h[0], h[0], 3 * slope[0]
    lower[-1], diag[-1], r[-1] = h[-1], 2 * h[-1], -3 * slope[-1]
    lower[1:-1], diag[1:-1], upper[1:-1] = h[:-1], 2 * (h[:-1] + h[1:]), h[1:]
    r[1:-1] = 3 * (slope[1:] - slope[:-1])
    c2 = _tridiagonal_solve(lower, diag, upper, r)
    c = np.zeros((n, 4))
    c[:, 0] = q
    c[:-1, 2] = c2[:-1]
    c[:-1, 3] = np.diff(c2) / (3 * h)
    c[:-1, 1] = slope - h * (2 * c2[:-1] + c2[1:]) / 3
    return c


def _tridiagonal_solve(lower: np.ndarray, diag: np.ndarray, upper: np.ndarray, r: np.ndarray) -> np.ndarray:
    """x with lower[i] x[i-1] + diag[i] x[i] + upper[i] x[i+1] = r[i] (Thomas algorithm; no pivoting,
    which a diagonally dominant system does not need)."""
    n = len(diag)
    d, y = diag.astype(float).copy(), r.astype(float).copy()
    for i in range(1, n):
        w = lower[i] / d[i - 1]
        d[i] -= w * upper[i - 1]
        y[i] -= w * y[i - 1]
    x = np.empty(n)
    x[-1] = y[-1] / d[-1]
    for i in range(n - 2, -1, -1):
        x[i] = (y[i] - upper[i] * x[i + 1]) / d[i]
    return x


def _joint_parameters(bodies: list[md.Body]) -> np.ndarray:
    """KernelModel.jpar: Coulomb smoothing, Stribeck, brake and backlash per joint (columns hil.kernels.layout.JP_*).
    The brake is released here; hil.devices.drives.DriveBank engages it and sets its smoothing at run time,
    in place, and holds a stuck joint through KernelModel.drive and prof_par."""
    jp = np.zeros((len(bodies), N_JP))
    for k, b in enumerate(bodies):
        j = b.joint
        jp[k, JP_COUL_VS] = j.coulomb_smoothing_rad_s
        jp[k, JP_STRIBECK] = j.stribeck_N_m
        jp[k, JP_STRIB_VS] = j.stribeck_velocity_rad_s if j.stribeck_N_m > 0 else 1.0
        jp[k, JP_BRAKE_VS] = 1.0
        jp[k, JP_BACKLASH] = j.backlash_rad
    return jp


_PROFILE_KIND = {md.PROFILE_CONSTANT: MOTION_CONSTANT, md.PROFILE_SPINUP: MOTION_SPINUP,
                 md.PROFILE_CYCLOIDAL: MOTION_CYCLOIDAL, md.PROFILE_TABLE: MOTION_TABLE}


def _joint_blocks(model: md.Model, index: dict[str, int]) -> dict[str, np.ndarray]:
    """Per joint: parent, axis, armature, friction, drive, the elastic joint's rotor and spring
    (``mot``: its rotor's index, -1 for a stiff joint), and the prescribed-motion profiles."""
    bodies = model.bodies
    nb = len(bodies)
    mot = -np.ones(nb, dtype=np.int64)
    nmot = 0
    for k, b in enumerate(bodies):
        if b.joint.elasticity is not None:
            mot[k] = nmot
            nmot += 1
    mot_inertia = np.array([b.joint.armature_kg_m2 if b.joint.elasticity else 0.0 for b in bodies])
    for k, b in enumerate(bodies):
        if b.joint.elasticity is not None and mot_inertia[k] <= 0:
            raise UserError(f"{model.source}: body[{b.name}].joint: an elastic joint needs rotor_inertia_kg_m2 > 0 "
                             "(the rotor carries the motor-side coordinate)")
    for b in bodies:
        raise_problem(model.source, f"body[{b.name}].joint", md.joint_problems(b.joint))
    return dict(
        parent=np.array([-1 if b.parent == md.BASE else index[b.parent] for b in bodies], dtype=np.int64),
        axis=np.array([b.joint.axis / np.linalg.norm(b.joint.axis) for b in bodies], float).reshape(nb, 3),
        armature=np.array([0.0 if b.joint.elasticity else b.joint.armature_kg_m2 for b in bodies]),
        viscous=np.array([b.joint.viscous_N_m_s_rad for b in bodies], float),
        coulomb=np.array([b.joint.coulomb_N_m for b in bodies], float), jpar=_joint_parameters(bodies),
        drive=np.array([JOINT_PRESCRIBED if b.joint.drive == md.DRIVE_PRESCRIBED else JOINT_TORQUE_DRIVEN
                        for b in bodies], dtype=np.int64),
        **_profiles(bodies),
        mot=mot, mot_inertia=mot_inertia,
        kspring=np.array([b.joint.elasticity.stiffness_N_m_rad if b.joint.elasticity else 0.0 for b in bodies]),
        dspring=np.array([b.joint.elasticity.damping_N_m_s_rad if b.joint.elasticity else 0.0 for b in bodies]))


def _profiles(bodies: list[md.Body]) -> dict[str, np.ndarray]:
    """The prescribed joints' motion profiles: kind and parameters, spline tables one after the other."""
    nb = len(bodies)
    prof_kind = np.zeros(nb, dtype=np.int64)
    prof_par = np.zeros((nb, 4))
    tabs_t, tabs_c, tab_off, tab_n = [], [], np.zeros(nb, np.int64), np.zeros(nb, np.int64)
    off = 0
    for k, b in enumerate(bodies):
        prof_par[k, 0] = b.joint.q0_rad
        pr = b.joint.profile
        if b.joint.drive != md.DRIVE_PRESCRIBED or pr is None:
            continue
        prof_kind[k] = _PROFILE_KIND[pr.kind]
        if pr.kind == md.PROFILE_SPINUP:
            prof_par[k, 1:3] = pr.omega_rad_s, pr.T_s
        elif pr.kind == md.PROFILE_CYCLOIDAL:
            prof_par[k, 1:3] = pr.k_rad_s, pr.T_s
        elif pr.kind == md.PROFILE_TABLE:
            t = np.asarray(pr.t_s, float)
            tabs_t.append(t)
            tabs_c.append(_spline_coefficients(t, np.asarray(pr.q_rad, float)))
            tab_off[k], tab_n[k] = off, len(t)
            off += len(t)
    return dict(prof_kind=prof_kind, prof_par=prof_par, tab_off=tab_off, tab_n=tab_n,
                tab_t=np.concatenate(tabs_t) if tabs_t else np.zeros(1),
                tab_c=np.concatenate(tabs_c) if tabs_c else np.zeros((1, 4)))


def _joint_stations(model: md.Model, modes: list, parent: np.ndarray, NM: int) -> dict[str, np.ndarray]:
    """Each joint's station on its parent: rest position and orientation, modal translation,
    rotation and foreshortening there."""
    nb = len(model.bodies)
    st_p0, st_R0 = np.zeros((nb, 3)), np.zeros((nb, 3, 3))
    st_G, st_L, st_S = np.zeros((nb, 3, NM)), np.zeros((nb, 3, NM)), np.zeros((nb, NM, NM))
    for k, b in enumerate(model.bodies):
        pm = modes[parent[k]] if parent[k] >= 0 else None
        st_p0[k], st_G[k], st_L[k], st_S[k] = _station_arrays(pm, b.joint.station_m, b.joint.offset_m, NM,
                                                             model.foreshortening)
        st_R0[k] = rpy_matrix(b.joint.rpy_rad)
    return dict(st_p0=st_p0, st_R0=st_R0, st_G=st_G, st_L=st_L, st_S=st_S)


def _body_nodes(model: md.Model, k: int, mode: BeamModes | None, NM: int) -> list[tuple]:
    """Body k's lumped nodes (mass, p0, J, Gamma, Lambda, S): its rigid part, its beam's mass
    nodes and its attachments, in that order."""
    b = model.bodies[k]
    nodes = []
    if b.rigid is not None:
        nodes.append((b.rigid.mass_kg, np.asarray(b.rigid.com_m, float), np.asarray(b.rigid.inertia_kg_m2, float),
                      np.zeros((3, NM)), np.zeros((3, NM)), np.zeros((NM, NM))))
    if mode is not None:
        n = mode.nm
        beam = mode.mass_nodes()
        for j in range(len(beam["m"])):
            G, L, S = np.zeros((3, NM)), np.zeros((3, NM)), np.zeros((NM, NM))
            G[:, :n] = beam["Gamma"][j]
            L[:, :n] = beam["Lambda"][j]
            if model.foreshortening:
                S[:n, :n] = beam["S"][j]
            nodes.append((beam["m"][j], beam["p0"][j], beam["J"][j], G, L, S))
    for a in b.attachments:
        p0, G, L, S = _station_arrays(mode, a.station_m, a.offset_m, NM, model.foreshortening)
        nodes.append((a.mass_kg, p0, np.asarray(a.inertia_kg_m2, float), G, L, S))
    return nodes


def _modal_damping(model: md.Model, k: int, mode: BeamModes, nodes: list[tuple]) -> np.ndarray:
    """Body k's modal damping matrix from its beam's damping ratios, on the modal mass of its nodes
    (and, for clamped_mass modes, of the children carried at the tip)."""
    b = model.bodies[k]
    n = mode.nm
    Mff = sum(m * G[:, :n].T @ G[:, :n] + L[:, :n].T @ J @ L[:, :n] for m, _, J, G, L, _ in nodes)
    if b.beam.family == "clamped_mass":
        tip_m, tip_J = _subtree_about(model, k, b.beam.length_m)
        own = sum(a.mass_kg for a in b.attachments if abs(a.station_m - b.beam.length_m) < 1e-9)
        if tip_m - own > 0:
            # children carried at the tip take part in the component modes the damping refers to
            g, lam, _ = mode.at(b.beam.length_m)
            own_J = sum((np.asarray(a.inertia_kg_m2, float) for a in b.attachments
                         if abs(a.station_m - b.beam.length_m) < 1e-9), np.zeros((3, 3)))
            Mff = Mff + (tip_m - own) * g.T @ g + lam.T @ (tip_J - own_J) @ lam
    zeta = np.broadcast_to(np.asarray(b.beam.damping_ratio, float), (n,)) if np.size(b.beam.damping_ratio) else np.zeros(n)
    return _damping_matrix(mode.K, Mff, np.asarray(zeta, float))


def _lumped_nodes(model: md.Model, modes: list, NM: int) -> dict[str, np.ndarray]:
    """Every body's lumped nodes (node_off: body k's nodes are node_off[k]..node_off[k + 1]), their
    per-body sums, and the bodies' modal stiffness and damping."""
    nb = len(model.bodies)
    all_nodes, node_off = [], [0]
    Kmod, Dmod = np.zeros((nb, NM, NM)), np.zeros((nb, NM, NM))
    Jsum, JL, LJL = np.zeros((nb, 3, 3)), np.zeros((nb, 3, NM)), np.zeros((nb, NM, NM))
    mG, mS, Mff0 = np.zeros((nb, 3, NM)), np.zeros((nb, NM, NM)), np.zeros((nb, NM, NM))
    for k in range(nb):
        nodes = _body_nodes(model, k, modes[k], NM)
        all_nodes += nodes
        node_off.append(len(all_nodes))
        for m, _, J, G, L, S in nodes:
            Jsum[k] += J
            JL[k] += J @ L
            LJL[k] += L.T @ J @ L
            mG[k] += m * G
            mS[k] += m * S
            Mff0[k] += m * G.T @ G
        Mff0[k] += LJL[k]
        if modes[k] is not None:
            n = modes[k].nm
            Kmod[k, :n, :n] = modes[k].K
            Dmod[k, :n, :n] = _modal_damping(model, k, modes[k], nodes)
    columns = list(zip(*all_nodes)) if all_nodes else [[] for _ in range(6)]
    nd = {key: np.array(v, float).reshape((len(all_nodes),) + shape)
          for key, v, shape in zip(("m", "p0", "J", "G", "L", "S"), columns,
                                   ((), (3,), (3, 3), (3, NM), (3, NM), (NM, NM)))}
    return dict(node_off=np.array(node_off, np.int64), nd_m=nd["m"], nd_p0=nd["p0"], nd_J=nd["J"], nd_G=nd["G"],
                nd_L=nd["L"], nd_S=nd["S"], Jsum=Jsum, JL=JL, LJL=LJL, mG=mG, mS=mS, Mff0=Mff0,
                axial=np.array([np.any(nd["G"][node_off[k]:node_off[k + 1], 0] != 0) for k in range(nb)],
                               np.int64).reshape(nb), Kmod=Kmod, Dmod=Dmod)


def _output_stations(model: md.Model, modes: list, index: dict[str, int], NM: int) -> tuple[list, dict]:
    """The output stations (the configured ones and the last body's tip) and their arrays."""
    stations = list(model.stations)
    if not any(s.name == "tip" for s in stations) and model.bodies:
        last = model.bodies[-1]
        stations.append(md.Station("tip", last.name, last.beam.length_m if last.beam else 0.0))
    ns = max(len(stations), 1)
    os_body, os_p0, os_R0 = np.zeros(ns, np.int64), np.zeros((ns, 3)), np.tile(np.eye(3), (ns, 1, 1))
    os_G, os_L, os_S = np.zeros((ns, 3, NM)), np.zeros((ns, 3, NM)), np.zeros((ns, NM, NM))
    for i, s in enumerate(stations):
        k = index[s.body]
        os_body[i] = k
        os_p0[i], os_G[i], os_L[i], os_S[i] = _station_arrays(modes[k], s.station_m, s.offset_m, NM, model.foreshortening)
    return stations, dict(os_body=os_body, os_p0=os_p0, os_R0=os_R0, os_G=os_G, os_L=os_L, os_S=os_S)


def _initial_state(model: md.Model, layout: Layout, mo: np.ndarray, nm: np.ndarray,
                   nq: int) -> tuple[np.ndarray, np.ndarray]:
    """The joints' (and their rotors') initial angles and rates, and the configured initial modal coordinates."""
    nb = len(model.bodies)
    pos0, vel0 = np.zeros(nq), np.zeros(nq)
    for k, b in enumerate(model.bodies):
        pos0[k] = b.joint.q0_rad
        vel0[k] = b.joint.qd0_rad_s
        if layout.motor_of_joint[k] >= 0:
            pos0[layout.motor_index(k)] = b.joint.q0_rad
            vel0[layout.motor_index(k)] = b.joint.qd0_rad_s
        eta0 = model.initial_eta.get(b.name)
        if eta0 is not None:
            pos0[nb + mo[k]: nb + mo[k] + nm[k]] = eta0
    return pos0, vel0


def assemble(model: md.Model) -> Assembled:
    """Modal precomputation and flattening of `model` for the kernels."""
    bodies = model.bodies
    nb = len(bodies)
    names = [b.name for b in bodies]
    index = {n: i for i, n in enumerate(names)}
    modes = [_body_modes(model, i) for i in range(nb)]
    nm = np.array([0 if m is None else m.nm for m in modes], dtype=np.int64)
    NM = max(1, int(nm.max()) if nb else 1)
    mo = np.concatenate([[0], np.cumsum(nm)[:-1]]).astype(np.int64)
    neta = int(nm.sum())
    joints = _joint_blocks(model, index)
    nmot = int((joints["mot"] >= 0).sum())
    nodes = _lumped_nodes(model, modes, NM)
    stations, outputs = _output_stations(model, modes, index, NM)
    blocks = dict(nm=nm, mo=mo, **joints, **_joint_stations(model, modes, joints["parent"], NM), **nodes,
                  gravity=np.asarray(model.gravity_m_s2, float), fitted=np.zeros((N_FIT, nb, NM, NM)), **outputs)
    nq = nb + neta + nmot
    sizes = lay_.Sizes(nb=nb, neta=neta, nmot=nmot, NM=NM, nq=nq, ns=len(outputs["os_body"]),
                       nnode=len(nodes["nd_m"]), ntab=len(joints["tab_t"]))
    dae = {name: np.zeros(shape) for name, (_, _, shape) in lay_.offsets(sizes)[0].items() if name.startswith("dae_")}
    km = KernelModel(sizes, {**blocks, **dae})
    screw_dae_arrays.pack(km)               # the DAE kernel's copy of the geometry and inertia
    layout = Layout(
        joint_names=[b.joint.name for b in bodies], body_names=names,
        mode_labels=[[] if m is None else list(m.labels) for m in modes], mode_offsets=[int(x) for x in mo],
        motor_of_joint=[int(x) for x in joints["mot"]], station_names=[s.name for s in stations],
        n_joints=nb, n_eta=neta, n_motors=nmot,
    )
    return Assembled(model, km, layout, modes, *_initial_state(model, layout, mo, nm, nq))
