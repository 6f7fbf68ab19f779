"""Fixed-step integrators and the integrator plan's stability rules.

* convergence orders against a fine RK4 reference on flexible chains: RK4 ~4, IMEX and fitted
  midpoint ~2 (all converge to the same solution);
* stability: with a > 1 kHz mode at dt = 1 ms and 1 substep RK4 blows up (SimulationError),
  the IMEX and fitted midpoint schemes stay bounded;
* forward Euler warns;
* plan_integrator: RK4 substeps keep omega_max h within safety * 2 sqrt(2) (and are the fewest that
  do), the midpoint schemes' substeps resolve only the joint springs, user-pinned method / substeps win.
The automatic plan's choice by accuracy: tests/test_mode_accuracy.py.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from hil.model import spec as md
from hil.model.assembly import assemble
from hil.kernels.layout import JP_COUL_VS
from hil.model.config import load_model
from hil.model.linearize import friction_rates
from hil.dynamics.plant import ForwardEulerWarning, Plant, SimulationError, plan_integrator

from chains import random_flexible_chain

RK4_BOUND = 2.0 * math.sqrt(2.0)
RK4_REAL_BOUND = 2.785


def run(model, method, substeps, duration, rng_seed=0):
    """Final state after `duration` from the model's initial state with random joint rates."""
    plant = Plant(model, method=method, substeps=substeps)
    nj = plant.layout.n_joints
    plant.vel[:nj] = np.random.default_rng(rng_seed).normal(size=nj) * 2.0
    plant.evaluate()
    for _ in range(int(round(duration / plant.dt))):
        plant.step()
    return plant.pos.copy()


CHAINS = {
    "chain3_damped": lambda: random_flexible_chain(np.random.default_rng(7), 3, damping=0.01),
    "chain4_spong": lambda: random_flexible_chain(np.random.default_rng(8), 4, damping=0.01, elastic_joint=True),
}

DURATION = 0.2


@pytest.fixture(scope="module")
def references():
    """RK4 with 64 substeps per 1 ms step."""
    return {name: run(make(), "rk4", 64, DURATION) for name, make in CHAINS.items()}


def observed_orders(errors):
    e = np.asarray(errors)
    return np.log2(e[:-1] / e[1:])


# measured max errors vs the reference: chain3 at 2/4/8 substeps 1.2e-7, 7.5e-9, 4.7e-10 (orders 3.99, 4.00);
# chain4 at 4/8/16 substeps 1.7e-8, 1.2e-9, 6.7e-11 (orders 3.84, 4.19)
@pytest.mark.parametrize("chain", list(CHAINS))
def test_rk4_converges_with_order_four(chain, references):
    ns = (2, 4, 8) if chain == "chain3_damped" else (4, 8, 16)
    errs = [np.abs(run(CHAINS[chain](), "rk4", n, DURATION) - references[chain]).max() for n in ns]
    orders = observed_orders(errs)
    print(f"\n[{chain}] RK4 substeps {ns}: max errors {np.array(errs)}, orders {orders}")
    assert np.all(orders > 3.7) and np.all(orders < 4.3)


# measured errors at 4/8/16 substeps: IMEX chain3 7.9e-6, 2.0e-6, 5.0e-7 (orders 2.00, 2.00), chain4 4.4e-6,
# 1.1e-6, 2.8e-7 (2.00, 2.00); fitted midpoint chain3 7.8e-8, 1.9e-8, 4.9e-9 (2.00, 2.00), chain4 1.3e-6,
# 2.7e-7, 6.2e-8 (2.31, 2.14: the fit also removes the modes' leading phase error, which dominates at
# 4 substeps, so the order approaches 2 from above)
@pytest.mark.parametrize("method", ["imex_midpoint", "fitted_midpoint"])
@pytest.mark.parametrize("chain", list(CHAINS))
def test_midpoint_schemes_converge_with_order_two(chain, method, references):
    ns = (4, 8, 16)
    errs = [np.abs(run(CHAINS[chain](), method, n, DURATION) - references[chain]).max() for n in ns]
    orders = observed_orders(errs)
    print(f"\n[{chain}] {method} substeps {ns}: max errors {np.array(errs)}, orders {orders}")
    assert np.all(orders > 1.8) and np.all(orders < (2.3 if method == "imex_midpoint" else 2.4))


# ---------------------------------------------------------------- stability


def stiff_axial_chain():
    """Three bodies with axial modes (top whole-arm frequency ~1.2 kHz), undamped, no friction."""
    model = random_flexible_chain(np.random.default_rng(1), 3, axial=True)
    for b in model.bodies:
        b.joint.viscous_N_m_s_rad = 0.0
        b.joint.coulomb_N_m = 0.0
    return model


