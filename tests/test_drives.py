"""Motor drives (hil.devices.drives) and the plant-side friction, brake and backlash, against analytic results.

Single-joint test rigs: a rigid body on one revolute joint (axis z, no gravity unless stated),
its motor rotor J_r behind a gear n, so the inertia at the joint is J = J_link + n^2 J_r.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from chains import random_flexible_chain
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.firmware.endpoint import CommandOutput
from hil.model import spec as md
from hil.model.assembly import assemble, make_work
from config_schema import ConfigError
from hil.model.config import load_model, load_model_from_string
from hil.devices.drives import DriveBank, DriveSpec, apparent_inertias
from hil.kernels.aba import forward_dynamics
from hil.kernels.oracle import forward_dynamics_dense
from hil.dynamics.plant import Plant
from hil.kernels.layout import JOINT_PRESCRIBED, JOINT_ROTOR_HELD, JP_COUL_VS, JP_BRAKE, JP_BRAKE_VS

ROOT = Path(__file__).resolve().parent.parent


def rig(*, n: float = 10.0, rotor: float = 2e-5, link_inertia: float = 1.05e-2, prescribed: bool = False,
        gravity: bool = False, mass: float = 1.0, com: float = 0.0, axis=(0.0, 0.0, 1.0),
        elastic: md.JointElasticity | None = None, **joint) -> md.Model:
    """One rigid body on one joint (its centre of mass `com` out along x: a pendulum arm)."""
    j = md.Joint("j", axis=np.array(axis, float), rotor_inertia_kg_m2=rotor, gear_ratio=n, elasticity=elastic,
                 **joint)
    if prescribed:
        j.drive = md.DRIVE_PRESCRIBED
        j.profile = md.Profile(md.PROFILE_CONSTANT)
    inertia = np.diag([link_inertia, link_inertia, link_inertia])
    body = md.Body("arm", md.BASE, j, rigid=md.RigidInertia(mass, np.array([com, 0.0, 0.0]), inertia))
    g = np.array([0.0, 0.0, -9.81]) if gravity else np.zeros(3)
    return md.Model("rig", [body], gravity_m_s2=g)


def run(bank: DriveBank, plant: Plant, command, steps: int):
    """Step drive and plant `steps` times; per step: end-of-step current, motor torque, link rate."""
    cmd = np.atleast_1d(np.asarray(command, float))
    out = np.zeros((steps, 3))
    for i in range(steps):
        plant.step(bank.update(cmd))
        out[i] = bank.current[0], bank.motor_torque[0], plant.vel[0]
    return out


VOLT = dict(interface="voltage", resistance_ohm=2.0, inductance_H=5e-3, torque_constant_N_m_A=0.05,
            back_emf_V_s_rad=0.05, supply_V=24.0)


# ---------------------------------------------------------------- electrical and mechanical step responses


def test_locked_rotor_voltage_step_rises_with_L_over_R():
    """i(t) = V/R (1 - exp(-t R/L)) at the end of every step; the torque is n Kt times the step-average
    current (at standstill the gear passes it without loss)."""
    plant = Plant(rig(prescribed=True))
    bank = DriveBank(plant, [DriveSpec(**VOLT, gear_efficiency=0.9)])
    duty = 0.5
    V, R, L, kt = duty * 24.0, 2.0, 5e-3, 0.05
    tau_e = L / R
    res = run(bank, plant, duty, 40)
    t = np.arange(1, 41) * plant.dt
    i_exact = V / R * (1 - np.exp(-t / tau_e))
    # average over step k: V/R (1 - tau_e/dt (exp(-t_{k-1}/tau_e) - exp(-t_k/tau_e)))
    i_avg = V / R * (1 - tau_e / plant.dt * (np.exp(-(t - plant.dt) / tau_e) - np.exp(-t / tau_e)))
    for k in (0, 1, 2, 4, 9, 39):
        assert res[k, 0] == pytest.approx(i_exact[k], rel=1e-12)
        assert res[k, 1] == pytest.approx(kt * i_avg[k], rel=1e-12)
    assert bank.tau[0] == pytest.approx(10.0 * res[-1, 1], rel=1e-12)
    assert res[-1, 0] == pytest.approx(V / R, rel=1e-6)


def test_the_duty_for_a_torque_gives_that_torque_on_a_locked_rotor():
    """The safe states command torques: a voltage drive gets the duty that settles to them (here at
    rest, so the back-EMF term is 0); other interfaces get the torque itself."""
    plant = Plant(rig(prescribed=True))
    bank = DriveBank(plant, [DriveSpec(**VOLT, gear_efficiency=0.9)])
    tau = np.array([2.0])
    duty = bank.command_for_torque(tau, np.zeros(1))
    assert duty[0] == pytest.approx(2.0 * 2.0 / (10.0 * 0.9 * 0.05) / 24.0)
    run(bank, plant, duty, 40)
    assert bank.tau[0] == pytest.approx(2.0 / 0.9, rel=1e-6)       # at standstill the gear passes n Kt i
    assert bank.command_for_torque(np.array([1e4]), np.zeros(1))[0] == 1.0
    ideal = DriveBank(Plant(rig()), [None])
    assert ideal.command_for_torque(tau, np.zeros(1))[0] == 2.0


def test_free_motor_voltage_step_reaches_no_load_speed_with_mechanical_time_constant():
    """Unloaded motor (L/R = 10 us << dt): the joint rate follows V/(n Ke) (1 - exp(-t/tau_m)) with
    tau_m = J R / (n^2 Kt Ke), J the inertia at the joint. The drive holds the step-start speed over
    each 1 ms step (tau_m = 50 ms), which costs at most (dt / 2 tau_m) e^-1 = 0.37 % of the final
    speed; the bound is 1 %."""
    n, Jr, Jl = 10.0, 2e-5, 1.05e-2
    spec = DriveSpec(**{**VOLT, "resistance_ohm": 1.0, "inductance_H": 1e-5})
    plant = Plant(rig(n=n, rotor=Jr, link_inertia=Jl))
    bank = DriveBank(plant, [spec])
    J = Jl + n * n * Jr
    assert bank.inertia[0] == pytest.approx(J, rel=1e-12)
    tau_m = J * 1.0 / (n * n * 0.05 * 0.05)
    assert tau_m == pytest.approx(0.05)
    w_inf = 24.0 / (n * 0.05)
    res = run(bank, plant, 1.0, 400)
    t = np.arange(1, 401) * plant.dt
    err = np.abs(res[:, 2] - w_inf * (1 - np.exp(-t / tau_m))).max() / w_inf
    print(f"\nfree motor: max |speed - analytic| = {err * 100:.2f} % of the no-load speed")
    assert err < 0.01
    k63 = int(np.argmax(res[:, 2] > (1 - math.exp(-1)) * w_inf))
    assert abs(t[k63] - tau_m) <= 1.5e-3                  # 63 % reached at tau_m
    assert abs(res[-1, 0]) < 0.01 * 24.0 / 1.0             # no load: the current dies out


def test_current_loop_is_first_order_with_its_bandwidth():
    f_bw, n, eta, kt = 100.0, 50.0, 0.8, 0.06
    plant = Plant(rig(n=n, prescribed=True))
    bank = DriveBank(plant, [DriveSpec("current", torque_constant_N_m_A=kt, gear_efficiency=eta,
                                       current_bandwidth_hz=f_bw)])
    cmd = 12.0
    i_ref = cmd / (n * eta * kt)
    res = run(bank, plant, cmd, 20)
    t = np.arange(1, 21) * plant.dt
    w = 2 * np.pi * f_bw
    np.testing.assert_allclose(res[:, 0], i_ref * (1 - np.exp(-w * t)), rtol=1e-12)
    # the torque delivered over the first T: Kt times the integral of the analytic current
    T = t[-1]
    impulse = kt * i_ref * (T - (1 - math.exp(-w * T)) / w)
    assert res[:, 1].sum() * plant.dt == pytest.approx(impulse, rel=1e-12)


def test_ella_current_loop_settles_within_one_cycle():
    plant = Plant(load_model("configs/ella.toml"))
    bank = DriveBank(plant)
    assert bank.interfaces == ("current",) * 3
    cmd = np.array([20.0, -50.0, 10.0])
    bank.update(cmd)
    i_ref = cmd / (bank.gear * 0.06)
    np.testing.assert_allclose(bank.current, i_ref, rtol=math.exp(-2 * np.pi * 1500 * 1e-3) * 1.01)


# ---------------------------------------------------------------- limits and efficiency


def at_speed(bank: DriveBank, plant: Plant, rate: float, command: float, cycles: int = 5) -> float:
    """Link torque after `cycles` updates at a held joint rate (the plant is not stepped)."""
    plant.vel[0] = rate
    for _ in range(cycles):
        bank.update(np.array([command]))
    return float(bank.tau[0])


@pytest.mark.parametrize("interface", ["torque", "current"])
def test_current_and_torque_limits(interface):
    n, eta, kt = 50.0, 0.8, 0.06
    spec = DriveSpec(interface, torque_constant_N_m_A=kt, gear_efficiency=eta, current_bandwidth_hz=2000.0,
                     current_limit_A=10.0, torque_limit_N_m=30.0)      # 10 A gives 24 N m: the current binds
    plant = Plant(rig(n=n))
    bank = DriveBank(plant, [spec])
    tau = at_speed(bank, plant, 1.0, 100.0)
    assert bank.torque_limited and bank.limited[0]
    assert abs(bank.current[0]) <= 10.0 * (1 + 1e-12)
    assert tau == pytest.approx(n * eta * kt * 10.0, rel=1e-6)
    tau = at_speed(bank, plant, 1.0, 20.0)
    assert not bank.torque_limited
    assert tau == pytest.approx(20.0, rel=1e-6)
    spec.torque_limit_N_m = 15.0                                       # now the torque limit binds
    bank = DriveBank(plant, [spec])
    assert at_speed(bank, plant, -1.0, -100.0) == pytest.approx(-15.0, rel=1e-6)
    assert bank.torque_limited
    assert abs(bank.current[0]) == pytest.approx(15.0 / (n * eta * kt), rel=1e-6)


def test_voltage_drive_current_limit():
    spec = DriveSpec(**VOLT, current_limit_A=4.0)                      # stall current V/R = 12 A
    plant = Plant(rig(prescribed=True))
    bank = DriveBank(plant, [spec])
    res = run(bank, plant, 1.0, 30)
    assert np.abs(res[:, 0]).max() <= 4.0 * (1 + 1e-12)
    assert res[-1, 0] == pytest.approx(4.0) and bank.torque_limited
    run(bank, plant, 0.1, 30)                                          # 1.2 A: within the limit
    assert not bank.torque_limited


def test_gear_efficiency_depends_on_power_flow():
    """Steady current, joint moving at 1 rad/s: the motor driving the load delivers eta n Kt i (= the
    command, which the drive converted with eta); the load back-driving the motor meets n Kt i / eta;
    at standstill the gear passes n Kt i."""
    n, eta, kt = 50.0, 0.7, 0.06
    plant = Plant(rig(n=n))
    bank = DriveBank(plant, [DriveSpec("current", torque_constant_N_m_A=kt, gear_efficiency=eta,
                                       current_bandwidth_hz=5000.0)])
    i = 10.0 / (n * eta * kt)
    assert at_speed(bank, plant, 1.0, 10.0) == pytest.approx(eta * n * kt * i, rel=1e-9)
    assert at_speed(bank, plant, -1.0, -10.0) == pytest.approx(-eta * n * kt * i, rel=1e-9)
    assert at_speed(bank, plant, -1.0, 10.0) == pytest.approx(n * kt * i / eta, rel=1e-9)
    assert at_speed(bank, plant, 1.0, -10.0) == pytest.approx(-n * kt * i / eta, rel=1e-9)
    assert at_speed(bank, plant, 0.0, 10.0) == pytest.approx(n * kt * i, rel=1e-9)
    assert bank.motor_torque[0] == pytest.approx(kt * i, rel=1e-9)


def test_torque_constant_loss_scales_torque_and_back_emf():
    plant = Plant(rig(n=50.0))
    bank = DriveBank(plant, [DriveSpec("current", torque_constant_N_m_A=0.06, current_bandwidth_hz=5000.0)])
    full = at_speed(bank, plant, 1.0, 10.0)
    bank.kt_scale[0] = 0.4
    assert at_speed(bank, plant, 1.0, 10.0) == pytest.approx(0.4 * full, rel=1e-9)
    plant = Plant(rig(prescribed=True))
    bank = DriveBank(plant, [DriveSpec(**{**VOLT, "inductance_H": 1e-6})])
    plant.vel[0] = 20.0                      # motor 200 rad/s: back-EMF 10 V of the 24 V
    bank.kt_scale[0] = 0.5
    bank.update(np.array([1.0]))
    assert bank.current[0] == pytest.approx((24.0 - 0.5 * 0.05 * 200.0) / 2.0, rel=1e-9)


# ---------------------------------------------------------------- holding brake (stick-slip) and friction on the plant


def pendulum(elastic: bool, **joint) -> md.Model:
    """A 2 kg arm (centre of mass 0.5 m out) on a horizontal joint: gravity torque 9.81 N m at q = 0,
    accelerating q positively; n = 50, J_r = 1e-4 (0.25 kg m^2 at the joint)."""
    el = md.JointElasticity(2e4, 5.0) if elastic else None
    return rig(n=50.0, rotor=1e-4, link_inertia=0.02, gravity=True, mass=2.0, com=0.5, axis=(0.0, 1.0, 0.0),
               elastic=el, **joint)


def braked_coordinate(plant: Plant) -> int:
    """State index of joint 0's motor coordinate: the joint, or the rotor of a Spong joint."""
    return plant.layout.motor_index(0) if plant.layout.motor_of_joint[0] >= 0 else 0


