"""Modes identified from measured vibration (hil.fit.modal_id, `hil modes --from-log`): on synthetic
signals with known poles, and on a "real arm" recorded through the emulator's own sensors (noise,
quantisation) in lockstep with the reference firmware (tests/real_arm.py: links 10 % softer and
twice as damped as the preset's, stopped by its brakes after an encoder fault). The identified
modes must match that hidden model's and differ from the nominal preset's by what was changed."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from config_schema import UserError
from hil.fit.modal_id import identify_modes
from real_arm import DAMPING_SCALE, E_SCALE

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


def decay(f_hz, zeta, amplitudes, n=3000, dt=1e-3, noise=0.0, seed=0) -> np.ndarray:
    """Channels (columns) of a sum of damped sinusoids, with white noise of the given rms."""
    t = np.arange(n) * dt
    rng = np.random.default_rng(seed)
    y = np.zeros((n, amplitudes.shape[1]))
    for k, (f, z) in enumerate(zip(f_hz, zeta)):
        w = 2 * np.pi * f / np.sqrt(1 - z * z)
        y += np.outer(np.exp(-z * w * t) * np.cos(np.sqrt(1 - z * z) * w * t + k), amplitudes[k])
    return y + noise * rng.standard_normal(y.shape)


def test_known_poles_are_recovered_from_noisy_channels():
    f, zeta = np.array([2.5, 7.0, 31.0]), np.array([0.004, 0.01, 0.02])
    y = decay(f, zeta, np.array([[1.0, 0.2], [0.3, 1.0], [0.5, 0.5]]), noise=0.02)
    found = identify_modes(y, 1e-3)
    assert len(found) == 3
    for m, fk, zk in zip(found, f, zeta):
        assert m.frequency_hz == pytest.approx(fk, rel=1e-3) and m.damping_ratio == pytest.approx(zk, rel=0.1)
    assert sum(m.share for m in found) == pytest.approx(1.0, abs=0.05)


def test_noise_alone_yields_no_mode():
    """The check can fail: white noise has no structural pole that stays put across model orders."""
    y = np.random.default_rng(1).standard_normal((3000, 4))
    assert identify_modes(y, 1e-3) == []


@pytest.mark.parametrize("y, order, message", [
    (np.zeros((100, 2)), 40, "at least 200"),
    (np.full((500, 2), np.nan), 40, "NaN"),
    (np.ones((500, 2)), 40, "constant"),
    (np.random.default_rng(0).standard_normal((500, 2)), 41, "even number"),
])
def test_a_window_that_cannot_be_identified_is_a_one_line_error(y, order, message):
    with pytest.raises(UserError, match=message):
        identify_modes(y, 1e-3, order)


def hil(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "hil", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def recording(real_arm) -> tuple[Path, Path]:
    hidden, stop, _ = real_arm
    return hidden, stop


def test_the_hidden_arms_modes_are_identified_from_its_brake_stop(recording):
    _, log = recording
    proc = hil("modes", "--from-log", str(log), "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["joints"] == "braked" and r["window_s"][1] == pytest.approx(2.5, abs=1e-6)
    assert len(r["pairs"]) >= 3
    for p in r["pairs"]:                             # against the model that made the recording
        assert abs(p["frequency_diff_pct"]) < 0.5 and abs(p["damping_diff_pct"]) < 15, p
    assert [round(p["model_hz"], 6) for p in r["pairs"]] == sorted({round(p["model_hz"], 6) for p in r["pairs"]})


def test_against_the_nominal_preset_the_softer_links_show(recording):
    """The comparison can fail: beside the nominal preset every mode is off by the hidden change,
    sqrt(0.9) - 1 = -5.1 % in frequency, damping about doubled."""
    _, log = recording
    proc = hil("modes", "ella", "--from-log", str(log))
    assert proc.returncode == 0, proc.stderr
    assert "joints braked" in proc.stdout
    r = json.loads(hil("modes", "ella", "--from-log", str(log), "--json").stdout)
    for p in r["pairs"][:2]:
        assert p["frequency_diff_pct"] == pytest.approx(100 * (np.sqrt(E_SCALE) - 1), abs=1.0), p
        assert p["damping_diff_pct"] == pytest.approx(100 * (DAMPING_SCALE - 1), abs=25), p


def test_a_log_without_the_pose_or_the_channels_is_a_one_line_error(recording, tmp_path):
    from hil.fit.log_modes import modes_from_log

    hidden, log = recording
    csv = tmp_path / "no_pose.csv"
    csv.write_text("t,imu_gx\n" + "".join(f"{k * 1e-3},{np.sin(k / 10)}\n" for k in range(400)))
    for args, message in (((str(csv), None, (0.0, 1.0)), "no model"),
                          ((str(csv), str(hidden)), "no joint angle column q_base_yaw"),
                          ((str(log), None, None, ("strain_*",)), "no measured channel matches"),
                          ((str(log), None, (9.0, 10.0)), "holds no samples"),
                          ((str(tmp_path / "absent.msgpack"),), "absent.msgpack")):
        with pytest.raises(UserError) as error:
            modes_from_log(*args)
        assert message in str(error.value) and "\n" not in str(error.value), args
    proc = hil("modes", "--from-log", str(log), "--window", "9:10")
    assert proc.returncode == 2 and "holds no samples" in proc.stderr and proc.stderr.count("\n") == 1
