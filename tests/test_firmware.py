"""The reference firmware against the emulator, in one process over an in-memory link."""
import numpy as np
import pytest

from firmware_bridge.controller import ReferenceController, ControllerGains, quintic
from firmware_bridge.firmware import Firmware
from firmware_bridge.messages import BusMap
from firmware_bridge.signals import CommandInput, SensorOutput
from hil.config import load_model
from hil.plant import Plant
from hil.runtime import Emulator, RuntimeOptions
from links import memory_pair


def closed_loop(vibration_suppression: bool, move_time: float = 1.0, duration: float = 3.0):
    """Tip positions of a closed-loop run of the ELLA preset with the reference firmware."""
    emu_link, fw_link = memory_pair()
    bus = BusMap.load("configs/bus/serial_frame.toml")
    plant = Plant(load_model("configs/ella.toml"))
    plant.equilibrium_eta()
    names = plant.layout.joint_names
    emu = Emulator(plant, emu_link, CommandInput(bus, names), SensorOutput(bus, names),
                   RuntimeOptions(mode="afap", realtime=False))
    fw = Firmware(bus, "configs/ella.toml", move_time, vibration_suppression)
    emu._send(0)
    tips = []
    for _ in range(int(duration / plant.dt)):
        while (frame := fw_link.recv()) is not None:
            if fw.sensors.feed(frame):
                tau = fw.ctl.update(fw.sensors.cycle * bus.cycle_s, fw.sensors.counts, fw.gravity, fw.sensors.gyro)
                for f in fw.commands.frames(tau, fw.sensors.cycle):
                    fw_link.send(f)
        emu.step_once()
        tips.append(emu.sensors.station_out[0, :3].copy())
    return np.array(tips), plant, fw, emu


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
    _, plant, fw, emu = runs[False]
    np.testing.assert_allclose(plant.q(), fw.goal, atol=2e-3)
    assert emu.watchdog.trips == 0
    assert emu.commands.counters()["rejected"] == {k: 0 for k in emu.commands.counters()["rejected"]}


def test_imu_vibration_suppression_shortens_the_residual_oscillation(runs):
    move_end = 0.2 + 1.0
    pid = settling_time(runs[False][0], 1e-3, move_end)
    vs = settling_time(runs[True][0], 1e-3, move_end)
    print(f"\ntip settling after the manoeuvre (0.2 mm band): PID {pid:.3f} s, PID + IMU suppression {vs:.3f} s")
    assert vs < 0.8 * pid
    np.testing.assert_allclose(runs[True][1].q(), runs[True][2].goal, atol=2e-3)


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
