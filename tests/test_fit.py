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
from real_arm import DAMPING_RATIO, DAMPING_SCALE, E_PA, E_SCALE, FRICTION, FRICTION_SCALE, PAYLOAD_KG, PAYLOAD_SCALE

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
    page = (out / "report.html").read_text()
    plots = json.loads(page.split("id='report-data'>", 1)[1].split("</script>", 1)[0])["plots"]
    for name in ("stop.msgpack", "stop2.msgpack"):
        assert f"recording {name}" in page
    assert [p["title"] for p in plots].count("imu_gx") == 2 and [p["title"] for p in plots].count("imu_gx: residual spectrum") == 2
    assert {s["label"] for p in plots for s in p["series"]} >= {"measured", "start", "fitted", "residual fitted"}
    assert "Correlation" in page and "95 % interval" in page


def test_a_model_that_cannot_explain_the_recording_fails_and_says_where(real_arm):
    """Only the damping free, the stiffness held at the preset's (10 % too stiff): the modes cannot
    come into phase, the validation residuals stay large (`hil fit` exits 1 then)."""
    from hil.fit.fit import run_fit
    from hil.fit.fit_file import load_fit

    path = real_arm[1].parent / "damping_only.toml"
    path.write_text(fit_text(parameters=("damping_ratio",)).replace("[fit]\n", "[fit]\nmax_evaluations = 30\n"))
    result, _ = run_fit(load_fit(path))
    assert not result.passed and result.failing and all(f.startswith("stop2.msgpack: imu_g") for f in result.failing)


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
    (("name = \"imu_gz\"", "name = \"imu_gx\"", 1), "each name once"),
    (("name = \"imu_gz\"\n", "name = \"imu_gz\"\nwindow_s = [2.6, 3.0]\n", 1), "holds 0 rows of the recording's"),
    (("model = \"ella\"\n", "model = \"ella\"\njobs = 0\n", 1), "jobs"),
    (("model = \"ella\"\n", "model = \"ella\"\nprescribe_joints = true\nshooting_s = 0.1\n", 1), "expected no shooting_s"),
    (("model = \"ella\"\n\n", "model = \"ella\"\nprescribe_joints = true\n\n[[parameter]]\npath = \"recording.delay_s\"\n"
      "lower = 0.0\nupper = 0.01\nunit = \"s\"\n\n", 1), "expected no joint parameter or delay"),
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


FRICTION_BOUNDS = {"viscous_N_m_s_rad": (0.1, 3.0, "N_m_s_rad"), "coulomb_N_m": (0.1, 3.0, "N_m")}


def rigid_fit_text(shooting: str, budget: int = 200, model: str = "ella", friction: bool = True) -> str:
    params = '[[parameter]]\npath = "body.link2.attachment.payload.mass_kg"\nlower = 1.0\nupper = 4.0\nunit = "kg"\n\n'
    if friction:
        params += "".join(f'[[parameter]]\npath = "body.{body}.joint.{key}"\nlower = {lo}\nupper = {hi}\nunit = "{unit}"\n\n'
                          for body in FRICTION for key, (lo, hi, unit) in FRICTION_BOUNDS.items())
    return (f'[fit]\nmodel = "{model}"\nmax_evaluations = {budget}\n' + shooting +
            '\n[[recording]]\nfile = "move.msgpack"\nrole = "training"\n\n'
            '[[recording]]\nfile = "move2.msgpack"\nrole = "validation"\n\n' + params
            + "".join(f'[[channel]]\nname = "enc_{j}"\n' for j in ("base_yaw", "shoulder_pitch", "elbow"))
            + "\n[validation]\nmax_nrmse = 0.02\n")


def test_the_payload_and_every_joints_friction_are_recovered_from_set_point_moves(loaded_arm):
    """Seven parameters (the payload; each joint's viscous and Coulomb friction), all 30 % off in the
    loaded arm, from the encoder channels of one PID move, the replay's joints restarted from the
    record every 0.25 s; judged on another move."""
    from hil.fit.fit import run_fit
    from hil.fit.fit_file import load_fit

    folder = loaded_arm[1].parent
    (folder / "rigid.toml").write_text(rigid_fit_text("shooting_s = 0.25\n", budget=100))
    result, _ = run_fit(load_fit(folder / "rigid.toml"))
    assert result.values["body.link2.attachment.payload.mass_kg"] == pytest.approx(PAYLOAD_KG * PAYLOAD_SCALE, rel=0.02)
    for body, (viscous, coulomb) in FRICTION.items():
        assert result.values[f"body.{body}.joint.viscous_N_m_s_rad"] == pytest.approx(viscous * FRICTION_SCALE, rel=0.05)
        assert result.values[f"body.{body}.joint.coulomb_N_m"] == pytest.approx(coulomb * FRICTION_SCALE, rel=0.05)
    assert result.passed and result.evaluations <= 100 + 7 + 2     # the budget, then the trust's Jacobian and the verdict


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


