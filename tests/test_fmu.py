"""The FMU export (`hil fmu export`, hil.fmu): fmpy validates its model description; simulated in fmpy it
gives `hil simulate --devices`'s numbers on the same commands; a parameter set through it changes the
arm as the same change to the preset does; a step of another size and a non-finite command are errors.
Every FMU simulation runs in its own process: a pythonfmu FMU instantiates once per process."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fmpy")
pytest.importorskip("pythonfmu")
ROOT = Path(__file__).resolve().parent.parent
JOINTS = ("base_yaw", "shoulder_pitch", "elbow")
DURATION_S = 0.4
PAYLOAD = "body.link2.attachment.payload.mass_kg"

SIMULATE = """
import json, sys
import numpy as np
from fmpy import simulate_fmu
fmu, table, out, start, joints, duration = sys.argv[1:4] + [json.loads(a) for a in sys.argv[4:]]
cmd = np.genfromtxt(table, delimiter=",", names=True)
inp = np.zeros(len(cmd), dtype=[("time", float)] + [("tau_cmd_" + j, float) for j in joints])
inp["time"] = cmd["t"]
for j in joints:
    inp["tau_cmd_" + j] = cmd["tau_" + j]
np.save(out, simulate_fmu(fmu, stop_time=duration, output_interval=1e-3, input=inp, start_values=start))
"""

REFUSE = """
import os
import sys
from fmpy import extract, read_model_description
from fmpy.fmi2 import FMU2Slave
md = read_model_description(sys.argv[1])
fmu = FMU2Slave(guid=md.guid, unzipDirectory=extract(sys.argv[1]), modelIdentifier=md.coSimulation.modelIdentifier,
                instanceName="arm")
fmu.instantiate(loggingOn=True)
fmu.setupExperiment(startTime=0.0)
vr = {v.name: v.valueReference for v in md.modelVariables}
try:
    fmu.enterInitializationMode()
    if sys.argv[2] == "payload":
        fmu.setReal([vr["body.link2.attachment.payload.mass_kg"]], [-1.0])
    fmu.exitInitializationMode()
    if sys.argv[2] == "nan":
        fmu.setReal([vr["tau_cmd_elbow"]], [float("nan")])
    fmu.doStep(currentCommunicationPoint=0.0, communicationStepSize=2e-3 if sys.argv[2] == "step" else 1e-3)
except Exception as exc:
    print("refused:", exc, flush=True)
    if "(fatal)" in str(exc):
        os._exit(0)         # no call after fmi2Fatal, not even the interpreter's own clean-up of the library
    fmu.freeInstance()
"""


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fmu")
    run("-m", "hil", "fmu", "export", "ella", "--out", str(folder / "ella.fmu"))
    t = np.arange(0.0, DURATION_S + 1e-9, 1e-3)
    table = np.column_stack([t, 5 * np.sin(2 * np.pi * t), -98 + 10 * np.sin(3 * np.pi * t), -40 + 5 * np.cos(5 * t)])
    np.savetxt(folder / "cmd.csv", table, delimiter=",", header="t," + ",".join(f"tau_{j}" for j in JOINTS),
               comments="", fmt="%.17g")
    return folder


def fmpy_run(folder: Path, name: str, start: dict) -> np.ndarray:
    run("-c", SIMULATE, str(folder / "ella.fmu"), str(folder / "cmd.csv"), str(folder / f"{name}.npy"), json.dumps(start),
        json.dumps(JOINTS), json.dumps(DURATION_S))
    return np.load(folder / f"{name}.npy")


def simulated(folder: Path, preset: str, name: str) -> np.ndarray:
    out = folder / f"{name}.csv"
    run("-m", "hil", "simulate", preset, "--devices", "--duration", str(DURATION_S), "--input", str(folder / "cmd.csv"),
        "--out", str(out))
    return np.genfromtxt(out, delimiter=",", names=True)


def assert_same(fmu: np.ndarray, sim: np.ndarray) -> None:
    names = [n for n in fmu.dtype.names if n != "time"]
    assert len(fmu) == len(sim) == round(DURATION_S / 1e-3) + 1 and len(names) == len(sim.dtype.names) - 1
    np.testing.assert_allclose(fmu["time"], sim["t"], rtol=0, atol=1e-12)
    for name in names:
        scale = max(float(np.max(np.abs(sim[name]))), 1e-300)
        assert np.max(np.abs(fmu[name] - sim[name])) <= 1e-12 * scale, name


def test_the_model_description_passes_fmpys_validation_and_declares_what_it_needs(exported):
    from fmpy import read_model_description
    from fmpy.validation import validate_fmu

    assert validate_fmu(str(exported / "ella.fmu")) == []
    md = read_model_description(str(exported / "ella.fmu"))
    cs = md.coSimulation
    assert cs.needsExecutionTool and not cs.canHandleVariableCommunicationStepSize and cs.canBeInstantiatedOnlyOncePerProcess
    assert md.defaultExperiment.stepSize == "0.001" or float(md.defaultExperiment.stepSize) == 1e-3
    by = {v.causality: [] for v in md.modelVariables}
    for v in md.modelVariables:
        by[v.causality].append(v.name)
    assert by["input"] == [f"tau_cmd_{j}" for j in JOINTS]
    assert {"q_elbow", "tip_z", "imu_gx", "imu_gx_true", "enc_elbow", "cur_elbow"} <= set(by["output"])
    assert {PAYLOAD, "body.link1.beam.damping_ratio", "body.link2.joint.viscous_N_m_s_rad"} <= set(by["parameter"])
    assert "Python" in md.description


def test_fmpy_gives_hil_simulates_numbers_and_a_parameter_the_presets(exported, tmp_path):
    assert_same(fmpy_run(exported, "nominal", {}), simulated(exported, "ella", "nominal"))
    heavy = (ROOT / "configs/ella.toml").read_text().replace('name = "payload"\n  station_m = 0.93\n  mass_kg = 2.1',
                                                            'name = "payload"\n  station_m = 0.93\n  mass_kg = 4.0')
    (tmp_path / "heavy.toml").write_text(heavy)
    loaded, reference = fmpy_run(exported, "heavy", {PAYLOAD: 4.0}), simulated(exported, str(tmp_path / "heavy.toml"), "heavy")
    assert_same(loaded, reference)
    nominal = np.load(exported / "nominal.npy")
    assert abs(loaded["tip_z"][-1] - nominal["tip_z"][-1]) > 1e-3       # the heavier payload sags the arm


@pytest.mark.parametrize("case, call, message", [
    ("step", "fmi2DoStep", "communication step 0.002 s: this FMU steps its preset's dt"),
    ("nan", "fmi2DoStep", "non-finite drive command"),
    ("payload", "fmi2ExitInitializationMode", "mass_kg = -1.0: expected a positive number in kg")])
def test_a_step_of_another_size_a_nan_command_and_a_refused_parameter_are_errors(exported, case, call, message):
    proc = run("-c", REFUSE, str(exported / "ella.fmu"), case)
    assert f"refused: {call} failed" in proc.stdout and message in proc.stdout + proc.stderr, proc.stdout + proc.stderr