@pytest.mark.parametrize("method", ["imex_midpoint", "fitted_midpoint"])
def test_midpoint_schemes_bounded_where_rk4_blows_up(method):
    model = stiff_axial_chain()
    rk4 = Plant(model, method="rk4", substeps=1)
    omega_h = 2 * np.pi * rk4.plan.f_max_hz * rk4.dt
    assert rk4.plan.f_max_hz > 1000.0 and omega_h > RK4_BOUND
    with pytest.raises(SimulationError):
        for _ in range(2000):
            rk4.step()
    assert rk4.t < 0.5   # it goes quickly

    def eta_range_and_energy(plant):
        nj = plant.layout.n_joints
        E0 = sum(plant.energy())
        eta_max = 0.0
        for _ in range(2000):
            plant.step()
            eta_max = max(eta_max, np.abs(plant.pos[nj:]).max())
        return eta_max, E0, sum(plant.energy()), plant.pos.copy()

    eta_imex, E0, E1, pos_imex = eta_range_and_energy(Plant(model, method=method, substeps=1))
    eta_rk4, _, E1_rk4, pos_rk4 = eta_range_and_energy(Plant(model, method="rk4"))   # stable RK4 substeps
    print(f"\nomega_max h = {omega_h:.1f}: RK4 (1 substep) failed at t = {rk4.t:.3f} s; after 2 s max |eta| "
          f"{method} x1 {eta_imex:.3e} vs RK4 {eta_rk4:.3e}; energy {E0:.5f} -> {method} {E1:.5f}, "
          f"RK4 {E1_rk4:.5f} J; joint angles differ by {np.abs(pos_imex[:3] - pos_rk4[:3]).max():.1e} rad")
    assert np.all(np.isfinite(pos_imex))
    assert eta_imex < 1.2 * eta_rk4
    assert abs(E1 - E0) < 1e-4 * abs(E0)


def heavy_friction_joint() -> md.Model:
    """One rigid body on a vertical axis (J = 0.37 kg m^2 about it), no gravity, 10 N m of Coulomb friction
    smoothed at 1 mrad/s, released at 50 mrad/s."""
    joint = md.Joint("j", axis=np.array([0.0, 0.0, 1.0]), qd0_rad_s=0.05, coulomb_N_m=10.0,
                     coulomb_smoothing_rad_s=1e-3)
    body = md.Body("b", md.BASE, joint, rigid=md.RigidInertia(1.0, np.zeros(3), np.diag([1.0, 1.0, 0.37])))
    return md.Model("heavy_friction", [body], gravity_m_s2=np.zeros(3))


@pytest.mark.parametrize("method", ["fitted_midpoint", "imex_midpoint"])
def test_a_joint_sliding_to_a_stop_under_heavy_friction_settles_instead_of_chattering(method):
    """(F_c h) / (J v_s) = 27 at one 1 ms substep: beyond what the linearly implicit friction keeps (about
    18, hil.kernels.joints), so the plan widens the smoothing to its floor (FRICTION_BOUND x safety: 7.5) and
    the joint comes to rest: after 0.1 s its rate (above 1e-9 rad/s) changes sign at most twice and stays
    below 1e-4 rad/s.
    With the configured 1 mrad/s written back into the kernel it chatters with period two for good."""
    runs = {}
    for widened in (True, False):
        plant = Plant(heavy_friction_joint(), method=method, substeps=1)
        if not widened:
            plant.km.jpar[:, JP_COUL_VS] = 1e-3
        smoothing = plant.coulomb_smoothing[0]
        qd = np.zeros(500)
        for s in range(500):
            plant.step()
            qd[s] = plant.vel[0]
        runs[widened] = (smoothing, qd[100:])
    (v_s, settled), (_, chatter) = runs[True], runs[False]
    moving = np.abs(settled) > 1e-9
    flips = np.count_nonzero((np.signbit(settled[1:]) != np.signbit(settled[:-1])) & moving[1:] & moving[:-1])
    print(f"\n{method}: v_s {v_s * 1e3:.2f} mrad/s: max |qd| {np.abs(settled).max():.1e}, {flips} sign changes; "
          f"configured 1 mrad/s: max |qd| {np.abs(chatter).max():.1e}")
    assert v_s == pytest.approx(10.0 * 1e-3 / (0.5 * 15.0 * 0.37), rel=1e-9)
    assert flips <= 2 and np.abs(settled).max() < 1e-4
    assert np.abs(chatter).max() > 1e-3 and np.all(np.signbit(chatter[1:]) != np.signbit(chatter[:-1]))


def test_forward_euler_warns():
    model = load_model("configs/ella.toml")
    with pytest.warns(ForwardEulerWarning):
        plant = Plant(model, method="euler")
    assert plant.plan.method == "euler"
    model.integrator.method = "euler"
    with pytest.warns(ForwardEulerWarning):
        Plant(model)


def test_no_warning_for_the_other_methods():
    model = load_model("configs/ella.toml")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ForwardEulerWarning)
        for method in ("rk4", "imex_midpoint", "fitted_midpoint", "auto"):
            Plant(model, method=method)


# ---------------------------------------------------------------- automatic plan


