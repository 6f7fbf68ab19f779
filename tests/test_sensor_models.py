"""Sensor models against hand computations, beam theory and the statistics they promise."""
from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest

from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from config_schema import ConfigError
from hil.model.config import load_model, load_model_from_string
from hil.dynamics.plant import Plant
from hil.logs.runlog import read_run
from hil.runtime.loop import Emulator, RuntimeOptions
from hil.model.sensor_specs import (
    AbsEncoderSpec,
    CurrentSpec,
    EncoderSpec,
    ImuSpec,
    SignalChain,
    StrainSpec,
    TorqueSpec,
    TriadChain,
)
from hil.devices.sensors import SensorSuite
from links import memory_pair

ELLA = "configs/ella.toml"
DT = 1e-3
UP = np.array([0.0, 0.0, 9.81])           # specific force at rest: gravity (-z) reversed


def _rpy(r: float, p: float, y: float) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def _one_body_text(joint: str, body: str = "", extra: str = "") -> str:
    """A one-joint arm (joint table lines `joint`, body tables `body`) with a station "tip"."""
    return f"""
[model]
name = "one"
gravity_m_s2 = [0.0, 0.0, -9.81]
[[body]]
name = "arm"
parent = "base"
  [body.joint]
  name = "j"
{joint}
{body or '''  [body.rigid]
  mass_kg = 1.0
  inertia_kg_m2 = [0.01, 0.01, 0.01]'''}
[[station]]
name = "tip"
body = "arm"
{'station_m = 0.8' if 'beam' in body else 'offset_m = [0.5, 0.0, 0.0]'}
{extra}
"""


def _one_body(joint: str, body: str = "", extra: str = "") -> Plant:
    return Plant(load_model_from_string(_one_body_text(joint, body, extra), "one.toml"))


def _at_rest() -> Plant:
    """A rigid arm turning about the vertical: gravity exerts no torque, so it stays at rest."""
    return _one_body('  axis = [0.0, 0.0, 1.0]')


def _moving(q_rad: list[float], t_s: list[float], gear: float = 10.0) -> Plant:
    """A rigid arm whose angle follows a spline through (t_s, q_rad)."""
    return _one_body(f'''  axis = [0.0, 0.0, 1.0]
  gear_ratio = {gear}
  drive = "prescribed"
    [body.joint.profile]
    kind = "table"
    t_s = {t_s}
    q_rad = {q_rad}''')


