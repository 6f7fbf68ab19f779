"""The compiled stages of the emulator's cycle against the Python reference they replace.

The command frames (hil.runtime.command_frames: the decoder table run by hil.kernels.frame_codec)
must give the torques, verdicts and rejection counts of CommandInput.feed for genuine, damaged,
forged, replayed and foreign frames. The sensor frames (hil.runtime.sensor_frames: the bus map's codec table, firmware_bridge.wire.codec_table,
run by hil.kernels.frame_codec) must be the bytes firmware_bridge.wire.signals.SensorOutput.frames makes
from the same measured channels, status and cycle: in an emulator of ELLA under a load of active
signal and bus faults, cycle by cycle, on every non-CANopen bus map; with the same saturation and
refusal counts for values beyond the signals' ranges and NaN. The whole cycle equals its Python model
(tests/cycle_oracle.py) under plant faults and a brake. The per-stage clock (hil.runtime.stages)
covers the whole cycle.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from firmware_bridge.firmware.endpoint import CommandOutput
from hil.devices.sensors import SensorSuite
from hil.dynamics.plant import Plant
from hil.faults.scenario import scenario_from_string
from hil.runtime.command_frames import CompiledCommandInput
from hil.runtime.sensor_frames import CompiledSensorFrames
from hil.runtime.stages import STAGES, StageClock
from tools import loop_rig
from cycle_oracle import StageEmulator

ROOT = Path(__file__).resolve().parent.parent
MAPS = ("serial_frame", "compact_fd", "compact_classic", "full_fd")
CYCLES = 300


def _checked(emu, bus: BusMap) -> list[int]:
    """Let every call of the emulator's compiled encoder be checked against a reference SensorOutput
    fed the same arguments; returns the list of frames compared, per call."""
    ref = SensorOutput(bus, emu.plant.layout.joint_names)
    ref.bind(emu.sensors.channel_names)
    compiled = emu.sensor_frames
    seen = []

    def both(cycle, measured, status):
        expected = ref.frames(cycle, measured.copy(), status)
        got = compiled(cycle, measured, status)
        assert got == expected, f"cycle {cycle}: compiled {got} != reference {expected}"
        seen.append(len(got))
        return got
    emu.sensor_frames = both
    return seen


@pytest.mark.parametrize("name", MAPS)
def test_sensor_frames_equal_the_reference_under_faults(model, name):
    bus = BusMap.load(ROOT / "configs" / "bus" / f"{name}.toml")
    emu, firmware = loop_rig.holding_emulator(model, bus, "faulted", CYCLES)
    seen = _checked(emu, bus)
    for _ in range(CYCLES):
        firmware.answer()
        emu.step_once()
    assert len(emu.faults.active()) >= 5               # the benchmark's fault load is on
    assert len(seen) == CYCLES and sum(seen) > 0
    assert emu.commands.reader.accepted == CYCLES      # the firmware decoded every frame and answered


def test_saturation_refusal_and_nan_match_the_reference(model):
    plant = Plant(model)
    names = SensorSuite(plant).channel_names
    rng = np.random.default_rng(7)
    for name in MAPS:
        bus = BusMap.load(ROOT / "configs" / "bus" / f"{name}.toml")
        ref, out = (SensorOutput(bus, plant.layout.joint_names) for _ in range(2))
        ref.bind(names)
        out.bind(names)
        compiled = CompiledSensorFrames(out, names)
        for cycle in range(400):        # values from 1e-3 to 1e7 times unit scale: many beyond the ranges
            measured = rng.normal(0.0, 10.0 ** rng.integers(-3, 8), len(names))
            if cycle % 5 == 0:
                measured[rng.integers(len(names))] = np.nan
            status = int(rng.integers(0, 300))
            assert compiled.frames(cycle, measured.copy(), status) == ref.frames(cycle, measured.copy(), status), \
                (name, cycle)
        assert ref.writer.saturated > 0 and ref.writer.refused > 0, name
        assert (out.writer.saturated, out.writer.refused) == (ref.writer.saturated, ref.writer.refused), name


def test_a_diverging_table_is_caught(model):
    """The comparison above can fail: one signal's byte order flipped in the table changes the bytes."""
    plant = Plant(model)
    names = SensorSuite(plant).channel_names
    bus = BusMap.load(ROOT / "configs" / "bus" / "compact_fd.toml")
    ref, out = (SensorOutput(bus, plant.layout.joint_names) for _ in range(2))
    ref.bind(names)
    out.bind(names)
    compiled = CompiledSensorFrames(out, names)
    compiled.sig[0, 1] ^= 1
    measured = np.arange(len(names), dtype=float) + 1000.0
    assert compiled.frames(3, measured, 1) != ref.frames(3, measured, 1)