def test_a_channel_a_fault_spoilt_is_matched_up_to_its_window(real_arm):
    """The elbow encoder reads 0 from 0.7 s on (the recording's fault, which a replay does not make):
    matched over its own window the hidden model fits it to its quantisation, over the whole run not."""
    from hil.fit.fit import FitProblem
    from hil.fit.fit_file import load_fit

    hidden, log = real_arm[0], real_arm[1]
    text = (fit_text(model=hidden.name, parameters=("E_Pa",)).replace("window_s = [1.2, 2.5]\n", "")
            + '[[channel]]\nname = "enc_elbow"\nwindow_s = [0.0, 0.69]\n[[channel]]\nname = "enc_shoulder_pitch"\n')
    path = log.parent / "windowed.toml"
    path.write_text(text)
    problem = FitProblem(load_fit(path))
    rec = problem.training[0]
    t = rec.rows[:, rec.header["columns"].index("t")]
    assert t[rec.masks["enc_elbow"]].max() <= 0.69 < t[rec.masks["enc_shoulder_pitch"]].max()
    values = {f"body.{link}.beam.E_Pa": E_PA * E_SCALE for link in LINKS}
    nrmse = problem.nrmse(rec, values)
    assert nrmse["enc_elbow"] < 0.01 and nrmse["enc_shoulder_pitch"] < 0.01, nrmse
    rec.masks["enc_elbow"] = rec.window                          # the same channel over the whole run
    rec.measured["enc_elbow"] = rec.rows[rec.window, rec.header["columns"].index("enc_elbow")]
    assert problem.nrmse(rec, values)["enc_elbow"] > 0.5


def test_a_jacobian_on_two_processes_is_the_one_on_one_and_a_lost_worker_is_one_line(real_arm):
    import os
    import signal

    import numpy as np

    from hil.fit.fit import FitProblem, _jacobian
    from hil.fit.fit_file import load_fit
    from hil.fit.workers import ReplayWorkers

    path = real_arm[1].parent / "jobs.toml"
    path.write_text(fit_text(parameters=("E_Pa",)))
    problem = FitProblem(load_fit(path))
    u = np.array([0.4, 0.6])
    f = problem.residual(u)
    alone = _jacobian(problem, u, f)
    with ReplayWorkers(problem, 2) as problem.workers:
        assert np.array_equal(_jacobian(problem, u, f), alone) and np.abs(alone).max() > 0
        assert problem.evaluations == 1 + 2 + 2
        os.kill(problem.workers.pids[0], signal.SIGKILL)
        with pytest.raises(UserError, match="a replay worker ended unexpectedly"):
            _jacobian(problem, u, f)


