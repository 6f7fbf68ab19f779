"""Station kinematics and joint reaction wrenches against independent references.

* ``station_state`` position and rotation against the pure-numpy forward kinematics
  of ``test_mass_matrix_direct`` (which reads only KernelModel arrays);
* velocity and angular velocity against the complex-step time derivative of that
  pose along qd;
* specific force (acceleration - gravity) and angular acceleration against
  central differences of the (exact) velocities along the curve
  q(t) = q + t qd + t^2/2 qdd, which has the same second-order jet as the true
  trajectory, and, more loosely, against central differences of the station pose
  along the true trajectory integrated a tiny step forward and backward with a
  small-step RK4;
* gravity sign: at rest on a locked joint under gravity -z, specific force = +g z;
* ``Plant.joint_wrench`` of a single pendulum by hand (static and moving).
"""
from __future__ import annotations

import numpy as np
import pytest

from hil.model import spec as md
from hil.model.assembly import assemble, make_work
from hil.model.config import load_model
from hil.kernels import integrate
from hil.kernels.aba import forward_dynamics
from hil.kernels.outputs import station_state, world_poses
from hil.dynamics.plant import Plant

from chains import random_flexible_chain, random_state
from test_mass_matrix_direct import CS, body_frames, deformed_point, rot_xyz, split, vee
from hil.kernels.layout import METHOD_RK4


def station_pose(km, q, s):
    """Independent world pose (p, R) of output station s (complex-step safe)."""
    R, p = body_frames(km, q)
    _, etas, _ = split(km, q)
    k = int(km.os_body[s])
    n = int(km.nm[k])
    r = deformed_point(km.os_p0[s], km.os_G[s][:, :n], km.os_S[s][:n, :n], etas[k])
    Rs = rot_xyz(km.os_L[s][:, :n] @ etas[k]) @ km.os_R0[s]
    return p[k] + R[k] @ r, R[k] @ Rs


def station_twist(km, q, qd, s):
    """World velocity and angular velocity of station s by complex step along qd."""
    p, R = station_pose(km, q + 1j * CS * qd, s)
    v = p.imag / CS
    W = R.imag / CS @ R.real.T
    return v, vee(0.5 * (W - W.T))


def kernel_station(km, w, t, pos, vel, tau, s):
    """station_state after forward_dynamics; returns the output dict, the solved acc and the
    state as the kernels saw it (prescribed joints imposed)."""
    acc = np.zeros(len(pos))
    assert forward_dynamics(km.mi, km.mf, w.w, t, pos, vel, tau, pos, vel, 0.0, 0.0, acc)
    world_poses(km.mi, km.mf, w.w)
    out = np.zeros(24)
    station_state(km.mi, km.mf, w.w, s, out)
    d = {"position": out[0:3], "rotation": out[3:12].reshape(3, 3), "velocity": out[12:15],
         "angular_velocity": out[15:18], "specific_force": out[18:21], "angular_acceleration": out[21:24]}
    return d, acc, w.pos.copy(), w.vel.copy()


CHAINS = {
    "plain": lambda rng: random_flexible_chain(rng, 4),
    "prescribed_axial": lambda rng: random_flexible_chain(rng, 3, prescribed=True, axial=True),
    "elastic_joint_damped": lambda rng: random_flexible_chain(rng, 4, elastic_joint=True, damping=0.02),
    "zero_order": lambda rng: random_flexible_chain(rng, 3, foreshortening=False),
}