def brake_run(bank: DriveBank, plant: Plant, command: float, steps: int) -> np.ndarray:
    """Step with a constant command; per step: the braked coordinate's angle and rate, held, T_b."""
    i = braked_coordinate(plant)
    cmd = np.array([command])
    out = np.zeros((steps, 4))
    for s in range(steps):
        plant.step(bank.update(cmd))
        out[s] = plant.pos[i], plant.vel[i], bank.brake_held[0], bank.brake_reaction[0]
    return out


def test_ella_pitch_brake_holds_the_arm_without_creep_and_release_lets_it_fall():
    """ELLA at its static equilibrium (arm horizontal), drives commanded zero, the pitch brake
    (160 N m) holding the 98 N m gravity load. Static: the brake torque is the holding torque of
    Plant.equilibrium_eta (a composite-body Newton-Euler solve, independent of the articulated-body
    sweep that gives the brake's reaction). Then link 2's first modes displaced by 2 mm ring: over
    2 s the pitch angle changes by less than 1e-9 rad (the tanh brake this replaces crept at
    0.2 rad/s). Released, the arm falls."""
    plant = Plant(load_model("configs/ella.toml"))
    hold = plant.equilibrium_eta()
    bank = DriveBank(plant)
    pitch = bank.names.index("shoulder_pitch")
    assert abs(hold[pitch]) == pytest.approx(98.0, rel=0.01)
    bank.set_brake(pitch, True)
    zero = np.zeros(3)
    q0 = plant.q()[pitch]
    plant.step(bank.update(zero))
    assert bank.brake_held[pitch] and bank.brake_reaction[pitch] == 0.0    # R known from the next cycle on
    for _ in range(500):
        plant.step(bank.update(zero))
        assert bank.brake_reaction[pitch] == pytest.approx(hold[pitch], rel=1e-9)
    eta = plant.layout.eta_index(plant.layout.body_names.index("link2"), 0)
    plant.pos[eta:eta + 2] += 2e-3
    reaction = np.zeros(2000)
    for s in range(2000):
        plant.step(bank.update(zero))
        reaction[s] = bank.brake_reaction[pitch]
    creep = abs(plant.q()[pitch] - q0)
    print(f"\nELLA pitch brake: holding torque {hold[pitch]:.3f} N m; links ringing, brake torque "
          f"{reaction.min():.2f} .. {reaction.max():.2f} N m; angle change over 2 s {creep:.1e} rad")
    assert creep < 1e-9
    assert bank.brake_held[pitch] and np.ptp(reaction) > 1.0
    bank.set_brake(pitch, False)
    assert not bank.brake_held[pitch]
    for _ in range(200):
        plant.step(bank.update(zero))
    assert abs(plant.q()[pitch] - q0) > 0.05