def test_a_transport_delay_and_a_gyro_axis_bias_and_scale_are_recovered(loaded_arm, tmp_path):
    """The loaded arm's moves with their torque columns logged one cycle (1 ms) before they act, as
    CSV; its gyro's z axis has another bias and a 2 % scale error. The fit, given the arm's preset
    with the preset's gyro, finds the delay, the bias and the scale error."""
    import numpy as np

    from hil.fit.fit import run_fit
    from hil.fit.fit_file import load_fit
    from hil.logs.runlog import read_run
    from real_arm import GYRO_BIAS_Z, GYRO_SCALE_ERROR_Z, sensors_and_motors_as_preset

    for name in ("move", "move2"):
        header, rows = read_run(loaded_arm[1].parent / f"{name}.msgpack")
        columns = header["columns"]
        keep = [c for c in columns if c in ("t", "imu_gz") or c.startswith(("tau_", "q_", "qd_", "enc_"))]
        table = rows[:, [columns.index(c) for c in keep]]
        for k, c in enumerate(keep):
            if c.startswith("tau_"):
                table[:-1, k] = table[1:, k]                     # logged a cycle before it acts
        np.savetxt(tmp_path / f"{name}.csv", table[:-1], delimiter=",", header=",".join(keep), comments="")
    (tmp_path / "loaded.toml").write_text(sensors_and_motors_as_preset(loaded_arm[0].read_text()))
    text = rigid_fit_text("shooting_s = 0.25\n", budget=60, model="loaded.toml", friction=False)
    gyro = ('[[parameter]]\npath = "sensor.imu.gyro.bias_rad_s[2]"\nlower = -0.005\nupper = 0.005\nunit = "rad_s"\n\n'
            '[[parameter]]\npath = "sensor.imu.gyro.scale_error[2]"\nlower = -0.1\nupper = 0.1\nunit = "1"\n\n')
    text = text.replace(".msgpack", ".csv").replace('path = "body.link2.attachment.payload.mass_kg"\nlower = 1.0\n'
                                                    'upper = 4.0\nunit = "kg"', 'path = "recording.delay_s"\nlower = 0.0\n'
                                                                               'upper = 0.004\nunit = "s"')
    text = text.replace("[[channel]]", gyro + "[[channel]]", 1).replace(
        "\n[validation]", '[[channel]]\nname = "imu_gz"\n\n[validation]')
    (tmp_path / "delay.toml").write_text(text)
    result, _ = run_fit(load_fit(tmp_path / "delay.toml"))
    assert result.values["recording.delay_s"] == pytest.approx(1e-3, rel=0.03), result.values
    assert result.values["sensor.imu.gyro.bias_rad_s[2]"] == pytest.approx(GYRO_BIAS_Z, rel=0.05), result.values
    assert result.values["sensor.imu.gyro.scale_error[2]"] == pytest.approx(GYRO_SCALE_ERROR_Z, abs=0.001), result.values
    assert result.passed, result.failing


def test_with_the_joints_prescribed_a_wrong_rigid_model_does_not_spoil_the_links(real_arm, tmp_path):
    """The fit's model has three times the joints' friction of the arm that was recorded (nothing the
    locked modes see, but an open-loop replay's joints would drift) and the preset's stiffness (the
    recorded arm's damping); with the joints following the record over the move and the stop, the
    links' stiffness comes out within 0.5 %."""
    import shutil

    from hil.fit.fit import run_fit
    from hil.fit.fit_file import load_fit

    for log in real_arm[1:]:
        shutil.copy(log, tmp_path / log.name)
    preset = (ROOT / "configs/ella.toml").read_text()
    sticky = "viscous_N_m_s_rad = 1.0\n  coulomb_N_m = 1.0\n"
    assert preset.count(sticky) == 2
    preset = preset.replace(sticky, sticky.replace("1.0", "3.0")).replace(
        f"damping_ratio = {DAMPING_RATIO}\n", f"damping_ratio = {DAMPING_RATIO * DAMPING_SCALE}\n")
    (tmp_path / "sticky.toml").write_text(preset)
    text = fit_text(model="sticky.toml", parameters=("E_Pa",)).replace("window_s = [1.2, 2.5]", "window_s = [0.2, 2.5]")
    (tmp_path / "prescribed.toml").write_text(text.replace("[fit]\n", "[fit]\nprescribe_joints = true\nmax_evaluations = 30\n"))
    result, _ = run_fit(load_fit(tmp_path / "prescribed.toml"))
    for link in LINKS:
        assert result.values[f"body.{link}.beam.E_Pa"] == pytest.approx(E_PA * E_SCALE, rel=0.005), result.values
    assert result.passed, result.failing


def test_the_correlation_time_counts_white_noise_once_and_a_slow_wave_many_times():
    import numpy as np

    from hil.fit.trust import correlation_time

    rng = np.random.default_rng(1)
    white = rng.normal(size=20000)
    ar = np.zeros_like(white)
    for k in range(1, len(white)):
        ar[k] = 0.9 * ar[k - 1] + white[k]
    assert correlation_time(white) == pytest.approx(1.0, abs=0.05)
    assert correlation_time(ar) == pytest.approx((1 + 0.9) / (1 - 0.9), rel=0.1)       # AR(1): (1 + a) / (1 - a)
    assert correlation_time(np.zeros(100)) == 1.0


def test_a_delayed_command_is_the_logged_one_shifted_and_a_delay_beyond_the_record_is_refused():
    import numpy as np

    from hil.replay.plant_replay import delayed

    v = np.arange(6.0)[:, None]
    assert delayed(v, 1.0).ravel().tolist() == [0, 0, 1, 2, 3, 4]
    assert delayed(v, 0.5).ravel().tolist() == [0, 0.5, 1.5, 2.5, 3.5, 4.5]      # the step's average of a held command
    for bad in (-1.0, 6.0, np.nan):
        with pytest.raises(UserError, match="command delay"):
            delayed(v, bad)


