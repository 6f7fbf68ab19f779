"""Fixtures every test module may use. The shared helpers are modules beside this one: ``emulators``
(the emulator factory and the fake firmware), ``links`` (in-memory links, the answering link, waiting
for bytes on a pty), ``bus_maps`` (maps no preset ships), ``wire_values`` (random signal values)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hil.model.config import load_model

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
WHEEL_TEST = "test_packaging.py::test_the_wheel_installs_in_a_fresh_venv_and_runs_outside_the_checkout"
WHEEL_JOB = pytest.StashKey[tuple]()
WHEEL_JOB_TIMEOUT_S = 2400


def _start_wheel_job() -> tuple:
    folder = Path(tempfile.mkdtemp(prefix="ella-wheel-job-"))
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("wheel_check.py")), str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    return proc, folder


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """The wheel test's job (tests/wheel_check.py: a cold install and compile, minutes of one core)
    starts now, beside the other tests, when that test is among the selected ones."""
    if any(item.nodeid.endswith(WHEEL_TEST) for item in items):
        config.stash[WHEEL_JOB] = _start_wheel_job()


def pytest_sessionfinish(session):
    job = session.config.stash.get(WHEEL_JOB, None)
    if job is not None:
        proc, folder = job
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def wheel_job(request):
    """A function returning the wheel job's steps (tests/wheel_check.py) once it has finished."""
    def steps() -> dict:
        job = request.config.stash.get(WHEEL_JOB, None)
        if job is None:
            job = request.config.stash[WHEEL_JOB] = _start_wheel_job()
        proc, folder = job
        proc.wait(timeout=WHEEL_JOB_TIMEOUT_S)
        record = folder / "steps.json"
        assert record.is_file(), f"the wheel job ended with status {proc.returncode} and no record"
        return json.loads(record.read_text())
    return steps


@pytest.fixture(autouse=True)
def _run_from_repo_root(monkeypatch):
    """Config paths in tests are relative to the repository root."""
    monkeypatch.chdir(ROOT)


@pytest.fixture(scope="session")
def model():
    """ELLA as configs/ella.toml describes it (read once; tests that change a model work on a copy)."""
    return load_model(CONFIGS / "ella.toml")


@pytest.fixture(scope="session")
def real_arm(tmp_path_factory):
    """The synthetic real arm (tests/real_arm.py): its hidden preset and two brake-stop recordings
    (set-point moves of 1.0 s and 0.8 s)."""
    import real_arm as arm
    folder = tmp_path_factory.mktemp("real_arm")
    hidden = arm.hidden_preset(folder)
    return hidden, arm.brake_stop(hidden, folder / "stop.msgpack"), arm.brake_stop(hidden, folder / "stop2.msgpack", 0.8)


@pytest.fixture(scope="session")
def loaded_arm(tmp_path_factory):
    """ELLA with a 30 % heavier payload and 30 % more joint friction (tests/real_arm.py) and two
    set-point moves of 3 s (the moves take 2.0 s and 1.5 s)."""
    import real_arm as arm
    folder = tmp_path_factory.mktemp("loaded_arm")
    preset = arm.loaded_preset(folder)
    return (preset, arm.move(preset, folder / "move.msgpack", 2.0, 3.0),
            arm.move(preset, folder / "move2.msgpack", 1.5, 3.0))


@pytest.fixture(scope="session")
def real_arm_exports(real_arm, tmp_path_factory):
    """The real arm's first brake stop exported to CSV, MDF4, Parquet and MCAP (`hil log export`): (log, files)."""
    import subprocess
    import sys
    log = real_arm[1]
    folder = tmp_path_factory.mktemp("exports")
    out = {}
    for fmt, suffix in (("csv", ".csv"), ("mdf4", ".mf4"), ("parquet", ".parquet"), ("mcap", ".mcap")):
        path = folder / f"stop{suffix}"
        proc = subprocess.run([sys.executable, "-m", "hil", "log", "export", str(log), "--format", fmt, "--out",
                               str(path), "--scene-rate", "1"], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        out[fmt] = path
    return log, out
