"""The reference firmware against the emulator (drives, sensors), in one process over an in-memory link."""
from typing import Callable, NamedTuple

import numpy as np
import pytest

from firmware_bridge.reference.controller import ReferenceController, ControllerGains, quintic
from firmware_bridge.reference.firmware import EncoderMonitor, Firmware
from firmware_bridge.wire.messages import BusMap, StatusFlag
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.model.assembly import assemble, make_work
from hil.model.config import load_model
from hil.model.linearize import static_forces
from hil.dynamics.plant import Plant
from hil.runtime.loop import Emulator, RuntimeOptions
from links import memory_pair


class Run(NamedTuple):
    tips: np.ndarray        # tip position per cycle [m]
    counts: np.ndarray      # encoder counts the firmware computed with, per cycle
    peak_current: np.ndarray  # largest |motor current| per joint over the run [A]
    plant: Plant
    fw: Firmware
    emu: Emulator


def rig(move_time: float, vibration_suppression: bool = False, **options):
    """ELLA at its gravity equilibrium (drives, sensors) behind an in-memory link in afap mode, its first
    sensor frames sent, and the reference firmware on the other end: (plant, emulator, firmware, its link)."""
    emu_link, fw_link = memory_pair()
    bus = BusMap.load("configs/bus/serial_frame.toml")
    plant = Plant(load_model("configs/ella.toml"))
    plant.equilibrium_eta()
    names = plant.layout.joint_names
    emu = Emulator(plant, emu_link, CommandInput(bus, names), SensorOutput(bus, names),
                   RuntimeOptions(mode="afap", realtime=False, **options))
    fw = Firmware(bus, "configs/firmware/ella_nominal.toml", move_time, vibration_suppression)
    emu.io.send(emu.encode(0, 0))
    return plant, emu, fw, fw_link


def closed_loop(vibration_suppression: bool, move_time: float = 1.0, duration: float = 3.0,
                feedforward: Callable[[np.ndarray], np.ndarray] | None = None) -> Run:
    """A closed-loop run of the ELLA preset (drives, sensors) with the reference firmware, one plant
    step per command frame; `feedforward` replaces the firmware's own gravity feed-forward."""
    plant, emu, fw, fw_link = rig(move_time, vibration_suppression)
    bus, names = fw.bus, plant.layout.joint_names
    tips, counts = [], []
    peak = np.zeros(len(names))
    for _ in range(int(duration / plant.dt)):
        while (frame := fw_link.recv()) is not None:
            if fw.sensors.feed(frame):
                tau = fw.ctl.update(fw.sensors.cycle * bus.cycle_s, fw.sensors.counts, feedforward or fw.gravity,
                                    fw.sensors.gyro)
                for f in fw.commands.frames(tau, fw.sensors.cycle):
                    fw_link.send(f)
        emu.step_once()
        tips.append(emu.sensors.station_out[0, :3].copy())
        counts.append(fw.sensors.counts.copy())
        np.maximum(peak, np.abs(emu.drives.current), out=peak)
    return Run(np.array(tips), np.array(counts), peak, plant, fw, emu)


def plant_feedforward(preset: str = "configs/ella.toml") -> Callable[[np.ndarray], np.ndarray]:
    """The emulator's exact holding torques of the undeformed arm (eta = 0): the feed-forward the
    firmware once took from the plant model, the reference its own rigid arm is measured against."""
    asm = assemble(load_model(preset))
    work, pos, nj = make_work(asm.km), np.zeros(asm.layout.nq), asm.layout.n_joints

    def holding_torques(q: np.ndarray) -> np.ndarray:
        pos[:nj] = q
        return static_forces(asm, pos, work)[:nj]
    return holding_torques


def settling_time(tips: np.ndarray, dt: float, move_end: float, band: float = 2e-4, window: int = 100) -> float:
    kernel = np.ones(window) / window
    trend = np.column_stack([np.convolve(tips[:, c], kernel, mode="same") for c in range(3)])
    osc = np.linalg.norm(tips - trend, axis=1)
    t = np.arange(len(tips)) * dt
    idx = np.nonzero((t > move_end) & (np.arange(len(t)) < len(t) - window) & (osc > band))[0]
    return float(t[idx[-1]] - move_end) if len(idx) else 0.0


