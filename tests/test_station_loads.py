"""External wrenches at output stations (hil.kernels.station_loads, Plant.station_loads) against independent
references: the principle of virtual work with the composite-body mass matrix and the stations' velocity maps;
the screw-theoretic DAE formulation; a clamped cantilever's static deflection under a tip force and a tip moment
(Euler-Bernoulli, closed form); and the energy balance with the wrenches' power."""
from __future__ import annotations

import numpy as np
import pytest

from hil.dynamics.plant import Plant
from hil.kernels import screw_dae
from hil.kernels.aba import forward_dynamics
from hil.kernels.oracle import mass_matrix_at
from hil.kernels.outputs import evaluate, station_state
from hil.model import spec as md
from hil.model.assembly import assemble, make_work

from chains import random_flexible_chain, random_state

L, E, RHO, A = 1.0, 2.1e11, 7800.0, 0.02 ** 2
I = 0.02 ** 4 / 12                                    # noqa: E741 - the second moment of area's usual symbol


def loaded_chain(seed: int) -> md.Model:
    """A random flexible chain with three output stations off the beams' axes (two on one beam)."""
    model = random_flexible_chain(np.random.default_rng(seed), 3)
    model.stations = [md.Station("mid", "b0", 0.4, np.array([0.01, 0.03, -0.02])),
                      md.Station("end", "b0", 0.5, np.array([0.0, -0.02, 0.01])),
                      md.Station("far", "b2", 0.3, np.array([0.02, 0.0, 0.04]))]
    return model


def velocity_map(asm, w, pos: np.ndarray, s: int) -> np.ndarray:
    """6 x nq: the world [angular; linear] velocity of output station s per unit generalized rate, column by
    column from station_state (linear in the rates at fixed coordinates)."""
    nq = asm.layout.nq
    J = np.zeros((6, nq))
    out, acc = np.zeros(24), np.zeros(nq)
    for i in range(nq):
        p, v = pos.copy(), np.zeros(nq)
        v[i] = 1.0
        evaluate(asm.km.mi, asm.km.mf, w.w, 0.3, p, v, np.zeros(asm.layout.n_joints), acc)
        station_state(asm.km.mi, asm.km.mf, w.w, s, out)
        J[:3, i], J[3:, i] = out[15:18], out[12:15]
    return J


@pytest.mark.parametrize("seed", range(4))
def test_the_wrenches_do_the_virtual_work_of_the_stations_velocities(seed):
    """M (qdd with the wrenches - qdd without) = sum over stations of J_s^T [moment; force]: the articulated-body
    passes against the composite-body mass matrix (hil.kernels.oracle) and the velocity maps of station_state,
    and the screw-theoretic DAE against both (measured: 1.7e-12 and 3e-13 relative)."""
    rng = np.random.default_rng(100 + seed)
    asm = assemble(loaded_chain(seed))
    w = make_work(asm.km)
    mi, mf, nq, nj = asm.km.mi, asm.km.mf, asm.layout.nq, asm.layout.n_joints
    pos, vel = random_state(rng, nq, nj, asm.pos0)
    tau = rng.normal(size=nj)
    ns = len(asm.layout.station_names)             # the three and the model's tip
    wrench = rng.normal(size=(ns, 6)) * [2.0, 2.0, 2.0, 20.0, 20.0, 20.0]
    acc0, acc1, acc_dae = np.zeros(nq), np.zeros(nq), np.zeros(nq)
    assert forward_dynamics(mi, mf, w.w, 0.3, pos, vel, tau, pos, vel, 0.0, 0.0, acc0)
    w.f_ext[:] = wrench
    assert forward_dynamics(mi, mf, w.w, 0.3, pos, vel, tau, pos, vel, 0.0, 0.0, acc1)
    assert screw_dae.forward_dynamics(mi, mf, w.w, 0.3, pos, vel, tau, pos, vel, 0.0, 0.0, acc_dae)
    M = np.zeros((nq, nq))
    mass_matrix_at(mi, mf, w.w, 0.3, pos, np.zeros(nq), M)
    generalized = sum(velocity_map(asm, w, pos, s).T @ wrench[s] for s in range(ns))
    assert np.abs(generalized).max() > 1.0
    np.testing.assert_allclose(M @ (acc1 - acc0), generalized, rtol=0, atol=1e-10 * np.abs(generalized).max())
    np.testing.assert_allclose(acc_dae, acc1, rtol=0, atol=1e-10 * np.abs(acc1).max())


def cantilever(n_modes: int = 4) -> md.Model:
    """A steel cantilever along world x, clamped at the base (joint held at 0), no gravity, 30 % modal
    damping, n_modes bending modes per plane."""
    beam = md.Beam(L, E, 8.1e10, RHO, A, I, I, 0.141 * 0.02 ** 4, n_bending_y=n_modes, n_bending_z=n_modes,
                   family="clamped_free", damping_ratio=np.full(2 * n_modes, 0.3))
    joint = md.Joint("j0", np.array([0.0, 1.0, 0.0]), drive=md.DRIVE_PRESCRIBED, profile=md.Profile(md.PROFILE_CONSTANT))
    return md.Model("cantilever", [md.Body("link", md.BASE, joint, beam=beam)], gravity_m_s2=np.zeros(3))


