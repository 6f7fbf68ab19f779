"""The screw-theoretic DAE kernel (hil.kernels.screw_dae, seed 000's formulation) against the
articulated-body kernel and against a mass matrix built from independent kinematics.

Agreement: generalized accelerations to 1e-9 relative and the DAE's interaction wrenches equal to
the ABA's reaction wrenches (Plant.joint_wrench: the parent's wrench on the child, child frame) to
1e-9 relative, on ELLA and on random 3-D chains of rigid and flexible links (prescribed joints,
Spong joints, axial modes, the zero-order model, the implicit integrator's added mass). The
direct check needs neither kernel's recursion: M_direct qdd + dV/dq = [tau; 0] at rest with the
elastic forces removed, M_direct by polarisation of the node kinetic energy
(tests/test_mass_matrix_direct.py).
"""
from __future__ import annotations

import numpy as np
import pytest

from hil.dynamics.plant import Plant
from hil.kernels.aba import forward_dynamics as aba_forward_dynamics
from hil.kernels.layout import DAE_NODE0, DAE_NODE1
from hil.kernels.screw_dae import forward_dynamics as dae_forward_dynamics
from hil.model.assembly import assemble, make_work
from hil.model.config import load_model

from chains import random_flexible_chain, random_rigid_chain, random_state
from test_mass_matrix_direct import gravity_forces_direct, mass_matrix_direct

TOL = 1e-9

CHAINS = {
    "ella": lambda rng: load_model("configs/ella.toml"),
    "rigid": lambda rng: random_rigid_chain(rng, 7),
    "flexible": lambda rng: random_flexible_chain(rng, 6),
    "prescribed": lambda rng: random_flexible_chain(rng, 5, prescribed=True, damping=0.02),
    "spong": lambda rng: random_flexible_chain(rng, 5, elastic_joint=True, damping=0.01),
    "axial": lambda rng: random_flexible_chain(rng, 5, axial=True),
    "zero_order": lambda rng: random_flexible_chain(rng, 4, foreshortening=False),
}


def solve_both(asm, pos, vel, tau, cK=0.0, cD=0.0, t=0.3):
    """(acc, wrenches) of the ABA and of the DAE at one state."""
    km, nq, nb = asm.km, asm.layout.nq, asm.layout.n_joints
    w = make_work(km)
    a_aba, a_dae = np.zeros(nq), np.zeros(nq)
    assert aba_forward_dynamics(km.mi, km.mf, w.w, t, pos, vel, tau, pos, vel, cK, cD, a_aba)
    assert dae_forward_dynamics(km.mi, km.mf, w.w, t, pos, vel, tau, pos, vel, cK, cD, a_dae)
    return (a_aba, w.fj[:nb].copy()), (a_dae, w.dae_wrench[:nb].copy())