@pytest.mark.parametrize("make", [lambda: load_model("configs/ella.toml"), lambda: load_model("configs/seed001_arm.toml"),
                                  stiff_axial_chain,
                                  lambda: random_flexible_chain(np.random.default_rng(8), 4, elastic_joint=True)])
def test_rk4_substeps_keep_omega_h_and_the_friction_within_safety_bounds(make):
    asm = assemble(make())
    plan = plan_integrator(asm, "rk4")
    cfg = asm.model.integrator
    assert plan.method == "rk4" and plan.dt_s == cfg.dt_s
    omega = 2 * np.pi * plan.f_max_hz
    rate = friction_rates(asm).max(initial=0.0)      # the stiffest joint friction's damping rate at rest
    h = cfg.dt_s / plan.substeps
    print(f"\n{asm.model.name}: {plan.describe()}, omega h = {omega * h:.3f} <= {cfg.safety * RK4_BOUND:.3f}, "
          f"friction rate h = {rate * h:.3f} <= {cfg.safety * RK4_REAL_BOUND:.3f}")
    assert omega * h <= cfg.safety * RK4_BOUND and rate * h <= cfg.safety * RK4_REAL_BOUND
    if plan.substeps > 1:   # the fewest that satisfy the bounds
        h_fewer = cfg.dt_s / (plan.substeps - 1)
        assert omega * h_fewer > cfg.safety * RK4_BOUND or rate * h_fewer > cfg.safety * RK4_REAL_BOUND


@pytest.mark.parametrize("method", ["imex_midpoint", "fitted_midpoint"])
def test_midpoint_substeps_resolve_the_joint_springs(method):
    model = random_flexible_chain(np.random.default_rng(8), 4, elastic_joint=True)
    model.bodies[2].joint.elasticity.stiffness_N_m_rad = 5e5     # rotor on its spring ~1 kHz
    asm = assemble(model)
    plan = plan_integrator(asm, method)
    km = asm.km
    f_rotor = math.sqrt(km.kspring[2] / km.mot_inertia[2]) / (2 * math.pi)
    assert plan.f_explicit_hz >= f_rotor * (1 - 1e-12)           # at least the rotor-on-spring frequency
    cfg = asm.model.integrator
    assert 2 * np.pi * plan.f_explicit_hz * cfg.dt_s / plan.substeps <= cfg.safety * 2.0
    assert plan.substeps > 1


def spong_beam(stiffness, damping):
    """One flexible link (2 bending modes, 1 kg tip mass) behind a Spong joint, rotor n^2 J_r = 0.01."""
    beam = md.Beam(length_m=0.8, E_Pa=2.1e11, G_Pa=8.1e10, rho_kg_m3=7800.0, area_m2=2e-4, Iy_m4=1e-8, Iz_m4=1.7e-8,
                   torsion_constant_m4=2e-8, n_bending_y=2, n_bending_z=0)
    joint = md.Joint("j", axis=np.array([0.0, 0.0, 1.0]), rotor_inertia_kg_m2=1e-4, gear_ratio=10.0,
                     elasticity=md.JointElasticity(stiffness, damping))
    body = md.Body("link", md.BASE, joint, beam=beam, attachments=[md.Attachment("tip", 0.8, 1.0)])
    return md.Model("spong_beam", [body], gravity_m_s2=np.zeros(3))


@pytest.mark.parametrize("method", ["imex_midpoint", "fitted_midpoint"])
def test_midpoint_plans_are_stable_for_a_stiff_damped_spong_joint_on_a_flexible_link(method):
    plant = Plant(spong_beam(1e6, 2.0), method=method)
    plant.vel[:] = 1.0
    plant.pos[1] = 1e-3
    plant.evaluate()
    E0 = sum(plant.energy())
    for _ in range(1000):
        plant.step()
    E1 = sum(plant.energy())
    print(f"\n{plant.plan.describe()}: passive plant energy {E0:.3f} -> {E1:.3g} J")
    assert E1 <= E0 * (1 + 1e-6)


def test_user_pinned_method_and_substeps_are_respected():
    model = stiff_axial_chain()                                  # RK4's stability bound: 6 substeps
    assert plan_integrator(assemble(model), "rk4").substeps == 6
    p = Plant(model, method="rk4", substeps=2)                   # pinned, even though unstable
    assert (p.plan.method, p.plan.substeps) == ("rk4", 2)
    p = Plant(model, method="imex_midpoint", substeps=3)
    assert (p.plan.method, p.plan.substeps) == ("imex_midpoint", 3)
    model.integrator.method = "imex_midpoint"
    model.integrator.substeps = 4
    p = Plant(model)
    assert (p.plan.method, p.plan.substeps) == ("imex_midpoint", 4)
    p = Plant(model, method="rk4")                               # argument beats the config
    assert (p.plan.method, p.plan.substeps) == ("rk4", 4)
    model.integrator.substeps = 0
    p = Plant(model, method="rk4")
    assert (p.plan.method, p.plan.substeps) == ("rk4", 6)
    with pytest.raises(ValueError):
        plan_integrator(assemble(model), "leapfrog")
