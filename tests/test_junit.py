"""Results for CI and audits: requirement IDs on targets, temporal assertions judged on a run's log, and
JUnit XML from `hil run --junit`, the pytest plugin's --hil-junit and `hil campaign --junit`, read back
with junitparser. Each with a run that must fail it: an assertion the run violates, a firmware that
crashes, a campaign case whose verdict fails."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from config_schema import ConfigError
from hil.logs.targets import load_targets

junitparser = pytest.importorskip("junitparser")
ROOT = Path(__file__).resolve().parent.parent

TARGETS = """
[verdict]
max_torque_N_m = 250.0
[verdict.requirements]
max_torque_N_m = { id = "REQ-DRV-001", text = "no drive torque above 250 N m" }

[[verdict.assert]]
name = "elbow_moves_gently"
formula = "always abs(tau_elbow) < 0.001"
requirement = { id = "REQ-VS-012", text = "the elbow is never driven" }

[[verdict.assert]]
name = "brake_holds"
formula = "always (brake_elbow >= 1 implies abs(tau_elbow) <= 300)"
"""


def run(tmp_path: Path, *args: str, targets: str = TARGETS) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp_path / "targets.toml").write_text(targets)
    junit = tmp_path / "run.xml"
    proc = subprocess.run([sys.executable, "-m", "hil", "run", "ella", "--bus", "serial_frame", "--mode", "lockstep",
                           "--duration", "0.5", "--move-time", "0.3", "--targets", str(tmp_path / "targets.toml"),
                           "--check", "--junit", str(junit), "--log", str(tmp_path / "run.msgpack"), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    return proc, junit


def cases(path: Path) -> dict:
    xml = junitparser.JUnitXml.fromfile(str(path))
    return {case.name: case for suite in xml for case in suite}


def properties(case) -> dict:
    return {p.name: p.value for p in case.child(junitparser.Properties).iterchildren(junitparser.Property)}


def test_a_violated_assertion_fails_the_run_with_its_requirement_and_first_violation(tmp_path):
    proc, junit = run(tmp_path, "--spawn-firmware")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "[REQ-VS-012]" in proc.stdout and "assert_elbow_moves_gently" in proc.stdout
    got = cases(junit)
    assert set(got) == {"max_torque_base_yaw", "max_torque_shoulder_pitch", "max_torque_elbow",
                        "assert_elbow_moves_gently", "assert_brake_holds", "rejected_commands", "watchdog_trips"}
    failed = got["assert_elbow_moves_gently"]
    (result,) = failed.result
    assert isinstance(result, junitparser.Failure)
    assert "robustness -" in result.message and "[REQ-VS-012]" in result.message
    props = properties(failed)
    assert props["requirement"] == "REQ-VS-012" and props["requirement_text"] == "the elbow is never driven"
    assert float(props["first_violation_s"]) < 0.5 and props["run_log"] == str(tmp_path / "run.msgpack")
    assert got["max_torque_elbow"].is_passed and properties(got["max_torque_elbow"])["requirement"] == "REQ-DRV-001"
    assert got["assert_brake_holds"].is_passed


def test_a_crashing_firmware_is_one_error_testcase(tmp_path):
    proc, junit = run(tmp_path, "--firmware", f"{sys.executable} -c 'import sys; sys.exit(3)' {{port}}")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (case,) = cases(junit).values()
    (result,) = case.result
    assert case.name == "run" and isinstance(result, junitparser.Error) and "status 3" in result.message


@pytest.mark.parametrize("extra, message", [
    ('[[verdict.assert]]\nname = "a"\nformula = "always (x < "\n', "verdict.assert[0].formula"),
    ('[[verdict.assert]]\nname = "a"\nformula = "always x < 1"\n[[verdict.assert]]\nname = "a"\nformula = "x < 1"\n',
     "no other assertion"),
    ('[verdict.requirements]\nmax_current_A = { id = "REQ-1" }\n', "expected a target this table gives"),
    ('[verdict.requirements]\nmax_torque_N_m = { id = "REQ 1" }\n', "expected a requirement ID"),
    ('[verdict.requirements]\nmax_torque_N_m = { text = "no id" }\n', "verdict.requirements.max_torque_N_m.id"),
])
def test_a_mistake_in_requirements_or_assertions_is_one_line(tmp_path, extra, message):
    path = tmp_path / "t.toml"
    path.write_text("[verdict]\nmax_torque_N_m = 250.0\n" + extra)
    with pytest.raises(ConfigError) as info:
        load_targets(path)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_an_assertion_on_a_column_the_run_will_not_log_is_refused_before_the_run(tmp_path):
    proc, junit = run(tmp_path, "--spawn-firmware", targets=TARGETS.replace("brake_elbow >= 1", "brak_elbow >= 1"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "no column 'brak_elbow' in this run's log (did you mean 'brake_elbow'?)" in proc.stderr
    assert not junit.exists()


PLUGIN_TEST = '''
def test_one_run(hil_run):
    hil_run.finish()
'''


def test_the_pytest_plugin_writes_every_runs_verdicts(tmp_path):
    (tmp_path / "targets.toml").write_text(TARGETS)
    (tmp_path / "test_fw.py").write_text(PLUGIN_TEST)
    junit = tmp_path / "hil.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_fw.py"),
                           "--hil-targets", str(tmp_path / "targets.toml"), "--hil-junit", str(junit)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    xml = junitparser.JUnitXml.fromfile(str(junit))
    (suite,) = list(xml)
    assert suite.name.endswith("test_fw.py::test_one_run")
    got = {c.name: c for c in suite}
    assert not got["assert_elbow_moves_gently"].is_passed and got["assert_brake_holds"].is_passed


def test_a_campaign_gives_one_testcase_per_case_with_the_failing_verdicts_requirements(tmp_path):
    from campaigns import write_campaign
    from hil.campaign.run import run_campaign
    from hil.cli.main import main

    crashing = f'[[firmware]]\nname = "crash"\nkind = "command"\ncommand = "{sys.executable} -c \'import sys; sys.exit(3)\' {{port}}"\n'
    path = write_campaign(tmp_path, firmware='[[firmware]]\nname = "pid"\nmove_time_s = 0.2\n\n' + crashing)
    path.write_text(path.read_text().replace("max_torque_N_m = 250.0", "max_torque_N_m = 1.0")
                    + '[verdict.requirements]\nmax_torque_N_m = { id = "REQ-DRV-001", text = "gentle drives" }\n')
    out = tmp_path / "out"
    run_campaign(path, out, workers=2, stream=io.StringIO())
    junit = tmp_path / "campaign.xml"
    assert main(["campaign", str(path), "--out", str(out), "--report", "--junit", str(junit)]) == 0
    got = cases(junit)
    (failure,) = got["pid/none/0000"].result
    assert isinstance(failure, junitparser.Failure) and "max_torque_shoulder_pitch: value" in failure.message
    assert "limit 1 [REQ-DRV-001]" in failure.message
    assert properties(got["pid/none/0000"])["requirements_failed"] == "REQ-DRV-001"
    (error,) = got["crash/none/0000"].result
    assert isinstance(error, junitparser.Error) and "run_failed" in error.message
    assert properties(got["crash/none/0000"])["report"] == str(out / "report.html")


def test_a_junit_file_the_disk_cannot_take_leaves_the_old_one_and_is_one_line(tmp_path, monkeypatch):
    import argparse
    import errno
    import os

    from hil.cli.registry import CliError
    from hil.cli.run import _write_junit
    from hil.logs import junit

    class FullDisk:
        def __init__(self, fd: int, mode: str):
            self.fd = fd

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            os.close(self.fd)

        def write(self, data: bytes):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    path = tmp_path / "run.xml"
    path.write_text("the last run's results")
    monkeypatch.setattr(junit.os, "fdopen", FullDisk)
    summary = {"run_failures": [], "verdicts": [], "t_s": 1.0}
    args = argparse.Namespace(junit=str(path), config="ella", scenario=None, log=None)
    with pytest.raises(CliError) as info:
        _write_junit(args, summary)
    assert str(info.value) == f"--junit {path}: No space left on device"
    assert path.read_text() == "the last run's results" and [p.name for p in tmp_path.iterdir()] == ["run.xml"]