@pytest.fixture(scope="module")
def runs():
    return {vs: closed_loop(vs) for vs in (False, True)}


def test_pid_reaches_the_seed000_setpoints(runs):
    _, _, peak, plant, fw, emu = runs[False]
    np.testing.assert_allclose(plant.q(), fw.goal, atol=2e-3)
    limits = np.array([d.current_limit_A for d in emu.drives.specs])
    print(f"\npeak motor currents {peak} A (limits {limits} A)")
    assert np.all((peak > 1.0) & (peak < limits))           # through current-mode drives, within their limit
    assert emu.watchdog.trips == 0
    assert emu.commands.counters()["rejected"] == {k: 0 for k in emu.commands.counters()["rejected"]}


def test_imu_vibration_suppression_shortens_the_residual_oscillation(runs):
    move_end = 0.2 + 1.0
    pid = settling_time(runs[False].tips, 1e-3, move_end)
    vs = settling_time(runs[True].tips, 1e-3, move_end)
    print(f"\ntip settling after the manoeuvre (0.2 mm band): PID {pid:.3f} s, PID + IMU suppression {vs:.3f} s")
    assert vs < 0.8 * pid
    np.testing.assert_allclose(runs[True].plant.q(), runs[True].fw.goal, atol=2e-3)


@pytest.fixture(scope="module")
def model_runs():
    feedforward = plant_feedforward()
    return {vs: closed_loop(vs, feedforward=feedforward) for vs in (False, True)}


def _same_set_point_results(own: Run, model: Run) -> bool:
    """Final joint angles within 10 urad (4 encoder counts of the pitch joint), tip settling within
    5 ms, peak motor currents within 1 %."""
    move_end = 0.2 + 1.0
    return bool(np.abs(own.plant.q() - model.plant.q()).max() < 1e-5
                and abs(settling_time(own.tips, 1e-3, move_end) - settling_time(model.tips, 1e-3, move_end)) <= 5e-3
                and np.allclose(own.peak_current, model.peak_current, rtol=0.01))


@pytest.mark.parametrize("vibration_suppression", [False, True])
def test_set_point_results_are_those_of_the_plant_model_feedforward(runs, model_runs, vibration_suppression):
    """The firmware's own rigid arm instead of the emulator's model changes nothing that matters."""
    own, model = runs[vibration_suppression], model_runs[vibration_suppression]
    print(f"\nfinal q, own - plant-model feed-forward: {own.plant.q() - model.plant.q()} rad")
    assert _same_set_point_results(own, model)


def test_the_set_point_comparison_sees_a_wrong_feedforward(model_runs):
    feedforward = plant_feedforward()
    weak = closed_loop(False, feedforward=lambda q: 0.9 * feedforward(q))      # a 10 % mass error
    assert not _same_set_point_results(weak, model_runs[False])


def test_encoder_counter_wraps_are_unwrapped():
    ctl = ReferenceController(np.array([100.0]), 16384, np.array([0.5]), np.array([0.5]), 1.0,
                              ControllerGains(np.ones(1), np.ones(1), np.zeros(1)), 1e-3)
    start = 2 ** 31 - 10
    assert ctl.joint_angles(np.array([start]))[0] == pytest.approx(0.5)
    wrapped = -(2 ** 31) + 10          # +20 counts across the signed 32-bit wrap
    assert ctl.joint_angles(np.array([wrapped]))[0] == pytest.approx(0.5 + 20 * 2 * np.pi / (16384 * 100))


def test_quintic_is_rest_to_rest():
    assert quintic(-1.0, 2.0) == (0.0, 0.0) and quintic(3.0, 2.0) == (1.0, 0.0)
    s, sd = quintic(1.0, 2.0)
    assert s == pytest.approx(0.5) and sd == pytest.approx(30 * 0.25 * 0.25 / 2.0)


