"""Fixtures every test module may use. The shared helpers are modules beside this one: ``emulators``
(the emulator factory and the fake firmware), ``links`` (in-memory links, the answering link, waiting
for bytes on a pty), ``bus_maps`` (maps no preset ships), ``wire_values`` (random signal values)."""
from pathlib import Path

import pytest

from hil.model.config import load_model

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"


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
