"""Any firmware under test: `hil run --firmware`, start and end of a run, one period, links that fit
their map, verdicts against the firmware's own targets, the command age, the example firmware."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from config_schema import ConfigError
from firmware_bridge.links.connect import check_link_fits
from firmware_bridge.wire.messages import BusMap
from hil.cli.summary import format_summary
from hil.logs.runlog import RunLog
from hil.logs.targets import Targets, load_targets
from hil.logs.verdicts import evaluate, settled_at, tip_metrics
from hil.model.presets import resolve
from hil.runtime.command_age import CommandAge
from hil.runtime.firmware_process import endpoint_of, expand

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
PYSERIAL_FW = f"{PY} examples/pyserial_firmware.py {{port}}"


def hil(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`hil ...` in its own process; stderr without the one-time compile notice."""
    proc = subprocess.run([PY, "-m", "hil", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    proc.stderr = "".join(line for line in proc.stderr.splitlines(keepends=True) if "compiling kernels" not in line)
    return proc


def last_json(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


# ----------------------------------------------------------------------------- placeholders, names
def test_placeholders_name_the_firmwares_end_of_the_link():
    pty = endpoint_of("serial:/dev/pts/7", "configs/bus/serial_frame.toml")
    assert expand(["fw", "{port}", "--link={link}", "{interface}", "{channel}", "{bus}"], pty) == [
        "fw", "/dev/pts/7", "--link=serial:/dev/pts/7", "serial", "/dev/pts/7", "configs/bus/serial_frame.toml"]
    can = endpoint_of("canfd:udp_loopback:bench,nodes=2", "m.toml")
    assert expand(["{interface}", "{channel}", "{port}", "{link}"], can) == [
        "udp_loopback", "bench", "bench", "canfd:udp_loopback:bench,nodes=2"]
    with pytest.raises(ValueError, match="'{device}' is not a placeholder"):
        expand(["{device}"], pty)


def test_presets_bus_maps_scenarios_and_targets_resolve_by_name():
    assert Path(resolve("preset", "ella")).samefile(ROOT / "configs" / "ella.toml")
    assert Path(resolve("bus", "serial_frame")).samefile(ROOT / "configs" / "bus" / "serial_frame.toml")
    assert Path(resolve("scenario", "imu_degradation")).name == "imu_degradation.toml"
    assert resolve("bus", "configs/bus/compact_fd.toml") == "configs/bus/compact_fd.toml"
    with pytest.raises(ValueError, match=r"no shipped bus of that name \(did you mean 'serial_frame'\?\)"):
        resolve("bus", "serial_frames")


# ----------------------------------------------------------------------------- links, periods
@pytest.mark.parametrize("bus, link, fits", [
    ("compact_fd", "can:udp_loopback:x", False), ("compact_fd", "canfd:udp_loopback:x", True),
    ("compact_fd", "slcan-pty", True), ("compact_fd", "pty", False), ("serial_frame", "can:virtual:0", False),
    ("serial_frame", "pty", True), ("compact_classic", "pty", False), ("compact_classic", "can:pcan:X", True)])
def test_a_link_that_cannot_carry_the_maps_frames_is_refused(bus, link, fits):
    bus_map = BusMap.load(resolve("bus", bus))
    if fits:
        check_link_fits(bus_map, link)
    else:
        with pytest.raises(ValueError, match=f"link '{link}' cannot carry the frames of .*{bus}"):
            check_link_fits(bus_map, link)


def test_an_fd_map_on_a_classical_can_link_refuses_to_start_in_one_line():
    proc = hil("run", "ella", "--bus", "compact_fd", "--link", "can:udp_loopback:refuse", "--duration", "0.1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and "needs a CAN FD link" in proc.stderr


def test_a_period_other_than_the_plant_step_refuses_to_start(tmp_path):
    proc = hil("run", "ella", "--bus", "serial_frame", "--period", "0.002", "--duration", "0.1")
    assert proc.returncode == 2 and "period 0.002 s differs from the plant step integrator.dt_s = 0.001 s" in proc.stderr
    slow = tmp_path / "slow.toml"
    slow.write_text((ROOT / "configs/bus/serial_frame.toml").read_text().replace("cycle_s = 0.001", "cycle_s = 0.002"))
    proc = hil("run", "ella", "--bus", str(slow), "--duration", "0.1")
    assert proc.returncode == 2 and "bus.cycle_s = 0.002 s differs from the plant step" in proc.stderr


# ----------------------------------------------------------------------------- start and end of a run
def test_without_a_firmware_the_run_prints_where_to_connect_and_fails_at_the_start_timeout():
    proc = hil("run", "ella", "--bus", "serial_frame", "--start-timeout", "0.5", "--duration", "1", "--no-realtime")
    ready = json.loads(proc.stdout.splitlines()[0].removeprefix("ready "))
    assert ready["link"] == "serial" and ready["endpoint"].startswith("/dev/") and ready["period_s"] == 0.001
    assert ready["mode"] == "realtime" and ready["start"] == "first_command"
    assert proc.returncode == 3
    assert "RUN FAILED: start: no valid command within 0.5 s" in proc.stdout and "cycles 0" in proc.stdout


def test_a_firmware_that_dies_mid_run_fails_it_with_its_status_and_last_words(tmp_path):
    dying = tmp_path / "dying.py"
    dying.write_text(textwrap.dedent(f"""
        import subprocess, sys
        sys.argv = ["fw", sys.argv[1]]
        sys.path.insert(0, {str(ROOT / "examples")!r})
        import pyserial_firmware as fw
        import serial
        real = serial.Serial.write
        sent = []
        def write(self, data):
            sent.append(1)
            if len(sent) > 300:
                print("controller: lost my marbles", file=sys.stderr, flush=True)
                sys.exit(4)
            return real(self, data)
        serial.Serial.write = write
        fw.main(sys.argv[1])
    """))
    proc = hil("run", "ella", "--bus", "serial_frame", "--mode", "lockstep", "--duration", "2",
               "--firmware", f"{PY} {dying} {{port}}")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "RUN FAILED: the firmware exited with status 4 at t = 0.30" in proc.stdout
    assert "controller: lost my marbles" in proc.stdout


def test_a_pyserial_firmware_that_flushes_its_input_on_opening_still_starts_in_lockstep(tmp_path):
    """pyserial flushes the port's input when it opens it: the first sensor frame, sent before,
    is gone; the emulator sends it again until the first command."""
    late = tmp_path / "late.py"
    late.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(ROOT / "examples")!r})
        import pyserial_firmware as fw
        time.sleep(0.3)                       # the emulator's first frame is already waiting
        fw.main(sys.argv[1])
    """))
    proc = hil("run", "ella", "--bus", "serial_frame", "--mode", "lockstep", "--duration", "1", "--json",
               "--firmware", f"{PY} {late} {{port}}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = last_json(proc.stdout)
    assert s["cycles"] == 1000 and s["start"]["resent"] >= 1 and s["run_failures"] == []
    assert s["firmware_timing"]["missed_cycles"] == 0 and s["firmware_timing"]["cycles_with_command"] == 1000


# ----------------------------------------------------------------------------- the pytest plugin fails, never passes
pytest_plugins = ["pytester"]
PLUGIN_TEST = """
    import pytest

    @pytest.mark.hil(firmware={firmware!r}, duration_s=1.0, start_timeout_s=2.0)
    def test_inner(hil_run):
        hil_run.finish()
"""


@pytest.mark.parametrize("firmware, reason", [
    (f"{PY} -c 'import sys; print(\"cannot open port\", file=sys.stderr); sys.exit(1)'", "exited with status 1"),
    (f"{PY} -c 'import time; time.sleep(30)' {{port}}", "start: no valid command within 2 s")],
    ids=["exits-at-start-up", "never-answers"])
def test_a_firmware_that_exits_or_never_answers_fails_the_plugin_test(pytester, monkeypatch, firmware, reason):
    from numba.core import config
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(Path(config.CACHE_DIR).parent))   # pytester moves HOME
    pytester.makepyfile(PLUGIN_TEST.format(firmware=firmware))
    result = pytester.runpytest_subprocess(f"--rootdir={pytester.path}", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*RunFailed*{reason}*"])


# ----------------------------------------------------------------------------- verdicts
def synthetic_log(t: np.ndarray, tip: np.ndarray, q: dict | None = None, events: list | None = None,
                  extra: dict | None = None) -> RunLog:
    cols = {"t": t, "tip_x": tip[:, 0], "tip_y": tip[:, 1], "tip_z": tip[:, 2], **(q or {}), **(extra or {})}
    return RunLog({"columns": list(cols), "events": events or []}, np.column_stack(list(cols.values())))


def test_a_slow_sway_never_settles_where_a_moving_average_saw_none():
    """10 mm of sway at 0.4 Hz to the end of the run: a 100 ms moving average follows it as trend
    (the old metric read 0.0 s settling); against the final value it never settles."""
    t = np.arange(0, 5, 1e-3)
    tip = np.zeros((len(t), 3))
    tip[:, 0] = 1.0 + 0.01 * np.sin(2 * np.pi * 0.4 * t)
    assert settled_at(t, tip, 2e-4, 1.2, 0.1) is None
    kernel = np.ones(100) / 100
    trend = np.convolve(tip[:, 0], kernel, mode="same")
    assert np.abs(tip[100:-100, 0] - trend[100:-100]).max() < 2e-4          # the old metric saw no oscillation
    metrics = tip_metrics(synthetic_log(t, tip))
    assert metrics["settled_at_s"] is None and metrics["residual_pp_mm"] > 5.0


def test_a_decaying_oscillation_settles_when_it_enters_the_band_for_good():
    t = np.arange(0, 5, 1e-3)
    tip = np.zeros((len(t), 3))
    tip[:, 2] = 0.01 * np.exp(-t) * np.cos(2 * np.pi * 3 * t)               # envelope 10 mm e^-t
    at = settled_at(t, tip, 1e-3, 0.0, 0.1)
    assert np.log(10) - 0.2 < at <= np.log(10)                               # envelope at the band: ln 10 s


def test_verdicts_pass_and_fail_on_the_targets():
    t = np.arange(0, 3, 1e-3)
    tip = np.zeros((len(t), 3))
    q = {"q_a": np.full(len(t), 0.5), "q_b": np.full(len(t), -0.2), "tau_a": 10 * np.sin(t), "tau_b": np.full(len(t), 50.0)}
    events = [{"event": "inject", "cycle": 1000, "t": 1.0, "fault": "f"},
              {"event": "watchdog_tripped", "cycle": 1030, "t": 1.03}]
    log = synthetic_log(t, tip, q, events)
    targets = Targets(setpoints_rad={"a": 0.5005, "b": -0.1}, tolerance_rad=1e-3, max_torque_N_m={"a": 20.0, "b": 40.0},
                      max_current_A=5.0, safe_state_within_s=0.05, settling_band_m=1e-3, settling_time_s=0.5)
    got = {v["name"]: v for v in evaluate(targets, log, ["a", "b"])}
    assert [n for n, v in got.items() if v["passed"]] == ["setpoint_a", "settling_time", "max_torque_a", "safe_state"]
    assert got["setpoint_b"]["value"] == pytest.approx(0.1) and got["max_torque_b"]["value"] == 50.0
    assert got["max_current_a"]["value"] is None and "no motor current" in got["max_current_a"]["description"]
    assert got["safe_state"]["value"] == pytest.approx(0.03)
    late = synthetic_log(t, tip, q, [events[0], {**events[1], "t": 1.2}])
    assert not {v["name"]: v for v in evaluate(targets, late, ["a", "b"])}["safe_state"]["passed"]
    none = synthetic_log(t, tip, q, [])
    assert {v["name"]: v for v in evaluate(targets, none, ["a", "b"])}["safe_state"]["value"] is None


def test_targets_files_are_checked_by_the_schema_reader(tmp_path):
    good = load_targets(resolve("targets", "seed000_setpoints"))
    assert good.setpoints_rad["elbow"] == 0.4270 and good.tolerance_rad == 2e-3
    bad = tmp_path / "bad.toml"
    bad.write_text('[verdict]\nsetpoints_rad = { elbow = 0.4 }\nsettling_bnad_m = 1e-3\n')
    with pytest.raises(ConfigError, match="verdict.settling_bnad_m.*did you mean 'settling_band_m'"):
        load_targets(bad)
    bad.write_text('[verdict]\nsetpoints_rad = { elbow = 0.4 }\n')
    with pytest.raises(ConfigError, match="verdict.tolerance_rad.*required with setpoints_rad"):
        load_targets(bad)
    bad.write_text('[verdict]\nmax_torque_N_m = { elbow = -3 }\n')
    with pytest.raises(ConfigError, match=r"verdict.max_torque_N_m.elbow = -3: expected a positive number in N m"):
        load_targets(bad)


def test_a_scenario_file_carries_its_verdict_table(tmp_path):
    from hil.faults.scenario import load_scenario
    path = tmp_path / "s.toml"
    path.write_text((ROOT / "configs/scenarios/imu_degradation.toml").read_text()
                    + "\n[verdict]\nsafe_state_within_s = 0.05\n")
    assert load_scenario(path).targets.safe_state_within_s == 0.05


def test_check_makes_the_exit_status_follow_the_verdicts(tmp_path):
    tight = tmp_path / "tight.toml"
    tight.write_text('[verdict]\nsetpoints_rad = { elbow = 0.4270 }\ntolerance_rad = 1e-9\n')
    common = ("run", "ella", "--bus", "serial_frame", "--mode", "lockstep", "--duration", "1.5", "--spawn-firmware",
              "--move-time", "1.0", "--no-realtime", "--check")
    failing = hil(*common, "--targets", str(tight))
    # the set-point fails; the link-health verdicts (defaults: no rejected command, no watchdog trip) pass
    assert failing.returncode == 1 and "FAIL  setpoint_elbow" in failing.stdout and "2 of 3 passed" in failing.stdout
    assert "PASS  rejected_commands" in failing.stdout and "PASS  watchdog_trips" in failing.stdout
    loose = tmp_path / "loose.toml"
    loose.write_text('[verdict]\nsetpoints_rad = { elbow = 0.4270 }\ntolerance_rad = 0.01\n')
    passing = hil(*common, "--targets", str(loose))
    assert passing.returncode == 0 and "PASS  setpoint_elbow" in passing.stdout


HOLD_FW = f"{PY} tests/firmwares/hold_pose.py configs/bus/serial_frame.toml serial:{{port}}"


def test_check_without_targets_fails_a_firmware_that_sends_one_out_of_range_command():
    """--check with no targets judges the link's health: one rejected frame among 500 fails the run."""
    common = ("run", "ella", "--bus", "serial_frame", "--mode", "lockstep", "--duration", "0.5", "--no-realtime",
              "--check")
    bad = hil(*common, "--firmware", HOLD_FW + " --out-of-range-at 100")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "FAIL  rejected_commands" in bad.stdout and "(1 range)" in bad.stdout
    good = hil(*common, "--firmware", HOLD_FW)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "PASS  rejected_commands" in good.stdout and "PASS  watchdog_trips" in good.stdout


def test_without_targets_no_line_claims_an_error_against_set_points():
    proc = hil("run", "ella", "--bus", "serial_frame", "--mode", "lockstep", "--duration", "0.5",
               "--firmware", PYSERIAL_FW)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "set-point" not in proc.stdout and "joint error" not in proc.stdout
    assert "final joint angles" in proc.stdout and "tip:" in proc.stdout and "verdicts" not in proc.stdout


def test_the_summary_says_what_gc_on_means_and_what_the_command_counts_are():
    s = {"cycles": 2, "t_s": 0.002, "mode": "realtime", "halted": None, "joints": ["a"], "q": [0.1],
         "realtime": {"features": {"gc": {"active": True, "detail": "collected 0, frozen 12 objects, disabled"}}},
         "timing": {}, "pacer": {"overruns": 0, "max_consecutive": 0, "skipped_periods": 0},
         "read_to_send_us": {"count": 2, "p50": 1.0, "p99": 1.0, "p99.9": 1.0, "max": 1.0},
         "link": {}, "commands": {"accepted": 3, "rejected": {"crc": 1}, "lost": 0, "ignored": 0},
         "watchdog": {"trips": 0, "events": []}, "faults": {"injections": 0, "errors": 0},
         "drives": {"torque_limited_cycles": 0}}
    text = format_summary(s)
    assert "gc frozen and disabled" in text and "gc on" not in text
    assert "over the 2 cycles that took in a new command" in text
    assert "3 accepted, 1 rejected (crc 1)" in text


# ----------------------------------------------------------------------------- command age
def test_the_command_age_follows_the_frame_each_command_answers():
    age = CommandAge(16)
    assert np.isnan(age.cycle_start(0))                                     # no command yet
    age.sent(1_000_000)                                                     # frames of cycle 0 at 1 ms
    age.taken(1_300_000)                                                    # answered 0.3 ms later
    assert age.cycle_start(2_000_000) == pytest.approx(1000.0)             # used at 2 ms: 1 ms old
    age.sent(2_100_000)
    age.taken(2_050_000)                       # read before the frames of cycle 1 went out: answers cycle 0's
    assert age.cycle_start(3_000_000) == pytest.approx(2000.0) and age.missed == 1
    age.sent(3_100_000)                                                     # the firmware falls silent
    assert age.cycle_start(4_000_000) == pytest.approx(3000.0) and age.missed == 2
    age.taken(4_500_000)
    assert age.cycle_start(5_000_000) == pytest.approx(1900.0) and age.missed == 2
    s = age.summary()
    assert s["cycles_with_command"] == 4 and s["missed_cycles"] == 2 and s["cmd_age_us"]["max"] == 3000.0


def test_a_firmware_silent_for_longer_than_the_send_history_ages_on():
    """The command in use answers frames sent HISTORY + 500 cycles ago: its age is that, not a newer
    send time from the ring of send times (which the silence has overwritten)."""
    from hil.runtime.command_age import HISTORY
    age = CommandAge(8)
    age.sent(0)
    age.taken(100_000)
    for k in range(1, HISTORY + 500):
        age.sent(k * 1_000_000)
    assert age.cycle_start((HISTORY + 500) * 1_000_000) == pytest.approx((HISTORY + 500) * 1000.0)


def test_hil_latency_measures_any_firmware():
    proc = hil("latency", "ella", "--bus", "serial_frame", "--duration", "0.5", "--no-realtime",
               "--firmware", PYSERIAL_FW)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "firmware timing: command age us" in proc.stdout and "missed cycles" in proc.stdout
    assert "final joint angles" not in proc.stdout


# ----------------------------------------------------------------------------- the C example
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler (cc) on this machine")
def test_the_c_example_closes_the_loop_to_the_set_points_in_lockstep(tmp_path):
    binary = tmp_path / "ella_pid"
    subprocess.run(["cc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(binary),
                    str(ROOT / "examples/c_firmware/ella_pid.c"), "-lm"], check=True, timeout=120)
    proc = hil("run", "ella", "--bus", "serial_frame", "--mode", "lockstep", "--duration", "4", "--json",
               "--targets", "seed000_setpoints", "--check", "--firmware", f"{binary} {{port}}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = last_json(proc.stdout)
    assert s["cycles"] == 4000 and s["commands"]["accepted"] == 4000
    assert [v["name"] for v in s["verdicts"] if not v["passed"]] == []
    assert {v["name"] for v in s["verdicts"]} >= {"setpoint_base_yaw", "setpoint_shoulder_pitch", "setpoint_elbow"}


def test_the_python_can_example_closes_the_loop_over_can_fd_with_e2e_frames():
    """examples/python_can_firmware.py speaks compact_fd's E2E Profile 5 frames (CRC-16 with the
    CAN id as Data ID, counter after it): every command taken, none rejected, the targets met."""
    channel = f"front-door-{os.getpid()}"
    proc = hil("run", "ella", "--bus", "compact_fd", "--link", f"canfd:udp_loopback:{channel}", "--mode", "lockstep",
               "--duration", "4", "--json", "--targets", "seed000_setpoints", "--check",
               "--firmware", f"{PY} examples/python_can_firmware.py {{interface}} {{channel}}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = last_json(proc.stdout)
    assert s["cycles"] == 4000 and s["commands"]["accepted"] == 4000
    assert not any(s["commands"]["rejected"].values()), s["commands"]
    assert [v["name"] for v in s["verdicts"] if not v["passed"]] == []


def test_a_misspelt_option_is_one_line_naming_its_command_and_the_nearest_option():
    proc = hil("run", "ella", "--bus", "serial_frame", "--durration", "1")
    assert proc.returncode == 2 and proc.stderr.startswith("hil run: error: unrecognized arguments --durration ")
    assert "(did you mean '--duration'?)" in proc.stderr and proc.stderr.count("\n") == 1


def test_frames_a_silent_firmware_leaves_unread_are_no_link_error():
    from hil.runtime.outcome import failures
    base = {"cycles": 10, "failed": None, "link": {"tx_dropped": 5}}
    assert failures({**base, "lockstep": {"dropped_while_silent": 5}}) == []
    assert failures({**base, "lockstep": {"dropped_while_silent": 3}}) == [
        "link: 2 frames could not be sent (tx_dropped): the firmware's end of the link is not open, or it does not read"]
    assert failures({**base, "cycles": 0, "link": {"tx_dropped": 0}}) == ["the run made no cycle"]
