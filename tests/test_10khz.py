"""ELLA at 10 kHz: configs/ella_10khz.toml (0.1 ms plant step) with configs/bus/udp_10khz.toml.

In lockstep with the reference firmware over udp_loopback (through `hil run` as a user starts it):
every cycle answered, nothing rejected, the plant at one 100 us substep, and two runs give
bit-identical logs. The period must agree across the preset, the map and --period: a 1 kHz map or
period with the 10 kHz preset is refused with a message naming both. (Real time at 10 kHz is a
benchmark, not a test: python -m tools.bench_loop --rate10k.)
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hil.logs.runlog import read_run

ROOT = Path(__file__).resolve().parent.parent
ARM = "configs/ella_10khz.toml"
BUS = "configs/bus/udp_10khz.toml"
DURATION_S = 0.3
CYCLES = round(DURATION_S / 1e-4)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", "run", ARM, *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


def _lockstep(log: Path, tag: str) -> dict:
    proc = _run("--bus", BUS, "--link", f"canfd:udp_loopback:tenk-{os.getpid()}-{tag}", "--spawn-firmware",
                "--mode", "lockstep", "--no-realtime", "--duration", str(DURATION_S), "--move-time", "0.2",
                "--log", str(log), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_lockstep_at_10khz_with_the_reference_firmware_is_bit_identical(tmp_path):
    tables = []
    for k in range(2):
        s = _lockstep(tmp_path / f"run{k}.msgpack", str(k))
        assert s["cycles"] == CYCLES and s["halted"] is None and s["failed"] is None
        assert s["commands"]["accepted"] == CYCLES and not any(s["commands"]["rejected"].values())
        assert s["watchdog"]["trips"] == 0 and s["log_dropped"] == 0
        assert s["integrator"]["substeps"] == 1 and "0.1 ms step" in s["integrator"]["plan"]
        assert s["firmware"]["cycles"] == CYCLES
        header, rows = read_run(tmp_path / f"run{k}.msgpack")
        np.testing.assert_allclose(np.diff(rows[:, header["columns"].index("t")]), 1e-4, rtol=1e-6)
        keep = [i for i, c in enumerate(header["columns"]) if not c.endswith("_us")]
        tables.append(rows[:, keep])
        q = rows[:, header["columns"].index("q_base_yaw")]
        assert abs(q[-1] - q[0]) > 0.05         # the firmware's manoeuvre moved the arm
    assert tables[0].shape[0] == CYCLES
    assert tables[0].tobytes() == tables[1].tobytes()
    np.testing.assert_array_equal(tables[0][:, 0], np.arange(1, CYCLES + 1))


@pytest.mark.parametrize("args, expected", [
    (["--bus", "configs/bus/compact_fd.toml"], "bus.cycle_s = 0.001 s differs from the plant step"),
    (["--bus", BUS, "--period", "0.001"], "period 0.001 s differs from the plant step"),
])
def test_the_period_must_agree_across_preset_map_and_period(args, expected):
    proc = _run(*args, "--link", f"canfd:udp_loopback:tenk-{os.getpid()}-x", "--mode", "afap",
                "--duration", "0.01", "--no-realtime")
    assert proc.returncode != 0
    assert expected in proc.stderr, proc.stderr