def rel(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("chain", list(CHAINS))
def test_accelerations_and_wrenches_equal_the_aba(chain, seed):
    rng = np.random.default_rng(70 + seed)
    asm = assemble(CHAINS[chain](rng))
    lay = asm.layout
    pos, vel = random_state(rng, lay.nq, lay.n_joints, asm.pos0)
    tau = rng.normal(size=lay.n_joints) * 5.0
    cK, cD = (2.5e-7, 5e-4) if seed == 2 else (0.0, 0.0)      # the IMEX scheme's added modal mass
    (a1, f1), (a2, f2) = solve_both(asm, pos, vel, tau, cK, cD)
    print(f"\n[{chain} {seed}] nq = {lay.nq}: acc rel {rel(a2, a1):.1e}, wrench rel {rel(f2, f1):.1e}")
    assert rel(a2, a1) < TOL
    assert rel(f2, f1) < TOL


def test_plants_of_both_formulations_step_alike():
    """ELLA for 0.3 s under torques, output stations on, the automatic plan (the fitted midpoint, whose
    implicit blocks both kernels take): states, station outputs (incl. specific force) and the wrenches
    of Plant.joint_wrench agree."""
    model = load_model("configs/ella.toml")
    plants = [Plant(model, formulation=f) for f in ("aba", "screw-dae")]
    assert plants[0].plan.method == plants[1].plan.method == "fitted_midpoint"
    outs = [p.output_stations(np.array([0, 1])) for p in plants]
    tau = np.array([4.0, -95.0, 3.0])
    for _ in range(300):
        for p in plants:
            p.step(tau)
    aba, dae = plants
    assert rel(dae.pos, aba.pos) < 1e-12
    assert rel(outs[1], outs[0]) < 1e-11
    for j in aba.layout.joint_names:
        assert rel(dae.joint_wrench(j), aba.joint_wrench(j)) < TOL
    assert rel(dae.joint_torques, aba.joint_torques) < TOL


@pytest.mark.parametrize("case", ["ella", "flexible", "axial", "zero_order"])
def test_dae_solves_the_direct_mass_matrix(case):
    """At rest, elastic forces removed: M_direct qdd + dV/dq = [tau; 0], M_direct and the gravity
    forces from independent kinematics (no recursion of either kernel)."""
    rng = np.random.default_rng(5)
    asm = assemble(CHAINS[case](rng))
    km, lay = asm.km, asm.layout
    pos, _ = random_state(rng, lay.nq, lay.n_joints, asm.pos0, eta_scale=0.02)
    zero = np.zeros(lay.nq)
    tau = rng.normal(size=lay.n_joints) * 3.0
    acc = np.zeros(lay.nq)
    assert dae_forward_dynamics(km.mi, km.mf, make_work(km).w, 0.0, pos, zero, tau, zero, zero, 0.0, 0.0, acc)
    M = mass_matrix_direct(km, pos)
    rhs = np.zeros(lay.nq)
    rhs[: lay.n_joints] = tau
    residual = M @ acc + gravity_forces_direct(km, pos) - rhs
    print(f"\n[{case}] |M qdd + g - tau| / |tau| = {np.max(np.abs(residual)) / np.max(np.abs(tau)):.1e}")
    assert np.max(np.abs(residual)) < 1e-9 * max(np.max(np.abs(M @ acc)), np.max(np.abs(tau)))


def test_a_wrong_link_inertia_breaks_the_agreement():
    """The agreement checks can fail: a DAE whose copy of one node mass is off by 1 % disagrees."""
    rng = np.random.default_rng(3)
    asm = assemble(CHAINS["flexible"](rng))
    lay = asm.layout
    pos, vel = random_state(rng, lay.nq, lay.n_joints, asm.pos0)
    tau = rng.normal(size=lay.n_joints)
    km = asm.km
    w = make_work(km)
    km.dae_node[2, 0] *= 1.01
    a1, a2 = np.zeros(lay.nq), np.zeros(lay.nq)
    aba_forward_dynamics(km.mi, km.mf, w.w, 0.0, pos, vel, tau, pos, vel, 0.0, 0.0, a1)
    dae_forward_dynamics(km.mi, km.mf, w.w, 0.0, pos, vel, tau, pos, vel, 0.0, 0.0, a2)
    assert rel(a2, a1) > 1e3 * TOL
    assert rel(w.dae_wrench[: lay.n_joints], w.fj[: lay.n_joints]) > 1e3 * TOL


def test_a_singular_block_is_reported():
    """A link without mass or inertia leaves its joint acceleration undetermined: the kernel returns
    False instead of dividing by 0."""
    rng = np.random.default_rng(4)
    asm = assemble(random_rigid_chain(rng, 3, armature=False))
    km = asm.km
    b0, b1 = km.dae_body[2, DAE_NODE0], km.dae_body[2, DAE_NODE1]
    km.dae_node[b0:b1] = 0.0
    km.dae_rot[2] = 0.0
    acc = np.zeros(asm.layout.nq)
    ok = dae_forward_dynamics(km.mi, km.mf, make_work(km).w, 0.0, asm.pos0, np.zeros(asm.layout.nq), np.ones(3), asm.pos0,
                              np.zeros(asm.layout.nq), 0.0, 0.0, acc)
    assert not ok


def test_seed000_projection_needs_the_joint_frame():
    """Seed 000 eq. 25-26 as printed: P = diag(I - A A^T, I) on the difference of the two bodies'
    twists in the inertial frame (Ad_oi V). For ELLA's elbow, away from the inertial origin, the
    linear rows of that difference are p x (R s) q_dot, not zero, for a motion the joint allows;
    in the joint's (child's) frame the same projection leaves exactly zero."""
    plant = Plant(load_model("configs/ella.toml"), formulation="screw-dae")
    plant.pos[:3] = [0.3, -0.2, 0.4]
    plant.vel[:] = 0.0
    plant.vel[2] = 1.0                                   # the elbow turns, nothing else moves
    plant.evaluate()
    w = plant.work
    k, s = 2, plant.km.axis[2]
    R, p = w.dae_Rw[k], w.dae_pw[k]
    rel_twist = np.concatenate([s * plant.vel[2], np.zeros(3)])  # V_child - V_station, child frame
    assert np.allclose(projection(s) @ rel_twist, 0.0, atol=1e-15)
    Ad = np.block([[R, np.zeros((3, 3))], [skew(p) @ R, R]])          # eq. 4, frame 2 -> inertial
    A = R @ s
    printed = projection(A) @ Ad @ rel_twist
    assert np.allclose(printed[:3], 0.0, atol=1e-15)
    assert np.allclose(printed[3:], np.cross(p, A) * plant.vel[2])
    assert np.linalg.norm(printed[3:]) > 0.5


def skew(v):
    return np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])