def test_brakes_closing_on_the_swinging_flexible_arm_only_take_energy_out():
    """ELLA swinging (1.58, -1.08, 1.12 rad/s at a bent pose), drives commanding zero, all three brakes
    engaged: the ringing links make the brakes stick and slip again and again (the 160 N m yaw brake
    cannot hold the ringing arm at once). Every stop is perfectly inelastic (the other coordinates
    keep their momenta) and the slipping brake dissipates, so the total energy never rises from one
    cycle to the next (zeroing a stopped joint's rate alone, the modal rates kept, raises it by up
    to 0.37 J here); within 1 s all three joints are held (the links ring out at 1 % damping)."""
    plant = Plant(load_model("configs/ella.toml"))
    plant.pos[:3] = [0.35, -0.25, 0.2]
    plant.equilibrium_eta()
    plant.vel[:3] = [1.58, -1.08, 1.12]
    bank = DriveBank(plant)
    for k in range(3):
        bank.set_brake(k, True)
    zero = np.zeros(3)
    energy = np.zeros(1001)
    energy[0] = sum(plant.energy())
    stops = 0
    for s in range(1000):
        held = bank.brake_held.copy()
        plant.step(bank.update(zero))
        stops += int(np.count_nonzero(bank.brake_held & ~held))
        energy[s + 1] = sum(plant.energy())
    rise = np.diff(energy).max()
    print(f"\nELLA braked while swinging: {stops} stops, energy {energy[0]:.2f} J -> {energy[-1]:.2f} J, "
          f"largest rise in a cycle {rise:.1e} J")
    assert stops > 5 and rise < 1e-6
    assert bank.brake_held.all() and np.all(plant.vel[:3] == 0.0)


@pytest.mark.parametrize("elastic", [False, True], ids=["rigid", "spong"])
def test_brake_holds_gravity_plus_motor_torque_up_to_its_holding_torque(elastic):
    """Pendulum at q = 0.3 rad in its static equilibrium, brake F_s = 20 N m: holding torque
    R = -m g l cos q = -9.372 N m (by hand; Plant.equilibrium_eta returns it, for the Spong joint as
    the loaded spring's torque). Held, the brake torque is T_b = R - tau for every motor command tau
    (the brake holds the motor besides gravity), and the braked coordinate (the rotor of the Spong
    joint) does not move at all. tau = 15 N m asks |R - tau| = 24.4 N m > F_s: with R known from the
    held steps it slips in that very cycle (the Spong rotor, swinging against its spring, may stick
    again for a step or two while it slips). Stopped again by the kinetic brake once the command is
    back to 0, it is held; releasing the brake frees it."""
    plant = Plant(pendulum(elastic, q0_rad=0.3))
    hold = plant.equilibrium_eta()
    R = -2.0 * 9.81 * 0.5 * math.cos(0.3)
    assert hold[0] == pytest.approx(R, rel=1e-12)
    bank = DriveBank(plant, [DriveSpec(brake_torque_N_m=20.0)])
    bank.set_brake(0, True)
    i = braked_coordinate(plant)
    x0 = plant.pos[i]
    for tau in (0.0, 5.0, -8.0, 10.0):
        res = brake_run(bank, plant, tau, 200)
        assert np.all(res[:, 2]) and np.all(res[:, 0] == x0) and np.all(res[:, 1] == 0.0)
        assert res[-1, 3] == pytest.approx(R - tau, rel=1e-9)
    res = brake_run(bank, plant, 15.0, 100)
    assert not res[0, 2] and (elastic or not res[:, 2].any())
    assert res[-1, 0] - x0 > 1e-3 and res[-1, 1] > 0.0           # motor and gravity both turn it positively
    brake_run(bank, plant, 0.0, 500)
    assert bank.brake_held[0]
    bank.set_brake(0, False)
    res = brake_run(bank, plant, 0.0, 100)
    assert not res[:, 2].any() and res[-1, 0] - res[0, 0] > 1e-3


def test_brake_sticks_below_its_holding_torque_and_slips_with_its_kinetic_torque():
    """No gravity, J = 0.2605 kg m^2, torque drive, brake F_s = 20 N m holding, F_k = 16 N m slipping:
    * 18 N m from rest (F_k < 18 < F_s): held, T_b = -18 N m;
    * 25 N m > F_s: slips after the one held step, accelerating at (25 - F_k) / J;
    * 18 N m again while slipping: the kinetic torque is below the load, it keeps accelerating at
      (18 - F_k) / J (static above kinetic friction);
    * 0 N m: the kinetic brake decelerates it at F_k / J, and it sticks once slower than v_b, within
      a step of the analytic stopping time, and stays."""
    plant = Plant(rig(n=50.0, rotor=1e-4))
    bank = DriveBank(plant, [DriveSpec(brake_torque_N_m=20.0, brake_kinetic_N_m=16.0)])
    J, dt = bank.inertia[0], plant.dt
    assert J == pytest.approx(0.2605, rel=1e-12)
    bank.set_brake(0, True)
    res = brake_run(bank, plant, 18.0, 300)
    assert np.all(res[:, 2]) and np.all(res[:, 0] == 0.0) and res[-1, 3] == pytest.approx(-18.0, rel=1e-12)
    res = brake_run(bank, plant, 25.0, 500)
    assert not res[1:, 2].any()
    assert (res[-1, 1] - res[-101, 1]) / (100 * dt) == pytest.approx((25.0 - 16.0) / J, rel=1e-9)
    res = brake_run(bank, plant, 18.0, 300)
    assert not res[:, 2].any()
    assert (res[-1, 1] - res[-101, 1]) / (100 * dt) == pytest.approx((18.0 - 16.0) / J, rel=1e-9)
    v0 = res[-1, 1]
    res = brake_run(bank, plant, 0.0, 600)
    stop = int(np.argmax(res[:, 2])) + 1                          # steps until held
    assert (res[9, 1] - res[109, 1]) / (100 * dt) == pytest.approx(16.0 / J, rel=1e-9)
    assert abs(stop * dt - v0 * J / 16.0) <= dt
    assert np.all(res[stop - 1:, 2]) and np.all(res[stop - 1:, 0] == res[stop - 1, 0])


