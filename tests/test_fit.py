"""`hil fit` (hil.fit.fit): the synthetic real arm's link stiffness and damping recovered from one
brake-stop recording, judged on another; a model that cannot explain the data fails with the
channels that do not fit; every fit-file mistake is one line before any replay."""
from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from config_schema import UserError
from real_arm import DAMPING_RATIO, DAMPING_SCALE, E_PA, E_SCALE, PAYLOAD_KG, PAYLOAD_SCALE

ROOT = Path(__file__).resolve().parent.parent
LINKS = ("link1", "link2")


def fit_text(model: str = "ella", parameters: tuple[str, ...] = ("E_Pa", "damping_ratio"), max_nrmse: float = 0.3,
             extra: str = "") -> str:
    bounds = {"E_Pa": (1.5e11, 2.5e11, "Pa"), "damping_ratio": (0.002, 0.05, "1")}
    params = "".join(f'[[parameter]]\npath = "body.{link}.beam.{p}"\nlower = {bounds[p][0]}\nupper = {bounds[p][1]}\n'
                     f'unit = "{bounds[p][2]}"\n\n' for p in parameters for link in LINKS)
    return (f'[fit]\nmodel = "{model}"\n\n[[recording]]\nfile = "stop.msgpack"\nrole = "training"\n'
            'window_s = [1.2, 2.5]\n\n[[recording]]\nfile = "stop2.msgpack"\nrole = "validation"\n'
            f'window_s = [1.2, 2.5]\n\n{params}'
            '[[channel]]\nname = "imu_gx"\n[[channel]]\nname = "imu_gy"\n[[channel]]\nname = "imu_gz"\n\n'
            f'[validation]\nmax_nrmse = {max_nrmse}\n{extra}')


def hil_fit(real_arm, name: str, text: str, *args: str) -> subprocess.CompletedProcess:
    folder = real_arm[1].parent
    path = folder / f"{name}.toml"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "hil", "fit", str(path), "--json", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)


def test_the_hidden_stiffness_and_damping_are_recovered_and_validated(real_arm):
    proc = hil_fit(real_arm, "links", fit_text())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = json.loads(proc.stdout)
    got = {p["path"]: p for p in r["parameters"]}
    for link in LINKS:
        e = got[f"body.{link}.beam.E_Pa"]
        z = got[f"body.{link}.beam.damping_ratio"]
        assert e["value"] == pytest.approx(E_PA * E_SCALE, rel=0.005), e          # frequencies within 0.25 %
        assert z["value"] == pytest.approx(DAMPING_RATIO * DAMPING_SCALE, rel=0.10), z
        assert e["ci95"][0] < e["value"] < e["ci95"][1] and e["start"] == E_PA
    assert r["passed"] and r["failing"] == [] and r["modes_matched"]
    assert all(v < 0.15 for rec in r["nrmse"]["validation"].values() for v in rec.values())
    out = real_arm[1].parent / "links.fit"
    calibrated = tomllib.loads((out / "calibrated.toml").read_text())
    assert calibrated["body"][1]["beam"]["E_Pa"] == pytest.approx(got["body.link1.beam.E_Pa"]["value"])
    assert calibrated["provenance"]["body.link1.beam.E_Pa"].startswith("fitted: hil fit links.toml on ")
    assert "stop.msgpack [1.2 .. 2.5 s]" in calibrated["provenance"]["body.link1.beam.E_Pa"]
    assert json.loads((out / "fit.json").read_text())["passed"] is True
    assert "Correlation" in (out / "report.html").read_text()