def projection(axis):
    """Seed 000 eq. 26 for one rotation axis."""
    return np.block([[np.eye(3) - np.outer(axis, axis), np.zeros((3, 3))], [np.zeros((3, 3)), np.eye(3)]])


def test_the_dae_follows_a_payload_fault():
    """A payload drop re-assembles the kernel model in place (hil.faults.engine), the DAE's copy of the
    geometry (its dae_* blocks) with it; it agrees with the ABA on the changed arm, in the fault and after
    it clears."""
    from firmware_bridge.wire.messages import BusMap
    from firmware_bridge.wire.signals import CommandInput, SensorOutput
    from hil.faults.engine import Duration, Fault, Trigger
    from hil.runtime.loop import Emulator, RuntimeOptions
    from links import memory_pair

    plant = Plant(load_model("configs/ella.toml"), formulation="screw-dae")
    plant.equilibrium_eta()
    bus = BusMap.load("configs/bus/serial_frame.toml")
    names = plant.layout.joint_names
    emu = Emulator(plant, memory_pair()[0], CommandInput(bus, names), SensorOutput(bus, names),
                   RuntimeOptions(mode="afap", realtime=False, watchdog_s=10.0))
    emu.faults.inject(Fault("drop", "payload_drop", "payload"), Trigger.at(0.005), Duration.lasting(0.01))
    reference = Plant(plant.asm, formulation="aba")   # the same kernel model arrays, changed in place
    masses = []
    for _ in range(25):
        emu.step_once()
        masses.append(plant.km.dae_node[:, 0].sum())
        reference.pos[:], reference.vel[:], reference.tau[:] = plant.pos, plant.vel, plant.tau
        a_dae, a_aba = plant.evaluate().copy(), reference.evaluate()
        assert np.max(np.abs(a_dae - a_aba)) <= TOL * max(1.0, np.max(np.abs(a_aba)))   # at rest: round-off
    assert max(masses) - min(masses) == pytest.approx(2.1)         # dropped, then back
    assert masses[-1] == pytest.approx(masses[0])