@pytest.mark.parametrize("elastic", [False, True], ids=["rigid", "spong"])
def test_brake_engaged_on_a_moving_joint_decelerates_it_and_then_sticks(elastic):
    """No gravity, the joint (and rotor) turning at 3 rad/s when the brake (F_k = F_s = 20 N m)
    engages. Rigid: it stops after v0 J / F_k = 39 ms, having turned v0^2 J / (2 F_k) = 58.6 mrad
    (within one step of motion); Spong (spring 2e4 N m/rad): the rotor stops and stays, the link
    rings out on the damped spring."""
    el = md.JointElasticity(2e4, 5.0) if elastic else None
    plant = Plant(rig(n=50.0, rotor=1e-4, elastic=el, qd0_rad_s=3.0))
    bank = DriveBank(plant, [DriveSpec(brake_torque_N_m=20.0)])
    J, dt = 0.2605, plant.dt
    bank.set_brake(0, True)
    res = brake_run(bank, plant, 0.0, 1000)
    stop = int(np.argmax(res[:, 2])) + 1
    assert stop > 10 and np.all(res[stop - 1:, 2]) and np.all(res[stop - 1:, 0] == res[stop - 1, 0])
    print(f"\n[{'spong' if elastic else 'rigid'}] braked from 3 rad/s: held after {stop} ms at "
          f"{res[-1, 0] * 1e3:.2f} mrad")
    if not elastic:
        assert abs(stop * dt - 3.0 * J / 20.0) <= dt
        assert res[-1, 0] == pytest.approx(9.0 * J / 40.0, abs=3.0 * dt)
    else:
        assert abs(plant.vel[0]) < 1e-3                         # the link at rest on the held rotor


@pytest.mark.parametrize("method", ["rk4", "fitted_midpoint"])
def test_slipping_brake_ramp_is_stable_at_its_default_width(method):
    """The kinetic brake alone (written into the kernel, no sticking) holding the pendulum's 9.81 N m
    gravity load, F_k = 20 N m: at the default ramp width v_b the joint creeps steadily at
    v_b T / F_k < v_b (where the drive bank would hold it). Ten times narrower, the ramp's damper
    F_k / v_b is beyond an explicit substep's stability bound and the rate chatters under RK4; the
    midpoint schemes take the brake's slope implicitly (hil.kernels.joints) and stay steady."""
    default = DriveBank(Plant(pendulum(False), method), [DriveSpec(brake_torque_N_m=20.0)]).brake_velocity[0]
    ripple = {}
    for factor in (1.0, 0.1):
        plant = Plant(pendulum(False), method)
        plant.km.jpar[0, JP_BRAKE] = 20.0
        plant.km.jpar[0, JP_BRAKE_VS] = factor * default
        v = np.zeros(1000)
        for s in range(1000):
            plant.step()
            v[s] = plant.vel[0]
        ripple[factor] = np.std(v[500:])
        if factor == 1.0:
            assert v[-1] == pytest.approx(default * 9.81 / 20.0, rel=1e-3) and v[-1] < default
    print(f"\n{method}: v_b {default:.3g} rad/s, ripple {ripple}")
    if method == "rk4":
        assert ripple[0.1] > 20 * ripple[1.0] and ripple[0.1] > 1e-3
    else:                       # measured: 2.2e-7 (still settling) and 2.2e-10 rad/s
        assert ripple[0.1] < 1e-6 and ripple[1.0] < 1e-6


@pytest.mark.parametrize("elastic", [False, True], ids=["rigid", "spong"])
def test_held_coordinate_does_no_work_and_the_energy_balance_holds(elastic):
    """Pendulum released at q = 0.3 rad with its spring relaxed, brake (40 N m) engaged, motor
    commanding 4 N m: the braked coordinate is held from the first cycle, so the drive power in is
    exactly 0, and
    E(T) - E(0) = -W_diss (rigid: nothing moves; Spong: the link sags and rings out on the spring's
    damper; measured relative residual 2e-5 of the trapezoidal power integral, bound 1e-4). RK4: the
    midpoint schemes' step-end rates carry their amplitude factor (1 + theta^2 / 12 on the 31 Hz link,
    hil.kernels.fitted_midpoint), which biases a power integral from them by about theta^2 / 6 (1 %)."""
    plant = Plant(pendulum(elastic, q0_rad=0.3), "rk4")
    bank = DriveBank(plant, [DriveSpec(brake_torque_N_m=40.0)])
    bank.set_brake(0, True)
    E0 = sum(plant.energy())
    w_diss = 0.0
    cmd = np.array([4.0])
    for _ in range(1000):
        plant.tau[:] = bank.update(cmd)
        p0 = plant.power()
        plant.step()
        p1 = plant.power()
        assert p0[0] == 0.0 and p1[0] == 0.0 and bank.brake_held[0]
        w_diss += 0.5 * plant.dt * (p0[1] + p1[1])
    dE = sum(plant.energy()) - E0
    print(f"\n[{'spong' if elastic else 'rigid'}] held: dE = {dE:.6e} J, W_diss = {w_diss:.6e} J, "
          f"residual {abs(dE + w_diss):.1e} J")
    assert dE == pytest.approx(-w_diss, rel=1e-4, abs=1e-12)
    assert elastic == (w_diss > 1e-3)


# ---------------------------------------------------------------- static holding torque of Spong joints


@pytest.mark.parametrize("backlash", [0.0, 0.02], ids=["no_backlash", "backlash"])
def test_equilibrium_holds_a_spong_pendulum_on_its_loaded_spring(backlash):
    """Plant.equilibrium_eta on the Spong pendulum at q = 0.3 rad: the holding torque is the gravity
    moment -m g l cos q (by hand), the rotor stands at q + tau / k (- half the backlash: the load
    turns the link positively, so the rotor holds it from below), and under that torque the
    pendulum stays at rest: accelerations below 1e-8, and no motion over 1 s of stepping."""
    plant = Plant(pendulum(True, q0_rad=0.3, backlash_rad=backlash))
    hold = plant.equilibrium_eta()
    tau = -2.0 * 9.81 * 0.5 * math.cos(0.3)
    assert hold[0] == pytest.approx(tau, rel=1e-12)
    r = plant.layout.motor_index(0)
    assert plant.pos[r] == pytest.approx(0.3 + tau / 2e4 - 0.5 * backlash, rel=1e-12)
    assert np.abs(plant.acc).max() < 1e-8
    x0 = plant.pos.copy()
    for _ in range(1000):
        plant.step(hold)
    np.testing.assert_allclose(plant.pos, x0, rtol=0, atol=1e-9)