def test_a_model_that_cannot_explain_the_recording_fails_and_says_where(real_arm):
    """Only the damping free, the stiffness held at the preset's (10 % too stiff): the modes cannot
    come into phase, the validation residuals stay large, the exit status is 1."""
    proc = hil_fit(real_arm, "damping_only", fit_text(parameters=("damping_ratio",)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    r = json.loads(proc.stdout)
    assert not r["passed"] and r["failing"] and all(f.startswith("stop2.msgpack: imu_g") for f in r["failing"])


@pytest.mark.parametrize("change, message", [
    (("unit = \"Pa\"", "unit = \"GPa\"", 1), "unit = \"GPa\": expected the unit of body.link1.beam.E_Pa"),
    (("role = \"validation\"", "role = \"training\"", 1), "at least one recording with role = \"validation\""),
    (("lower = 150000000000.0", "lower = 3e11", 1), "expected more than lower"),
    (("body.link1.beam.E_Pa", "body.link1.beam.E_GPa", 1), "did you mean"),
    (("name = \"imu_gx\"", "name = \"imu_qx\"", 1), "no channel 'imu_qx'"),
    (("file = \"stop2.msgpack\"", "file = \"absent.msgpack\"", 1), "absent.msgpack: no such recording"),
    (("window_s = [1.2, 2.5]", "window_s = [3.0, 4.0]", 1), "holds 0 rows"),
    (("max_nrmse = 0.3", "max_nrmse = -1", 1), "max_nrmse"),
    (("[[channel]]", "[[chanel]]", 1), "unknown key"),
    (("upper = 250000000000.0", "upper = 2.0e11", 1), "outside its bounds"),
])
def test_a_fit_file_mistake_is_one_line_before_any_replay(real_arm, change, message):
    from hil.fit.fit import FitProblem, run_fit
    from hil.fit.fit_file import load_fit

    text = fit_text()
    assert change[0] in text
    path = real_arm[1].parent / "broken.toml"
    path.write_text(text.replace(*change))
    calls = []
    FitProblem.simulated, original = (lambda self, *a: calls.append(a)), FitProblem.simulated
    try:
        with pytest.raises(UserError) as error:
            run_fit(load_fit(path))
    finally:
        FitProblem.simulated = original
    assert message in str(error.value) and "\n" not in str(error.value) and calls == []


def test_the_command_line_says_a_fit_file_mistake_in_one_line(real_arm):
    proc = hil_fit(real_arm, "broken_cli", fit_text().replace('unit = "Pa"', 'unit = "GPa"', 1))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "expected the unit of" in proc.stderr


def rigid_fit_text(shooting: str) -> str:
    return ('[fit]\nmodel = "ella"\nmax_evaluations = 30\n' + shooting +
            '\n[[recording]]\nfile = "move.msgpack"\nrole = "training"\n\n'
            '[[recording]]\nfile = "move2.msgpack"\nrole = "validation"\n\n'
            '[[parameter]]\npath = "body.link2.attachment.payload.mass_kg"\nlower = 1.0\nupper = 4.0\nunit = "kg"\n\n'
            '[[parameter]]\npath = "body.link1.joint.viscous_N_m_s_rad"\nlower = 0.2\nupper = 3.0\nunit = "N_m_s_rad"\n\n'
            + "".join(f'[[channel]]\nname = "enc_{j}"\n' for j in ("base_yaw", "shoulder_pitch", "elbow"))
            + "\n[validation]\nmax_nrmse = 0.02\n")


def test_the_payload_is_recovered_from_set_point_moves_with_multiple_shooting(loaded_arm):
    """Encoder channels of a PID move, the replay's joints restarted from the record every 0.25 s."""
    folder = loaded_arm[1].parent
    (folder / "payload.toml").write_text(rigid_fit_text("shooting_s = 0.25\n"))
    proc = subprocess.run([sys.executable, "-m", "hil", "fit", str(folder / "payload.toml"), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = json.loads(proc.stdout)
    payload = next(p for p in r["parameters"] if p["path"].endswith("payload.mass_kg"))
    assert payload["value"] == pytest.approx(PAYLOAD_KG * PAYLOAD_SCALE, rel=0.02), payload
    assert r["evaluations"] <= 30 + 3 * 2 + 6            # the budget, then the trust's Jacobian and the verdict


def test_multiple_shooting_needs_the_joint_angles(loaded_arm, tmp_path):
    header_only = tmp_path / "no_angles.csv"
    rows = ["t,tau_base_yaw,tau_shoulder_pitch,tau_elbow,enc_base_yaw,enc_shoulder_pitch,enc_elbow"]
    rows += [f"{k * 1e-3},0,0,0,0,0,0" for k in range(1, 50)]
    header_only.write_text("\n".join(rows) + "\n")
    text = rigid_fit_text("shooting_s = 0.01\n").replace('"move.msgpack"', f'"{header_only}"')
    (tmp_path / "f.toml").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "hil", "fit", str(tmp_path / "f.toml")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "no channel 'q_base_yaw'" in proc.stderr and proc.stderr.count("\n") == 1


def test_an_output_folder_in_a_missing_folder_is_refused_before_the_fit(real_arm, tmp_path):
    proc = hil_fit(real_arm, "nowhere", fit_text(), "--out", str(tmp_path / "absent" / "out"))
    assert proc.returncode == 2 and "does not exist; create it first" in proc.stderr and proc.stderr.count("\n") == 1
    assert not (tmp_path / "absent").exists()
