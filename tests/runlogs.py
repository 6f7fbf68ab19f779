"""Synthetic run logs of the ELLA preset for the report, export and live-view tests.

The joint angles follow smooth manoeuvres, the modal coordinates ring at a few Hz, the tip is
the model's own tip station at those coordinates (hil.viz.scene), and the optional columns of
the shared log schema (``cmd_age_us``, joint wrenches) and the summary's targets and verdicts
are there only when asked for, so that a test sees both a log that has them and one that does
not.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from hil.logs.runlog import MsgpackRunWriter
from hil.model.assembly import assemble
from hil.model.config import load_model
from hil.viz.scene import ArmScene

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "configs" / "ella.toml"
JOINTS = ("base_yaw", "shoulder_pitch", "elbow")
SETPOINTS = {"base_yaw": 0.6922, "shoulder_pitch": -0.4928, "elbow": 0.4270}
EVENTS = [{"event": "inject", "cycle": 700, "t": 0.7, "fault": "elbow_encoder", "detail": "dropout on enc_elbow"},
          {"event": "watchdog_tripped", "cycle": 722, "t": 0.722},
          {"event": "clear", "cycle": 900, "t": 0.9, "fault": "elbow_encoder", "detail": "cleared"}]


def ella_columns(asm, optional: bool) -> list[str]:
    lay = asm.layout
    cols = ["cycle", "t", "status"] + [f"tau_cmd_{j}" for j in JOINTS] + [f"tau_{j}" for j in JOINTS]
    cols += [f"q_{j}" for j in JOINTS] + [f"qd_{j}" for j in JOINTS]
    cols += [f"eta_{b}_{m}" for b, labels in zip(lay.body_names, lay.mode_labels) for m in labels]
    cols += [f"brake_{j}" for j in JOINTS]
    for ch in [f"enc_{j}" for j in JOINTS] + [f"imu_{a}" for a in ("ax", "ay", "az", "gx", "gy", "gz")] + \
            [f"cur_{j}" for j in JOINTS]:
        cols += [ch, f"{ch}_true"]
    cols += ["tip_x", "tip_y", "tip_z", "lateness_us", "compute_us", "io_us"]
    if optional:
        cols += ["cmd_age_us"] + [f"w_{j}_{a}" for j in JOINTS for a in ("mx", "my", "mz", "fx", "fy", "fz")]
    return cols


def synthetic_rows(cols: list[str], asm, duration_s: float, seed: int = 1) -> np.ndarray:
    """Rows at 1 kHz (module docstring)."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, int(round(duration_s * 1e3)) + 1) * 1e-3
    n = len(t)
    rows = np.zeros((n, len(cols)))
    ix = {c: i for i, c in enumerate(cols)}
    rows[:, ix["cycle"]] = np.arange(1, n + 1)
    rows[:, ix["t"]] = t
    rows[:, ix["status"]] = 1 + 16 * ((t > 0.722) & (t < 0.9))
    ramp = np.clip((t - 0.2) / 1.0, 0, 1)
    smooth = ramp ** 3 * (10 - 15 * ramp + 6 * ramp ** 2)
    for j in JOINTS:
        rows[:, ix[f"q_{j}"]] = SETPOINTS[j] * smooth
        rows[:, ix[f"qd_{j}"]] = np.gradient(rows[:, ix[f"q_{j}"]], t)
        rows[:, ix[f"tau_cmd_{j}"]] = 20 * np.sin(2 * np.pi * 0.75 * t)
        rows[:, ix[f"tau_{j}"]] = rows[:, ix[f"tau_cmd_{j}"]] + 0.1
        rows[:, ix[f"brake_{j}"]] = np.where(t > 0.722, 1.0, 0.0)
        rows[:, ix[f"cur_{j}"]] = rows[:, ix[f"tau_{j}"]] / 5 + 0.05 * rng.standard_normal(n)
        rows[:, ix[f"cur_{j}_true"]] = rows[:, ix[f"tau_{j}"]] / 5
    for k, c in enumerate(c for c in cols if c.startswith("eta_")):
        rows[:, ix[c]] = 1e-3 / (k + 1) * np.sin(2 * np.pi * (3.0 + 2 * k) * t) * np.exp(-t)
    for a, f in zip(("ax", "ay", "az", "gx", "gy", "gz"), (5.0, 7.0, 11.0, 5.0, 7.0, 11.0)):
        rows[:, ix[f"imu_{a}_true"]] = 0.5 * np.sin(2 * np.pi * f * t)
        rows[:, ix[f"imu_{a}"]] = rows[:, ix[f"imu_{a}_true"]] + 0.01 * rng.standard_normal(n)
    scene = ArmScene(asm)
    pos, _ = scene.coordinates(cols, rows)
    rows[:, [ix["tip_x"], ix["tip_y"], ix["tip_z"]]] = scene.station_positions("tip", t, pos)
    rows[:, ix["lateness_us"]] = rng.exponential(2.0, n)
    rows[5, ix["lateness_us"]] = 4000.0                           # one overrun
    rows[:, ix["compute_us"]] = 80 + rng.exponential(5.0, n)
    rows[:, ix["io_us"]] = 20 + rng.exponential(3.0, n)
    if "cmd_age_us" in ix:
        rows[:, ix["cmd_age_us"]] = 850 + rng.exponential(20.0, n)
        for c in cols:
            if c.startswith("w_"):
                rows[:, ix[c]] = rng.standard_normal(n)
    return rows


def write_synthetic_log(path: Path, duration_s: float = 2.0, optional: bool = False) -> tuple[dict, np.ndarray]:
    """A msgpack run log (and, with `optional`, a summary with targets and verdicts beside it)."""
    text = ARM.read_text(encoding="utf-8")
    asm = assemble(load_model(ARM))
    cols = ella_columns(asm, optional)
    rows = synthetic_rows(cols, asm, duration_s)
    header = {"config": "configs/ella.toml", "config_text": text, "mode": "realtime", "columns": cols}
    with MsgpackRunWriter(path, header) as w:
        events = iter(EVENTS)
        pending = next(events, None)
        for row in rows:
            while pending is not None and pending["t"] <= row[1]:
                w.write_event(pending)
                pending = next(events, None)
            w.write(row)
    if optional:
        summary = {"cycles": len(rows), "t_s": float(rows[-1, 1]), "mode": "realtime",
                   "targets": {"setpoints_rad": SETPOINTS, "settling_band_m": 2e-4},
                   "verdicts": [{"name": "settled", "description": "tip within the band", "value": 0.42,
                                 "limit": 1.0, "unit": "s", "passed": True},
                                {"name": "overshoot", "description": "joint overshoot", "value": 0.08,
                                 "limit": 0.05, "unit": "rad", "passed": False}],
                   "commands": {"accepted": len(rows), "rejected": {"crc": 2, "counter": 1}}}
        Path(str(path) + ".summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return header, rows