def _wrap(count: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return (count + half) % (1 << bits) - half


def _run(suite: SensorSuite, n: int, tau=None) -> tuple[np.ndarray, np.ndarray]:
    """measured and truth after each of n steps, (n, channels)."""
    tau = np.zeros(suite.plant.layout.n_joints) if tau is None else tau
    meas, truth = np.zeros((n, len(suite.channel_names))), np.zeros((n, len(suite.channel_names)))
    for i in range(n):
        suite.plant.step(tau)
        suite.sample()
        meas[i], truth[i] = suite.measured, suite.truth
    return meas, truth


# ----------------------------------------------------------------------------- encoders
def test_encoder_counts_wrap_in_a_narrow_counter_and_the_index_latches_the_last_mark():
    # motor angle 10 q: up to 30 rad (4.8 revolutions) and back to -10 rad, 400 counts per revolution
    plant = _moving([0.0, 3.0, -1.0], [0.0, 0.6, 1.2])
    spec = EncoderSpec(joint="j", lines_per_rev=100, quadrature=4, counter_bits=10, index_count=37)
    suite = SensorSuite(plant, [spec])
    enc, idx = suite.channel("enc_j"), suite.channel("index_j")
    assert suite.measured[idx] == 0                       # nothing latched yet
    prev = math.floor(10 * plant.q()[0] * 400 / (2 * math.pi))
    latch, wrapped, crossings = 0, 0, 0
    for _ in range(1200):
        suite.plant.step(np.zeros(1))
        suite.sample()
        now = math.floor(10 * plant.q()[0] * 400 / (2 * math.pi))
        assert suite.measured[enc] == _wrap(now, 10)
        assert suite.truth[enc] == pytest.approx(10 * plant.q()[0] * 400 / (2 * math.pi), abs=1e-9)
        wrapped += suite.measured[enc] != now
        # the marks at 37 + 400 k the counter passed this step; the latch keeps the last one passed
        marks = [m for m in range(min(prev, now) + 1, max(prev, now) + 1) if (m - 37) % 400 == 0]
        if marks:
            latch = max(marks) if now > prev else min(marks)
            crossings += len(marks)
        assert suite.truth[idx] == latch
        assert suite.measured[idx] == _wrap(latch, 10)
        prev = now
    assert wrapped > 100 and crossings >= 10              # the run exercised the wrap and both directions


def test_abs_encoder_reads_the_single_turn_link_angle():
    plant = _at_rest()
    suite = SensorSuite(plant, [AbsEncoderSpec(joint="j", resolution_bits=12, zero_rad=0.3)])
    c = suite.channel("abs_j")
    for q in (0.3, 0.31, 1.0, -0.5, 6.5, 100.0, -100.0):
        plant.pos[0] = q
        suite.reset()
        turn = (q - 0.3) % (2 * math.pi) * 4096 / (2 * math.pi)
        assert suite.truth[c] == pytest.approx(turn, abs=1e-9)
        assert suite.measured[c] == math.floor(turn) and 0 <= suite.measured[c] <= 4095


# ----------------------------------------------------------------------------- IMU kinematics
def test_imu_at_rest_reads_gravity_in_the_mounted_frame_plus_bias():
    plant = Plant(load_model(ELLA))
    plant.pos[:3] = [0.4, -0.3, 0.6]
    hold = plant.equilibrium_eta()
    rpy = (0.3, -0.5, 1.2)
    ba, bg = np.array([0.1, -0.2, 0.3]), np.array([0.01, 0.02, -0.03])
    imu = ImuSpec(station="tip", rpy_rad=np.array(rpy), accel=TriadChain(bias=ba), gyro=TriadChain(bias=bg))
    suite = SensorSuite(plant, [imu])
    suite.plant.step(hold)
    suite.sample()
    R_sensor = plant.station("tip")["rotation"] @ _rpy(*rpy)
    np.testing.assert_allclose(suite.imu[0, :3], R_sensor.T @ UP + ba, atol=1e-6)
    np.testing.assert_allclose(suite.imu[0, 3:], bg, atol=1e-9)
    assert abs(R_sensor.T @ UP - UP).max() > 1.0         # the mounting really turns the reading


def _clamped_free_tip_slopes(L: float, n: int) -> np.ndarray:
    """phi'(L) / phi(L) of the first n clamped-free bending modes (Euler-Bernoulli, closed form)."""
    out = []
    for bl in (1.8751040687119611, 4.6940911329741745)[:n]:
        b = bl / L
        s = (math.cosh(bl) + math.cos(bl)) / (math.sinh(bl) + math.sin(bl))
        phi = math.cosh(bl) - math.cos(bl) - s * (math.sinh(bl) - math.sin(bl))
        dphi = b * (math.sinh(bl) + math.sin(bl) - s * (math.cosh(bl) - math.cos(bl)))
        out.append(dphi / phi)
    return np.array(out)


def test_imu_rate_is_the_joint_rates_plus_the_link_slope_rates():
    """ELLA straight out (q = 0, links undeformed: every frame parallel to the world's), moving:
    omega = qd_yaw z + qd_pitch y + qd_elbow z + link 1's cross-section rate at its tip (it
    carries the elbow) + link 2's torsion rate at its tip; unit-tip-value modes give the
    clamped-free tip slopes phi'(L) and the torsion tip value 1."""
    plant = Plant(load_model(ELLA))
    lay = plant.layout
    plant.pos[:] = 0.0
    plant.vel[:] = 0.0
    qd = np.array([0.3, -0.2, 0.5])
    eta1 = np.array([0.02, -0.01, 0.03, 0.015, 0.04])     # bending_y 1-2, bending_z 1-2, torsion
    eta2 = np.array([0.0, 0.0, 0.0, 0.0, -0.05])
    plant.vel[:3] = qd
    plant.vel[lay.eta_index(1, 0):lay.eta_index(1, 0) + 5] = eta1
    plant.vel[lay.eta_index(2, 0):lay.eta_index(2, 0) + 5] = eta2
    rpy = (0.2, 0.1, -0.4)
    suite = SensorSuite(plant, [ImuSpec(station="tip", rpy_rad=np.array(rpy))])
    slope = _clamped_free_tip_slopes(0.95, 2)
    omega = np.array([0.0, 0.0, qd[0]]) + np.array([0.0, qd[1], 0.0]) + np.array([0.0, 0.0, qd[2]])
    omega += [eta1[4], -slope @ eta1[2:4], slope @ eta1[0:2]]      # link 1 at x = L1: torsion, bending
    omega += [eta2[4], 0.0, 0.0]
    np.testing.assert_allclose(suite.imu[0, 3:], _rpy(*rpy).T @ omega, rtol=1e-9, atol=1e-12)
    assert abs(slope @ eta1[0:2]) > 0.02                    # the elastic part is not negligible


def test_misalignment_mixes_the_ideal_axes():
    plant = Plant(load_model(ELLA))
    plant.vel[:3] = [0.3, -0.2, 0.5]
    Ma = np.array([[0.0, 0.01, -0.02], [0.03, 0.0, 0.005], [-0.01, 0.02, 0.0]])
    Mg = np.array([[0.0, -0.04, 0.01], [0.02, 0.0, -0.03], [0.05, 0.01, 0.0]])
    suite = SensorSuite(plant, [ImuSpec(station="tip", accel=TriadChain(misalignment=Ma),
                                        gyro=TriadChain(misalignment=Mg))])
    a, g = suite.imu[0, :3], suite.imu[0, 3:]
    ideal_a = suite.truth[[suite.channel(f"imu_a{x}") for x in "xyz"]]
    ideal_g = suite.truth[[suite.channel(f"imu_g{x}") for x in "xyz"]]
    np.testing.assert_allclose(a, (np.eye(3) + Ma) @ ideal_a, rtol=1e-12)
    np.testing.assert_allclose(g, (np.eye(3) + Mg) @ ideal_g, rtol=1e-12)
    assert np.abs(g - ideal_g).max() > 1e-3


def test_a_scale_error_scales_each_axis_before_the_bias_and_a_current_sensor_alike():
    """(1 + e) (I + M) s + b per triad axis; a single channel (1 + e) s + b. e = 0 leaves the reading as it was."""
    plant = Plant(load_model(ELLA))
    plant.vel[:3] = [0.3, -0.2, 0.5]
    e, Mg, bg = np.array([0.02, -0.03, 0.01]), np.array([[0.0, -0.04, 0.01], [0.02, 0.0, -0.03], [0.05, 0.01, 0.0]]), \
        np.array([1e-3, -2e-3, 3e-3])
    scaled = ImuSpec(station="tip", gyro=TriadChain(misalignment=Mg, bias=bg, scale_error=e))
    plain = ImuSpec(station="tip", name="plain", gyro=TriadChain(misalignment=Mg, bias=bg))
    current = CurrentSpec(joint="elbow", chain=SignalChain(bias=0.1, scale_error=-0.05))
    suite = SensorSuite(plant, [scaled, plain, current], current_source=np.array([0.0, 0.0, 4.0]))
    g, g0 = suite.imu[0, 3:], suite.imu[1, 3:]
    ideal = suite.truth[[suite.channel(f"imu_g{x}") for x in "xyz"]]
    np.testing.assert_allclose(g, (1 + e) * ((np.eye(3) + Mg) @ ideal) + bg, rtol=1e-12)
    np.testing.assert_allclose(g0, (np.eye(3) + Mg) @ ideal + bg, rtol=1e-12)
    assert suite.measured[suite.channel("cur_elbow")] == pytest.approx(0.95 * 4.0 + 0.1, rel=1e-12)


def test_sensors_without_noise_read_bias_and_scale_only_step_after_step():
    """noise=False (a replay's sensors): no white noise and no bias walk at any step, from the first;
    with noise the same chain wanders (the check can fail)."""
    chain = dict(noise_density=1e-3, bias=np.array([1e-3, -2e-3, 3e-3]), bias_walk=1e-2, scale_error=np.array([0.0, 0.0, 0.02]))
    readings = {}
    for noise in (False, True):
        suite = SensorSuite(_at_rest(), [ImuSpec(station="tip", gyro=TriadChain(**chain))], noise=noise)
        readings[noise] = _run(suite, 200)[0][:, 3:6]
    np.testing.assert_allclose(readings[False], np.tile(chain["bias"], (200, 1)), rtol=0, atol=1e-15)
    assert np.abs(readings[True] - chain["bias"]).max() > 1e-3


# ----------------------------------------------------------------------------- noise statistics
N_SAMPLES = 20000


def test_white_noise_has_the_configured_density_and_bias():
    """sigma = N sqrt(f_s / 2) per sample without a filter; through the first-order low-pass the
    variance is sigma^2 alpha / (2 - alpha), close to the continuous N^2 pi f_c / 2."""
    plant = _at_rest()
    Na, Ng, fc = 2e-3, 1e-4, 50.0
    ba, bg = np.array([0.05, -0.1, 0.2]), np.array([1e-3, -2e-3, 3e-3])
    raw = ImuSpec(station="tip", name="raw", accel=TriadChain(noise_density=Na, bias=ba),
                  gyro=TriadChain(noise_density=Ng, bias=bg))
    filtered = ImuSpec(station="tip", name="lpf", accel=TriadChain(noise_density=Na, lpf_hz=fc),
                       gyro=TriadChain(noise_density=Ng, lpf_hz=fc))
    suite = SensorSuite(plant, [raw, filtered], seed=7)
    meas, truth = _run(suite, N_SAMPLES)
    err = meas - truth
    np.testing.assert_allclose(truth[:, :6], np.tile([0, 0, 9.81, 0, 0, 0], (N_SAMPLES, 1)), atol=1e-9)
    sigma = np.repeat([Na, Ng], 3) * math.sqrt(0.5 / DT)
    np.testing.assert_allclose(err[:, :6].std(axis=0), sigma, rtol=0.05)
    assert np.all(np.abs(err[:, :6].mean(axis=0) - np.r_[ba, bg]) < 4 * sigma / math.sqrt(N_SAMPLES))
    alpha = 1 - math.exp(-2 * math.pi * fc * DT)
    np.testing.assert_allclose(err[:, 6:].std(axis=0), sigma * math.sqrt(alpha / (2 - alpha)), rtol=0.05)
    np.testing.assert_allclose(err[:, 6:].std(axis=0), np.repeat([Na, Ng], 3) * math.sqrt(math.pi * fc / 2),
                               rtol=0.06)


def test_bias_random_walk_variance_grows_linearly_in_time():
    plant = _at_rest()
    Ba, Bg = 0.02, 1e-3
    imus = [ImuSpec(station="tip", name=f"imu{i}", accel=TriadChain(bias_walk=Ba), gyro=TriadChain(bias_walk=Bg))
            for i in range(4)]
    suite = SensorSuite(plant, imus, seed=3)
    meas, truth = _run(suite, N_SAMPLES)
    walk = (meas - truth) / np.tile(np.repeat([Ba, Bg], 3), 4)     # unit density
    for lag in (1, 10, 100, 1000):
        inc = walk[lag:] - walk[:-lag]
        assert np.mean(inc ** 2) == pytest.approx(lag * DT, rel=0.1), lag


# ----------------------------------------------------------------------------- signal chain
def _current_suite(chain: SignalChain, divider: int = 1) -> tuple[SensorSuite, np.ndarray, int]:
    plant = _at_rest()
    current = np.zeros(1)
    suite = SensorSuite(plant, [CurrentSpec(joint="j", chain=chain, divider=divider)], current_source=current)
    return suite, current, suite.channel("cur_j")


def test_saturation_and_quantisation():
    suite, current, c = _current_suite(SignalChain(range=2.0, lsb=0.01))
    for true, reading in ((0.1234, 0.12), (-0.0371, -0.04), (1.9987, 2.0), (5.0, 2.0), (-7.0, -2.0), (0.0, 0.0)):
        current[0] = true
        suite.plant.step(np.zeros(1))
        suite.sample()
        assert suite.measured[c] == pytest.approx(reading, abs=1e-12), true
        assert suite.truth[c] == true
    plant = Plant(load_model(ELLA))
    hold = plant.equilibrium_eta()
    suite = SensorSuite(plant, [ImuSpec(station="tip", accel=TriadChain(range=5.0))])
    suite.plant.step(hold)
    suite.sample()
    assert suite.imu[0, 2] == 5.0 and suite.truth[suite.channel("imu_az")] > 9.0


def test_low_pass_step_response_has_the_configured_time_constant():
    fc = 20.0
    tau = 1 / (2 * math.pi * fc)
    suite, current, c = _current_suite(SignalChain(lpf_hz=fc))
    current[0] = 1.0
    meas, _ = _run(suite, 100)
    t = np.arange(1, 101) * DT
    np.testing.assert_allclose(meas[:, c], 1 - np.exp(-t / tau), rtol=1e-12)
    assert t[np.argmax(meas[:, c] >= 1 - math.exp(-1))] == pytest.approx(tau, abs=DT)


def test_a_divider_holds_the_reading_between_samples():
    suite, current, c = _current_suite(SignalChain(), divider=4)
    seen = []
    for k in range(1, 13):
        current[0] = 0.1 * k
        suite.plant.step(np.zeros(1))
        suite.sample()
        seen.append((suite.measured[c], suite.truth[c]))
    held = [0.0] * 3 + [0.4] * 4 + [0.8] * 4 + [1.2]       # samples at steps 4, 8, 12 (and 0 at the start)
    np.testing.assert_allclose([m for m, _ in seen], held, atol=1e-12)
    np.testing.assert_allclose([t for _, t in seen], held, atol=1e-12)


def test_same_seed_same_readings_and_another_seed_other_readings():
    def readings(seed: int) -> np.ndarray:
        plant = Plant(load_model(ELLA))
        hold = plant.equilibrium_eta()
        return _run(SensorSuite(plant, seed=seed), 100, hold)[0]

    a, b, c = readings(5), readings(5), readings(6)
    assert a.tobytes() == b.tobytes()
    assert not np.array_equal(a, c)


# ----------------------------------------------------------------------------- strain and torque
def test_root_and_mid_span_strain_of_a_cantilever_under_gravity_match_beam_theory():
    """A horizontal steel strip clamped at its joint, sagging under its own weight q = rho A g:
    M(x) = q (L - x)^2 / 2, and a gauge on the top face (z = +h/2) reads eps = M h / (2 E I_y)."""
    E, rho, A, Iy, L, h = 2.1e11, 7800.0, 2e-4, 1.5e-9, 0.8, 0.0067
    plant = _one_body('  axis = [0.0, 1.0, 0.0]', f'''  [body.beam]
  length_m = {L}
  E_Pa = {E}
  G_Pa = 8.1e10
  rho_kg_m3 = {rho}
  area_m2 = {A}
  Iy_m4 = {Iy}
  Iz_m4 = 4e-9
  torsion_constant_m4 = 3e-9
  damping_ratio = 0.01
    [body.beam.modes]
    bending_y = 2
    bending_z = 8''', '''[[station]]
name = "root"
body = "arm"
station_m = 0.0
[[station]]
name = "mid"
body = "arm"
station_m = 0.4''')
    plant.equilibrium_eta()
    gauges = [StrainSpec(name="root_top", station="root", plane="bending_z", distance_m=h / 2),
              StrainSpec(name="root_bottom", station="root", plane="bending_z", distance_m=-h / 2),
              StrainSpec(name="mid_top", station="mid", plane="bending_z", distance_m=h / 2),
              StrainSpec(name="root_side", station="root", plane="bending_y", distance_m=h / 2)]
    suite = SensorSuite(plant, gauges)
    q = rho * A * 9.81
    for name, x in (("root_top", 0.0), ("mid_top", 0.4)):
        assert suite.measured[suite.channel(f"strain_{name}")] == pytest.approx(
            q * (L - x) ** 2 / 2 * h / (2 * E * Iy), rel=5e-3), name
    assert suite.measured[suite.channel("strain_root_bottom")] == -suite.measured[suite.channel("strain_root_top")]
    assert suite.measured[suite.channel("strain_root_side")] == pytest.approx(0.0, abs=1e-12)


def test_torque_sensor_at_rest_reads_the_holding_torque():
    plant = Plant(load_model(ELLA))
    plant.pos[:3] = [0.5, -0.4, 0.9]
    hold = plant.equilibrium_eta()
    suite = SensorSuite(plant, [TorqueSpec(joint=j) for j in plant.layout.joint_names])
    np.testing.assert_allclose(suite.measured, hold, rtol=1e-9, atol=1e-9)
    suite.plant.step(hold)
    suite.sample()
    np.testing.assert_allclose(suite.measured, hold, rtol=1e-6, atol=1e-6)
    assert abs(hold[1]) > 10.0


def test_torque_sensor_of_a_spong_joint_reads_the_spring():
    k, d = 4e3, 3.0
    plant = _one_body(f'''  axis = [0.0, 0.0, 1.0]
  gear_ratio = 50.0
  rotor_inertia_kg_m2 = 1e-5
    [body.joint.elasticity]
    stiffness_N_m_rad = {k}
    damping_N_m_s_rad = {d}''')
    rotor = plant.layout.motor_index(0)
    plant.pos[0], plant.pos[rotor] = 0.2, 0.21
    plant.vel[0], plant.vel[rotor] = 0.5, 0.3
    suite = SensorSuite(plant, [TorqueSpec(joint="j"), EncoderSpec(joint="j", lines_per_rev=1000)])
    assert suite.measured[suite.channel("torque_j")] == pytest.approx(k * 0.01 + d * (0.3 - 0.5), rel=1e-9)
    # the encoder sits on the motor: it counts the rotor, not the link
    assert suite.measured[suite.channel("enc_j")] == math.floor(50 * 0.21 * 4000 / (2 * math.pi))


# ----------------------------------------------------------------------------- bus and log
SENSOR_MAP = """
[bus]
kind = "serial"
bitrate_bps = 921600
cycle_s = 0.001
[[message]]
name = "cmd"
id = 0x01
direction = "to_plant"
length_bytes = 6
  [[message.signal]]
  name = "tau_j"
  type = "int16"
  start_bit = 0
  scale = 0.01
  min = -300.0
  max = 300.0
[[message]]
name = "sensors"
id = 0x81
direction = "to_firmware"
length_bytes = 12
  [[message.signal]]
  name = "index_j"
  type = "int32"
  start_bit = 0
  [[message.signal]]
  name = "cur_j"
  type = "int16"
  start_bit = 32
  scale = 0.001
  min = -30.0
  max = 30.0
  [[message.signal]]
  name = "spare"
  type = "int16"
  start_bit = 48
  [[message.signal]]
  name = "enc_j"
  type = "int32"
  start_bit = 64
"""


def test_sensor_output_fills_every_signal_named_like_a_channel():
    bus = BusMap.from_string(SENSOR_MAP, "sensor_map.toml")
    out = SensorOutput(bus, ["j"])
    with pytest.raises(ConfigError, match=r"signal\[spare\].name = \"spare\": expected a sensor channel"):
        out.bind(["cur_j", "enc_j", "vel_j", "index_j"])     # a signal without a channel would always read 0
    bus = BusMap.from_string(SENSOR_MAP.replace('name = "spare"', 'name = "vel_j"'), "sensor_map.toml")
    out = SensorOutput(bus, ["j"])
    out.bind(["cur_j", "enc_j", "vel_j", "index_j"])
    frame, = out.frames(3, np.array([1.234, -77.0, 5.0, 16421.0]), status=1)
    values = bus.codec("sensors").decode(frame)
    assert values.tolist() == [16421.0, 1.234, 5.0, -77.0]


def test_the_run_log_keeps_the_truth_beside_every_measured_value(tmp_path):
    plant = Plant(load_model(ELLA))
    plant.equilibrium_eta()
    bus = BusMap.load("configs/bus/serial_frame.toml")
    names = plant.layout.joint_names
    link, _ = memory_pair()
    log = tmp_path / "run.msgpack"
    emu = Emulator(plant, link, CommandInput(bus, names), SensorOutput(bus, names),
                   RuntimeOptions(mode="afap", realtime=False, duration_s=0.05, log_path=str(log), start="immediately"))
    emu.run()
    header, rows = read_run(log)
    cols = header["columns"]
    col = {c: rows[:, i] for i, c in enumerate(cols)}
    for name in emu.sensors.channel_names:
        assert f"{name}_true" in cols and cols.index(f"{name}_true") == cols.index(name) + 1
    assert {"enc_base_yaw", "enc_base_yaw_true", "imu_gz", "imu_gz_true", "cur_elbow_true"} <= set(cols)
    np.testing.assert_array_equal(col["enc_elbow"], np.floor(col["enc_elbow_true"]))
    gyro = np.c_[col["imu_gx"] - col["imu_gx_true"], col["imu_gy"] - col["imu_gy_true"]]
    assert 0 < np.abs(gyro).max() < 0.02                   # noise and bias on top of the truth


def test_full_fd_carries_every_sensor_of_the_ella_preset():
    """Encoders, index latches, IMU and motor currents in one 64-byte CAN FD frame; what the
    firmware decodes is the measured value to within half a bus LSB."""
    plant = Plant(load_model(ELLA))
    plant.equilibrium_eta()
    bus = BusMap.load("configs/bus/full_fd.toml")
    names = plant.layout.joint_names
    link, fw_link = memory_pair()
    emu = Emulator(plant, link, CommandInput(bus, names), SensorOutput(bus, names),
                   RuntimeOptions(mode="afap", realtime=False))
    codec = bus.codec("sensors")
    assert set(codec.signal_names) - {"status", "cycle"} == set(emu.sensors.channel_names) - {
        f"vel_{j}" for j in names}
    lsb = {s.name: s.scale for s in codec.spec.signals}
    for _ in range(5):
        emu.step_once()
        while (frame := fw_link.recv()) is not None:
            values = dict(zip(codec.signal_names, codec.decode(frame)))
        for name in codec.signal_names[:-2]:
            assert abs(values[name] - emu.sensors.measured[emu.sensors.channel(name)]) <= 0.5 * lsb[name] + 1e-12
    assert values["cur_shoulder_pitch"] < -1.0            # the pitch motor holds the arm against gravity


# ----------------------------------------------------------------------------- configuration
def test_a_preset_without_sensor_tables_gets_the_default_set():
    plant = Plant(load_model("configs/seed001_arm.toml"))
    suite = SensorSuite(plant)
    joints = plant.layout.joint_names
    expected = [f"{p}_{j}" for j in joints for p in ("enc", "index", "vel")]
    expected += [f"imu_{a}" for a in ("ax", "ay", "az", "gx", "gy", "gz")]
    assert suite.channel_names == expected
    imu = [suite.channel(f"imu_{a}") for a in ("ax", "ay", "az", "gx", "gy", "gz")]
    np.testing.assert_array_equal(suite.measured[imu], suite.truth[imu])       # ideal
    assert all(isinstance(s, EncoderSpec) and s.counts_per_rev == 16384 and s.counter_bits == 32
               for s in plant.asm.model.sensors[:len(joints)])


def test_every_numeric_sensor_value_of_ella_has_provenance():
    raw = tomllib.loads(open(ELLA, encoding="utf-8").read())
    prov = load_model(ELLA).provenance
    missing = []
    for s in raw["sensor"]:
        name = s.get("name") or {"encoder": "enc", "current": "cur"}[s["kind"]] + "_" + s["joint"]
        for key, value in s.items():
            tables = value.items() if isinstance(value, dict) else [(None, value)]
            for sub, v in tables:
                full = f"sensor.{name}.{key}" + (f".{sub}" if sub else "")
                if not isinstance(v, (bool, str)) and f"{full}" not in prov:
                    missing.append(full)
    assert not missing


BROKEN_SENSORS = {
    "negative_noise": ('kind = "imu"\nstation = "tip"\n  [sensor.accel]\n  noise_density_m_s2_rtHz = -1.0',
                       "sensor[imu].accel.noise_density_m_s2_rtHz", ["non-negative", "m/s^2/sqrt(Hz)"]),
    "unknown_joint": ('kind = "encoder"\njoint = "wrist"', "sensor[enc_wrist].joint", ["joints 'j'"]),
    "bad_quadrature": ('kind = "encoder"\njoint = "j"\nquadrature = 3', "sensor[enc_j].quadrature", ["1, 2 or 4"]),
    "strain_on_rigid": ('kind = "strain"\nname = "g"\nstation = "tip"', "sensor[g].station", ["flexible body"]),
    "unknown_kind": ('kind = "lidar"', "sensor[#1].kind", ['"encoder"', '"strain"']),
    "bad_range": ('kind = "current"\njoint = "j"\nrange_A = 0.0', "sensor[cur_j].range_A", ["positive", "in A"]),
    "misalignment_diagonal": ('kind = "imu"\nstation = "tip"\n  [sensor.gyro]\n'
                              '  misalignment_rad = [[0.01, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]',
                              "sensor[imu].gyro.misalignment_rad", ["zero diagonal", "rad"]),
    "scale_error_too_large": ('kind = "current"\njoint = "j"\nscale_error = 0.7', "sensor[cur_j].scale_error",
                              ["at most 0.5"]),
    "triad_scale_error_too_large": ('kind = "imu"\nstation = "tip"\n  [sensor.gyro]\n  scale_error = [0.0, -0.6, 0.0]',
                                    "sensor[imu].gyro.scale_error", ["within +-0.5"]),
    "unknown_key": ('kind = "torque"\njoint = "j"\nnoise_density_Nm_rtHz = 1.0',
                    "sensor[torque_j].noise_density_Nm_rtHz", ["unknown key", "noise_density_N_m_rtHz"]),
    "two_encoders_one_joint": ('kind = "encoder"\njoint = "j"\n\n[[sensor]]\nkind = "encoder"\nname = "e2"\n'
                               'joint = "j"', "sensor[e2].joint", ["enc_j, index_j, vel_j", "taken"]),
    "duplicate_name": ('kind = "current"\njoint = "j"\n\n[[sensor]]\nkind = "current"\njoint = "j"',
                       "sensor[cur_j].name", ["unique sensor name"]),
}


@pytest.mark.parametrize("case", sorted(BROKEN_SENSORS))
def test_a_broken_sensor_table_names_file_key_and_expectation(case):
    table, key, fragments = BROKEN_SENSORS[case]
    text = _one_body_text('  axis = [0.0, 0.0, 1.0]', extra="[[sensor]]\n" + table)
    with pytest.raises(ConfigError) as info:
        load_model_from_string(text, "broken.toml")
    msg = str(info.value)
    assert msg.startswith(f"broken.toml: {key} = "), msg
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)
