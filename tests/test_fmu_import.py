"""A user's FMU co-simulated in the loop (`hil run --fmu PART.fmu --connect ...`, hil.runtime.cosim), with FMUs
built here by pythonfmu from tests/fmus: a torsion spring on the elbow acts exactly as its formula says, one
cycle after the state it read; a spring at a station pushes the arm as a plant given the same wrench moves;
an FMU that fails its step (an error or a fatal status, after which it is not called again) or gives NaN
fails the run with its name; a connection that names nothing is one
line before the run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fmpy")
pythonfmu = pytest.importorskip("pythonfmu")
ROOT = Path(__file__).resolve().parent.parent
FMUS = ROOT / "tests" / "fmus"
SPRING = "joint.elbow.q_rad={0}.q, joint.elbow.qd_rad_s={0}.qd, {0}.load=joint.elbow.load_N_m"


@pytest.fixture(scope="module")
def fmus(tmp_path_factory) -> Path:
    from pythonfmu import FmuBuilder

    folder = tmp_path_factory.mktemp("fmus")
    FmuBuilder.build_FMU(FMUS / "spring_load.py", dest=folder)
    FmuBuilder.build_FMU(FMUS / "station_spring.py", dest=folder)
    for name in ("failing_load", "nan_load", "raising_load"):
        FmuBuilder.build_FMU(FMUS / f"{name}.py", dest=folder, project_files=[FMUS / "spring_load.py"])
    return folder


def hil_run(tmp_path: Path, fmu: Path, connect: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", "run", "ella", "--bus", "serial_frame", "--firmware-in-process",
                           "--mode", "lockstep", "--duration", "0.5", "--move-time", "0.3", "--fmu", str(fmu),
                           "--connect", connect, "--log", str(tmp_path / "run.msgpack"), "--json", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_a_spring_on_the_elbow_acts_as_its_formula_one_cycle_after_the_state_it_read(fmus, tmp_path):
    from hil.logs.runlog import read_run

    proc = hil_run(tmp_path, fmus / "SpringLoad.fmu", SPRING.format("SpringLoad"), "--ideal-drives")
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["fmu"]["name"] == "SpringLoad" and summary["fmu"]["step"]["cycles"] == 500
    assert summary["fmu"]["step"]["p50_us"] > 0
    header, rows = read_run(tmp_path / "run.msgpack")
    col = {c: rows[:, i] for i, c in enumerate(header["columns"])}
    load = col["tau_elbow"] - col["tau_cmd_elbow"]            # ideal drives: delivered = command + load
    spring = -50.0 * col["q_elbow"] - 2.0 * col["qd_elbow"]    # k = 50 N m/rad, c = 2 N m s/rad, q0 = 0
    np.testing.assert_allclose(load[1:], spring[:-1], rtol=0, atol=1e-9)
    assert load[0] == 0.0 and np.abs(load).max() > 1.0
    assert np.array_equal(col["tau_base_yaw"], col["tau_cmd_base_yaw"])     # the other joints carry no load


@pytest.mark.parametrize("fmu, message", [("FailingLoad", "FMU FailingLoad failed its step to t = 0.200 s"),
                                          ("NanLoad", "FMU NanLoad gave load = nan at t = 0.200 s"),
                                          ("RaisingLoad", "FMU RaisingLoad failed its step to t = 0.200 s: fmi2DoStep "
                                                          "failed with status 4 (fatal)")])
def test_an_fmu_that_fails_or_gives_nan_fails_the_run_with_its_name(fmus, tmp_path, fmu, message):
    proc = hil_run(tmp_path, fmus / f"{fmu}.fmu", SPRING.format(fmu))
    assert proc.returncode == 3, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert message in summary["failed"] and summary["cycles"] <= 201


@pytest.mark.parametrize("connect, message", [
    ("SpringLoad.lod=joint.elbow.load_N_m", "SpringLoad has no Real output 'lod' (did you mean 'load'?)"),
    ("SpringLoad.load=joint.elbo.load_N_m", "no joint 'elbo' on the arm (did you mean 'elbow'?)"),
    ("SpringLoad.load=joint.elbow.torque_N_m", "expected joint.<joint>.load_N_m or station.<station>.mx_N_m"),
    ("SpringLoad.load=station.tipp.fz_N", "no station 'tipp' on the arm (did you mean 'tip'?)"),
    ("SpringLoad.load=station.tip.fz_kN", "expected joint.<joint>.load_N_m or station.<station>.mx_N_m"),
    ("joint.elbow.q_deg=SpringLoad.q", "expected joint.<joint>.q_rad, .qd_rad_s or .tau_N_m"),
    ("station.tipp.z_m=SpringLoad.q", "no station 'tipp' on the arm (did you mean 'tip'?)"),
    ("station.tip.vz_m=SpringLoad.q", "station.<station>.x_m, .y_m, .z_m, .vx_m_s"),
    ("joint.elbow.q_rad=SpringLoad.load", "SpringLoad has no Real input 'load'"),
    ("joint.elbow.q_rad", "expected SOURCE=TARGET"),
    ("tip.z_m=joint.elbow.load_N_m", "one side must be the FMU's (SpringLoad.<variable>)"),
    ("SpringLoad.load=joint.elbow.load_N_m, SpringLoad.load=joint.elbow.load_N_m", "has a source already"),
])
def test_a_connection_that_names_nothing_is_one_line(fmus, connect, message):
    from config_schema import UserError
    from hil.runtime.cosim import FmuPart

    with pytest.raises(UserError) as info:
        FmuPart(fmus / "SpringLoad.fmu", connect).bind(["base_yaw", "shoulder_pitch", "elbow"], ["tip", "imu"],
                                                       ["tip"], 1e-3)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_command_line_refuses_a_bad_connection_before_the_run(fmus, tmp_path):
    proc = hil_run(tmp_path, fmus / "SpringLoad.fmu", "SpringLoad.lod=joint.elbow.load_N_m")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "has no Real output 'lod'" in proc.stderr and not (tmp_path / "run.msgpack").exists()


STATION_SPRING = "station.{0}.z_m=StationSpring.z, station.{0}.vz_m_s=StationSpring.vz, StationSpring.fz=station.{0}.fz_N"


def test_a_spring_at_a_station_pushes_the_arm_as_a_plant_given_that_wrench_moves(fmus):
    """ELLA held by ideal drives at its equilibrium, a spring and damper pulling its elbow point (a station no
    sensor samples) down: each cycle the FMU reads the station's height and rate at the new instant, and its
    force acts over the next step; a plant stepped alongside with the same drive torques and the same
    wrench at that station stays equal to the emulator's (1e-12 rad), and the arm sags under it."""
    from emulators import FakeFirmware, make_emulator
    from firmware_bridge.wire.messages import BusMap
    from hil.dynamics.plant import Plant
    from hil.model.config import load_model
    from hil.runtime.cosim import FmuPart
    from links import AnsweringLink

    model = load_model(ROOT / "configs" / "ella.toml")
    model.integrator.method, model.integrator.substeps = "rk4", 8
    bus = BusMap.load(ROOT / "configs" / "bus" / "serial_frame.toml")
    link = AnsweringLink()
    emu = make_emulator(model, bus, link, ideal_drives=True, sampled_stations=("elbow_point",))
    fw = FakeFirmware(bus, None, emu)
    link.answer = lambda frame: fw.answer(frame, lambda t: fw.hold)
    part = FmuPart(fmus / "StationSpring.fmu", STATION_SPRING.format("elbow_point"))
    emu.attach_fmu(part)
    s = emu.plant.layout.station_names.index("elbow_point")
    row = emu.sensors.station_names.index("elbow_point")
    assert emu.columns[-6:] == [f"f_ext_elbow_point_{c}" for c in ("mx", "my", "mz", "fx", "fy", "fz")]
    try:
        emu.step_once()
        anchor = emu.sensors.station_out[row, 2]          # where the spring's first step found the station
        predicted = Plant(model)
        predicted.pos[:], predicted.vel[:], predicted.t = emu.plant.pos, emu.plant.vel, emu.plant.t
        start = emu.plant.pos.copy()
        for _ in range(200):
            z, vz = emu.sensors.station_out[row, 2], emu.sensors.station_out[row, 14]
            expected = -2000.0 * (z - anchor) - 30.0 * vz - 20.0
            emu.step_once()
            assert emu.plant.station_loads[s, 5] == pytest.approx(expected, rel=1e-12, abs=1e-12)
            predicted.station_loads[s] = emu.plant.station_loads[s]
            predicted.step(emu.drives.tau)
            np.testing.assert_allclose(emu.plant.pos, predicted.pos, rtol=0, atol=1e-12)
        assert np.abs(emu.plant.station_loads[s, :5]).max() == 0.0
        assert np.abs(emu.plant.pos[:3] - start[:3]).max() > 1e-4          # the spring's 20 N preload moved it
    finally:
        part.close()