def test_balancing_weighs_each_channel_by_its_noise_level(real_arm):
    """After balanced(), each channel's share of the residual is 1 (or less, at the floor): the gyro
    channel with the bias drift no longer outweighs the others."""
    import numpy as np

    from hil.fit.fit import NRMSE_FLOOR, FitProblem
    from hil.fit.fit_file import load_fit

    path = real_arm[1].parent / "balance.toml"
    path.write_text(fit_text(parameters=("E_Pa",)))
    problem = FitProblem(load_fit(path))
    u = np.array([0.5, 0.5])
    before = problem.residual(u)
    problem.balanced(before)
    after = problem.residual(u)
    n = int(problem.training[0].masks["imu_gx"].sum())
    shares = [float(np.linalg.norm(after[k * n:(k + 1) * n])) for k in range(3)]
    level = [float(np.linalg.norm(before[k * n:(k + 1) * n])) for k in range(3)]
    assert max(level) / min(level) > 3                                 # unbalanced to start with
    for share, nrmse in zip(shares, level):
        assert share == pytest.approx(1.0 if nrmse >= NRMSE_FLOOR else nrmse / NRMSE_FLOOR, rel=1e-9)


def test_the_torque_constants_are_recovered_from_the_motor_currents(loaded_arm, tmp_path):
    """The loaded arm's motors have torque constants 10 % above the preset's (its drives convert with
    them: the torques are the commanded ones, the currents 10 % lower). Replayed from the logged motor
    currents (input = "current"), the fit, given the arm's preset with the preset's motors, finds the
    three torque constants within 1 %."""
    import shutil

    from hil.fit.fit import run_fit
    from hil.fit.fit_file import load_fit
    from real_arm import KT_N_M_A, KT_SCALE, sensors_and_motors_as_preset

    for log in loaded_arm[1:]:
        shutil.copy(log, tmp_path / log.name)
    (tmp_path / "as_preset.toml").write_text(sensors_and_motors_as_preset(loaded_arm[0].read_text()))
    params = "".join(f'[[parameter]]\npath = "body.{body}.joint.motor.torque_constant_N_m_A"\nlower = 0.04\n'
                     'upper = 0.09\nunit = "N_m_A"\n\n' for body in FRICTION)
    text = rigid_fit_text("shooting_s = 0.25\n", budget=80, model="as_preset.toml", friction=False)
    text = text.replace('role = "training"\n', 'role = "training"\ninput = "current"\n').replace(
        'role = "validation"\n', 'role = "validation"\ninput = "current"\n')
    text = text.split("[[parameter]]", 1)[0] + params + "[[channel]]" + text.split("[[channel]]", 1)[1]
    (tmp_path / "motors.toml").write_text(text)
    result, _ = run_fit(load_fit(tmp_path / "motors.toml"))
    for body in FRICTION:
        kt = result.values[f"body.{body}.joint.motor.torque_constant_N_m_A"]
        assert kt == pytest.approx(KT_N_M_A * KT_SCALE, rel=0.01), result.values
    assert result.passed, result.failing


def test_a_torque_constant_without_a_current_recording_is_one_line(loaded_arm, tmp_path):
    from hil.fit.fit_file import load_fit

    text = rigid_fit_text("", friction=False).replace("body.link2.attachment.payload.mass_kg",
                                                      "body.link1.joint.motor.torque_constant_N_m_A")
    text = text.replace("lower = 1.0\nupper = 4.0\nunit = \"kg\"", "lower = 0.04\nupper = 0.09\nunit = \"N_m_A\"")
    (tmp_path / "kt.toml").write_text(text)
    with pytest.raises(UserError, match='a training recording with input = "current"'):
        load_fit(tmp_path / "kt.toml")


def test_a_measured_current_is_the_motor_torque_through_the_gear_the_sensor_undone():
    import numpy as np

    from hil.replay.plant_replay import motor_torques

    motors = np.array([[9.6, 0.8, 0.1, 1.05]] * 3)          # n Kt, eta, bias, 1 + scale error
    measured = np.full(3, 0.1 + 1.05 * 2.0)                 # 2 A through the sensor
    tau = motor_torques(measured, np.array([1.0, -1.0, 0.0]), motors)
    np.testing.assert_allclose(tau, [9.6 * 2.0 * 0.8, 9.6 * 2.0 / 0.8, 9.6 * 2.0], rtol=1e-12)   # driving, driven, at rest