@pytest.mark.parametrize("backlash", [0.0, 1e-3], ids=["no_backlash", "backlash"])
def test_equilibrium_holds_a_flexible_chain_with_a_spong_joint(backlash):
    """A random flexible 4-body chain whose third joint is a Spong joint: at the returned torques every
    generalized acceleration (joints, modes, rotors) is below 1e-8; the Spong joint's torque equals
    its spring torque, the rotor deflected by tau / k plus half the backlash in the loaded direction."""
    model = random_flexible_chain(np.random.default_rng(3), 4, elastic_joint=True, damping=0.02)
    model.bodies[2].joint.backlash_rad = backlash
    plant = Plant(model)
    hold = plant.equilibrium_eta()
    assert np.abs(plant.acc).max() < 1e-8
    r = plant.layout.motor_index(2)
    k = model.bodies[2].joint.elasticity.stiffness_N_m_rad
    assert abs(hold[2]) > 1.0
    assert plant.pos[r] - plant.pos[2] == pytest.approx(hold[2] / k + math.copysign(0.5 * backlash, hold[2]),
                                                         rel=1e-9)


def test_brake_without_holding_torque_is_refused():
    plant = Plant(rig())
    bank = DriveBank(plant)
    with pytest.raises(ValueError, match="no brake"):
        bank.set_brake("j", True)


def test_friction_scale_multiplies_viscous_coulomb_and_stribeck():
    """J = 0.102 kg m^2: the configured smoothing 0.01 rad/s is stable at three times the friction
    ((0.9 + 0.9 / 0.01) h / J = 0.89 < 0.5 x 2.785), so it is kept and the curve scales exactly."""
    plant = Plant(rig(viscous_N_m_s_rad=0.3, coulomb_N_m=0.2, coulomb_smoothing_rad_s=0.01, stribeck_N_m=0.1,
                      stribeck_velocity_rad_s=0.05, link_inertia=0.1))
    bank = DriveBank(plant)
    J = bank.inertia[0]

    def friction_at(v):
        plant.vel[0] = v
        return -J * plant.evaluate()[0]

    base = [friction_at(v) for v in (0.01, 0.05, 1.0)]
    bank.set_friction_scale(0, 3.0)
    assert plant.km.viscous[0] == pytest.approx(0.9) and bank.friction_scale[0] == 3.0
    assert bank.coulomb_smoothing[0] == 0.01
    np.testing.assert_allclose([friction_at(v) for v in (0.01, 0.05, 1.0)], 3.0 * np.array(base), rtol=1e-12)
    bank.set_friction_scale("j", 1.0)
    np.testing.assert_allclose([friction_at(v) for v in (0.01, 0.05, 1.0)], base, rtol=1e-12)


def test_stribeck_friction_curve():
    """tau_f(v) = c v + (F_c + F_s exp(-(v/v_st)^2)) tanh(v/v_s): values read back from the plant's
    acceleration (J qdd = -tau_f) at hand-evaluated points. J = 1.202 kg m^2, heavy enough for the
    1 mrad/s smoothing to be stable ((c + (F_c + F_s) / v_s) h / J = 1.25 < 0.5 x 2.785), so the
    plant keeps it."""
    c, Fc, Fs, vst, vs = 0.2, 1.0, 0.5, 0.1, 1e-3
    plant = Plant(rig(viscous_N_m_s_rad=c, coulomb_N_m=Fc, coulomb_smoothing_rad_s=vs, stribeck_N_m=Fs,
                      stribeck_velocity_rad_s=vst, link_inertia=1.2), method="rk4")
    bank = DriveBank(plant)
    J = bank.inertia[0]
    assert bank.coulomb_smoothing[0] == vs
    expected = {
        0.0: 0.0,
        5e-4: c * 5e-4 + (Fc + Fs * math.exp(-2.5e-5)) * math.tanh(0.5),   # inside the smoothing
        0.01: c * 0.01 + (Fc + Fs * math.exp(-0.01)) * math.tanh(10.0),     # breakaway ~ F_c + F_s
        0.1: c * 0.1 + Fc + Fs / math.e,                                    # at v_st
        1.0: c * 1.0 + Fc + Fs * math.exp(-100.0),                          # sliding: Coulomb level
        -0.1: -(c * 0.1 + Fc + Fs / math.e),
    }
    for v, tau_f in expected.items():
        plant.vel[0] = v
        assert -J * plant.evaluate()[0] == pytest.approx(tau_f, rel=1e-12, abs=1e-14), v


def stable_smoothing(plant: Plant, inertia: np.ndarray, scale: float) -> np.ndarray:
    """The Coulomb smoothing the plant must use, by hand: the configured v_s, or at least the floor
    s (F_c + F_st) h / (kappa J - s c h), kappa = safety x RK4's real-axis bound 2.785."""
    h = plant.plan.dt_s / plant.plan.substeps
    kappa = plant.asm.model.integrator.safety * 2.785
    joints = [b.joint for b in plant.asm.model.bodies]
    return np.array([max(j.coulomb_smoothing_rad_s,
                         scale * (j.coulomb_N_m + j.stribeck_N_m) * h / (kappa * J - scale * j.viscous_N_m_s_rad * h))
                     for j, J in zip(joints, inertia)])


def test_ella_coulomb_smoothing_is_widened_to_the_stable_floor_only_for_an_explicit_plan():
    """ELLA's configured 1 mrad/s tanh is steeper than one 1 ms RK4 substep keeps stable for any of
    its joints ((c + F_c / v_s) h / J = 2.7 .. 3.8 > 0.5 x 2.785): with RK4 pinned to one substep the bare
    plant (hil simulate) and the drive bank widen it to the floor, ten times the friction needs about ten
    times the width, and scaling back restores the nominal width. A joint whose configured smoothing is
    stable keeps it, and so does every joint under the preset's plan, which takes the friction implicitly;
    ten times the friction widens it there only to the implicit friction's floor (1.2 .. 1.7 mrad/s at its
    three 333 us substeps, against 20 .. 28 mrad/s at RK4's one)."""
    implicit = Plant(load_model("configs/ella.toml"))
    bank = DriveBank(implicit)
    assert np.all(implicit.coulomb_smoothing == 1e-3)
    for k in range(3):
        bank.set_friction_scale(k, 10.0)
    h = implicit.dt / implicit.plan.substeps
    floor = implicit.km.coulomb * h / (0.5 * 15.0 * bank.inertia)  # (10 F_c h) / (kappa J), kappa = safety x 15
    np.testing.assert_allclose(bank.coulomb_smoothing, np.maximum(1e-3, floor), rtol=1e-12)
    assert np.all(bank.coulomb_smoothing < 2e-3)
    plant = Plant(load_model("configs/ella.toml"), method="rk4", substeps=1)
    np.testing.assert_allclose(plant.coulomb_smoothing, stable_smoothing(plant, apparent_inertias(plant), 1.0),
                               rtol=1e-12)
    plant.pos[:3] = [0.6922, -0.4928, 0.4270]
    plant.equilibrium_eta()
    bank = DriveBank(plant)
    nominal = stable_smoothing(plant, bank.inertia, 1.0)
    assert np.all(nominal > 1.9e-3) and np.all(nominal < 3e-3)
    np.testing.assert_allclose(bank.coulomb_smoothing, nominal, rtol=1e-12)
    np.testing.assert_allclose(plant.km.jpar[:, JP_COUL_VS], nominal, rtol=1e-12)
    for k in range(3):
        bank.set_friction_scale(k, 10.0)
    tenfold = stable_smoothing(plant, bank.inertia, 10.0)
    np.testing.assert_allclose(bank.coulomb_smoothing, tenfold, rtol=1e-12)
    assert np.all(tenfold > 9.9 * nominal)
    print(f"\nELLA Coulomb smoothing (configured 1e-3 rad/s): 1x {np.round(nominal * 1e3, 3)} mrad/s, "
          f"10x {np.round(tenfold * 1e3, 2)} mrad/s")
    bank.set_friction_scale("elbow", 1.0)
    assert bank.coulomb_smoothing[2] == pytest.approx(nominal[2], rel=1e-12)
    np.testing.assert_allclose(bank.coulomb_smoothing[:2], tenfold[:2], rtol=1e-12)
    stable = Plant(rig(coulomb_N_m=0.5, coulomb_smoothing_rad_s=0.05, viscous_N_m_s_rad=0.5))
    assert stable.coulomb_smoothing[0] == 0.05 == DriveBank(stable).coulomb_smoothing[0]