def settled_tip(n_modes: int, formulation: str, wrench: list[float]) -> tuple[Plant, dict]:
    """The cantilever released from rest under a constant tip wrench, after 1.5 s (settled: 30 % damping)."""
    plant = Plant(cantilever(n_modes), "imex_midpoint", substeps=1, formulation=formulation)
    plant.station_loads[plant.layout.station_names.index("tip")] = wrench
    for _ in range(1500):
        plant.step()
    plant.evaluate()
    return plant, plant.station("tip")


@pytest.mark.parametrize("formulation", ["aba", "screw-dae"])
def test_a_tip_force_bends_a_cantilever_as_euler_bernoulli_says(formulation):
    """Tip force P = -40 N along z, applied from rest: the damped beam settles on w(L) = P L^3 / 3EI (4 modes
    per plane: measured 0.06 % short of the closed form), at rest; released, it swings back."""
    P = -40.0
    plant, tip = settled_tip(4, formulation, [0.0, 0.0, 0.0, 0.0, 0.0, P])
    assert tip["position"][2] == pytest.approx(P * L ** 3 / (3 * E * I), rel=1e-3)
    assert abs(tip["position"][1]) < 1e-12 and np.abs(tip["velocity"]).max() < 1e-9
    plant.station_loads[:] = 0.0
    for _ in range(3):
        plant.step()
    plant.evaluate()
    assert plant.station("tip")["velocity"][2] > 1e-3


@pytest.mark.parametrize("formulation", ["aba", "screw-dae"])
def test_a_tip_moment_bends_a_cantilever_towards_euler_bernoulli_as_modes_are_added(formulation):
    """Tip moment M = 15 N m about z: the deflection v(L) = M L^2 / 2EI and the tip's turn M L / EI are
    approached as the assumed modes' series converges, slowly, since a clamped-free mode carries no moment at
    the free end: measured errors 3.0, 0.80, 0.20 % (deflection, order 2 in the modes) and 20, 10, 5.1 % (turn,
    order 1) with 2, 4, 8 modes per plane; the tip force's deflection is met within 0.5 % at every count."""
    Mz, EI = 15.0, E * I
    deflection, turn = [], []
    for n in (2, 4, 8):
        _, tip = settled_tip(n, formulation, [0.0, 0.0, Mz, 0.0, 0.0, -40.0])
        deflection.append(1.0 - tip["position"][1] / (Mz * L ** 2 / (2 * EI)))
        turn.append(1.0 - tip["rotation"][1, 0] / (Mz * L / EI))
        assert tip["position"][2] == pytest.approx(-40.0 * L ** 3 / (3 * EI), rel=5e-3)
    assert 0.0 < deflection[2] < 2.5e-3 and 0.0 < turn[2] < 0.06
    for coarse, fine in zip(deflection, deflection[1:]):
        assert 3.5 < coarse / fine < 4.5
    for coarse, fine in zip(turn, turn[1:]):
        assert 1.8 < coarse / fine < 2.2


def test_the_energy_balance_counts_the_wrenches_power():
    """A random flexible chain under gravity, drive torques and constant station wrenches for 0.3 s (RK4 at
    0.1 ms): E(T) - E(0) = the integral of the power in (drives and wrenches) less the dissipated power, to
    the quadrature's accuracy; without the wrenches' power the balance misses by far more."""
    model = loaded_chain(7)
    model.dt_s = 1e-4
    plant = Plant(model, "rk4", substeps=1)
    plant.tau[:] = [0.5, -0.3, 0.2]
    names = plant.layout.station_names
    plant.station_loads[names.index("mid")] = [0.3, 0.0, -0.2, 5.0, -3.0, 2.0]
    plant.station_loads[names.index("far")] = [0.0, 0.1, 0.0, -4.0, 0.0, 6.0]
    E0 = sum(plant.energy())
    work = wrench_work = 0.0
    p0 = plant.power()
    for _ in range(3000):
        wrench_before = station_power(plant)
        plant.step()
        p1 = plant.power()
        work += 0.5 * plant.dt * ((p0[0] - p0[1]) + (p1[0] - p1[1]))
        wrench_work += 0.5 * plant.dt * (wrench_before + station_power(plant))
        p0 = p1
    dE = sum(plant.energy()) - E0
    assert abs(wrench_work) > 1e-3
    assert dE == pytest.approx(work, rel=1e-5, abs=1e-9)
    assert abs(dE - (work - wrench_work)) > 100 * abs(dE - work)


def station_power(plant: Plant) -> float:
    """sum over loaded stations of moment . angular velocity + force . velocity, from Plant.station (world axes)."""
    plant.evaluate()
    total = 0.0
    for s, name in enumerate(plant.layout.station_names):
        state, wrench = plant.station(name), plant.station_loads[s]
        total += wrench[:3] @ state["angular_velocity"] + wrench[3:] @ state["velocity"]
    return total
