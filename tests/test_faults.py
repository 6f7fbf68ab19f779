"""Fault injection: every fault kind's effect and its clearance, triggers, durations, scenarios.

Signal faults act on a stand-in sensor suite (channel names and the truth/measured arrays the
sensor suite exposes); plant faults on the ELLA plant and a stand-in drive bank; bus faults on
frames of the shipped bus maps through a FaultyLink over an in-memory link (CAN maps) or a pty
pair (serial map), read back by the firmware-side FrameReader.
"""
from __future__ import annotations

import copy
import math
import re
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.links.faults import FaultyLink
from firmware_bridge.links.serial import SerialLink, open_pty_pair
from firmware_bridge.wire.framing import encode_frame
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.frame_io import FrameReader, FrameWriter
from config_schema import ConfigError
from hil.model import spec as md
from hil.model.config import load_model
from hil.devices.drives import P_STICK, DriveBank
from hil.faults.engine import FaultEngine, bus_encoding, encoder_counter_bits
from hil.faults.spec import Duration, Fault, FaultError, Trigger
from hil.model.linearize import component_frequencies_hz
from hil.dynamics.plant import REAL_AXIS_STABILITY, Plant
from hil.model.sensor_specs import EncoderSpec, ImuSpec
from hil.faults.scenario import load_scenario, scenario_from_string
from links import memory_pair, wait_bytes
from hil.kernels.layout import JP_BRAKE_VS

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "configs" / "ella.toml"
FD = ROOT / "configs" / "bus" / "compact_fd.toml"
CLASSIC = ROOT / "configs" / "bus" / "compact_classic.toml"
SERIAL = ROOT / "configs" / "bus" / "serial_frame.toml"
SCENARIOS = sorted((ROOT / "configs" / "scenarios").glob("*.toml"))
DT = 1e-3
CHANNELS = ["enc_base_yaw", "enc_shoulder_pitch", "enc_elbow", "vel_elbow", "abs_elbow", "imu_ax", "imu_ay",
            "imu_az", "imu_gx", "imu_gy", "imu_gz", "strain_root1", "cur_elbow", "torque_elbow", "elbow_imu_gz"]


# ----------------------------------------------------------------------------- stand-ins
class Suite:
    """The sensor suite's interface: channel names, truth and measured arrays, channel(name).
    Each channel reads a distinct ramp, so every sample differs from the last."""

    def __init__(self) -> None:
        self.channel_names = list(CHANNELS)
        self.truth = np.zeros(len(CHANNELS))
        self.measured = np.zeros(len(CHANNELS))

    def channel(self, name: str) -> int:
        return self.channel_names.index(name)

    def sample(self, k: int) -> None:
        self.truth[:] = 100.0 * np.arange(len(CHANNELS)) + 0.5 * k
        self.measured[:] = self.truth


class Drives:
    """The drive bank's fault interface: kt_scale per joint, set_brake, set_friction_scale."""

    def __init__(self, joint_names: list[str]):
        self.names = joint_names
        self.kt_scale = np.ones(len(joint_names))
        self.brake = np.zeros(len(joint_names), bool)
        self.friction_scale = np.ones(len(joint_names))

    def set_brake(self, joint_index: int, engaged: bool) -> None:
        self.brake[joint_index] = engaged

    def set_friction_scale(self, joint_index: int, factor: float) -> None:
        self.friction_scale[joint_index] = factor


def run(engine: FaultEngine, suite: Suite, cycles: range) -> np.ndarray:
    """The measured arrays of the given cycles, one row each, with the engine's hooks in loop order."""
    rows = []
    for k in cycles:
        engine.begin_cycle(k, k * DT)
        suite.sample(k)
        engine.apply_signals(suite.measured, suite.truth)
        rows.append(suite.measured.copy())
    return np.array(rows)


def signal_rig(seed: int = 0, **kwargs) -> tuple[FaultEngine, Suite]:
    suite = Suite()
    return FaultEngine(suite.channel_names, dt_s=DT, seed=seed, **kwargs), suite


def ramp(name: str, cycles: range) -> np.ndarray:
    """The healthy samples of channel ``name`` in ``cycles``."""
    return 100.0 * CHANNELS.index(name) + 0.5 * np.array(list(cycles))


# ----------------------------------------------------------------------------- signal faults
def test_no_fault_leaves_measured_untouched_and_records_nothing():
    engine, suite = signal_rig()
    out = run(engine, suite, range(50))
    np.testing.assert_array_equal(out[:, 5], ramp("imu_ax", range(50)))
    assert engine.events == [] and not engine.any_active


