"""The O(n) articulated-body algorithm against the composite-body oracle and Pinocchio."""
import numpy as np
import pytest

from hil.model.assembly import assemble, make_work
from hil.model.config import load_model
from hil.kernels.aba import forward_dynamics
from hil.kernels.oracle import forward_dynamics_dense

from chains import pinocchio_model, random_flexible_chain, random_rigid_chain, random_state, rigid_equivalent


def solve_both(model, pos, vel, tau, cK=0.0, cD=0.0, t=0.3):
    asm = assemble(model)
    w = make_work(asm.km)
    a1 = np.zeros(asm.layout.nq)
    a2 = np.zeros(asm.layout.nq)
    assert forward_dynamics(asm.km.mi, asm.km.mf, w.w, t, pos, vel, tau, pos, vel, cK, cD, a1)
    assert forward_dynamics_dense(asm.km.mi, asm.km.mf, w.w, t, pos, vel, tau, pos, vel, cK, cD, a2)
    return a1, a2


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("variant", ["plain", "zero_order", "prescribed", "elastic_joint", "axial_damped"])
def test_aba_equals_oracle_on_random_flexible_chains(seed, variant):
    rng = np.random.default_rng(seed)
    kw = {"plain": {}, "zero_order": {"foreshortening": False}, "prescribed": {"prescribed": True},
          "elastic_joint": {"elastic_joint": True}, "axial_damped": {"axial": True, "damping": 0.02}}[variant]
    model = random_flexible_chain(rng, 3 + seed % 3, **kw)
    asm = assemble(model)
    pos, vel = random_state(rng, asm.layout.nq, asm.layout.n_joints, asm.pos0)
    tau = rng.normal(size=asm.layout.n_joints) * 5
    cK, cD = (2.5e-7, 5e-4) if seed % 2 else (0.0, 0.0)
    a_aba, a_dense = solve_both(model, pos, vel, tau, cK, cD)
    assert np.all(np.isfinite(a_aba))
    np.testing.assert_allclose(a_aba, a_dense, rtol=0, atol=1e-10 * np.abs(a_dense).max())


@pytest.mark.parametrize("n", [3, 7, 30])
def test_rigid_limit_equals_pinocchio_aba(n):
    import pinocchio as pin

    rng = np.random.default_rng(100 + n)
    for _ in range(3):
        model = random_rigid_chain(rng, n)
        asm = assemble(model)
        pos = asm.pos0.copy()
        vel = rng.normal(size=n)
        tau = rng.normal(size=n) * 3
        a_aba, a_dense = solve_both(model, pos, vel, tau)
        pm = pinocchio_model(model)
        ref = pin.aba(pm, pm.createData(), pos, vel, tau)
        scale = np.abs(ref).max()
        np.testing.assert_allclose(a_aba, ref, rtol=0, atol=1e-9 * scale)
        np.testing.assert_allclose(a_dense, ref, rtol=0, atol=1e-9 * scale)


def test_ella_rigid_equivalent_under_gravity_equals_pinocchio():
    import pinocchio as pin

    model = rigid_equivalent(load_model("configs/ella.toml"))
    for body in model.bodies:   # Pinocchio's ABA has no joint friction
        body.joint.viscous_N_m_s_rad = 0.0
        body.joint.coulomb_N_m = 0.0
    rng = np.random.default_rng(7)
    pm = pinocchio_model(model)
    for _ in range(5):
        pos = rng.uniform(-1.5, 1.5, 3)
        vel = rng.normal(size=3)
        tau = rng.normal(size=3) * 20
        a_aba, _ = solve_both(model, pos, vel, tau)
        ref = pin.aba(pm, pm.createData(), pos, vel, tau)
        np.testing.assert_allclose(a_aba, ref, rtol=0, atol=1e-9 * np.abs(ref).max())


