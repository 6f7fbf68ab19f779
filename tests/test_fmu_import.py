"""A user's FMU co-simulated in the loop (`hil run --fmu PART.fmu --connect ...`, hil.runtime.cosim), with FMUs
built here by pythonfmu from tests/fmus: a torsion spring on the elbow acts exactly as its formula says, one
cycle after the state it read; an FMU that fails its step or gives NaN fails the run with its name; a
connection that names nothing is one line before the run."""
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
    for name in ("failing_load", "nan_load"):
        FmuBuilder.build_FMU(FMUS / f"{name}.py", dest=folder, project_files=[FMUS / "spring_load.py"])
    return folder


def hil_run(tmp_path: Path, fmu: Path, connect: str, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", "run", "ella", "--bus", "serial_frame", "--spawn-firmware",
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
                                          ("NanLoad", "FMU NanLoad gave load = nan at t = 0.200 s")])
def test_an_fmu_that_fails_or_gives_nan_fails_the_run_with_its_name(fmus, tmp_path, fmu, message):
    proc = hil_run(tmp_path, fmus / f"{fmu}.fmu", SPRING.format(fmu))
    assert proc.returncode == 3, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert message in summary["failed"] and summary["cycles"] <= 201


@pytest.mark.parametrize("connect, message", [
    ("SpringLoad.lod=joint.elbow.load_N_m", "SpringLoad has no Real output 'lod' (did you mean 'load'?)"),
    ("SpringLoad.load=joint.elbo.load_N_m", "expected joint.<joint>.load_N_m with a joint of the arm"),
    ("joint.elbow.q_deg=SpringLoad.q", "expected joint.<joint>.q_rad, .qd_rad_s or .tau_N_m"),
    ("joint.elbow.q_rad=SpringLoad.load", "SpringLoad has no Real input 'load'"),
    ("joint.elbow.q_rad", "expected SOURCE=TARGET"),
    ("tip.z_m=joint.elbow.load_N_m", "one side must be the FMU's (SpringLoad.<variable>)"),
    ("SpringLoad.load=joint.elbow.load_N_m, SpringLoad.load=joint.elbow.load_N_m", "has a source already"),
])
def test_a_connection_that_names_nothing_is_one_line(fmus, connect, message):
    from config_schema import UserError
    from hil.runtime.cosim import FmuPart

    with pytest.raises(UserError) as info:
        FmuPart(fmus / "SpringLoad.fmu", connect, ["base_yaw", "shoulder_pitch", "elbow"], 1e-3)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_command_line_refuses_a_bad_connection_before_the_run(fmus, tmp_path):
    proc = hil_run(tmp_path, fmus / "SpringLoad.fmu", "SpringLoad.lod=joint.elbow.load_N_m")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "has no Real output 'lod'" in proc.stderr and not (tmp_path / "run.msgpack").exists()