def test_hil_run_logs_the_wrench_an_fmu_applies_at_the_tip(fmus, tmp_path):
    """`hil run ... --connect "tip.z_m=StationSpring.z, StationSpring.fz=station.tip.fz_N"`: the run log's
    f_ext_tip_fz is the spring's force from the tip's height one cycle before (the anchor where the first
    step found it, 20 N preload), the other components zero; hil replay re-simulates the log bit for bit
    with that wrench; a station the arm lacks is one line before the run."""
    from hil.logs.runlog import read_run
    from hil.replay.plant_replay import replay

    proc = hil_run(tmp_path, fmus / "StationSpring.fmu", "tip.z_m=StationSpring.z, StationSpring.fz=station.tip.fz_N",
                   "--ideal-drives")
    assert proc.returncode == 0, proc.stderr[-2000:]
    header, rows = read_run(tmp_path / "run.msgpack")
    col = {c: rows[:, i] for i, c in enumerate(header["columns"])}
    force = col["f_ext_tip_fz"]
    np.testing.assert_allclose(force[1:], -2000.0 * (col["tip_z"][:-1] - col["tip_z"][0]) - 20.0, rtol=0, atol=1e-9)
    assert force[0] == 0.0 and np.ptp(force[1:]) > 1.0
    assert all(np.all(col[f"f_ext_tip_{c}"] == 0.0) for c in ("mx", "my", "mz", "fx", "fy"))
    assert replay(header, rows).bit_identical            # the replay applies the logged wrench as the run did
    unloaded = {**header, "columns": [c.replace("f_ext_", "unused_") for c in header["columns"]]}
    assert not replay(unloaded, rows).bit_identical      # and without it does not reproduce the run
    (tmp_path / "bad").mkdir()
    bad = hil_run(tmp_path / "bad", fmus / "StationSpring.fmu", "StationSpring.fz=station.tipp.fz_N")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "no station 'tipp' on the arm (did you mean 'tip'?)" in bad.stderr
    assert not (tmp_path / "bad" / "run.msgpack").exists()
