"""The package as a user installs it, as a job: the wheel built, installed in a fresh virtual
environment and run outside the checkout (its kernels compiled cold). tests/conftest.py starts it
beside the rest of the suite when the wheel test is selected (the cold compile takes minutes of
one core); tests/test_packaging.py waits for it and judges what it recorded.

    python tests/wheel_check.py FOLDER       # writes FOLDER/steps.json: each step's argv, status, output
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _step(steps: dict, name: str, argv: list[str], timeout: float, **kwargs) -> bool:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
        steps[name] = {"argv": argv, "returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}
    except subprocess.TimeoutExpired:
        steps[name] = {"argv": argv, "returncode": None, "stdout": "", "stderr": f"timed out after {timeout:g} s"}
    return steps[name]["returncode"] == 0


def check(folder: Path) -> dict:
    """Build, install, run; each step's record (a failed step ends the job)."""
    steps: dict = {}
    dist, venv, work = folder / "dist", folder / "venv", folder / "elsewhere"
    if not _step(steps, "build", [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(ROOT)], 600):
        return steps
    wheels = sorted(dist.glob("ella_hil-*.whl"))
    steps["wheel_names"] = zipfile.ZipFile(wheels[0]).namelist() if len(wheels) == 1 else []
    if not (_step(steps, "venv", [sys.executable, "-m", "venv", str(venv)], 300)
            and _step(steps, "install", [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheels[0])], 900)):
        return steps
    work.mkdir()
    env = {**os.environ, "NUMBA_CACHE_DIR": str(folder / "numba")}
    if _step(steps, "run", [str(venv / "bin" / "hil"), "run", "ella", "--bus", "serial_frame", "--spawn-firmware",
                            "--mode", "lockstep", "--duration", "1", "--no-realtime", "--json"], 1200, cwd=work, env=env):
        _step(steps, "describe", [str(venv / "bin" / "python"), "-m", "firmware_bridge.describe", "compact_fd"], 120,
              cwd=work, env=env)
    return steps


if __name__ == "__main__":
    out = Path(sys.argv[1])
    result = check(out)
    (out / "steps.json.part").write_text(json.dumps(result))
    (out / "steps.json.part").replace(out / "steps.json")
