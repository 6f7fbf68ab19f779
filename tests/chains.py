"""Random and reference chains shared by the tests, and their Pinocchio twins."""
from __future__ import annotations

import numpy as np

from hil.model import spec as md
from hil.model.assembly import rpy_matrix


def spd_inertia(rng: np.random.Generator, scale: float = 0.1) -> np.ndarray:
    """A random physically valid inertia tensor (principal moments obey the triangle inequality)."""
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    a, b, c = rng.uniform(0.2, 1.0, 3) * scale
    return Q @ np.diag([a + b, b + c, a + c]) @ Q.T


def random_rigid_chain(rng: np.random.Generator, n: int, armature: bool = True) -> md.Model:
    bodies = []
    for i in range(n):
        joint = md.Joint(f"j{i}", axis=rng.normal(size=3), offset_m=rng.normal(size=3) * 0.3,
                         rpy_rad=rng.uniform(-np.pi, np.pi, 3), q0_rad=rng.uniform(-np.pi, np.pi),
                         rotor_inertia_kg_m2=rng.uniform(0, 1e-4) if armature else 0.0,
                         gear_ratio=rng.uniform(1, 100))
        rigid = md.RigidInertia(rng.uniform(0.5, 3.0), rng.normal(size=3) * 0.2, spd_inertia(rng))
        bodies.append(md.Body(f"b{i}", md.BASE if i == 0 else f"b{i - 1}", joint, rigid=rigid))
    return md.Model("random_rigid", bodies, gravity_m_s2=np.array([0.0, 0.0, -9.81]))


def steel_beam(rng: np.random.Generator, length: float, modes=(2, 2, 1, 0), damping: float = 0.0) -> md.Beam:
    ny, nz, nt, na = modes
    return md.Beam(length_m=length, E_Pa=2.1e11, G_Pa=8.1e10, rho_kg_m3=7800.0, area_m2=2e-4 * rng.uniform(0.8, 1.2),
                   Iy_m4=1e-8 * rng.uniform(0.8, 1.5), Iz_m4=1.7e-8 * rng.uniform(0.8, 1.5),
                   torsion_constant_m4=2e-8 * rng.uniform(0.8, 1.2), n_bending_y=ny, n_bending_z=nz, n_torsion=nt,
                   n_axial=na, damping_ratio=np.full(ny + nz + nt + na, damping))


def random_flexible_chain(rng: np.random.Generator, n: int, *, foreshortening: bool = True, damping: float = 0.0,
                          prescribed: bool = False, elastic_joint: bool = False, axial: bool = False) -> md.Model:
    """Alternating flexible and rigid bodies on random placements, with tip attachments."""
    bodies = []
    parent_len = 0.0
    for i in range(n):
        joint = md.Joint(f"j{i}", axis=rng.normal(size=3), station_m=parent_len, offset_m=rng.normal(size=3) * 0.05,
                         rpy_rad=rng.uniform(-np.pi, np.pi, 3), q0_rad=rng.uniform(-np.pi, np.pi),
                         rotor_inertia_kg_m2=1e-4, gear_ratio=rng.uniform(1, 50), viscous_N_m_s_rad=rng.uniform(0, 1),
                         coulomb_N_m=rng.uniform(0, 0.5), coulomb_smoothing_rad_s=0.05)
        if prescribed and i == 1:
            joint.drive = md.DRIVE_PRESCRIBED
            joint.profile = md.Profile(md.PROFILE_SPINUP, omega_rad_s=2.0, T_s=1.0)
        elif elastic_joint and i == 2:
            joint.elasticity = md.JointElasticity(5e3, 2.0)
        parent = md.BASE if i == 0 else f"b{i - 1}"
        if i % 2 == 0:
            length = rng.uniform(0.5, 1.2)
            beam = steel_beam(rng, length, (2, 2, 1, 1 if axial else 0), damping)
            att = md.Attachment("mass", length, rng.uniform(0.5, 2.0), rng.normal(size=3) * 0.03, spd_inertia(rng, 0.01))
            bodies.append(md.Body(f"b{i}", parent, joint, beam=beam, attachments=[att]))
            parent_len = length
        else:
            rigid = md.RigidInertia(rng.uniform(0.2, 1.0), rng.normal(size=3) * 0.1, spd_inertia(rng, 0.02))
            bodies.append(md.Body(f"b{i}", parent, joint, rigid=rigid))
            parent_len = 0.0
    return md.Model("random_flexible", bodies, foreshortening=foreshortening,
                    gravity_m_s2=np.array([0.0, 0.0, -9.81]))


def random_state(rng: np.random.Generator, nq: int, n_joints: int, pos0: np.ndarray, eta_scale: float = 0.01):
    pos = pos0.copy()
    pos[n_joints:] += rng.normal(size=nq - n_joints) * eta_scale
    vel = rng.normal(size=nq)
    vel[n_joints:] *= 0.1
    return pos, vel


def pinocchio_model(model: md.Model):
    """The Pinocchio twin of an all-rigid Model (same frames, inertias, armature, gravity)."""
    import pinocchio as pin

    pm = pin.Model()
    ids = {md.BASE: 0}
    armature = []
    for body in model.bodies:
        j = body.joint
        axis = np.asarray(j.axis, float) / np.linalg.norm(j.axis)
        placement = pin.SE3(rpy_matrix(j.rpy_rad), np.array([j.station_m, 0, 0]) + np.asarray(j.offset_m, float))
        jid = pm.addJoint(ids[body.parent], pin.JointModelRevoluteUnaligned(axis), placement, j.name)
        r = body.rigid
        pm.appendBodyToJoint(jid, pin.Inertia(r.mass_kg, np.asarray(r.com_m, float), np.asarray(r.inertia_kg_m2, float)),
                             pin.SE3.Identity())
        for a in body.attachments:
            c = np.array([a.station_m, 0, 0]) + np.asarray(a.offset_m, float)
            pm.appendBodyToJoint(jid, pin.Inertia(a.mass_kg, c, np.asarray(a.inertia_kg_m2, float)), pin.SE3.Identity())
        ids[body.name] = jid
        armature.append(j.armature_kg_m2)
    pm.armature = np.array(armature)
    pm.gravity.linear = np.asarray(model.gravity_m_s2, float)
    return pm


def rigid_equivalent(model: md.Model) -> md.Model:
    """Each beam replaced by the rigid body of its undeformed mass distribution (attachments kept)."""
    import copy

    out = copy.deepcopy(model)
    for body in out.bodies:
        if body.beam is None:
            continue
        b = body.beam
        m = b.rho_kg_m3 * b.area_m2 * b.length_m
        L = b.length_m
        Ip = b.polar_moment_m4 or (b.Iy_m4 + b.Iz_m4)
        I = np.diag([b.rho_kg_m3 * L * Ip, m * L * L / 12 + b.rho_kg_m3 * L * b.Iy_m4,
                     m * L * L / 12 + b.rho_kg_m3 * L * b.Iz_m4])
        body.rigid = md.RigidInertia(m, np.array([L / 2, 0, 0]), I)
        body.beam = None
    return out