def sign_changes(qd: np.ndarray, noise: float = 1e-9) -> np.ndarray:
    """Per column: how often qd changes sign from one step to the next, both values above `noise`."""
    above = np.abs(qd) > noise
    flips = (np.signbit(qd[1:]) != np.signbit(qd[:-1])) & above[1:] & above[:-1]
    return np.count_nonzero(flips, axis=0)


@pytest.mark.parametrize("scale", [1.0, 10.0], ids=["nominal", "friction_x10"])
def test_ella_held_at_rest_by_its_holding_torque_stays_at_rest(scale):
    """ELLA at the seed 000 set-points in its static equilibrium, the drives (current loops primed at
    rest) commanding the holding torques of Plant.equilibrium_eta, joint friction scaled by 1 and 10:
    over 0.5 s no joint rate changes sign from step to step after the first 50 ms and every |qd| stays
    below 1e-4 rad/s (measured: round-off, 1e-16 rad/s). The control, the configured 1 mrad/s written
    back into the kernel: the unstable tanh slides the joints at up to 0.27 (1x) and 7 mrad/s (10x).
    RK4 at one 1 ms substep, the step whose stability bound the configured smoothing breaks (the preset's
    plan takes the friction implicitly: test_ella_held_at_rest_by_the_implicit_friction_with_its_configured_smoothing)."""
    runs = {}
    for widened in (True, False):
        plant = Plant(load_model("configs/ella.toml"), method="rk4", substeps=1)
        plant.pos[:3] = [0.6922, -0.4928, 0.4270]
        hold = plant.equilibrium_eta()
        bank = DriveBank(plant)
        for k in range(3):
            bank.set_friction_scale(k, scale)
        if not widened:
            plant.km.jpar[:, JP_COUL_VS] = 1e-3
        for _ in range(5):                   # the current loops reach the holding currents (the plant at rest)
            bank.update(hold)
        qd = np.zeros((500, 3))
        for s in range(500):
            plant.step(bank.update(hold))
            qd[s] = plant.vel[:3]
        runs[widened] = qd[50:]
        if widened:
            smoothing = bank.coulomb_smoothing
    flips, peak = sign_changes(runs[True]), np.abs(runs[True]).max(axis=0)
    print(f"\nELLA at rest, friction x{scale:g}: v_s = {np.round(smoothing * 1e3, 2)} mrad/s, sign "
          f"changes {flips}, max |qd| {peak} rad/s; configured 1 mrad/s: max |qd| {np.abs(runs[False]).max(axis=0)}")
    assert np.all(flips <= 2) and np.all(peak < 1e-4)
    assert np.abs(runs[False]).max() > 1e-4


@pytest.mark.parametrize("scale", [1.0, 10.0], ids=["nominal", "friction_x10"])
def test_ella_held_at_rest_by_the_implicit_friction_with_its_configured_smoothing(scale):
    """The preset's plan (the fitted midpoint) keeps the configured 1 mrad/s smoothing (at ten times the
    friction its floor, below 2 mrad/s) and ELLA held at the set-points by its holding torques stays at
    rest: after the first 50 ms no joint rate changes sign more than twice and every |qd| stays below 1e-4
    rad/s."""
    plant = Plant(load_model("configs/ella.toml"))
    plant.pos[:3] = [0.6922, -0.4928, 0.4270]
    hold = plant.equilibrium_eta()
    bank = DriveBank(plant)
    for k in range(3):
        bank.set_friction_scale(k, scale)
    for _ in range(5):
        bank.update(hold)
    qd = np.zeros((500, 3))
    for s in range(500):
        plant.step(bank.update(hold))
        qd[s] = plant.vel[:3]
    print(f"\nimplicit friction x{scale:g}: v_s {bank.coulomb_smoothing} rad/s, sign changes "
          f"{sign_changes(qd[50:])}, max |qd| {np.abs(qd[50:]).max(axis=0)} rad/s")
    assert np.all(bank.coulomb_smoothing == 1e-3) if scale == 1.0 else np.all(bank.coulomb_smoothing < 2e-3)
    assert np.all(sign_changes(qd[50:]) <= 2) and np.abs(qd[50:]).max() < 1e-4


def test_bare_plant_held_at_rest_stays_at_rest():
    """The plant without a drive bank (hil simulate) widens the smoothing too: ELLA at the set-points,
    stepped with its holding torques for 0.5 s, stays at rest (configured 1 mrad/s: slides at
    0.3 mrad/s; RK4 at one 1 ms substep)."""
    plant = Plant(load_model("configs/ella.toml"), method="rk4", substeps=1)
    plant.pos[:3] = [0.6922, -0.4928, 0.4270]
    hold = plant.equilibrium_eta()
    qd = np.zeros((500, 3))
    for s in range(500):
        plant.step(hold)
        qd[s] = plant.vel[:3]
    assert np.all(plant.coulomb_smoothing > 1.9e-3)
    assert np.all(sign_changes(qd[50:]) <= 2) and np.abs(qd).max() < 1e-4


# ---------------------------------------------------------------- backlash


def backlash_rig(backlash: float) -> md.Model:
    return rig(n=50.0, rotor=1e-4, link_inertia=0.05, elastic=md.JointElasticity(1e3, 0.0), backlash_rad=backlash)


