"""The package as a user installs it: the wheel in a fresh virtual environment, run outside the
checkout, finds its presets, bus maps, scenarios and targets by name. The work is done by
tests/wheel_check.py, started beside the rest of the suite (tests/conftest.py); this test waits
for it and judges each step."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ok(steps: dict, name: str) -> dict:
    step = steps.get(name)
    assert step is not None, f"the wheel job never reached its step {name!r}"
    assert step["returncode"] == 0, f"{name}: {step['argv']}\n{step['stdout']}\n{step['stderr']}"
    return step


@pytest.mark.wheel
def test_the_wheel_installs_in_a_fresh_venv_and_runs_outside_the_checkout(wheel_job):
    steps = wheel_job()
    build = _ok(steps, "build")
    assert "project.license" not in build["stdout"] + build["stderr"]      # no deprecated license metadata
    assert {"hil/configs/ella.toml", "hil/configs/bus/serial_frame.toml", "hil/configs/scenarios/combined.toml",
            "hil/configs/targets/seed000_setpoints.toml", "firmware_bridge/maps/compact_fd.toml",
            "firmware_bridge/describe/__main__.py"} <= set(steps["wheel_names"])
    _ok(steps, "venv")
    _ok(steps, "install")
    summary = json.loads(_ok(steps, "run")["stdout"].strip().splitlines()[-1])
    assert summary["cycles"] == 1000 and summary["run_failures"] == [] and summary["commands"]["accepted"] == 1000
    assert str(ROOT) not in json.dumps(summary)                          # nothing came from the checkout
    tables = _ok(steps, "describe")["stdout"]
    assert "Profile 5" in tables and str(ROOT) not in tables
