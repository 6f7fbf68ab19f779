"""Tests of the ``hil`` command line: modes, simulate, run logs and torque input tables."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from hil.cli.main import main
from hil.logs.runlog import read_run
from hil.dynamics.simulate import Progress, TorqueTable

SPINUP = "configs/spinup_beam.toml"

RIGID_TOML = """
[model]
name = "rigid_disk"
gravity_m_s2 = [0.0, 0.0, 0.0]

[integrator]
method = "rk4"
dt_s = 0.001

[[body]]
name = "disk"
parent = "base"
  [body.joint]
  name = "spin"
  axis = [0.0, 0.0, 1.0]
  q0_rad = 0.3
  [body.rigid]
  mass_kg = 2.0
  com_m = [0.0, 0.0, 0.0]
  inertia_kg_m2 = [0.3, 0.3, 0.5]
"""
RIGID_IZZ = 0.5


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_help_subprocess():
    res = subprocess.run([sys.executable, "-m", "hil", "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0
    for name in ("modes", "simulate", "bench"):
        assert name in res.stdout


def test_modes_json(capsys):
    code, out, _ = _run(capsys, "modes", "configs/ella.toml", "--json")
    assert code == 0
    rep = json.loads(out)
    assert {"config", "model", "links", "arm", "f_max_hz", "integrator"} <= rep.keys()
    assert [link["body"] for link in rep["links"]] == ["link1", "link2"]
    for link in rep["links"]:
        assert link["modes"] == ["bending_y_1", "bending_y_2", "bending_z_1", "bending_z_2", "torsion_1"]
        comp = np.array(link["component_hz"])
        assert comp.shape == (5,) and np.all(comp > 0) and np.all(np.diff(comp) >= 0)
        assert np.all(np.array(link["analytic_hz"]) > 0)
    locked = np.array(rep["arm"]["locked_hz"])
    assert locked.shape == (10,) and np.all(locked > 0)
    assert len(rep["arm"]["free_hz"]) == 13          # 3 joints + 10 modes
    assert rep["f_max_hz"] >= locked.max() > 0
    it = rep["integrator"]
    assert (it["method"], it["substeps"], it["dt_s"]) == ("fitted_midpoint", 3, 0.001)
    assert it["accurate"] is True and it["note"] == "" and it["bandwidth_hz"] is None
    assert len(it["modes"]) == 11 and set(it["modes"][0]) == {"true_hz", "integrated_hz", "error", "damping_ratio",
                                                              "numerical_damping", "in_band"}
    assert max(abs(m["error"]) for m in it["modes"]) < 1e-3 and it["modes"][-1]["true_hz"] > 200


def test_modes_reports_a_pinned_plan_that_is_off(capsys):
    code, out, _ = _run(capsys, "modes", "configs/ella.toml", "--method", "rk4", "--substeps", "1", "--json")
    it = json.loads(out)["integrator"]
    assert code == 0 and it["accurate"] is False
    top = it["modes"][-1]
    assert top["error"] == pytest.approx(-0.0137, abs=5e-4) and top["numerical_damping"] > 0.01
    code, out, _ = _run(capsys, "modes", "configs/ella.toml", "--method", "rk4", "--substeps", "1")
    assert "OFF" in out and "-1.37" in out and "its damping ratio: no" in out


def test_modes_says_whether_the_plan_judged_the_energy(capsys, tmp_path):
    code, out, _ = _run(capsys, "modes", "configs/ella.toml")
    assert code == 0 and "the undamped arm's energy over 10 s: not judged (integrator.energy_tolerance = 0)" in out
    preset = tmp_path / "ella_energy.toml"
    preset.write_text((Path(__file__).resolve().parent.parent / "configs" / "ella.toml").read_text().replace("[integrator]\n",
                                                                    "[integrator]\nenergy_tolerance = 1e-6\n", 1))
    code, out, _ = _run(capsys, "modes", str(preset))
    assert code == 0 and "integrator: rk4, 4 substep(s)" in out
    assert "the undamped arm's energy over 10 s: max |E - E(0)| 4.8e-07, drift -2.8e-07" in out


def test_modes_table(capsys):
    code, out, _ = _run(capsys, "modes", SPINUP)
    assert code == 0
    assert "component modes (ascending)" in out and "bending_y_1" in out and "highest frequency" in out


def test_simulate_csv_columns_and_rows(tmp_path, capsys):
    out = tmp_path / "run.csv"
    code, stdout, _ = _run(capsys, "simulate", SPINUP, "--duration", "0.5", "--out", out)
    assert code == 0
    assert "real-time factor" in stdout and "max |eta|" in stdout
    header, rows = read_run(out)
    assert header["columns"] == ["t", "q_hub", "qd_hub", "tau_hub", "eta_beam_bending_y_1", "eta_beam_bending_y_2",
                                 "tip_x", "tip_y", "tip_z", "energy"]
    assert rows.shape == (501, 10)
    assert np.allclose(rows[:, 0], np.arange(501) * 1e-3)
    assert rows[-1, 1] > 0                      # the hub spins up
    assert np.allclose(np.hypot(rows[:, 6], rows[:, 7]), 8.0, rtol=1e-4)


def test_msgpack_roundtrip_equals_csv(tmp_path, capsys):
    csv_path, mp_path = tmp_path / "run.csv", tmp_path / "run.msgpack"
    for path in (csv_path, mp_path):
        assert _run(capsys, "simulate", SPINUP, "--duration", "0.2", "--every", "10", "--out", path)[0] == 0
    h_csv, rows_csv = read_run(csv_path)
    h_mp, rows_mp = read_run(mp_path)
    assert rows_mp.shape == (21, 10)
    assert h_mp["columns"] == h_csv["columns"]
    assert h_mp["format"] == "hil-run" and h_mp["version"] == 2 and h_mp["trailing_bytes"] == 0
    assert h_mp["config"] == SPINUP and h_mp["dt_s"] == 0.001 and h_mp["every"] == 10
    assert h_mp["integrator"]["method"] == "fitted_midpoint" and h_mp["integrator"]["input_hold"] == "zoh"
    np.testing.assert_array_equal(rows_mp, rows_csv)


def test_truncated_msgpack_readable(tmp_path, capsys):
    path = tmp_path / "run.msgpack"
    assert _run(capsys, "simulate", SPINUP, "--duration", "0.05", "--out", path)[0] == 0
    _, full = read_run(path)
    data = path.read_bytes()
    cut = tmp_path / "cut.msgpack"
    cut.write_bytes(data[:-13])                 # mid-record: a record is 1 + 9 * 10 + 5 bytes (CRC-32)
    header, rows = read_run(cut)
    assert rows.shape == (full.shape[0] - 1, full.shape[1])
    np.testing.assert_array_equal(rows, full[:-1])
    assert header["trailing_bytes"] == 96 - 13


def test_torque_table_interpolation(tmp_path):
    path = tmp_path / "tau.csv"
    path.write_text("t,tau_a\n0.1,0.0\n0.3,2.0\n0.5,-1.0\n")
    table = TorqueTable.from_csv(path, ["a", "b"])
    out = np.zeros(2)
    for t, expected in [(0.0, 0.0), (0.1, 0.0), (0.2, 1.0), (0.3, 2.0), (0.4, 0.5), (0.5, -1.0), (9.0, -1.0)]:
        table(t, out)
        assert out == pytest.approx([expected, 0.0], abs=1e-12)


def test_constant_torque_rigid_body(tmp_path, capsys):
    cfg = tmp_path / "rigid.toml"
    cfg.write_text(RIGID_TOML)
    tau = tmp_path / "tau.csv"
    tau.write_text("t,tau_spin\n0.0,2.0\n0.2,2.0\n")          # held constant after t = 0.2
    out = tmp_path / "run.csv"
    assert _run(capsys, "simulate", cfg, "--duration", "0.5", "--input", tau, "--out", out)[0] == 0
    header, rows = read_run(out)
    col = {c: i for i, c in enumerate(header["columns"])}
    t = rows[:, col["t"]]
    np.testing.assert_allclose(rows[:, col["q_spin"]], 0.3 + 2.0 / (2 * RIGID_IZZ) * t ** 2, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(rows[:, col["qd_spin"]], 2.0 / RIGID_IZZ * t, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(rows[:, col["tau_spin"]], 2.0)
    np.testing.assert_allclose(rows[:, col["energy"]], 0.5 * RIGID_IZZ * rows[:, col["qd_spin"]] ** 2, rtol=1e-9)


def test_bad_csv_column_and_order(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("t,tau_knee\n0.0,1.0\n")
    code, _, err = _run(capsys, "simulate", "configs/ella.toml", "--duration", "0.01", "--input", bad)
    assert code == 2 and str(bad) in err and "'tau_knee'" in err
    back = tmp_path / "back.csv"
    back.write_text("t,tau_elbow\n0.0,1.0\n0.0,2.0\n")
    code, _, err = _run(capsys, "simulate", "configs/ella.toml", "--duration", "0.01", "--input", back)
    assert code == 2 and str(back) in err and "increase" in err


def test_broken_config(tmp_path, capsys):
    cfg = tmp_path / "broken.toml"
    cfg.write_text(RIGID_TOML.replace("mass_kg = 2.0", "mass_kg = -2.0"))
    for argv in (["simulate", cfg, "--duration", "0.1"], ["modes", cfg]):
        code, _, err = _run(capsys, *argv)
        assert code == 2 and str(cfg) in err and "mass_kg" in err and "Traceback" not in err
    code, _, err = _run(capsys, "modes", tmp_path / "missing.toml")
    assert code == 2 and "missing.toml" in err


def test_bench_dispatch(monkeypatch):
    calls = []
    fake = types.ModuleType("tools.bench_kernel")
    fake.main = lambda argv: calls.append(argv) or 0
    monkeypatch.setitem(sys.modules, "tools.bench_kernel", fake)
    assert main(["bench", "--help", "configs/ella.toml"]) == 0
    assert main(["bench", "kernel", "--quick"]) == 0
    assert calls == [["--help", "configs/ella.toml"], ["--quick"]]
    loop = types.ModuleType("tools.bench_loop")
    loop.main = lambda argv: calls.append(("loop", argv)) or 0
    monkeypatch.setitem(sys.modules, "tools.bench_loop", loop)
    assert main(["bench", "loop", "--duration", "1"]) == 0
    assert calls[-1] == ("loop", ["--duration", "1"])


def test_progress_bar():
    stream = io.StringIO()
    bar = Progress(stream, width=10, delay_s=0.0)
    for k in range(5):
        bar(k, 4)
    text = stream.getvalue()
    assert text.startswith("\r[") and "100.0%" in text and text.endswith("\n")


# ----------------------------------------------------------------------------- hil run: start-up failures
FIRMWARE_SLEEPS = "import sys, time; print(sys.argv[1], flush=True); time.sleep(60)"


def _recording_popen(monkeypatch) -> list[subprocess.Popen]:
    import hil.runtime.firmware_process as fp
    started: list[subprocess.Popen] = []
    real = fp.subprocess.Popen

    def popen(*args, **kwargs):
        started.append(real(*args, **kwargs))
        return started[-1]
    monkeypatch.setattr(fp.subprocess, "Popen", popen)
    return started


def _endpoint():
    from hil.runtime.firmware_process import endpoint_of
    return endpoint_of("serial:/dev/pts/x", "configs/bus/serial_frame.toml")


def test_spawn_firmware_that_is_not_ready_is_killed_and_reaped(monkeypatch):
    from hil.runtime.launch import LINK_PLACEHOLDER, FirmwareStartError, spawn_firmware
    started = _recording_popen(monkeypatch)
    with pytest.raises(FirmwareStartError, match="did not print 'ready'"):
        spawn_firmware([sys.executable, "-c", FIRMWARE_SLEEPS, "starting"], _endpoint(), ready_timeout_s=30)
    proc, = started
    assert proc.returncode is not None and proc.stdout.closed
    firmware = spawn_firmware([sys.executable, "-c", FIRMWARE_SLEEPS, "ready", LINK_PLACEHOLDER], _endpoint())
    try:
        assert firmware.returncode is None
    finally:
        firmware.stop(0.0)
    assert started[-1].returncode is not None


def test_run_closes_the_link_and_reaps_the_firmware_when_the_start_fails(monkeypatch, capsys):
    """A firmware that does not start is the user's to fix: one error, status 2, the link closed and the
    firmware process reaped."""
    import hil.runtime.launch as launch
    started = _recording_popen(monkeypatch)
    closed = []
    link = types.SimpleNamespace(close=lambda: closed.append(True))
    emulator = types.SimpleNamespace(link=link, run=lambda: pytest.fail("the run must not start"), xcp=None,
                                     firmware_exited=lambda status: None)
    built = types.SimpleNamespace(emulator=emulator, endpoint=_endpoint(), arm="configs/ella.toml",
                                  scenario_targets=None, ready_line=lambda: {"link": "serial"})
    monkeypatch.setattr(launch, "build_emulator", lambda *a, **k: built)
    monkeypatch.setattr(launch, "reference_firmware", lambda *a, **k: [sys.executable, "-c", FIRMWARE_SLEEPS, "ready"])

    def no_host(link, timeout_s=5.0):
        raise launch.FirmwareStartError("the firmware did not open the slcan channel")
    monkeypatch.setattr(launch, "await_host", no_host)
    assert main(["run", "configs/ella.toml", "--bus", "configs/bus/serial_frame.toml", "--spawn-firmware"]) == 2
    assert "slcan channel" in capsys.readouterr().err
    proc, = started
    assert closed == [True]
    assert proc.returncode is not None and proc.stdout.closed

    def not_ready(*a, **k):
        raise launch.FirmwareStartError("firmware did not print 'ready'")
    monkeypatch.setattr(launch, "spawn_firmware", not_ready)
    assert main(["run", "configs/ella.toml", "--bus", "configs/bus/serial_frame.toml", "--spawn-firmware"]) == 2
    assert "did not print" in capsys.readouterr().err
    assert closed == [True, True]


def test_log_export_writes_rows_and_events(tmp_path, capsys):
    from hil.logs.runlog import MsgpackRunWriter
    log = tmp_path / "run.msgpack"
    with MsgpackRunWriter(log, {"columns": ["cycle", "t"]}) as w:
        w.write(np.array([0.0, 0.0]))
        w.write_event({"event": "inject", "cycle": 1, "t": 0.001, "fault": "f", "detail": 'offset on "imu_ax"'})
        w.write(np.array([1.0, 0.001]))
        w.write_event({"event": "watchdog_tripped", "cycle": 2, "t": 0.002})
    header, rows = read_run(log)
    assert rows.tolist() == [[0.0, 0.0], [1.0, 0.001]] and [e["event"] for e in header["events"]] == \
        ["inject", "watchdog_tripped"]
    assert main(["log", "export", str(log), "--csv", str(tmp_path / "run.csv")]) == 0
    assert "2 events" in capsys.readouterr().out
    lines = (tmp_path / "run.events.csv").read_text().splitlines()
    assert lines == ["t,cycle,event,fault,detail", "0.001,1,inject,f,\"offset on 'imu_ax'\"",
                     "0.002,2,watchdog_tripped,,\"\""]


def test_a_user_error_is_one_line_and_a_bug_shows_its_traceback(capsys, monkeypatch, tmp_path):
    """Only refusals a user can act on (config_schema.UserError and its kinds, missing files) are one-line
    errors with status 2; a plain ValueError from inside a command is a bug: its traceback, a line asking to
    report it, status 70."""
    import hil.cli.modes as modes_cli
    from hil.cli.registry import EXIT_INTERNAL, EXIT_USAGE

    bad = tmp_path / "bad.toml"
    bad.write_text((Path(__file__).resolve().parent.parent / "configs" / "ella.toml").read_text()
                   .replace("E_Pa = 2.1e11", "E_Pa = -2.1e11", 1))
    code, out, err = _run(capsys, "modes", str(bad))
    assert code == EXIT_USAGE and len(err.strip().splitlines()) == 1 and "E_Pa" in err and "Traceback" not in err
    code, out, err = _run(capsys, "modes", str(tmp_path / "missing.toml"))
    assert code == EXIT_USAGE and len(err.strip().splitlines()) == 1

    def broken(*args, **kwargs):
        raise ValueError("an internal invariant")
    monkeypatch.setattr(modes_cli, "modes_report", broken)
    code, out, err = _run(capsys, "modes", "configs/ella.toml")
    assert code == EXIT_INTERNAL
    assert "Traceback" in err and "ValueError: an internal invariant" in err and "please report it" in err


@pytest.mark.parametrize("argv, message", [
    (["simulate", "configs/ella.toml", "--duration", "0.01", "--input-hold", "linear"], "torque table"),
    (["replay", "tests/data/ella_make_run_torques.csv"], "cycle column"),
    (["compare", "a.msgpack", "b.msgpack", "--tol", "q_*=abc"], "--tol"),
])
def test_refusals_from_inside_the_commands_stay_one_line_user_errors(capsys, argv, message):
    """Refusals raised deep in the code (the offline stepper, the replay, the tolerance parser) are
    config_schema.UserError: one line, status 2, no traceback."""
    code, out, err = _run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_misspelt_option_is_one_line_with_the_nearest_option(capsys):
    from hil.cli.main import main
    assert main(["run", "ella", "--bus", "serial_frame", "--durration", "3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--durration (did you mean '--duration'?)" in err
    assert "hil run --help lists the options" in err and "usage:" not in err
    with pytest.raises(SystemExit) as stop:
        main(["run", "ella", "--bus", "serial_frame", "--mode", "lockstp"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'lockstp'" in err and "usage:" not in err