def test_backlash_transmits_nothing_inside_the_band_and_k_beyond_it():
    b, k, tau = 0.02, 1e3, 2.0
    plant = Plant(backlash_rig(b))
    B = plant.km.mot_inertia[0]
    r = plant.layout.motor_index(0)
    for defl, spring in ((0.0, 0.0), (0.009, 0.0), (-0.0099, 0.0), (0.015, k * 0.005), (-0.03, -k * 0.02)):
        plant.pos[:] = 0.0
        plant.vel[:] = 0.0
        plant.pos[r] = defl
        plant.tau[0] = tau
        acc = plant.evaluate()
        assert acc[r] == pytest.approx((tau - spring) / B, rel=1e-12), defl
        assert acc[0] == pytest.approx(spring / 0.05, rel=1e-12, abs=1e-12), defl     # link inertia 0.05


def test_backlash_requires_an_elastic_joint():
    with pytest.raises(ValueError, match="backlash_rad"):
        assemble(rig(backlash_rad=0.01))


@pytest.mark.parametrize("held", [False, True], ids=["free", "held"])
def test_aba_matches_dense_oracle_with_stribeck_brake_and_backlash(held):
    """Also with brakes holding: the stiff joint 1 as a prescribed joint of constant angle, the Spong
    joint 2's rotor at rest (JOINT_ROTOR_HELD); the held joint's link torque (the brake's R) then
    equals the composite-body oracle's, the arm moving."""
    rng = np.random.default_rng(7)
    model = random_flexible_chain(rng, 4, elastic_joint=True, damping=0.02)
    for b in model.bodies:
        b.joint.stribeck_N_m = 0.3
        b.joint.stribeck_velocity_rad_s = 0.2
    model.bodies[2].joint.backlash_rad = 0.01
    asm = assemble(model)
    asm.km.jpar[:, JP_BRAKE] = 2.0
    asm.km.jpar[:, JP_BRAKE_VS] = 0.05
    w1, w2 = make_work(asm.km), make_work(asm.km)
    nq = asm.layout.nq
    r = asm.layout.motor_index(2)
    if held:
        asm.km.drive[1], asm.km.prof_par[1, 0] = JOINT_PRESCRIBED, asm.pos0[1]
        asm.km.drive[2] = JOINT_ROTOR_HELD
    for defl in (0.002, 0.02):
        pos = asm.pos0.copy()
        pos[r] = pos[2] + defl
        vel = rng.normal(size=nq) * 0.3
        if held:
            vel[1] = vel[r] = 0.0
        tau = rng.normal(size=4)
        a1, a2 = np.zeros(nq), np.zeros(nq)
        assert forward_dynamics(asm.km.mi, asm.km.mf, w1.w, 0.0, pos, vel, tau, pos, vel, 0.0, 0.0, a1)
        assert forward_dynamics_dense(asm.km.mi, asm.km.mf, w2.w, 0.0, pos, vel, tau, pos, vel, 0.0, 0.0, a2)
        np.testing.assert_allclose(a1, a2, rtol=0, atol=1e-9 * np.abs(a2).max())
        if held:
            assert a1[1] == 0.0 and a1[r] == 0.0
            # the held joint's link torque R: the composite-body row M_1 qdd + h_1 (h counts the drive as -tau_1)
            R = w2.Mq[1] @ a2 + w2.hq[1] + w2.tauj[1]
            assert w1.tau_joint[1] == pytest.approx(R, rel=1e-9)


def test_energy_balance_with_backlash_stribeck_and_brake():
    """Random chain with a Spong joint whose spring has a dead band that the motion crosses many times,
    Stribeck friction and an engaged brake: E(T) - E(0) equals the drive work minus the dissipation
    (the elastic energy is the dead-band spring's 1/2 k dz^2). Measured relative residual 4e-7
    (the chain without these effects: 1.5e-5 in test_energy); bound 1e-5."""
    model = random_flexible_chain(np.random.default_rng(3), 4, elastic_joint=True, damping=0.02)
    for b in model.bodies:
        b.joint.stribeck_N_m = 0.2
        b.joint.stribeck_velocity_rad_s = 0.1
    model.bodies[2].joint.backlash_rad = 1e-3
    auto = Plant(model).plan.substeps
    plant = Plant(model, method="rk4", substeps=2 * auto)
    plant.km.jpar[1, JP_BRAKE] = 0.5
    plant.km.jpar[1, JP_BRAKE_VS] = 0.05
    rng = np.random.default_rng(5)
    nj = plant.layout.n_joints
    amp, freq, phase = rng.uniform(1, 5, nj), rng.uniform(0.3, 2.0, nj), rng.uniform(0, 2 * np.pi, nj)
    r = plant.layout.motor_index(2)
    E0 = sum(plant.energy())
    w_in = w_diss = 0.0
    inside = []
    for _ in range(2000):
        plant.tau[:] = amp * np.sin(2 * np.pi * freq * plant.t + phase)
        p0 = plant.power()
        plant.step()
        p1 = plant.power()
        w_in += 0.5 * plant.dt * (p0[0] + p1[0])
        w_diss += 0.5 * plant.dt * (p0[1] + p1[1])
        inside.append(abs(plant.pos[r] - plant.pos[2]) <= 5e-4)
    crossings = int(np.count_nonzero(np.diff(np.array(inside, int))))
    dE = sum(plant.energy()) - E0
    resid = abs(dE - (w_in - w_diss)) / max(abs(w_in), w_diss)
    print(f"\nbacklash chain: {crossings} band-edge crossings, dE = {dE:.5f} J, W_in = {w_in:.5f} J, "
          f"W_diss = {w_diss:.5f} J, relative residual {resid:.2e}")
    assert crossings >= 5
    assert resid < 1e-5


# ---------------------------------------------------------------- configuration


def test_presets_without_motor_tables_get_ideal_torque_drives():
    for name in ("seed001_arm", "canadarm", "spinup_beam"):
        plant = Plant(load_model(f"configs/{name}.toml"))
        bank = DriveBank(plant)
        cmd = np.linspace(-1e4, 1e4, plant.layout.n_joints)
        np.testing.assert_array_equal(bank.update(cmd), cmd)
        assert not bank.torque_limited and bank.interfaces == ("torque",) * plant.layout.n_joints


def test_ella_torque_limits_match_the_bus_command_ranges():
    model = load_model("configs/ella.toml")
    names = [b.joint.name for b in model.bodies]
    limits = np.array([b.joint.motor.torque_limit_N_m for b in model.bodies])
    for path in sorted((ROOT / "configs" / "bus").glob("*.toml")):
        np.testing.assert_allclose(CommandOutput(BusMap.load(path), names).limit, limits, err_msg=path.name)


ELLA_TEXT = (ROOT / "configs" / "ella.toml").read_text()
MOTOR = "  [body.joint.motor]\n"


def _ella(old: str, new: str, count: int = 1) -> str:
    assert ELLA_TEXT.count(old) >= count, old
    return ELLA_TEXT.replace(old, new, count)