def test_friction_enters_as_joint_torque():
    """Viscous and Coulomb friction act exactly as an opposing drive torque."""
    rng = np.random.default_rng(3)
    model = random_rigid_chain(rng, 4)
    for j in model.bodies:
        j.joint.viscous_N_m_s_rad = 0.7
        j.joint.coulomb_N_m = 0.4
        j.joint.coulomb_smoothing_rad_s = 0.1
    asm = assemble(model)
    vel = rng.normal(size=4)
    tau = rng.normal(size=4)
    a_fric, _ = solve_both(model, asm.pos0, vel, tau)
    for j in model.bodies:
        j.joint.viscous_N_m_s_rad = 0.0
        j.joint.coulomb_N_m = 0.0
    a_equiv, _ = solve_both(model, asm.pos0, vel, tau - 0.7 * vel - 0.4 * np.tanh(vel / 0.1))
    np.testing.assert_allclose(a_fric, a_equiv, atol=1e-12)


@pytest.mark.parametrize("elastic_joint", [False, True])
def test_implicit_dampers_solve_with_their_slopes_on_the_inertia(elastic_joint):
    """With cD > 0 each joint's (and Spong rotor's) friction is taken at the reference rates with cD times
    its slope on the inertia its drive meets, and the modal damping as cD D on the modal mass: the
    accelerations solve (M + cD C) a = M a0, a0 the explicit accelerations at the same state, M the dense
    mass matrix, C the dampers' slopes (the friction's by central differences of the friction law), near
    rest where the smoothed Coulomb and Stribeck friction is steep and curved."""
    from hil.kernels.joints import joint_friction
    from hil.model.linearize import free_coordinates, mass_matrix_at

    rng = np.random.default_rng(3)
    model = random_flexible_chain(rng, 3, damping=0.02, elastic_joint=elastic_joint)
    for b in model.bodies:
        b.joint.coulomb_N_m, b.joint.coulomb_smoothing_rad_s = 2.0, 0.05
        b.joint.stribeck_N_m, b.joint.stribeck_velocity_rad_s = 1.0, 0.3
    asm = assemble(model)
    km, lay = asm.km, asm.layout
    pos, vel = random_state(rng, lay.nq, lay.n_joints, asm.pos0)
    vel *= 0.02
    tau = rng.normal(size=lay.n_joints) * 5
    a0, a1 = np.zeros(lay.nq), np.zeros(lay.nq)
    w = make_work(km).w
    cD = 5e-3
    assert forward_dynamics(km.mi, km.mf, w, 0.0, pos, vel, tau, pos, vel, 0.0, 0.0, a0)
    assert forward_dynamics(km.mi, km.mf, w, 0.0, pos, vel, tau, pos, vel, 0.0, cD, a1)
    C = np.zeros((lay.nq, lay.nq))
    eps = 1e-7
    for k in range(lay.n_joints):
        i = lay.motor_index(k) if km.mot[k] >= 0 else k
        slope = (joint_friction(km.mi, km.mf, k, vel[i] + eps)[0] - joint_friction(km.mi, km.mf, k, vel[i] - eps)[0]) / (2 * eps)
        assert slope > 0
        C[i, i] = slope
        n = int(km.nm[k])
        a = lay.n_joints + lay.mode_offsets[k]
        C[a:a + n, a:a + n] = km.Dmod[k, :n, :n]
    free = free_coordinates(asm)
    M = mass_matrix_at(asm, pos)[np.ix_(free, free)]
    expected = np.linalg.solve(M + cD * C[np.ix_(free, free)], M @ a0[free])
    print(f"\nimplicit dampers: |a1 - a0| {np.abs(a1 - a0).max():.3e}, against the direct solve "
          f"{np.abs(a1[free] - expected).max():.3e}")
    assert np.abs(a1 - a0).max() > 1e-2 * np.abs(a0).max()          # the slopes matter here
    np.testing.assert_allclose(a1[free], expected, rtol=0, atol=1e-6 * np.abs(expected).max())
