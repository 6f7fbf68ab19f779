"""How to test a firmware on the emulator: this suite tests the reference firmware, and any other
ELLA firmware from the command line::

    pytest tests/firmware_suite --hil-firmware "./my_fw {port}" [--hil-targets my_targets.toml]
                                [--hil-bus MAP] [--hil-link SPEC] [--hil-mode realtime]

(``{port}`` becomes the pty path of the firmware's end; see hil.testing.pytest_plugin for the
other placeholders), or copy it and set ``firmware`` in the markers. The fixtures come from the
package's pytest plugin: ``hil_run`` is an emulator run (ELLA, serial frames over a pty pair,
lockstep: one plant step per command, so the physics is the same on any machine) with the
marker's settings, already started; ``finish()`` waits for its end and returns the summary, the
verdicts against the targets (default: the seed 000 set-points, ``configs/targets``), the
firmware's own report (the reference firmware's only) and the run log (every measured channel
beside its ground truth, the fault events). A firmware that exits, never answers or leaves the
link unread fails the test. Only what needs the reference firmware's own report is skipped for
another firmware, with the reason.
"""
import numpy as np
import pytest

from firmware_bridge.wire.messages import StatusFlag
from hil.faults.spec import Duration, Trigger
from hil.testing.harness import REFERENCE, EmulatorRun
from hil.testing.pytest_plugin import command_line_settings

JOINTS = ("base_yaw", "shoulder_pitch", "elbow")
TARGETS = "seed000_setpoints"


@pytest.fixture
def targets(request) -> str:
    """The firmware's own targets (--hil-targets), else the seed 000 set-points."""
    return request.config.getoption("hil_targets") or TARGETS


def joint_rates(log) -> np.ndarray:
    """True joint rates [rad/s] per row."""
    return np.column_stack([log.column(f"qd_{j}") for j in JOINTS])


def setpoint_verdicts(result) -> list[dict]:
    found = [v for v in result.verdicts if v["name"].startswith("setpoint_")]
    assert found, "the targets name no set-points"
    return found


def test_the_arm_reaches_the_setpoints_without_a_lost_frame(hil_start, targets):
    result = hil_start(duration_s=4.0, targets=targets).finish()
    assert result.verdicts and not result.failed_verdicts(), result.failed_verdicts()
    commands = result.summary["commands"]
    assert sum(commands["rejected"].values()) == 0 and commands["lost"] == 0
    assert result.summary["watchdog"]["trips"] == 0


@pytest.fixture(scope="module")
def dropout(request):
    """One run with an elbow encoder dropout mid-manoeuvre, shared by the tests below."""
    settings = {**command_line_settings(request.config), "duration_s": 2.0, "safe_state": "brake",
                "watchdog_s": 0.02}
    run = EmulatorRun(**settings).start()
    try:
        run.inject("dropout", "enc_elbow", name="elbow_dropout", trigger=Trigger.at(0.7))   # mid-manoeuvre
        yield run.finish()
    finally:
        run.close()


def test_after_an_encoder_dropout_the_arm_is_braked_within_50_ms(dropout):
    """The firmware must stop driving on the implausible count (the reference firmware stops
    commanding); the drives' watchdog (20 ms) closes the holding brakes. The links' vibration may
    make a brake slip again, but the arm comes to rest."""
    log = dropout.log
    t_fault = log.event_time("inject", "elbow_dropout")
    assert np.abs(joint_rates(log.window(t_fault - 0.05, t_fault))).max() > 0.5      # moving at the fault
    assert 0 <= log.event_time("watchdog_tripped") - t_fault <= 0.05
    status = log.window(t_fault + 0.05).column("status").astype(int)
    assert np.all(status & StatusFlag.COMMAND_TIMEOUT)                 # braked from 50 ms on, to the end
    assert np.abs(joint_rates(log.window(t_fault + 1.0))).max() == 0.0   # held still
    after = log.window(t_fault + 0.05)
    assert all(np.all(after.column(f"brake_{j}") >= 1) for j in JOINTS)          # every brake closed


def test_the_reference_firmware_reports_the_encoder_fault(dropout, request):
    if command_line_settings(request.config).get("firmware", REFERENCE) != REFERENCE:
        pytest.skip("needs the reference firmware's own report (its latched fault), which another firmware "
                    "does not print")
    assert "elbow" in dropout.firmware["fault"]


def test_the_arm_recovers_from_a_100_ms_sensor_bus_off(hil_start, targets):
    run = hil_start(duration_s=3.0, safe_state="brake", targets=targets)
    run.inject("silent", "to_firmware", name="bus_off", trigger=Trigger.at(1.6), duration=Duration.lasting(0.1))
    result = run.finish()
    assert result.summary["watchdog"]["trips"] == 1                  # no commands without sensor frames
    # lockstep: the first frame after the gap (its counter jumped) is not answered, the next is;
    # no cycle waits out the firmware as silent
    assert result.summary.get("lockstep", {}).get("silent_cycles", 0) == 0
    assert [e["event"] for e in result.log.events if e["event"].startswith("watchdog")] == \
        ["watchdog_tripped", "watchdog_cleared"]
    assert all(v["passed"] for v in setpoint_verdicts(result)), setpoint_verdicts(result)


def test_vibration_suppression_stays_stable_on_a_degraded_imu(hil_start, targets):
    """Scenario file, emulator in its own process (`hil run --scenario`): the faults come from the file."""
    result = hil_start(duration_s=3.0, scenario="imu_degradation", vibration_suppression=True, subprocess=True,
                       targets=targets).finish()
    assert result.summary["faults"]["injections"] >= 3
    assert {e["fault"] for e in result.log.events if e["event"] == "inject"} >= {"gyro_z_noise", "accel_x_bias"}
    tip_speed = np.abs(np.diff(result.log.column("tip_z"))) / 1e-3
    assert tip_speed[-500:].max() < 0.05                             # no instability in the last 0.5 s
    assert all(v["passed"] for v in setpoint_verdicts(result)), setpoint_verdicts(result)