def test_encoder_monitor_latches_implausible_jumps_only():
    gear = np.array([100.0, 100.0, 50.0])
    monitor = EncoderMonitor(gear, 16384, 1e-3, max_rate_rad_s=3.0, counter_bits=32)
    per_cycle = 3.0 * gear * 16384 / (2 * np.pi) * 1e-3          # counts one cycle at the rate limit
    counts = np.array([2**31 - 100, 0, 5], np.int64)             # the first one wraps below
    names = ["a", "b", "c"]
    assert monitor.check(counts, 0, names)
    counts = counts + (0.9 * per_cycle).astype(np.int64)
    counts[0] = (counts[0] + 2**31) % 2**32 - 2**31              # a counter wrap is no jump
    assert monitor.check(counts, 1, names)
    assert monitor.check(counts + (2.5 * per_cycle).astype(np.int64), 4, names)   # 3 cycles: lost frames
    jump = counts + (2.5 * per_cycle).astype(np.int64)
    jump[2] = 0                                                  # a dropout reading 0
    assert not monitor.check(jump, 5, names)
    assert monitor.fault.startswith("encoder c")
    assert not monitor.check(counts, 6, names)                   # latched


def test_the_reference_manoeuvre_never_trips_the_encoder_monitor():
    run = closed_loop(False, move_time=0.5, duration=1.0)     # a fast manoeuvre: high rates
    monitor = EncoderMonitor(np.array([b.joint.gear_ratio for b in run.plant.asm.model.bodies]), 16384, run.plant.dt)
    counts = run.counts
    assert np.ptp(counts, axis=0).min() > 1000                      # every joint moved
    assert all(monitor.check(c, k, run.fw.names) for k, c in enumerate(counts))


def outage_run(bumpless: bool, outage_s: tuple[float, float] = (0.4, 0.9), duration: float = 5.0) -> Run:
    """The reference manoeuvre with the firmware's commands lost for 0.5 s mid-move (the drives' watchdog
    trips and holds zero torque, the arm sags), then delivered again; `bumpless` False: the firmware
    ignores the status word's command timeout (its integrator winds up, its trajectory runs on)."""
    plant, emu, fw, fw_link = rig(1.0, watchdog_s=0.05)
    bus, names = fw.bus, plant.layout.joint_names
    counts = []
    for _ in range(int(duration / plant.dt)):
        while (frame := fw_link.recv()) is not None:
            if fw.sensors.feed(frame):
                t = fw.sensors.cycle * bus.cycle_s
                engaged = not (bumpless and fw.sensors.status & StatusFlag.COMMAND_TIMEOUT)
                tau = fw.ctl.update(t, fw.sensors.counts, fw.gravity, fw.sensors.gyro, engaged)
                for f in fw.commands.frames(tau, fw.sensors.cycle):
                    if not outage_s[0] <= t < outage_s[1]:
                        fw_link.send(f)
        emu.step_once()
        counts.append(fw.sensors.counts.copy())
    return Run(np.array(counts)[:, :0], np.array(counts), np.zeros(len(names)), plant, fw, emu)


def monitor_verdict(run: Run) -> str | None:
    """The reference firmware's encoder plausibility check over the run's counts: its latched fault, if any."""
    monitor = EncoderMonitor(np.array([b.joint.gear_ratio for b in run.plant.asm.model.bodies]), 16384, run.plant.dt)
    for k, c in enumerate(run.counts):
        if not monitor.check(c, k, run.fw.names):
            break
    return monitor.fault


def test_re_engaging_after_a_command_timeout_is_bumpless():
    """After the watchdog's safe state the firmware re-plans from the measured pose with its integrator held:
    the arm reaches the set-points without an implausible jump (peak 4.2 rad/s, the sag itself); ignoring
    the timeout (the integrator wound up, the trajectory run on) lurches at 5.7 rad/s on re-engaging and
    trips the plausibility check, as `make run` did on a loaded machine."""
    run = outage_run(bumpless=True)
    assert run.emu.supervisor.watchdog.trips == 1
    assert monitor_verdict(run) is None
    final = run.plant.q()[:3]
    assert np.abs(final - np.array([0.6922, -0.4928, 0.4270])).max() < 2e-3, final
    assert monitor_verdict(outage_run(bumpless=False)) is not None