@pytest.mark.parametrize("fault, expected", [
    (Fault("f", "offset", "imu_ax", {"offset_m_s2": 0.4}), lambda v, k: v + 0.4),
    (Fault("f", "gain", "imu_ax", {"gain": -2.0}), lambda v, k: -2.0 * v),
    (Fault("f", "stuck", "imu_ax", {"value_m_s2": 3.25}), lambda v, k: np.full_like(v, 3.25)),
    (Fault("f", "stuck", "imu_ax"), lambda v, k: np.full_like(v, v[0])),
    (Fault("f", "drift", "imu_ax", {"rate_m_s2_per_s": 2.0}), lambda v, k: v + 2.0 * DT * (k - k[0])),
    (Fault("f", "delay", "imu_ax", {"samples": 3}), lambda v, k: np.concatenate([[v[0]] * 3, v[:-3]])),
    (Fault("f", "dropout", "imu_ax"), lambda v, k: np.zeros_like(v)),
    (Fault("f", "dropout", "imu_ax", {"mode": "hold"}), lambda v, k: np.full_like(v, v[0])),
    (Fault("f", "nan", "imu_ax"), lambda v, k: np.full_like(v, np.nan)),
    (Fault("f", "saturation", "imu_ax", {"low_m_s2": 0.0, "high_m_s2": 505.0}), lambda v, k: np.minimum(v, 505.0)),
    (Fault("f", "quantisation", "imu_ax", {"lsb_m_s2": 4.0}), lambda v, k: np.floor(v / 4.0 + 0.5) * 4.0),
])
def test_signal_fault_acts_while_active_and_clearing_restores_the_channel(fault, expected):
    engine, suite = signal_rig()
    engine.inject(fault, Trigger.at(0.010), Duration.lasting(0.020))
    out = run(engine, suite, range(40))
    i = CHANNELS.index("imu_ax")
    healthy = ramp("imu_ax", range(40))
    active = range(10, 30)
    np.testing.assert_allclose(out[10:30, i], expected(healthy[10:30], np.array(active)), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(out[:10, i], healthy[:10])
    np.testing.assert_array_equal(out[30:, i], healthy[30:])           # cleared: the channel is healthy again
    others = np.delete(np.arange(len(CHANNELS)), i)
    np.testing.assert_array_equal(out[:, others], np.array([100.0 * others + 0.5 * k for k in range(40)]))
    assert [(e.cycle, e.action) for e in engine.events] == [(10, "inject"), (30, "clear")]


def test_dropout_flags_the_channel_invalid_while_active():
    engine, suite = signal_rig()
    engine.inject(Fault("f", "dropout", "imu_gz"), Trigger.at(0.002), Duration.lasting(0.003))
    flags = []
    for k in range(8):
        run(engine, suite, range(k, k + 1))
        flags.append(bool(engine.invalid[CHANNELS.index("imu_gz")]))
    assert flags == [False, False, True, True, True, False, False, False]


def test_noise_has_the_configured_sigma_and_a_seed_reproduces_it():
    def noise(seed: int) -> np.ndarray:
        engine, suite = signal_rig(seed)
        engine.inject(Fault("f", "noise", "imu_gz", {"sigma_rad_s": 0.05}), duration=Duration.lasting(20.0))
        return run(engine, suite, range(20000))[:, CHANNELS.index("imu_gz")] - ramp("imu_gz", range(20000))

    n = noise(1)
    assert abs(n.mean()) < 4 * 0.05 / math.sqrt(len(n))
    assert n.std() == pytest.approx(0.05, rel=0.03)
    np.testing.assert_array_equal(n, noise(1))
    assert not np.array_equal(n, noise(2))


def test_bitflip_inverts_one_bit_of_the_raw_bus_integer():
    bus = BusMap.load(FD)
    codec = bus.codec("sensors")
    engine, suite = signal_rig(encoding=bus_encoding(bus))
    engine.inject(Fault("f", "bitflip", "imu_ax", {"bit": 15}), duration=Duration.once())
    engine.inject(Fault("g", "bitflip", "enc_elbow", {"bit": 3}), duration=Duration.once())
    suite.measured[:] = 0.0                              # in every signal's range
    suite.measured[CHANNELS.index("imu_ax")] = 9.81
    suite.measured[CHANNELS.index("enc_elbow")] = 123456.0
    healthy = suite.measured.copy()
    engine.begin_cycle(0, 0.0)
    engine.apply_signals(suite.measured, suite.truth)

    def raw(values: np.ndarray, name: str, bits: int) -> int:
        v = [values[CHANNELS.index(s)] if s in CHANNELS else 0.0 for s in codec.signal_names]
        frame = codec.encode(v)
        s = codec.spec.signals[codec.index(name)]
        return (int.from_bytes(frame.data, "little") >> s.start_bit) & ((1 << bits) - 1)

    assert raw(suite.measured, "imu_ax", 16) == raw(healthy, "imu_ax", 16) ^ (1 << 15)
    assert suite.measured[CHANNELS.index("imu_ax")] < 0                 # the sign bit of the int16
    assert raw(suite.measured, "enc_elbow", 32) == raw(healthy, "enc_elbow", 32) ^ (1 << 3)
    assert suite.measured[CHANNELS.index("enc_elbow")] == 123456 ^ 8
    suite.sample(1)
    engine.begin_cycle(1, DT)
    engine.apply_signals(suite.measured, suite.truth)                   # once: gone the next cycle
    np.testing.assert_array_equal(suite.measured, suite.truth)
    with pytest.raises(FaultError, match="bit index 0..15"):
        engine.inject(Fault("h", "bitflip", "imu_ax", {"bit": 16}))
    with pytest.raises(FaultError, match="no integer-coded"):
        engine.inject(Fault("h", "bitflip", "strain_root1", {"bit": 1}))
    with pytest.raises(FaultError, match="an integer signal cannot carry NaN"):
        engine.inject(Fault("h", "nan", "imu_ax"))
    engine.inject(Fault("h", "nan", "strain_root1"))          # not an integer on this bus


def test_slip_persists_after_clearance():
    engine, suite = signal_rig()
    engine.inject(Fault("f", "slip", "enc_elbow", {"slip_counts": -40}), Trigger.at(0.005), Duration.once())
    engine.inject(Fault("g", "slip", "enc_elbow", {"slip_counts": 15}), Trigger.at(0.008), Duration.lasting(0.002))
    out = run(engine, suite, range(20))[:, CHANNELS.index("enc_elbow")]
    healthy = ramp("enc_elbow", range(20))
    np.testing.assert_array_equal(out[:5], healthy[:5])
    np.testing.assert_array_equal(out[5:8], healthy[5:8] - 40)
    np.testing.assert_array_equal(out[8:], healthy[8:] - 25)            # both slips stay after clearing
    assert [e.action for e in engine.events] == ["inject", "clear", "inject", "clear"]
    assert not engine.any_active


def test_encoder_disconnect_freezes_the_count_and_the_lost_motion_stays_lost():
    engine, suite = signal_rig()
    engine.inject(Fault("f", "encoder_disconnect", "elbow"), Trigger.at(0.010), Duration.lasting(0.005))
    out = run(engine, suite, range(30))
    enc, vel = CHANNELS.index("enc_elbow"), CHANNELS.index("vel_elbow")
    healthy = ramp("enc_elbow", range(30))
    np.testing.assert_array_equal(out[10:15, enc], healthy[10])         # no edges: the count stands still
    np.testing.assert_array_equal(out[10:15, vel], 0.0)
    lost = healthy[14] - healthy[10]
    np.testing.assert_array_equal(out[15:, enc], healthy[15:] - lost)   # counts on, 4 cycles of motion short
    np.testing.assert_array_equal(out[15:, vel], ramp("vel_elbow", range(15, 30)))


def slip_rig(**kwargs) -> tuple[FaultEngine, np.ndarray]:
    engine = FaultEngine(["enc_a", "vel_a"], dt_s=DT, **kwargs)
    return engine, np.zeros(2)


def counts(engine: FaultEngine, measured: np.ndarray, cycle: int, count: float) -> float:
    """One cycle in loop order with the counter sampled at `count`; the count the bus would carry."""
    engine.begin_cycle(cycle, cycle * DT)
    measured[0] = count
    engine.apply_signals(measured, measured.copy())
    return float(measured[0])


def test_slipped_count_wraps_like_the_counter():
    """A 16-bit counter at 32700 slipped by +400 reads 33100 - 65536 = -32436, as the real counter
    that gained 400 edges would; and back across the wrap the other way."""
    engine, m = slip_rig(counter_bits={"enc_a": 16})
    assert counts(engine, m, 0, 32700.0) == 32700.0
    engine.inject(Fault("s", "slip", "enc_a", {"slip_counts": 400}), duration=Duration.once())
    assert counts(engine, m, 1, 32700.0) == -32436.0
    assert counts(engine, m, 2, 32767.0) == -32369.0              # kept after clearing, still wrapped
    assert counts(engine, m, 3, -32768.0) == -32368.0
    engine.inject(Fault("t", "slip", "enc_a", {"slip_counts": -1000}), duration=Duration.once())
    assert counts(engine, m, 4, -32500.0) == 32436.0              # -32500 - 600 wraps to the top
    assert engine._offsets[0][1] == -600.0
    # without the width the offset is added as before (the channel is not known as a counter)
    engine, m = slip_rig()
    engine.inject(Fault("s", "slip", "enc_a", {"slip_counts": 400}))
    assert counts(engine, m, 0, 32700.0) == 33100.0


def test_encoder_disconnected_across_the_wrap_counts_on_from_the_held_count():
    engine, m = slip_rig(counter_bits={"enc_a": 16})
    h = engine.inject(Fault("d", "encoder_disconnect", "enc_a"))
    assert counts(engine, m, 0, 32700.0) == 32700.0
    assert counts(engine, m, 1, -32700.0) == 32700.0              # moved on 136 counts, through the wrap
    engine.clear(h)
    assert counts(engine, m, 2, -32690.0) == 32710.0              # 136 counts lost, 10 gained since
    assert counts(engine, m, 3, -32600.0) == -32736.0             # and the counter wraps again


def test_counter_bits_argument():
    with pytest.raises(ValueError, match="no channel 'enc_b'"):
        slip_rig(counter_bits={"enc_b": 16})
    with pytest.raises(ValueError, match="2 .. 62 bits"):
        slip_rig(counter_bits={"enc_a": 64})
    specs = [EncoderSpec(joint="elbow", counter_bits=16), ImuSpec(station="tip"),
             EncoderSpec(joint="base_yaw", index=False)]
    assert encoder_counter_bits(specs) == {"enc_elbow": 16, "enc_base_yaw": 32}
    assert encoder_counter_bits(SimpleNamespace(specs=specs)) == {"enc_elbow": 16, "enc_base_yaw": 32}


def test_delay_counts_cycles():
    engine, suite = signal_rig()
    with pytest.raises(FaultError, match=re.escape("samples") + ".*in cycles"):
        engine.inject(Fault("f", "delay", "imu_ax", {"samples": 0}))


@pytest.mark.parametrize("channel, key", [
    ("enc_elbow", "offset_counts"), ("vel_elbow", "offset_counts_s"), ("abs_elbow", "offset_counts"),
    ("imu_ay", "offset_m_s2"), ("elbow_imu_gz", "offset_rad_s"), ("strain_root1", "offset_strain"),
    ("cur_elbow", "offset_A"), ("torque_elbow", "offset_N_m"),
])
def test_parameter_keys_carry_the_channel_unit(channel, key):
    engine, suite = signal_rig()
    engine.inject(Fault("f", "offset", channel, {key: 2.0}))
    out = run(engine, suite, range(2))[:, CHANNELS.index(channel)]
    np.testing.assert_array_equal(out, ramp(channel, range(2)) + 2.0)
    wrong = "offset_rad" if key != "offset_rad" else "offset_A"
    with pytest.raises(FaultError, match=re.escape(f"expected {key} [")):
        engine.inject(Fault("g", "offset", channel, {wrong: 2.0}))


def test_signal_faults_on_one_channel_compose_in_the_order_they_struck():
    engine, suite = signal_rig()
    engine.inject(Fault("gain", "gain", "imu_ay", {"gain": 2.0}), Trigger.at(0.001))
    engine.inject(Fault("offset", "offset", "imu_ay", {"offset_m_s2": 1.0}), Trigger.at(0.0))
    out = run(engine, suite, range(3))[:, CHANNELS.index("imu_ay")]
    healthy = ramp("imu_ay", range(3))
    np.testing.assert_array_equal(out, [healthy[0] + 1, 2 * (healthy[1] + 1), 2 * (healthy[2] + 1)])


def test_a_failing_signal_effect_is_counted_and_never_raised():
    engine, suite = signal_rig()
    engine.inject(Fault("f", "offset", "imu_ay", {"offset_m_s2": 1.0}))
    engine.inject(Fault("g", "offset", "imu_az", {"offset_m_s2": 1.0}))
    run(engine, suite, range(1))
    engine._chain[0] = lambda m, t: 1 / 0
    out = run(engine, suite, range(1, 3))
    assert engine.error_count == 2
    np.testing.assert_array_equal(out[:, CHANNELS.index("imu_az")], ramp("imu_az", range(1, 3)) + 1.0)


# ----------------------------------------------------------------------------- triggers and durations
def test_time_trigger_and_durations():
    engine, suite = signal_rig()
    engine.inject(Fault("once", "nan", "cur_elbow"), Trigger.at(0.0035), Duration.once())
    engine.inject(Fault("perm", "nan", "torque_elbow"), Trigger.at(0.002), Duration.permanent())
    late = engine.inject(Fault("late", "nan", "abs_elbow"), Trigger.at(1.0))
    out = run(engine, suite, range(10))
    assert np.isnan(out[:, CHANNELS.index("cur_elbow")]).nonzero()[0].tolist() == [4]
    assert np.isnan(out[:, CHANNELS.index("torque_elbow")]).nonzero()[0].tolist() == list(range(2, 10))
    engine.clear(late)                                   # disarmed before it struck: nothing to record
    run(engine, suite, range(10, 1100))
    assert [(e.cycle, e.fault, e.action) for e in engine.events] == [
        (2, "perm", "inject"), (4, "once", "inject"), (5, "once", "clear")]
    assert [f.name for _, f in engine.active()] == ["perm"] and engine.any_active


def test_clear_by_handle_takes_effect_at_the_next_cycle_start():
    engine, suite = signal_rig()
    h = engine.inject(Fault("f", "offset", "imu_ax", {"offset_m_s2": 1.0}))
    run(engine, suite, range(3))
    engine.clear(h)
    out = run(engine, suite, range(3, 5))
    np.testing.assert_array_equal(out[:, CHANNELS.index("imu_ax")], ramp("imu_ax", range(3, 5)))
    assert engine.events[-1][2:4] == ("clear", "f") and engine.events[-1].cycle == 3
    assert engine.active() == [] and not engine.any_active
    with pytest.raises(KeyError):
        engine.clear(99)


@pytest.mark.parametrize("direction, fires", [("rising", [3, 12]), ("falling", [8]), ("either", [3, 8, 12])])
def test_threshold_crossing_on_a_joint_angle(direction, fires):
    q = [0.0, 0.1, 0.2, 0.35, 0.5, 0.5, 0.4, 0.31, 0.2, 0.1, 0.2, 0.29, 0.3, 0.6]
    plant = SimpleNamespace(layout=SimpleNamespace(joint_names=["base_yaw", "elbow"]), pos=np.zeros(2))
    suite = Suite()
    engine = FaultEngine(suite.channel_names, dt_s=DT, plant=plant)
    engine.inject(Fault("f", "nan", "imu_ax"), Trigger.crossing("q_elbow", 0.3, direction, repeat=True),
                  Duration.once())
    struck = []
    for k, qk in enumerate(q):
        plant.pos[1] = qk
        engine.begin_cycle(k, k * DT)
        if engine.any_active:
            struck.append(k)
    assert struck == fires


def test_threshold_crossing_on_measured_and_true_channel_values_fires_once_without_repeat():
    engine, suite = signal_rig()
    # ramps: imu_ax reads 500 + 0.5 k; the trigger sees the previous cycle's sample before any fault
    engine.inject(Fault("m", "offset", "imu_ay", {"offset_m_s2": 1.0}),
                  Trigger.crossing("imu_ax", 502.0), Duration.once())
    engine.inject(Fault("t", "offset", "imu_az", {"offset_m_s2": 1.0}),
                  Trigger.crossing("truth:imu_gx", 803.0, "rising"), Duration.once())
    engine.inject(Fault("bias", "offset", "imu_ax", {"offset_m_s2": -50.0}), Trigger.at(0.0))
    run(engine, suite, range(30))
    inj = [(e.cycle, e.fault) for e in engine.events if e.action == "inject"]
    assert inj == [(0, "bias"), (5, "m"), (7, "t")]    # sample 4 (502.0) seen at the start of cycle 5


def test_time_crossing_signal():
    engine, suite = signal_rig()
    engine.inject(Fault("f", "nan", "imu_ax"), Trigger.crossing("t", 0.0042), Duration.once())
    run(engine, suite, range(10))
    assert engine.events[0].cycle == 5


def test_probability_trigger_is_reproducible_with_a_seed():
    def strikes(seed: int) -> list[int]:
        engine, suite = signal_rig(seed)
        engine.inject(Fault("f", "nan", "imu_ax"), Trigger.probability(0.05), Duration.once())
        run(engine, suite, range(4000))
        return [e.cycle for e in engine.events if e.action == "inject"]

    a = strikes(5)
    assert a == strikes(5) and a != strikes(6)
    # a one-cycle fault re-arms in the cycle it clears: strikes are Bernoulli(p) cycle by cycle
    assert len(a) / 4000 == pytest.approx(0.05, rel=0.2)


def test_mttf_and_mttr_statistics():
    engine, suite = signal_rig(3)
    mttf, mttr = 0.05, 0.02
    engine.inject(Fault("f", "dropout", "imu_gx"), Trigger.mttf(mttf), Duration.mttr(mttr))
    n = 200_000
    for k in range(n):
        engine.begin_cycle(k, k * DT)
    t = [(e.action, e.t_s) for e in engine.events]
    assert t[0][0] == "inject"
    up = [b[1] - a[1] for a, b in zip(t, t[1:]) if a[0] == "clear"]
    down = [b[1] - a[1] for a, b in zip(t, t[1:]) if a[0] == "inject"]
    assert len(up) > 2000
    # whole-cycle resolution delays each change by DT / 2 on average
    assert np.mean(up) == pytest.approx(mttf + DT / 2, rel=0.06)
    assert np.mean(down) == pytest.approx(mttr + DT / 2, rel=0.06)


def test_same_seed_and_inputs_give_the_same_events():
    def events(seed: int) -> list:
        engine, suite = signal_rig(seed)
        engine.inject(Fault("a", "noise", "imu_gz", {"sigma_rad_s": 1.0}), Trigger.mttf(0.03), Duration.mttr(0.01))
        engine.inject(Fault("b", "stuck", "imu_gy"), Trigger.probability(0.01), Duration.once())
        engine.inject(Fault("c", "offset", "imu_ax", {"offset_m_s2": 9.0}), Trigger.mttf(0.2),
                      Duration.lasting(0.003))
        out = run(engine, suite, range(3000))
        return engine.events, out

    (ev1, out1), (ev2, out2) = events(9), events(9)
    assert ev1 == ev2 and len(ev1) > 50
    np.testing.assert_array_equal(out1, out2)
    assert events(10)[0] != ev1


def test_trigger_and_duration_constructors_refuse_bad_values():
    for bad in (lambda: Trigger.at(-1.0), lambda: Trigger.probability(0.0), lambda: Trigger.probability(1.5),
                lambda: Trigger.mttf(0.0), lambda: Trigger.crossing("t", 1.0, "up"),
                lambda: Duration.lasting(0.0), lambda: Duration.mttr(-1.0)):
        with pytest.raises(ValueError):
            bad()


def test_binding_errors_name_the_parameter_and_the_unit():
    engine, suite = signal_rig()
    cases = [
        (Fault("f", "offset", "imu_ax", {"offset": 1.0}), "offset_m_s2"),
        (Fault("f", "offset", "imu_ax", {"offset_m_s2": "x"}), "in m/s^2"),
        (Fault("f", "offset", "nowhere", {"offset_m_s2": 1.0}), "channel whose unit is known"),
        (Fault("f", "offset", "wrist_ax", {"offset_m_s2": 1.0}), "expected a sensor channel"),
        (Fault("f", "noise", "imu_gz", {"sigma_rad_s": -1.0}), "number >= 0 in rad/s"),
        (Fault("f", "flood", "imu_gz"), "expected one of"),
        (Fault("f", "slip", "imu_gz", {"slip_rad_s": 3}), "encoder channel"),
        (Fault("f", "saturation", "imu_ax", {"low_m_s2": 2.0, "high_m_s2": 1.0}), "high_m_s2 >= low_m_s2"),
        (Fault("f", "stall", "imu_ax", {"stall_s": 1e-3}), "expected no target"),
        (Fault("f", "drop", "to_plants"), "to_plant"),
        (Fault("f", "drop", "to_plant"), "needs the engine's link"),
        (Fault("f", "brake", "elbow"), "needs the engine's drives"),
        (Fault("f", "payload_drop", "payload"), "needs the engine's plant"),
        (Fault("f", "frame_delay", "to_plant", {"cycles": 2, "delay_s": 0.1}), "exactly one of cycles, delay_s"),
    ]
    for fault, text in cases:
        with pytest.raises(FaultError, match=re.escape(text)) as info:
            engine.inject(fault)
        assert str(info.value).startswith("fault 'f': ")


# ----------------------------------------------------------------------------- plant faults
@pytest.fixture(scope="module")
def ella():
    return Plant(load_model(ARM))


@pytest.fixture
def plant(ella):
    """The module's ELLA plant, put back to its nominal arrays, substeps and state after the test
    (also when the test fails before clearing its faults)."""
    nominal = kernel_arrays(ella)
    substeps = ella.plan.substeps
    yield ella
    for name, a in ella.km.arrays().items():
        np.copyto(a, nominal[name])
    ella.plan.substeps = substeps
    ella.reset()


def holding_torque(plant: Plant, q: list[float]) -> np.ndarray:
    plant.reset()
    plant.pos[:3] = q
    return plant.equilibrium_eta().copy()


def kernel_arrays(plant: Plant) -> dict[str, np.ndarray]:
    return {name: np.array(a, copy=True) for name, a in plant.km.arrays().items()}


def assert_arrays_equal(plant: Plant, nominal: dict[str, np.ndarray]) -> None:
    for name, a in plant.km.arrays().items():
        np.testing.assert_array_equal(a, nominal[name], err_msg=name)


@pytest.mark.parametrize("fault, removed_kg", [
    (Fault("drop", "payload_drop", "payload"), 2.1),
    (Fault("lighter", "payload", "link2/payload", {"mass_kg": 0.6}), 1.5),
    (Fault("heavier", "payload", "payload", {"mass_kg": 3.1, "inertia_kg_m2": [2e-3, 2e-3, 2e-3]}), -1.0),
])
def test_payload_change_shifts_the_holding_torque_by_the_gravity_moment(plant, fault, removed_kg):
    nominal = kernel_arrays(plant)
    engine = FaultEngine(["enc_elbow"], dt_s=plant.dt, plant=plant)
    q = [0.3, 0.0, 0.0]                 # links level: a change of sag moves no mass sideways to first order
    before = holding_torque(plant, q)
    tip = plant.station("tip")["position"]                   # where the payload hangs, loaded sag
    h = engine.inject(fault, Trigger.at(0.0))
    engine.begin_cycle(0, 0.0)
    after = holding_torque(plant, q)
    # the pitch joint carries the payload's weight at the tip's horizontal reach; gravity has no
    # moment about the vertical yaw axis
    reach = math.hypot(tip[0], tip[1])
    assert after[1] - before[1] == pytest.approx(removed_kg * 9.81 * reach, rel=1e-3)
    assert after[0] == pytest.approx(before[0], abs=1e-9)
    engine.clear(h)
    engine.begin_cycle(1, plant.dt)
    assert_arrays_equal(plant, nominal)
    np.testing.assert_array_equal(holding_torque(plant, q), before)


def test_payload_drop_raises_the_substeps_while_the_bare_link_vibrates_faster():
    """With the plan chosen by the modes alone (motion tolerance off: the fitted midpoint x2) the bare link's
    faster modes need more substeps while the payload is gone (the variant is judged by its modes)."""
    model = load_model(ARM)
    model.integrator.motion_tolerance_rad = 0.0
    plant = Plant(model)
    engine = FaultEngine([], dt_s=plant.dt, plant=plant)
    nominal = plant.plan.substeps
    h = engine.inject(Fault("drop", "payload_drop", "payload"))
    engine.begin_cycle(0, 0.0)
    assert plant.plan.substeps > nominal              # link 2 torsion without the payload: 726 Hz
    plant.reset()
    for _ in range(200):
        plant.step(np.array([0.0, -60.0, 0.0]))
    assert np.all(np.isfinite(plant.pos)) and np.abs(plant.pos[3:]).max() < 0.1
    engine.clear(h)
    engine.begin_cycle(1, plant.dt)
    assert plant.plan.substeps == nominal
    plant.reset()


def test_a_payload_change_plans_its_substeps_by_the_plants_rule_backlash_included():
    """ELLA with an elastic elbow (1e5 N m/rad) and 1 mrad of backlash, RK4: at the initial state the
    spring sits in its dead band and looks free, yet the plant's plan resolves its ring in contact
    (926 Hz: 5 substeps). Without the payload it rings at 1128 Hz: the payload drop must raise the
    substeps to the 6 a plant of the dropped model plans, not to the 5 that the arm's frequencies alone
    ask for (link 2 torsion, 726 Hz). A crack of link 2 while it lasts only lowers frequencies."""
    model = load_model(ARM)
    elbow = model.bodies[2].joint
    elbow.elasticity = md.JointElasticity(stiffness_N_m_rad=1e5, damping_N_m_s_rad=1.0)
    elbow.backlash_rad = 1e-3
    model.integrator.method = "rk4"
    plant = Plant(model)
    dropped = copy.deepcopy(model)
    payload = next(a for b in dropped.bodies for a in b.attachments if a.name == "payload")
    payload.mass_kg, payload.inertia_kg_m2 = 0.0, np.zeros((3, 3))
    planned = Plant(dropped).plan.substeps
    assert planned > plant.plan.substeps
    engine = FaultEngine([], dt_s=plant.dt, plant=plant)
    engine.inject(Fault("drop", "payload_drop", "payload"))
    engine.begin_cycle(0, 0.0)
    assert plant.plan.substeps == planned
    engine.inject(Fault("crack", "stiffness_loss", "link2", {"stiffness_scale": 0.5}))
    engine.begin_cycle(1, plant.dt)
    assert plant.plan.substeps == planned


def test_payload_errors(plant):
    engine = FaultEngine([], dt_s=plant.dt, plant=plant)
    with pytest.raises(FaultError, match="names no attachment; expected one of .*link2/payload"):
        engine.inject(Fault("f", "payload_drop", "tool"))
    with pytest.raises(FaultError, match="mass_kg"):
        engine.inject(Fault("f", "payload", "payload", {"mass_kg": -1.0}))
    arrays = engine._plant_arrays
    model = load_model(ARM)
    model.bodies[2].beam.n_torsion = 2                  # one more mode: the arrays would change shape
    model.bodies[2].beam.damping_ratio = np.full(6, 0.01)
    with pytest.raises(FaultError, match="keeps the kernel arrays' shapes"):
        arrays.variant(model, "f")


def test_stiffness_loss_lowers_the_link_frequencies_by_the_square_root(plant):
    nominal = kernel_arrays(plant)
    f0 = component_frequencies_hz(plant.asm)
    engine = FaultEngine([], dt_s=plant.dt, plant=plant)
    h = engine.inject(Fault("crack", "stiffness_loss", "link2", {"stiffness_scale": 0.64}))
    engine.begin_cycle(0, 0.0)
    f1 = component_frequencies_hz(plant.asm)
    np.testing.assert_allclose(f1["link2"], 0.8 * f0["link2"], rtol=1e-12)
    np.testing.assert_array_equal(f1["link1"], f0["link1"])
    engine.clear(h)
    engine.begin_cycle(1, plant.dt)
    assert_arrays_equal(plant, nominal)
    with pytest.raises(FaultError, match="flexible body: link1, link2"):
        engine.inject(Fault("f", "stiffness_loss", "yaw_carrier", {"stiffness_scale": 0.5}))
    with pytest.raises(FaultError, match=r"factor in \(0, 1\]"):
        engine.inject(Fault("f", "stiffness_loss", "link2", {"stiffness_scale": 1.5}))


def test_payload_change_leaves_what_the_drive_bank_set_alone(plant):
    plant.km.viscous[2] *= 3.0                           # the drive bank scales friction in place
    plant.km.coulomb[2] *= 3.0
    friction = plant.km.viscous.copy(), plant.km.coulomb.copy()
    engine = FaultEngine([], dt_s=plant.dt, plant=plant)
    h = engine.inject(Fault("drop", "payload_drop", "payload"))
    engine.begin_cycle(0, 0.0)
    engine.clear(h)
    engine.begin_cycle(1, plant.dt)
    np.testing.assert_array_equal(plant.km.viscous, friction[0])
    np.testing.assert_array_equal(plant.km.coulomb, friction[1])


def test_a_damping_change_scales_the_modal_damping_alone_and_composes_with_a_crack(plant):
    nominal = kernel_arrays(plant)
    engine = FaultEngine([], dt_s=plant.dt, plant=plant)
    k = plant.layout.body_names.index("link2")
    worn = engine.inject(Fault("worn", "damping", "link2", {"damping_scale": 3.0}))
    engine.begin_cycle(0, 0.0)
    np.testing.assert_array_equal(plant.km.Dmod[k], 3.0 * nominal["Dmod"][k])
    np.testing.assert_array_equal(plant.km.Kmod, nominal["Kmod"])
    crack = engine.inject(Fault("crack", "stiffness_loss", "link2", {"stiffness_scale": 0.64}))
    engine.begin_cycle(1, plant.dt)
    np.testing.assert_allclose(plant.km.Dmod[k], 3.0 * 0.8 * nominal["Dmod"][k], rtol=1e-15)
    engine.clear(worn)
    engine.clear(crack)
    engine.begin_cycle(2, 2 * plant.dt)
    assert_arrays_equal(plant, nominal)
    with pytest.raises(FaultError, match="damping_scale"):
        engine.inject(Fault("f", "damping", "link2", {"damping_scale": 0.0}))


def test_stiffness_loss_and_payload_change_compose(plant):
    nominal = kernel_arrays(plant)
    engine = FaultEngine([], dt_s=plant.dt, plant=plant)
    engine.inject(Fault("drop", "payload_drop", "payload"))
    engine.begin_cycle(0, 0.0)
    dropped = plant.km.Kmod[2].copy()
    crack = engine.inject(Fault("crack", "stiffness_loss", "link2", {"stiffness_scale": 0.5}))
    engine.begin_cycle(1, plant.dt)
    np.testing.assert_array_equal(plant.km.Kmod[2], 0.5 * dropped)
    engine.clear(crack)
    engine.begin_cycle(2, 2 * plant.dt)
    np.testing.assert_array_equal(plant.km.Kmod[2], dropped)
    engine.clear(0)
    engine.begin_cycle(3, 3 * plant.dt)
    assert_arrays_equal(plant, nominal)


def test_substep_change_restabilizes_friction_and_brakes_for_the_substep_in_force():
    """ELLA under RK4 pinned to one 1 ms substep (its friction then needs a wider smoothing): a payload drop
    raises the substeps 1 -> 4; friction x10 on the elbow while it lasts widens the elbow's Coulomb smoothing only as far as
    the 4-substep h needs (6.8 mrad/s). Clearing the payload brings back the full step: the smoothing
    must widen again to its floor there (27.8 mrad/s), and every brake ramp follows the substep in force."""
    plant = Plant(load_model(ARM), method="rk4", substeps=1)
    drives = DriveBank(plant)
    engine = FaultEngine([], dt_s=plant.dt, plant=plant, drives=drives)
    nominal = plant.plan.substeps
    configured = plant._configured_smoothing
    kappa = plant.asm.model.integrator.safety * REAL_AXIS_STABILITY[plant.plan.method]
    braked = drives.brake_torque > 0
    assert nominal == 1 and braked.any()

    def assert_stable_for(substeps: int) -> None:
        assert plant.plan.substeps == substeps
        floor = plant.friction_smoothing_floor(drives.inertia)
        np.testing.assert_allclose(plant.coulomb_smoothing, np.maximum(configured, floor), rtol=1e-12)
        h = plant.dt / substeps
        ramp = drives.brake_kinetic * h / (kappa * drives.inertia)
        np.testing.assert_allclose(drives.brake_velocity[braked], ramp[braked], rtol=1e-12)
        np.testing.assert_array_equal(drives.par[:, P_STICK], drives.brake_velocity)
        np.testing.assert_array_equal(plant.km.jpar[:, JP_BRAKE_VS], drives.brake_velocity)

    assert_stable_for(nominal)
    drop = engine.inject(Fault("drop", "payload_drop", "payload"))
    engine.begin_cycle(0, 0.0)
    assert_stable_for(4)
    friction = engine.inject(Fault("sticky", "friction", "elbow", {"friction_scale": 10.0}))
    engine.begin_cycle(1, plant.dt)
    assert drives.friction_scale[2] == 10.0
    assert_stable_for(4)
    assert plant.coulomb_smoothing[2] == pytest.approx(6.8e-3, rel=0.01)
    engine.clear(drop)
    engine.begin_cycle(2, 2 * plant.dt)
    assert_stable_for(nominal)
    assert plant.coulomb_smoothing[2] == pytest.approx(27.8e-3, rel=0.01)
    engine.clear(friction)
    engine.begin_cycle(3, 3 * plant.dt)
    assert drives.friction_scale[2] == 1.0
    assert_stable_for(nominal)


def test_binding_leaves_the_loop_state_alone_until_the_fault_strikes(plant):
    """inject may run on another thread: the set refresh() iterates and the drive-fault state are
    changed on the loop's thread only (begin_cycle), the latter made with the engine."""
    drives = Drives(["base_yaw", "shoulder_pitch", "elbow"])
    engine = FaultEngine([], dt_s=plant.dt, plant=plant, drives=drives)
    assert engine._drive_faults is not None and engine._plant_arrays is not None
    arrays = engine._plant_arrays
    drop = engine.inject(Fault("drop", "payload_drop", "payload"))
    engine.inject(Fault("crack", "stiffness_loss", "link2", {"stiffness_scale": 0.5}))
    assert arrays.touched == set() and not arrays.payloads and not arrays.weakened
    engine.begin_cycle(0, 0.0)
    assert {"Kmod", "Dmod", "Jsum"} <= arrays.touched and len(arrays.payloads) == len(arrays.weakened) == 1
    engine.clear(drop)
    engine.clear(1)
    engine.begin_cycle(1, plant.dt)
    # the loop's brake holder and a brake fault share one record: neither releases the other's brake
    engine.hold_brake(0, True)
    brake = engine.inject(Fault("b", "brake", "base_yaw"))
    engine.begin_cycle(2, 2 * plant.dt)
    engine.clear(brake)
    engine.begin_cycle(3, 3 * plant.dt)
    assert drives.brake[0]
    engine.hold_brake(0, False)
    assert not drives.brake[0]


def test_drive_faults_reach_the_drive_bank_and_clear():
    drives = Drives(["base_yaw", "shoulder_pitch", "elbow"])
    engine, suite = signal_rig(drives=drives)
    engine.inject(Fault("f1", "friction", "elbow", {"friction_scale": 3.0}), Trigger.at(0.001), Duration.lasting(0.004))
    engine.inject(Fault("f2", "friction", "elbow", {"friction_scale": 2.0}), Trigger.at(0.002), Duration.lasting(0.001))
    engine.inject(Fault("kt", "kt_loss", "shoulder_pitch", {"kt_scale": 0.5}), Trigger.at(0.002),
                  Duration.lasting(0.002))
    engine.inject(Fault("brake", "brake", "base_yaw"), Trigger.at(0.003), Duration.once())
    seen = []
    for k in range(7):
        engine.begin_cycle(k, k * DT)
        seen.append((drives.friction_scale[2], drives.kt_scale[1], bool(drives.brake[0])))
    assert seen == [(1.0, 1.0, False), (3.0, 1.0, False), (6.0, 0.5, False), (3.0, 0.5, True),
                    (3.0, 1.0, False), (1.0, 1.0, False), (1.0, 1.0, False)]
    with pytest.raises(FaultError, match="expected a joint: base_yaw, shoulder_pitch, elbow"):
        engine.inject(Fault("f", "brake", "wrist"))
    drives.brake_torque = np.array([160.0, 160.0, 0.0])   # a bank that says which joints have brakes
    with pytest.raises(FaultError, match="expected a joint with a holding brake"):
        engine.inject(Fault("f", "brake", "elbow"))


# ----------------------------------------------------------------------------- bus faults (CAN maps)
class BusRig:
    """The emulator's end of a bus (a FaultyLink over an in-memory link) and the firmware's end,
    each cycle in loop order: the firmware's command is on the link, begin_cycle, receive, send."""

    def __init__(self, path: Path = FD, seed: int = 0):
        self.bus = BusMap.load(path)
        emu, self.fw = memory_pair()
        self.link = FaultyLink(emu, self.bus)
        self.engine = FaultEngine(CHANNELS, dt_s=DT, seed=seed, link=self.link)
        self.to_firmware = FrameWriter(self.bus, "to_firmware")
        self.to_plant = FrameWriter(self.bus, "to_plant")
        self.fw_reader = FrameReader(self.bus, "to_firmware")
        self.emu_reader = FrameReader(self.bus, "to_plant")
        self.k = 0

    def cycle(self) -> tuple[list[Frame], list[Frame]]:
        """(command frames the emulator received, sensor frames the firmware received)."""
        for f in self.to_plant.frames(self.k):
            self.fw.send(f)
        self.engine.begin_cycle(self.k, self.k * DT)
        commands = drain(self.link.recv)
        for f in commands:
            self.emu_reader.read(f)
        for f in self.to_firmware.frames(self.k):
            assert self.link.send(f)
        sensors = drain(self.fw.recv)
        for f in sensors:
            self.fw_reader.read(f)
        self.k += 1
        return commands, sensors

    def cycles(self, n: int) -> list[tuple[list[Frame], list[Frame]]]:
        return [self.cycle() for _ in range(n)]

    def counter(self, frame: Frame) -> int:
        codec, values = self.bus.decode(frame)
        return int(values[codec.counter_index])


def drain(recv) -> list[Frame]:
    out = []
    while (f := recv()) is not None:
        out.append(f)
    return out


def sensor_counters(rig: BusRig, got) -> list[list[int]]:
    return [[rig.counter(f) for f in sensors] for _, sensors in got]


def test_no_bus_fault_passes_every_frame():
    rig = BusRig()
    got = rig.cycles(5)
    assert sensor_counters(rig, got) == [[0], [1], [2], [3], [4]]
    assert rig.fw_reader.accepted == 5 and rig.emu_reader.accepted == 5
    assert rig.link.name == "emulator" and rig.link.counters is rig.link.inner.counters


def test_drop_loses_the_frames_and_clearing_restores_them():
    rig = BusRig()
    rig.engine.inject(Fault("f", "drop", "to_firmware"), Trigger.at(0.002), Duration.lasting(0.002))
    got = rig.cycles(6)
    assert sensor_counters(rig, got) == [[0], [1], [], [], [4], [5]]
    assert rig.fw_reader.rejected["counter"] == 1          # a jump of 3 is more than the check accepts
    assert rig.link.stats()["faults"]["f"]["hits"] == 2


def test_random_frame_drop_is_seeded():
    def lost(seed: int) -> list[int]:
        rig = BusRig(seed=seed)
        rig.engine.inject(Fault("f", "drop", "to_plant", {"probability_per_frame": 0.3}))
        return [k for k, (cmds, _) in enumerate(rig.cycles(1000)) if not cmds]

    a = lost(1)
    assert a == lost(1) and a != lost(2)
    assert len(a) == pytest.approx(300, abs=60)


def test_duplicate_frames_are_rejected_as_repeated_counters():
    rig = BusRig()
    rig.engine.inject(Fault("f", "duplicate", "to_firmware", {"copies": 2}), Trigger.at(0.001), Duration.once())
    got = rig.cycles(3)
    assert sensor_counters(rig, got) == [[0], [1, 1, 1], [2]]
    assert rig.fw_reader.rejected["counter"] == 2 and rig.fw_reader.accepted == 3


def test_reorder_swaps_a_frame_with_the_next_one():
    rig = BusRig()
    rig.engine.inject(Fault("f", "reorder", "to_firmware"), Trigger.at(0.001), Duration.lasting(0.002))
    got = rig.cycles(5)
    assert sensor_counters(rig, got) == [[0], [], [2, 1], [3], [4]]


def test_frame_delay_holds_frames_for_whole_cycles_and_clearing_releases_them():
    rig = BusRig()
    rig.engine.inject(Fault("f", "frame_delay", "to_firmware", {"cycles": 3}), Trigger.at(0.001),
                      Duration.lasting(0.004))
    got = rig.cycles(8)
    # sent in cycles 1..4, due in 4..7; the clearance at the start of cycle 5 releases 2, 3, 4 at once
    assert sensor_counters(rig, got) == [[0], [], [], [], [1], [2, 3, 4, 5], [6], [7]]


def test_command_delay_in_seconds_rounds_up_to_whole_cycles():
    rig = BusRig()
    rig.engine.inject(Fault("f", "frame_delay", "to_plant", {"delay_s": 0.0015}), Trigger.at(0.0))
    got = rig.cycles(5)
    assert [[rig.counter(f) for f in cmds] for cmds, _ in got] == [[], [], [0], [1], [2]]


def test_output_delay_holds_the_sensor_frames():
    rig = BusRig()
    rig.engine.inject(Fault("f", "output_delay", "", {"cycles": 1}), Trigger.at(0.002), Duration.lasting(0.002))
    got = rig.cycles(6)
    assert sensor_counters(rig, got) == [[0], [1], [], [2], [3, 4], [5]]


@pytest.mark.parametrize("kind, params", [("corrupt", {"bytes": 3}), ("bad_crc", {})])
@pytest.mark.parametrize("direction", ["to_firmware", "to_plant"])
def test_damaged_frames_fail_the_crc_check_downstream(kind, params, direction):
    rig = BusRig()
    rig.engine.inject(Fault("f", kind, direction, params), Trigger.at(0.001), Duration.lasting(0.003))
    rig.cycles(6)
    reader = rig.fw_reader if direction == "to_firmware" else rig.emu_reader
    # cycles 1..3 fail the CRC; cycle 4's counter then jumps by 4, more than the check accepts
    assert dict(reader.rejected) == {**dict.fromkeys(reader.rejected, 0), "crc": 3, "counter": 1}
    assert reader.accepted == 2


def test_bad_crc_needs_a_crc_byte():
    rig = BusRig(CLASSIC)
    with pytest.raises(FaultError, match="message enc_a has no CRC byte"):
        rig.engine.inject(Fault("f", "bad_crc", "to_firmware:enc_a"))
    rig.engine.inject(Fault("f", "bad_crc", "to_firmware"), Trigger.at(0.0), Duration.once())
    rig.cycle()                                  # enc_a has no CRC-8 and passes; enc_b and imu_accel do not
    assert rig.fw_reader.rejected["crc"] == 2 and rig.fw_reader.accepted == 1


def test_wrong_counter_is_a_valid_frame_with_a_stale_counter():
    rig = BusRig()
    rig.engine.inject(Fault("f", "wrong_counter", "to_plant:cmd_torque"), Trigger.at(0.002), Duration.once())
    got = rig.cycles(5)
    assert [[rig.counter(f) for f in cmds] for cmds, _ in got] == [[0], [1], [1], [3], [4]]
    assert rig.emu_reader.rejected["counter"] == 1 and rig.emu_reader.rejected["crc"] == 0
    assert rig.emu_reader.accepted == 4 and rig.emu_reader.counters.lost == 1


def test_wrong_dlc_is_rejected_for_its_length():
    rig = BusRig()
    rig.engine.inject(Fault("f", "wrong_dlc", "to_firmware:0x110", {"length_bytes": 24}), Trigger.at(0.001),
                      Duration.once())
    got = rig.cycles(3)
    assert [len(f.data) for _, sensors in got for f in sensors] == [32, 24, 32]
    assert rig.fw_reader.rejected["length"] == 1 and rig.fw_reader.accepted == 2


def test_bus_off_silences_the_node_and_it_recovers():
    rig = BusRig()
    rig.engine.inject(Fault("bus_off", "silent", "to_firmware"), Trigger.at(0.002), Duration.lasting(0.005))
    got = rig.cycles(10)
    assert sensor_counters(rig, got) == [[0], [1], [], [], [], [], [], [7], [8], [9]]
    assert [(e.cycle, e.action) for e in rig.engine.events] == [(2, "inject"), (7, "clear")]


def test_changed_period_passes_every_nth_frame():
    rig = BusRig()
    rig.engine.inject(Fault("f", "period", "to_plant", {"divider": 3}), Trigger.at(0.001), Duration.lasting(0.007))
    got = rig.cycles(10)
    assert [k for k, (cmds, _) in enumerate(got) if cmds] == [0, 1, 4, 7, 8, 9]


def test_babbling_node_adds_filler_frames_at_its_rate():
    rig = BusRig()
    rig.engine.inject(Fault("f", "babble", "to_plant:0x7F", {"rate_hz": 2500.0, "length_bytes": 12}),
                      Trigger.at(0.0), Duration.lasting(0.010))
    got = rig.cycles(14)
    babble = [[f for f in cmds if f.arbitration_id == 0x7F] for cmds, _ in got]
    assert sum(map(len, babble)) == 25 and babble[-1] == []
    assert all(f.data == b"\xaa" * 12 and f.is_fd for frames in babble for f in frames)
    assert rig.emu_reader.rejected["unknown_id"] == 25 and rig.emu_reader.accepted == 14


def test_message_targets_by_name_and_id():
    rig = BusRig(CLASSIC)
    rig.engine.inject(Fault("f", "drop", "to_firmware:imu_accel"))
    rig.engine.inject(Fault("g", "drop", "to_firmware:0x111"))
    got = rig.cycles(4)
    assert [[f.arbitration_id for f in s] for _, s in got] == [[0x110], [0x110, 0x113], [0x110], [0x110, 0x113]]
    with pytest.raises(FaultError, match="goes to_plant, not to_firmware"):
        rig.engine.inject(Fault("h", "drop", "to_firmware:cmd_torque"))
    with pytest.raises(FaultError, match="no message 'nothing'"):
        rig.engine.inject(Fault("h", "drop", "to_firmware:nothing"))


def test_a_failing_bus_effect_passes_the_frame_and_is_counted():
    rig = BusRig()
    rig.engine.inject(Fault("f", "drop", "to_firmware"))
    rig.cycle()
    effect = rig.link._tx[0]
    effect.apply = lambda frame, out: 1 / 0
    _, sensors = rig.cycle()
    assert len(sensors) == 1 and rig.link.errors == 1


# ----------------------------------------------------------------------------- bus faults (serial)
def wait_frames(link: SerialLink, n: int, timeout_s: float = 2.0) -> list[Frame]:
    out: list[Frame] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n and time.monotonic() < deadline:
        f = link.recv()
        if f is None:
            time.sleep(1e-3)
        else:
            out.append(f)
    return out


@pytest.mark.parametrize("kind", ["corrupt", "bad_crc"])
def test_serial_damage_fails_the_packet_crc(kind):
    bus = BusMap.load(SERIAL)
    master, slave_path = open_pty_pair()
    emu_raw = SerialLink.from_fd(master)
    fw = SerialLink(slave_path)
    try:
        link = FaultyLink(emu_raw, bus)
        engine = FaultEngine(CHANNELS, dt_s=DT, link=link)
        engine.inject(Fault("tx", kind, "to_firmware"), Trigger.at(0.001), Duration.once())
        engine.inject(Fault("rx", kind, "to_plant"), Trigger.at(0.003), Duration.once())
        sensors_out, commands_out = FrameWriter(bus, "to_firmware"), FrameWriter(bus, "to_plant")
        received, commands = [], []
        for k in range(5):
            command = commands_out.frames(k)[0]
            fw.send(command)
            wait_bytes(master, len(encode_frame(command)))              # the packet reached this end
            engine.begin_cycle(k, k * DT)
            commands.append(drain(link.recv))
            link.send(sensors_out.frames(k)[0])
            received += wait_frames(fw, 1, 0.2 if k == 1 else 10.0)     # cycle 1's frame is damaged
        assert [f.data[25] for f in received] == [0, 2, 3, 4]           # the cycle counter byte
        assert fw.counters.rx_crc_errors == 1 and fw.counters.rx_frames == 4
        assert [len(c) for c in commands] == [1, 1, 1, 0, 1]
        assert emu_raw.counters.rx_crc_errors == 1
        assert link.fileno() == master
    finally:
        fw.close()
        emu_raw.close()


def test_serial_damage_needs_a_link_that_writes_packets():
    rig = BusRig(SERIAL)
    with pytest.raises(FaultError, match="needs a link that writes raw packets"):
        rig.engine.inject(Fault("f", "corrupt", "to_firmware"))
    rig.engine.inject(Fault("f", "corrupt", "to_plant"))      # received frames need no raw access


# ----------------------------------------------------------------------------- timing
def test_stall_busy_waits_in_the_active_cycles_only():
    engine, suite = signal_rig()
    engine.inject(Fault("f", "stall", "", {"stall_s": 0.002}), Trigger.at(0.001), Duration.once())
    waited = []
    for k in range(3):
        engine.begin_cycle(k, k * DT)
        t0 = time.perf_counter_ns()
        ns = engine.stall()
        waited.append((ns, time.perf_counter_ns() - t0))
    assert [ns for ns, _ in waited] == [0, 2_000_000, 0]
    assert waited[1][1] >= 2_000_000                                     # it did wait, at least that long


# ----------------------------------------------------------------------------- scenarios
def scenario_rig(plant: Plant, seed: int) -> tuple[FaultEngine, Suite, BusRig]:
    rig = BusRig(FD, seed)
    suite = Suite()
    engine = FaultEngine(suite.channel_names, dt_s=DT, seed=seed, encoding=bus_encoding(rig.bus), plant=plant,
                         drives=Drives(plant.layout.joint_names), link=rig.link)
    rig.engine = engine
    return engine, suite, rig


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenarios_load_and_bind(plant, path):
    scenario = load_scenario(path)
    assert scenario.description and scenario.faults
    assert path.read_text().startswith(f"# {path.stem} — ")
    engine, _, _ = scenario_rig(plant, scenario.seed)
    assert scenario.inject_into(engine) == list(range(len(scenario.faults)))


def test_combined_scenario_runs_the_same_twice(plant):
    nominal = kernel_arrays(plant)

    def run_it() -> tuple[list, np.ndarray, list]:
        scenario = load_scenario(ROOT / "configs" / "scenarios" / "combined.toml")
        engine, suite, rig = scenario_rig(plant, scenario.seed)
        scenario.inject_into(engine)
        rows, frames = [], []
        plant.pos[2] = 0.0
        for k in range(4000):
            plant.pos[2] = 0.4 * k / 4000                # the elbow moves through the slip trigger
            for f in rig.to_plant.frames(k):
                rig.fw.send(f)
            engine.begin_cycle(k, k * DT)
            drain(rig.link.recv)
            assert engine.stall() == (1_500_000 if k == 2500 else 0)
            suite.sample(k)
            engine.apply_signals(suite.measured, suite.truth)
            rows.append(suite.measured.copy())
            for f in rig.to_firmware.frames(k):
                rig.link.send(f)
            frames.append([bytes(f.data) for f in drain(rig.fw.recv)])
        for handle, _ in engine.active():
            engine.clear(handle)
        engine.begin_cycle(4000, 4.0)
        plant.reset()
        return engine.events, np.array(rows), frames

    (ev1, rows1, fr1), (ev2, rows2, fr2) = run_it(), run_it()
    assert ev1 == ev2 and fr1 == fr2
    np.testing.assert_array_equal(rows1, rows2)
    names = {e.fault for e in ev1}
    assert names == {"gyro_z_noise", "sensor_frame_loss", "elbow_encoder_slip", "elbow_friction", "link2_crack",
                     "compute_stall", "late_output", "payload_lost", "accel_x_intermittent"}
    slip = next(e for e in ev1 if e.fault == "elbow_encoder_slip")
    assert slip.cycle == 2000                            # q_elbow reaches 0.2 rad at the start of cycle 2000
    assert_arrays_equal(plant, nominal)


SCENARIO_HEAD = """
[[fault]]
name = "bias"
kind = "offset"
target = "imu_ax"
"""


@pytest.mark.parametrize("body, key, text", [
    ("offset_m_s2 = 0.3\n[fault.trigger]\nat = 1.0", "fault[bias].trigger.at",
     "unknown key (did you mean 'at_s'?); expected exactly one of at_s, signal, probability_per_cycle, mttf_s"),
    ("offset = 0.3", "fault[bias].offset", "did you mean 'offset_m_s2'?"),
    ("offset_rad_s = 0.3", "fault[bias].offset_rad_s", "expected offset_m_s2 [m/s^2]"),
    ("offset_m_s2 = true", "fault[bias].offset_m_s2", "expected a finite number in m/s^2"),
    ("", "fault[bias].offset_m_s2", "required; expected a finite number in m/s^2"),
    ("offset_m_s2 = 0.3\n[fault.trigger]\nsignal = \"q_elbow\"\nthreshold_m_s2 = 1.0",
     "fault[bias].trigger.threshold_m_s2", "allowed keys here: signal, threshold_rad, direction, repeat"),
    ("offset_m_s2 = 0.3\n[fault.trigger]\nsignal = \"imu_gz\"\nthreshold_rad_s = 1.0\ndirection = \"up\"",
     "fault[bias].trigger.direction", "expected one of"),
    ("offset_m_s2 = 0.3\n[fault.trigger]\nmttf_s = -1.0", "fault[bias].trigger.mttf_s", "a positive number in s"),
    ("offset_m_s2 = 0.3\n[fault.trigger]\nat_s = 1.0\nrepeat = true", "fault[bias].trigger.repeat", "fires once"),
    ("offset_m_s2 = 0.3\n[fault.duration]\nfor_s = 0", "fault[bias].duration.for_s", "a positive number in s"),
    ("offset_m_s2 = 0.3\n[fault.duration]\nonce = false", "fault[bias].duration.once", "expected true"),
    ("offset_m_s2 = 0.3\n[fault.duration]\nfor_s = 1.0\nmttr_s = 1.0", "fault[bias].duration",
     "expected exactly one of once, for_s, permanent, mttr_s"),
])
def test_scenario_errors_name_file_key_and_unit(body, key, text):
    with pytest.raises(ConfigError) as info:
        scenario_from_string(SCENARIO_HEAD + body, "configs/scenarios/broken.toml")
    assert str(info.value).startswith(f"configs/scenarios/broken.toml: {key} = ")
    assert text in str(info.value)


def test_scenario_structure_errors():
    cases = [
        ("[scenario]\nseed = -1", "scenario.seed"),
        ("[scenario]\nname = 'x'", "scenario.name"),
        ("[[fault]]\nname = 'a'\nkind = 'flood'", "fault[a].kind"),
        ("[[fault]]\nkind = 'nan'\ntarget = 'imu_ax'", "fault[0].name"),
        ("[[fault]]\nname = 'a'\nkind = 'nan'\ntarget = 'imu_ax'\n[[fault]]\nname = 'a'\nkind = 'nan'\n"
         "target = 'imu_ay'", "fault[a].name"),
        ("[[fault]]\nname = 'a'\nkind = 'drop'\ntarget = 'to_firmware:'", "fault[a].target"),
        ("faults = 1", "faults"),
    ]
    for text, key in cases:
        with pytest.raises(ConfigError, match=rf"^x.toml: {re.escape(key)} = "):
            scenario_from_string(text, "x.toml")
    with pytest.raises(ConfigError, match="x.toml: not valid TOML"):
        scenario_from_string("[[fault]\n", "x.toml")


def test_scenario_binding_errors_name_the_file(plant):
    scenario = scenario_from_string(SCENARIO_HEAD.replace("imu_ax", "wrist_ax") + "offset_m_s2 = 1.0", "s.toml")
    engine, _, _ = scenario_rig(plant, 0)
    with pytest.raises(ConfigError, match=r"^s.toml: fault\[bias\].target = \"wrist_ax\": expected a sensor channel"):
        scenario.inject_into(engine)



def test_a_misspelt_target_is_refused_with_the_nearest_name(tmp_path):
    """Every name a scenario gives is checked at load, with a suggestion: a sensor channel, a joint."""
    engine = FaultEngine(["enc_elbow", "imu_ax"], dt_s=1e-3)
    with pytest.raises(ConfigError, match=r"expected a sensor channel \(did you mean 'enc_elbow'\?\)"):
        engine.inject(Fault("f", "offset", "enc_elbw", {"offset_counts": 5}))