def add_stations(model, rng):
    """A station with offset in the middle of every flexible body, plus the automatic tip."""
    for b in model.bodies:
        if b.beam is not None:
            model.stations.append(md.Station(f"mid_{b.name}", b.name, b.beam.length_m * rng.uniform(0.2, 0.9),
                                             rng.normal(size=3) * 0.05))
    return model


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("chain", list(CHAINS))
def test_station_state_against_independent_derivatives(chain, seed):
    rng = np.random.default_rng(2000 + seed)
    model = add_stations(CHAINS[chain](rng), rng)
    asm = assemble(model)
    km, lay = asm.km, asm.layout
    w = make_work(km)
    pos, vel = random_state(rng, lay.nq, lay.n_joints, asm.pos0, eta_scale=0.01)
    vel[lay.n_joints:] *= 10.0   # elastic rates comparable to the rigid motion
    tau = rng.normal(size=lay.n_joints) * 3.0
    t0 = 0.4
    worst = {}
    for s, name in enumerate(lay.station_names):
        d, acc, q, qd = kernel_station(km, w, t0, pos, vel, tau, s)
        p_ref, R_ref = station_pose(km, q, s)
        v_ref, om_ref = station_twist(km, q, qd, s)

        # second-order jet of the trajectory: q(t) = q + t qd + t^2/2 qdd, qd(t) = qd + t qdd
        def twist_at(t):
            return station_twist(km, q + t * qd + 0.5 * t * t * acc, qd + t * acc, s)

        def central(h):
            (vp, wp), (vm, wm) = twist_at(h), twist_at(-h)
            return (vp - vm) / (2 * h), (wp - wm) / (2 * h)

        h = 1e-6
        a1, al1 = central(h)
        a2, al2 = central(2 * h)
        a_ref = (4 * a1 - a2) / 3          # Richardson: O(h^4)
        al_ref = (4 * al1 - al2) / 3
        sf_ref = a_ref - km.gravity

        sv = max(np.linalg.norm(v_ref), 1e-3)
        sw = max(np.linalg.norm(om_ref), 1e-3)
        sa = max(np.linalg.norm(sf_ref), 1.0)
        sal = max(np.linalg.norm(al_ref), 1.0)
        errs = {
            "position": np.linalg.norm(d["position"] - p_ref),
            "rotation": np.abs(d["rotation"] - R_ref).max(),
            "velocity": np.linalg.norm(d["velocity"] - v_ref) / sv,
            "angular_velocity": np.linalg.norm(d["angular_velocity"] - om_ref) / sw,
            "specific_force": np.linalg.norm(d["specific_force"] - sf_ref) / sa,
            "angular_acceleration": np.linalg.norm(d["angular_acceleration"] - al_ref) / sal,
        }
        for key, e in errs.items():
            worst[key] = max(worst.get(key, 0.0), e)
    print(f"\n[{chain} seed {seed}] " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
    assert worst["position"] < 1e-13 and worst["rotation"] < 1e-13
    assert worst["velocity"] < 1e-12 and worst["angular_velocity"] < 1e-12
    assert worst["specific_force"] < 1e-9
    assert worst["angular_acceleration"] < 1e-9


def rk4_state_at(km, w, t0, pos, vel, tau, dt, nsub):
    p, v = pos.copy(), vel.copy()
    assert integrate.advance(km.mi, km.mf, w.w, t0, p, v, tau, dt, nsub, METHOD_RK4)
    return p, v


@pytest.mark.parametrize("seed", range(3))
def test_station_state_against_true_trajectory(seed):
    """Central differences in time of the station pose along the integrated trajectory."""
    rng = np.random.default_rng(2100 + seed)
    model = add_stations(random_flexible_chain(rng, 3, prescribed=seed == 1, elastic_joint=seed == 2,
                                               damping=0.01), rng)
    asm = assemble(model)
    km, lay = asm.km, asm.layout
    w = make_work(km)
    pos, vel = random_state(rng, lay.nq, lay.n_joints, asm.pos0, eta_scale=0.01)
    vel[lay.n_joints:] *= 10.0
    tau = rng.normal(size=lay.n_joints) * 3.0
    t0 = 0.4
    h = 5e-6
    worst = {}
    for s in range(len(lay.station_names)):
        d, _, q, qd = kernel_station(km, w, t0, pos, vel, tau, s)
        poses = {}
        for j in (-2, -1, 1, 2):
            p, _ = rk4_state_at(km, w, t0, q, qd, tau, j * h, 8)
            poses[j] = station_pose(km, p, s)
        poses[0] = station_pose(km, q, s)
        P = {j: poses[j][0] for j in poses}
        R = {j: poses[j][1] for j in poses}
        # 4th-order central differences
        v = (-P[2] + 8 * P[1] - 8 * P[-1] + P[-2]) / (12 * h)
        a = (-P[2] + 16 * P[1] - 30 * P[0] + 16 * P[-1] - P[-2]) / (12 * h * h)
        Rd = (-R[2] + 8 * R[1] - 8 * R[-1] + R[-2]) / (12 * h)
        Rdd = (-R[2] + 16 * R[1] - 30 * R[0] + 16 * R[-1] - R[-2]) / (12 * h * h)
        W = Rd @ R[0].T
        A = Rdd @ R[0].T      # skew(alpha) + skew(omega)^2 (symmetric part)
        om = vee(0.5 * (W - W.T))
        al = vee(0.5 * (A - A.T))
        sf = a - km.gravity
        errs = {
            "velocity": np.linalg.norm(d["velocity"] - v) / max(np.linalg.norm(v), 1e-3),
            "angular_velocity": np.linalg.norm(d["angular_velocity"] - om) / max(np.linalg.norm(om), 1e-3),
            "specific_force": np.linalg.norm(d["specific_force"] - sf) / max(np.linalg.norm(sf), 1.0),
            "angular_acceleration": np.linalg.norm(d["angular_acceleration"] - al) / max(np.linalg.norm(al), 1.0),
        }
        for key, e in errs.items():
            worst[key] = max(worst.get(key, 0.0), e)
    print(f"\n[trajectory seed {seed}] " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
    assert worst["velocity"] < 1e-8 and worst["angular_velocity"] < 1e-8
    assert worst["specific_force"] < 1e-6 and worst["angular_acceleration"] < 1e-6


# ---------------------------------------------------------------- gravity sign


def locked_rigid_body(q0=0.7):
    joint = md.Joint("j0", axis=np.array([0.0, 1.0, 0.0]), q0_rad=q0, drive=md.DRIVE_PRESCRIBED,
                     profile=md.Profile(md.PROFILE_CONSTANT))
    body = md.Body("b0", md.BASE, joint, rigid=md.RigidInertia(1.5, np.array([0.3, 0.0, 0.0]), np.eye(3) * 0.01))
    return md.Model("locked", [body], stations=[md.Station("tip", "b0", 0.0, np.array([0.6, 0.1, -0.2]))])


def test_specific_force_at_rest_on_locked_joint_is_plus_g_up():
    plant = Plant(locked_rigid_body())
    plant.evaluate()
    st = plant.station("tip")
    np.testing.assert_allclose(st["specific_force"], [0.0, 0.0, 9.81], atol=1e-12)
    np.testing.assert_allclose(st["velocity"], 0.0, atol=1e-15)
    np.testing.assert_allclose(st["angular_acceleration"], 0.0, atol=1e-12)


def test_specific_force_at_static_deflection_is_plus_g_up():
    """A flexible arm with locked joints at its gravity equilibrium: every station reads +g z."""
    model = load_model("configs/ella.toml")
    for b in model.bodies:
        b.joint.drive = md.DRIVE_PRESCRIBED
        b.joint.profile = md.Profile(md.PROFILE_CONSTANT)
    model.bodies[1].joint.q0_rad = -0.4
    model.bodies[2].joint.q0_rad = 0.9
    plant = Plant(model)
    plant.equilibrium_eta()
    assert np.abs(plant.eta("link2")).max() > 1e-4           # it does sag
    for name in plant.layout.station_names:
        np.testing.assert_allclose(plant.station(name)["specific_force"], [0.0, 0.0, 9.81], atol=1e-7)


# ---------------------------------------------------------------- joint reaction wrench


def pendulum(q0, qd0=0.0):
    """2 kg point-like bob 0.5 m along body x, hinge about body y (= world y), gravity -z."""
    joint = md.Joint("hinge", axis=np.array([0.0, 1.0, 0.0]), q0_rad=q0, qd0_rad_s=qd0,
                     rotor_inertia_kg_m2=1e-4, gear_ratio=10.0)
    body = md.Body("bob", md.BASE, joint, rigid=md.RigidInertia(2.0, np.array([0.5, 0.0, 0.0]), np.eye(3) * 1e-3))
    return md.Model("pendulum", [body])


def test_joint_wrench_of_pendulum_held_at_rest():
    m, l, g, q = 2.0, 0.5, 9.81, 0.3
    plant = Plant(pendulum(q))
    # the bob is at l (cos q, 0, -sin q) in the world; gravity moment about +y is +m g l cos q
    tau = -m * g * l * np.cos(q)
    plant.tau[:] = tau
    acc = plant.evaluate()
    assert abs(acc[0]) < 1e-12
    # child axes = Ry(q): world z in child axes is (-sin q, 0, cos q)
    force = m * g * np.array([-np.sin(q), 0.0, np.cos(q)])   # the parent carries the weight
    moment = np.cross([l, 0.0, 0.0], force)                  # = (0, -m g l cos q, 0) = (0, tau, 0)
    np.testing.assert_allclose(moment, [0.0, tau, 0.0], atol=1e-12)
    np.testing.assert_allclose(plant.joint_wrench("hinge"), np.r_[moment, force], rtol=0, atol=1e-12)


def test_joint_wrench_of_swinging_pendulum():
    """Moving: force = m (a_com - g), moment about the hinge = r x F + I alpha (planar)."""
    m, l, g, q, qd = 2.0, 0.5, 9.81, -0.8, 2.5
    Jc = 1e-3
    plant = Plant(pendulum(q, qd))
    tau = 1.7
    plant.tau[:] = tau
    qdd = plant.evaluate()[0]
    arm = 10.0 ** 2 * 1e-4
    # hand solution of the planar pendulum (rotation about +y lowers +x): (m l^2 + Jc + arm) qdd = tau + m g l cos q
    np.testing.assert_allclose(qdd, (tau + m * g * l * np.cos(q)) / (m * l * l + Jc + arm), rtol=1e-12)
    c, s = np.cos(q), np.sin(q)
    # in child axes: the bob sits at (l, 0, 0); centripetal -l qd^2 x, tangential (about +y) -l qdd z
    a_com = np.array([-l * qd * qd, 0.0, -l * qdd])
    g_child = -g * np.array([-s, 0.0, c])
    force = m * (a_com - g_child)
    moment = np.cross([l, 0.0, 0.0], force) + np.array([0.0, Jc * qdd, 0.0])
    np.testing.assert_allclose(plant.joint_wrench("hinge"), np.r_[moment, force], rtol=0, atol=1e-12)
    # the axis component is the torque the joint transmits (drive minus the armature's share)
    np.testing.assert_allclose(plant.joint_wrench("hinge")[1], tau - arm * qdd, atol=1e-12)
