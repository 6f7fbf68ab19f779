"""A run against a recording (the within_record target, hil.logs.verdicts.record_band): each channel
within its tolerance of the recorded one, over the window both cover, read from any format the
recordings reader takes; a run that leaves the band fails with where it first did; a targets file
that names a missing recording or channel is refused when it is read."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from config_schema import UserError
from hil.logs.targets import load_targets
from hil.logs.verdicts import evaluate

ROOT = Path(__file__).resolve().parent.parent
JOINTS = ["base_yaw", "shoulder_pitch", "elbow"]


def targets(folder: Path, record: str, tolerance: str, extra: str = "") -> Path:
    path = folder / "band.toml"
    path.write_text(f'[verdict]\nwithin_record = {{ file = "{record}", tolerance = {{ {tolerance} }}{extra} }}\n')
    return path


def test_a_run_within_the_recordings_band_passes(real_arm):
    _, stop, _ = real_arm
    verdicts = evaluate(load_targets(targets(stop.parent, stop.name, "q_elbow = 1e-12, imu_gx = 1e-12")), stop, JOINTS)
    assert [(v["name"], v["passed"], v["value"]) for v in verdicts] == [("record_q_elbow", True, 0.0),
                                                                         ("record_imu_gx", True, 0.0)]
    assert verdicts[0]["unit"] == "rad"


def test_a_run_that_leaves_the_band_fails_with_the_first_time_beyond(real_arm):
    """The other move of the same arm against the first: the elbow leaves a 1 mrad band early."""
    _, stop, stop2 = real_arm
    verdict, = evaluate(load_targets(targets(stop.parent, stop.name, "q_elbow = 1e-3", ', window_s = [0.0, 0.7]')),
                        stop2, JOINTS)
    assert not verdict["passed"] and verdict["value"] > 1e-3 and "first beyond 0.001 at t = 0." in verdict["description"]


def test_the_recording_may_be_an_export_of_another_tool(real_arm_exports):
    stop, files = real_arm_exports
    mf4 = files["mdf4"]
    verdicts = evaluate(load_targets(targets(mf4.parent, mf4.name, "q_elbow = 1e-12, imu_gz = 1e-12")), stop, JOINTS)
    assert all(v["passed"] for v in verdicts) and len(verdicts) == 2


def test_a_channel_the_run_lacks_fails(real_arm, tmp_path):
    _, stop, _ = real_arm
    csv = tmp_path / "strain.csv"
    csv.write_text("t,strain_root\n" + "".join(f"{k * 1e-3},0\n" for k in range(1, 100)))
    verdict, = evaluate(load_targets(targets(tmp_path, "strain.csv", "strain_root = 1e-6")), stop, JOINTS)
    assert not verdict["passed"] and "the run has no channel strain_root" in verdict["description"]


@pytest.mark.parametrize("record, tolerance, extra, message", [
    ("absent.msgpack", "q_elbow = 1e-3", "", "expected a recording file"),
    ("{stop}", "q_elbw = 1e-3", "", "no channel 'q_elbw' (did you mean 'q_elbow'?)"),
    ("{stop}", "", "", "expected a table of 1 to 64 channels"),
    ("{stop}", "q_elbow = -1", "", "expected a positive number"),
    ("{stop}", "q_elbow = 1e-3", ", window_s = [2.0, 1.0]", "expected [t0, t1] in s with t0 < t1"),
])
def test_a_bad_within_record_is_refused_when_read(real_arm, tmp_path, record, tolerance, extra, message):
    _, stop, _ = real_arm
    path = targets(tmp_path, record.format(stop=stop), tolerance, extra)
    with pytest.raises(UserError) as error:
        load_targets(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_hil_compare_takes_another_tools_recording_as_the_reference(real_arm, real_arm_exports):
    _, stop, stop2 = real_arm
    mf4 = real_arm_exports[1]["mdf4"]
    same = subprocess.run([sys.executable, "-m", "hil", "compare", str(mf4), str(stop)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert same.returncode == 0, same.stdout + same.stderr
    other = subprocess.run([sys.executable, "-m", "hil", "compare", str(mf4), str(stop2), "--tol", "1e-3"], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert other.returncode == 1 and "beyond tolerance" in other.stdout
