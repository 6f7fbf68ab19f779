"""The package as a user installs it: the wheel in a fresh virtual environment, run outside the
checkout, finds its presets, bus maps, scenarios and targets by name."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.wheel
def test_the_wheel_installs_in_a_fresh_venv_and_runs_outside_the_checkout(tmp_path):
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(ROOT)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    assert "project.license" not in build.stdout + build.stderr           # no deprecated license metadata
    wheel, = dist.glob("ella_hil-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"hil/configs/ella.toml", "hil/configs/bus/serial_frame.toml", "hil/configs/scenarios/combined.toml",
            "hil/configs/targets/seed000_setpoints.toml", "firmware_bridge/maps/compact_fd.toml",
            "firmware_bridge/describe/__main__.py"} <= set(names)

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stdout + install.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    hil = str(venv / "bin" / "hil")

    def run(*args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([hil, *args], cwd=work, env=env, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    out = run("run", "ella", "--bus", "serial_frame", "--spawn-firmware", "--mode", "lockstep", "--duration", "1",
              "--no-realtime", "--json").stdout
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["cycles"] == 1000 and summary["run_failures"] == [] and summary["commands"]["accepted"] == 1000
    assert str(ROOT) not in json.dumps(summary)                          # nothing came from the checkout
    tables = subprocess.run([str(venv / "bin" / "python"), "-m", "firmware_bridge.describe", "compact_fd"], cwd=work,
                            env=env, capture_output=True, text=True, timeout=120)
    assert tables.returncode == 0 and "Profile 5" in tables.stdout and str(ROOT) not in tables.stdout