BROKEN = {
    # id: (text, key, value, fragments of the expectation, e.g. the unit)
    "backlash_without_elasticity": (_ella("  coulomb_N_m = 0.5\n", "  coulomb_N_m = 0.5\n  backlash_rad = 0.01\n"),
                                    "body[link2].joint.backlash_rad", "0.01", ["0 rad", "elasticity"]),
    "negative_backlash": (_ella("  coulomb_N_m = 0.5\n", "  coulomb_N_m = 0.5\n  backlash_rad = -0.01\n"),
                          "body[link2].joint.backlash_rad", "-0.01", ["non-negative", "rad"]),
    "stribeck_without_velocity": (_ella("  coulomb_N_m = 0.5\n", "  coulomb_N_m = 0.5\n  stribeck_N_m = 0.2\n"),
                                  "body[link2].joint.stribeck_velocity_rad_s", "<missing>",
                                  ["required", "positive", "rad/s"]),
    "efficiency_above_one": (_ella("gear_efficiency = 1.0", "gear_efficiency = 1.2"),
                             "body[yaw_carrier].joint.motor.gear_efficiency", "1.2", ["at most 1"]),
    "negative_resistance": (_ella("resistance_ohm = 1.2", "resistance_ohm = -1.2"),
                            "body[yaw_carrier].joint.motor.resistance_ohm", "-1.2", ["positive", "ohm"]),
    "missing_bandwidth": (_ella("    current_bandwidth_hz = 1500.0\n", ""),
                          "body[yaw_carrier].joint.motor.current_bandwidth_hz", "<missing>",
                          ['interface = "current"', "Hz"]),
    "voltage_without_inductance": (_ella('interface = "current"\n    resistance_ohm = 1.2\n    inductance_H = 3.2e-4\n',
                                         'interface = "voltage"\n    resistance_ohm = 1.2\n'),
                                   "body[yaw_carrier].joint.motor.inductance_H", "<missing>",
                                   ['interface = "voltage"', "in H"]),
    "bad_interface": (_ella('interface = "current"', 'interface = "velocity"'),
                      "body[yaw_carrier].joint.motor.interface", '"velocity"', ['"torque"', '"voltage"']),
    "unknown_motor_key": (_ella("supply_V = 48.0", "supply_V = 48.0\n    kv_rpm_V = 158.0"),
                          "body[yaw_carrier].joint.motor.kv_rpm_V", "158.0", ["unknown key", "back_emf_V_s_rad"]),
    "current_limit_without_kt": (
        _ella('interface = "current"\n    resistance_ohm = 1.2\n    inductance_H = 3.2e-4\n'
              '    torque_constant_N_m_A = 0.06\n', 'interface = "torque"\n'),
        "body[yaw_carrier].joint.motor.current_limit_A", "30.0", ["torque_constant_N_m_A", "N m/A", "in A"]),
    "rotor_inertia_twice": (_ella("supply_V = 48.0", "supply_V = 48.0\n    rotor_inertia_kg_m2 = 1.4e-5"),
                            "body[yaw_carrier].joint.motor.rotor_inertia_kg_m2", "1.4e-5", ["one place", "kg m^2"]),
    "kinetic_above_holding": (_ella("brake_torque_N_m = 100.0", "brake_torque_N_m = 100.0\n    brake_kinetic_N_m = 120.0"),
                              "body[link2].joint.motor.brake_kinetic_N_m", "120.0",
                              ["at most brake_torque_N_m = 100.0 N m"]),
    "negative_torque_limit": (_ella("torque_limit_N_m = 90.0", "torque_limit_N_m = -90.0"),
                              "body[link2].joint.motor.torque_limit_N_m", "-90.0", ["positive", "N m (link side)"]),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_drive_config_names_file_key_and_unit(case):
    text, key, value, fragments = BROKEN[case]
    with pytest.raises(ConfigError) as info:
        load_model_from_string(text, "configs/ella_broken.toml")
    msg = str(info.value)
    assert msg.startswith(f"configs/ella_broken.toml: {key} = "), msg
    assert value in msg, msg
    for frag in fragments:
        assert frag in msg, (frag, msg)


def test_motor_table_may_carry_the_rotor_inertia():
    text = _ella("  rotor_inertia_kg_m2 = 1.3e-5\n", "", 3).replace(
        "supply_V = 48.0", "supply_V = 48.0\n    rotor_inertia_kg_m2 = 1.4e-5")
    model = load_model_from_string(text, "ella_motor_rotor.toml")
    assert [b.joint.rotor_inertia_kg_m2 for b in model.bodies] == [1.4e-5] * 3


def test_drive_spec_built_in_python_is_checked():
    plant = Plant(rig())
    with pytest.raises(ValueError, match="current_bandwidth_hz"):
        DriveBank(plant, [DriveSpec("current", torque_constant_N_m_A=0.05)])
    with pytest.raises(ValueError, match="gear_efficiency"):
        DriveBank(plant, [DriveSpec(gear_efficiency=1.5)])
    with pytest.raises(ValueError, match="1 joints"):
        DriveBank(plant, [None, None])
    with pytest.raises(ValueError, match="brake_kinetic_N_m"):
        DriveBank(plant, [DriveSpec(brake_torque_N_m=10.0, brake_kinetic_N_m=12.0)])
    with pytest.raises(ValueError, match="no brake on a prescribed joint"):
        DriveBank(Plant(rig(prescribed=True)), [DriveSpec(brake_torque_N_m=10.0)])
    with pytest.raises(ValueError, match=r"current_limit_A = 5.0: expected no current limit in A without "
                                         r"torque_constant_N_m_A \(N m/A\)"):
        DriveBank(plant, [DriveSpec(current_limit_A=5.0)])


@pytest.mark.parametrize("interface", md.INTERFACES)
def test_a_current_limit_needs_the_torque_constant_for_every_interface(interface):
    """Kt turns the current limit into a torque: without it a limit is refused whatever the interface
    (current and voltage drives need Kt anyway)."""
    others = {k: 1.0 for k in md.DRIVE_REQUIRED.get(interface, ()) if k != "torque_constant_N_m_A"}
    spec = DriveSpec(interface, **others, current_limit_A=5.0)
    assert [p.key for p in md.drive_problems(spec)] == ["torque_constant_N_m_A"] * (interface != "torque") + [
        "current_limit_A"]
    assert md.drive_problems(dataclasses.replace(spec, torque_constant_N_m_A=0.05)) == []


SAME_MESSAGE = {
    # id of a BROKEN case: its joint and the change to that joint's DriveSpec that gives the same value in code
    "negative_resistance": (0, dict(resistance_ohm=-1.2)),
    "efficiency_above_one": (0, dict(gear_efficiency=1.2)),
    "bad_interface": (0, dict(interface="velocity")),
    "current_limit_without_kt": (0, dict(interface="torque", torque_constant_N_m_A=0.0)),
    "kinetic_above_holding": (2, dict(brake_kinetic_N_m=120.0)),
    "negative_torque_limit": (2, dict(torque_limit_N_m=-90.0)),
}


@pytest.fixture(scope="module")
def ella_broken():
    """ELLA loaded under the broken files' name, and its plant."""
    model = load_model_from_string(ELLA_TEXT, "configs/ella_broken.toml")
    return model, Plant(model)


@pytest.mark.parametrize("case", sorted(SAME_MESSAGE))
def test_broken_drive_value_gives_the_same_message_from_toml_and_from_code(case, ella_broken):
    model, plant = ella_broken
    k, change = SAME_MESSAGE[case]
    with pytest.raises(ConfigError) as from_toml:
        load_model_from_string(BROKEN[case][0], "configs/ella_broken.toml")
    specs = [b.joint.motor for b in model.bodies]
    specs[k] = dataclasses.replace(specs[k], **change)
    with pytest.raises(ValueError) as from_code:
        DriveBank(plant, specs)
    assert str(from_code.value) == str(from_toml.value)
