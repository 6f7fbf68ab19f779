"""How to test a firmware on the emulator: this suite tests the reference firmware; run it against
your own with ``pytest tests/firmware_suite --hil-firmware "./my_fw --port {link}"`` (and
``--hil-bus``/``--hil-link`` for its bus map and link), or copy it and set ``firmware`` in the
markers. The fixtures come from the package's pytest plugin (hil.testing.pytest_plugin): ``hil_run`` is an
emulator run (ELLA, serial frames over a pty pair, real-time 1 kHz loop) with the marker's settings,
already started; ``finish()`` waits for its end and returns the summary, the firmware's result and
the run log (every measured channel beside its ground truth, the fault events).
"""
import numpy as np
import pytest

from firmware_bridge.reference.controller import ELLA_SETPOINTS
from firmware_bridge.messages import StatusFlag
from hil.faults.spec import Duration, Trigger

JOINTS = ("base_yaw", "shoulder_pitch", "elbow")


def joint_errors(result) -> np.ndarray:
    """Set-point minus final joint angle [rad]."""
    return np.array([ELLA_SETPOINTS[j] for j in JOINTS]) - np.array(result.summary["q"])


def joint_rates(log) -> np.ndarray:
    """True joint rates [rad/s] per row."""
    return np.column_stack([log.column(f"qd_{j}") for j in JOINTS])


@pytest.mark.hil(duration_s=2.5, mode="lockstep")     # one step per command: deterministic, as fast as it goes
def test_the_arm_reaches_the_setpoints_without_a_lost_frame(hil_run):
    result = hil_run.finish()
    assert np.abs(joint_errors(result)).max() < 2e-3
    assert sum(result.summary["commands"]["rejected"].values()) == 0
    assert result.firmware["fault"] is None and result.summary["watchdog"]["trips"] == 0


@pytest.mark.hil(duration_s=2.0, safe_state="brake", watchdog_s=0.02)
def test_after_an_encoder_dropout_the_firmware_brakes_the_arm_within_50_ms(hil_run):
    """The firmware stops commanding on the implausible count; the drives' watchdog (20 ms) closes
    the holding brakes. The links' vibration may make a brake slip again, but the arm comes to rest."""
    hil_run.inject("dropout", "enc_elbow", name="elbow_dropout", trigger=Trigger.at(0.7))   # mid-manoeuvre
    result = hil_run.finish()
    t_fault = result.log.event_time("inject", "elbow_dropout")
    assert "elbow" in result.firmware["fault"]
    assert np.abs(joint_rates(result.log.window(t_fault - 0.05, t_fault))).max() > 0.5   # moving at the fault
    assert result.log.event_time("watchdog_tripped") - t_fault <= 0.05
    status = result.log.window(t_fault + 0.05).column("status").astype(int)
    assert np.all(status & StatusFlag.COMMAND_TIMEOUT)                 # braked from 50 ms on, to the end
    assert np.abs(joint_rates(result.log.window(t_fault + 1.0))).max() == 0.0   # held still
    after = result.log.window(t_fault + 0.05)
    assert all(np.all(after.column(f"brake_{j}") >= 1) for j in JOINTS)          # every brake closed


@pytest.mark.hil(duration_s=3.0, safe_state="brake")
def test_the_arm_recovers_from_a_100_ms_sensor_bus_off(hil_run):
    hil_run.inject("silent", "to_firmware", name="bus_off", trigger=Trigger.at(1.6), duration=Duration.lasting(0.1))
    result = hil_run.finish()
    assert result.summary["watchdog"]["trips"] == 1                  # no commands without sensor frames
    assert [e["event"] for e in result.log.events if e["event"].startswith("watchdog")] == \
        ["watchdog_tripped", "watchdog_cleared"]
    assert np.abs(joint_errors(result)).max() < 5e-3


@pytest.mark.hil(duration_s=3.0, scenario="configs/scenarios/imu_degradation.toml", vibration_suppression=True,
                 subprocess=True)
def test_vibration_suppression_stays_stable_on_a_degraded_imu(hil_run):
    """Scenario file, emulator in its own process (`hil run --scenario`): the faults come from the file."""
    result = hil_run.finish()
    assert result.summary["faults"]["injections"] >= 3
    assert {e["fault"] for e in result.log.events if e["event"] == "inject"} >= {"gyro_z_noise", "accel_x_bias"}
    tip_speed = np.abs(np.diff(result.log.column("tip_z"))) / 1e-3
    assert tip_speed[-500:].max() < 0.05                             # no instability in the last 0.5 s
    assert np.abs(joint_errors(result)).max() < 5e-3