def test_stage_clock_covers_the_cycle(model):
    bus = BusMap.load(ROOT / "configs" / "bus" / "serial_frame.toml")
    emu, firmware = loop_rig.holding_emulator(model, bus, "models", 50)
    emu.stage_clock = StageClock(20)
    for _ in range(50):
        firmware.answer()
        emu.step_once()
    d = emu.stage_clock.durations_us()
    assert set(d) == {*STAGES, "compute", "cycle"} and all(len(v) == 20 for v in d.values())
    assert all(np.all(d[s] >= 0) for s in STAGES) and np.all(d["plant"] > 0)
    np.testing.assert_allclose(sum(d[s] for s in STAGES), d["cycle"])
    compute = STAGES[STAGES.index("decode"):STAGES.index("send")]
    np.testing.assert_allclose(sum(d[s] for s in compute), d["compute"])
    assert np.all(d["compute"] < d["cycle"])


def _mutations(rng, frames):
    """Genuine command frames, and each one damaged in the ways a bus damages or forges frames:
    a flipped bit, a wrong length, an unknown id, a replay, a frame of the other direction."""
    for f in frames:
        k = int(rng.integers(8))
        data = bytearray(f.data)
        if k == 0:
            data[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
            yield Frame(f.arbitration_id, bytes(data), f.is_fd, f.is_extended_id)
        elif k == 1:
            yield Frame(f.arbitration_id, bytes(data[:-1]), f.is_fd, f.is_extended_id)
        elif k == 2:
            yield Frame(0x7EE, bytes(data), f.is_fd, f.is_extended_id)
        elif k == 3:
            yield f
            yield f
        elif k == 4:
            yield Frame(f.arbitration_id, rng.integers(0, 256, len(data), dtype=np.uint8).tobytes(), f.is_fd,
                        f.is_extended_id)
        else:
            yield f


@pytest.mark.parametrize("name", MAPS)
def test_command_decoding_equals_the_reference(model, name):
    bus = BusMap.load(ROOT / "configs" / "bus" / f"{name}.toml")
    joints = [b.joint.name for b in model.bodies]
    sender = CommandOutput(bus, joints)
    ref, got = CommandInput(bus, joints), CommandInput(bus, joints)
    compiled = CompiledCommandInput(got)
    rng = np.random.default_rng(3)
    foreign = SensorOutput(bus, joints)
    foreign.bind(SensorSuite(Plant(model)).channel_names)
    for cycle in range(400):
        tau = rng.uniform(-1.2, 1.2, len(joints)) * sender.limit       # some beyond the range: saturated
        frames = sender.frames(tau, cycle) + (foreign.frames(cycle, np.zeros(40), 1)[:1] if cycle % 9 == 0 else [])
        for frame in _mutations(rng, frames):
            assert compiled.feed(frame) == ref.feed(frame), (name, cycle, frame)
            np.testing.assert_array_equal(got.tau, ref.tau)
            assert got.reader.rejected_total == ref.reader.rejected_total
    assert got.counters() == ref.counters()
    for key, values in ref.reader.values.items():
        np.testing.assert_array_equal(got.reader.values[key], values)
    counts = ref.counters()
    rejected = counts["rejected"]
    assert rejected["crc"] + rejected["length"] > 0 and rejected["unknown_id"] > 0 and rejected["counter"] > 0, rejected
    assert counts["lost"] > 0 and counts["ignored"] > 0
    assert counts["resyncs"] > 0 or bus.codec("cmd_torque").counter_index is None, counts



def _counter_story(sender):
    """Command frames with the counter cases of the E2E check: in order, a repeat, one lost, a jump
    beyond the window (stale), a sender that restarted its counter (two frames in order: re-anchored),
    a replay of two old frames, and the counter wrapping past its top."""
    tau = np.zeros(len(sender.limit))
    frames = [sender.frames(tau, k)[0] for k in range(300)]
    order = [0, 1, 1, 2, 4, 5, 40, 6, 7, 100, 101, 102, 103, 50, 51, 104, *range(105, 300)]
    return [frames[k] for k in order]


@pytest.mark.parametrize("sync_frames", [None, 3])
def test_counter_verdicts_equal_the_reference(model, sync_frames):
    """Every counter case taken or rejected as CounterCheck does, counted the same; a compiled check
    re-anchoring after three frames instead of two (sync_frames = 3) must fail the comparison."""
    bus = BusMap.load(ROOT / "configs" / "bus" / "serial_frame.toml")
    joints = [b.joint.name for b in model.bodies]
    ref, got = CommandInput(bus, joints), CommandInput(bus, joints)
    compiled = CompiledCommandInput(got)
    if sync_frames is not None:
        compiled._ctr[:, 3] = sync_frames
    verdicts = [(compiled.feed(f), ref.feed(f)) for f in _counter_story(CommandOutput(bus, joints))]
    counts = ref.counters()
    assert counts["lost"] > 0 and counts["resyncs"] > 0 and counts["rejected"]["counter"] > 0, counts
    same = all(a == b for a, b in verdicts) and got.counters() == counts
    assert same == (sync_frames is None), (verdicts, got.counters(), counts)


PLANT_FAULTS = """
[scenario]
description = "plant, drive and signal faults early in the run"
seed = 5
[[fault]]
name = "friction"
kind = "friction"
target = "elbow"
friction_scale = 10.0
  [fault.trigger]
  at_s = 0.02
  [fault.duration]
  for_s = 0.1
[[fault]]
name = "kt"
kind = "kt_loss"
target = "base_yaw"
kt_scale = 0.5
  [fault.trigger]
  at_s = 0.04
[[fault]]
name = "stiffness"
kind = "stiffness_loss"
target = "link2"
stiffness_scale = 0.7
  [fault.trigger]
  at_s = 0.06
[[fault]]
name = "brake"
kind = "brake"
target = "shoulder_pitch"
  [fault.trigger]
  at_s = 0.1
  [fault.duration]
  for_s = 0.05
[[fault]]
name = "payload"
kind = "payload_drop"
target = "payload"
  [fault.trigger]
  at_s = 0.18
[[fault]]
name = "gyro_noise"
kind = "noise"
target = "imu_gz"
sigma_rad_s = 0.02
  [fault.trigger]
  at_s = 0.01
"""


def _rig(model, bus, scenario_text: str, cls=None):
    from firmware_bridge.wire.signals import CommandInput as Commands
    from hil.faults.scenario import scenario_from_string
    from hil.runtime.loop import Emulator, RuntimeOptions
    plant = Plant(model)
    plant.equilibrium_eta()
    names = plant.layout.joint_names
    here, there = loop_rig.MemoryEnd("emulator"), loop_rig.MemoryEnd("firmware")
    here.peer, there.peer = there, here
    emu = (cls or Emulator)(plant, here, Commands(bus, names), SensorOutput(bus, names),
                            RuntimeOptions(mode="afap", realtime=False, stats_capacity=100),
                            scenario=scenario_from_string(scenario_text))
    return emu, loop_rig.HoldingFirmware(bus, there, names, np.round(emu.hold_tau / 0.02) * 0.02)


def _pair(model):
    bus = BusMap.load(ROOT / "configs" / "bus" / "full_fd.toml")
    return _rig(model, bus, PLANT_FAULTS), _rig(model, bus, PLANT_FAULTS, StageEmulator)


def test_the_cycle_equals_its_model_under_plant_faults(model):
    """The compiled cycle against DriveBank.update, Plant.step and SensorSuite.sample one after the
    other (tests/cycle_oracle.py): bit for bit, cycle by cycle, through a friction, torque-constant,
    stiffness and payload fault, an engaged brake (its stick and slip in the call) and a noise fault."""
    (fast, fw_a), (ref, fw_b) = _pair(model)
    braking = []
    for cycle in range(300):
        braking.append(fast.drives.braking)
        for emu, fw in ((fast, fw_a), (ref, fw_b)):
            fw.answer()
            emu.step_once()
        for a, b in ((fast.plant.pos, ref.plant.pos), (fast.plant.vel, ref.plant.vel),
                     (fast.sensors.measured, ref.sensors.measured), (fast.sensors.truth, ref.sensors.truth),
                     (fast.drives.outputs, ref.drives.outputs), (fast.sensors.station_out, ref.sensors.station_out)):
            assert a.tobytes() == b.tobytes(), f"cycle {cycle}"
        assert fast.plant.t == ref.plant.t and fast.drives.torque_limited == ref.drives.torque_limited
    assert 0 < sum(braking) < 100           # the brake engaged for a while, and released
    assert len(fast.faults.events) >= 6 and fast.faults.summary() == ref.faults.summary()


def test_a_diverging_cycle_is_caught(model):
    """The comparison above can fail: the call on other sensor noise differs."""
    (fast, fw_a), (ref, fw_b) = _pair(model)
    fast.sensors.rng = np.random.default_rng(99)
    for emu, fw in ((fast, fw_a), (ref, fw_b)):
        fw.answer()
        emu.step_once()
    assert fast.sensors.measured.tobytes() != ref.sensors.measured.tobytes()


def test_the_screw_dae_cycle_equals_its_model(model):
    """The screw-DAE formulation is the same call's other plant step: bit for bit its model's, with a
    noise fault, over a watchdog trip (the firmware falls silent) in the hold safe state."""
    from hil.runtime.loop import Emulator, RuntimeOptions
    bus = BusMap.load(ROOT / "configs" / "bus" / "serial_frame.toml")
    rigs = []
    for cls in (Emulator, StageEmulator):
        plant = Plant(model, formulation="screw-dae")
        plant.equilibrium_eta()
        names = plant.layout.joint_names
        here, there = loop_rig.MemoryEnd("emulator"), loop_rig.MemoryEnd("firmware")
        here.peer, there.peer = there, here
        emu = cls(plant, here, CommandInput(bus, names), SensorOutput(bus, names),
                  RuntimeOptions(mode="afap", realtime=False, safe_state="hold", watchdog_s=0.01),
                  scenario=scenario_from_string(PLANT_FAULTS[PLANT_FAULTS.index('[[fault]]\nname = "gyro_noise"'):]
                                                .replace("[[fault]]", "[scenario]\nseed = 2\n[[fault]]", 1)))
        rigs.append((emu, loop_rig.HoldingFirmware(bus, there, names, np.round(emu.hold_tau / 0.02) * 0.02)))
    (fast, fw_a), (ref, fw_b) = rigs
    for cycle in range(60):
        for emu, fw in rigs:
            if cycle < 30:
                fw.answer()
            emu.step_once()
        for a, b in ((fast.plant.pos, ref.plant.pos), (fast.plant.vel, ref.plant.vel),
                     (fast.sensors.measured, ref.sensors.measured), (fast.drives.outputs, ref.drives.outputs)):
            assert a.tobytes() == b.tobytes(), f"cycle {cycle}"
    assert fast.plant.dae and fast.watchdog.trips == ref.watchdog.trips == 1
