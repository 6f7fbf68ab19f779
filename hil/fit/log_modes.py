"""`hil modes --from-log`: the arm's modes identified from a run's measured vibration
(hil.fit.modal_id), beside the model's linearised modes at the same pose.

The window: by default the longest stretch in which every joint's holding brake is closed and
holds (no joint moves: a brake that slips is not yet a lock) — a brake stop, the lab's
free-decay test: the joints locked, the links ringing out — from BRAKE_SETTLE_S after it began; without one, the whole run (the arm under its
controller: the identified modes are then the closed loop's, which the locked model's only
approximate; the result says so). The model's modes are those of the arm linearised at rest in
its static equilibrium at the window's mean joint angles, with every joint locked.
"""
from __future__ import annotations

import fnmatch
from pathlib import Path

import numpy as np

from config_schema import UserError
from hil.fit.modal_id import IdentifiedMode, identify_modes
from hil.logs.runlog import read_run
from hil.model.assembly import assemble
from hil.model.config import load_model, load_model_from_string
from hil.model.linearize import locked_modes_hz, rest_state

BRAKE_SETTLE_S = 0.05                         # after the brakes hold: the stop's own transient
STILL_RAD_S = 1e-9                            # a joint rate below this is a held joint
DEFAULT_CHANNELS = ("imu_a*", "imu_g*", "strain_*")


def held_rows(columns: list[str], rows: np.ndarray, joints: list[str]) -> np.ndarray:
    """Per row: every joint's brake closed and holding (no joint moving)."""
    brakes = [c for c in columns if c.startswith("brake_")]
    if not brakes:
        return np.zeros(len(rows), bool)
    rates = [f"qd_{j}" for j in joints if f"qd_{j}" in columns]
    held = np.all(rows[:, [columns.index(c) for c in brakes]] > 0.5, axis=1)
    return held & np.all(np.abs(rows[:, [columns.index(c) for c in rates]]) < STILL_RAD_S, axis=1)


def braked_window(t: np.ndarray, braked: np.ndarray) -> tuple[float, float] | None:
    """The longest stretch of all-braked rows, from BRAKE_SETTLE_S after its start; None if none."""
    best, start = None, None
    for k, on in enumerate(np.append(braked, False)):
        if on and start is None:
            start = k
        elif not on and start is not None:
            if best is None or k - start > best[1] - best[0]:
                best = (start, k)
            start = None
    if best is None:
        return None
    return float(t[best[0]] + BRAKE_SETTLE_S), float(t[best[1] - 1])


def parse_window(text: str) -> tuple[float, float]:
    """``T0:T1`` (s; either side may be empty: the run's start or end)."""
    first, colon, last = text.partition(":")
    try:
        t0 = float(first) if first else -np.inf
        t1 = float(last) if last else np.inf
    except ValueError:
        t0 = t1 = np.nan
    if not colon or not t0 < t1:
        raise UserError(f"--window {text!r}: expected T0:T1 in s with T0 < T1 (either may be left out)")
    return t0, t1


def _channels(columns: list[str], patterns: tuple[str, ...]) -> list[str]:
    return [c for c in columns if not c.endswith("_true") and any(fnmatch.fnmatchcase(c, p) for p in patterns)]


def modes_from_log(path: str, model_path: str | None = None, window: tuple[float, float] | None = None,
                   channels: tuple[str, ...] = DEFAULT_CHANNELS, order: int = 40, min_hz: float = 0.5,
                   max_hz: float | None = None) -> dict:
    """The identified and the model's modes of the run log at `path` (keys in MODES_FROM_LOG_HELP)."""
    header, rows = read_run(path)
    columns = header["columns"]
    if "t" not in columns:
        raise UserError(f"{path}: no time column t")
    t = rows[:, columns.index("t")]
    model = load_model(model_path) if model_path else _logged_model(path, header)
    asm = assemble(model)
    joints = asm.layout.joint_names
    missing = [f"q_{j}" for j in joints if f"q_{j}" not in columns]
    if missing:
        raise UserError(f"{path}: no joint angle column {missing[0]}: the pose the model is linearised at")
    braked = held_rows(columns, rows, joints)
    held = "braked"
    if window is None:
        window = braked_window(t, braked)
        if window is None:
            window, held = (float(t[0]), float(t[-1])), "controlled"
    sel = (t >= window[0]) & (t <= window[1])
    if held == "braked" and not np.all(braked[sel]):
        held = "controlled"
    names = _channels(columns, channels)
    if not names:
        raise UserError(f"{path}: no measured channel matches {', '.join(channels)}; "
                        f"the log has {', '.join(c for c in columns if c.startswith(('imu_', 'strain_'))) or 'none'}")
    if sel.sum() < 2:
        raise UserError(f"{path}: the window {window[0]:g} .. {window[1]:g} s holds no samples "
                        f"(the run spans {t[0]:g} .. {t[-1]:g} s)")
    dt = float(np.median(np.diff(t[sel])))
    found = identify_modes(rows[sel][:, [columns.index(c) for c in names]], dt, order, min_hz, max_hz)
    pose = rows[sel][:, [columns.index(f"q_{j}") for j in joints]].mean(axis=0)
    f_model, zeta_model = locked_modes_at(asm, pose)
    return {"log": str(path), "model": model_path or header.get("config"), "window_s": [float(t[sel][0]),
            float(t[sel][-1])], "joints": held, "channels": names, "pose_rad": pose.tolist(),
            "identified": [m.as_dict() for m in found],
            "model_modes": [{"frequency_hz": float(f), "damping_ratio": float(z)} for f, z in zip(f_model, zeta_model)],
            "pairs": _pairs(found, f_model, zeta_model)}


def locked_modes_at(asm, joint_angles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The locked arm's damped frequencies [Hz] and damping ratios at rest at these joint angles."""
    pos = asm.pos0.copy()
    pos[:len(joint_angles)] = joint_angles
    return locked_modes_hz(asm, rest_state(asm, pos)[0])


def _logged_model(path: str, header: dict):
    text = header.get("config_text")
    if not text:
        raise UserError(f"{path}: the log carries no model (config_text); give one with --model")
    return load_model_from_string(text, header.get("config") or Path(path).name)


def _pairs(found: list[IdentifiedMode], f_model: np.ndarray, zeta_model: np.ndarray) -> list[dict]:
    """Each identified mode with the model mode nearest in frequency, and their differences in %."""
    out = []
    for m in found:
        if len(f_model) == 0:
            break
        k = int(np.argmin(np.abs(np.log(f_model / m.frequency_hz))))
        out.append({"identified_hz": m.frequency_hz, "model_hz": float(f_model[k]),
                    "frequency_diff_pct": 100.0 * (m.frequency_hz / f_model[k] - 1.0),
                    "identified_damping": m.damping_ratio, "model_damping": float(zeta_model[k]),
                    "damping_diff_pct": 100.0 * (m.damping_ratio / zeta_model[k] - 1.0) if zeta_model[k] > 0 else None,
                    "share": m.share})
    return out


MODES_FROM_LOG_HELP = """\
hil modes --from-log RUN identifies the arm's modes from the run's measured vibration (eigensystem
realisation with a stabilisation diagram on the IMU and strain channels) and prints them beside
the model's (the log's own preset, or --model) linearised at the window's mean pose, joints
locked. Window: --window T0:T1, else the longest stretch with every brake closed and holding (a
brake stop), else the whole run (the closed loop's modes: "joints": "controlled").
--json keys: log, model, window_s, joints (braked or controlled), channels, pose_rad,
  identified (frequency_hz, damping_ratio, share: of the window's response energy),
  model_modes (frequency_hz, damping_ratio), pairs (each identified mode with the nearest model
  mode: identified_hz, model_hz, frequency_diff_pct, identified_damping, model_damping,
  damping_diff_pct, share)."""


def format_modes_from_log(r: dict) -> str:
    lines = [f"{r['log']}: {r['window_s'][0]:.3f} .. {r['window_s'][1]:.3f} s, joints {r['joints']}, "
             f"channels {', '.join(r['channels'])}",
             f"model {r['model']} linearised at q = {', '.join(f'{q:.4f}' for q in r['pose_rad'])} rad, joints locked"]
    if r["joints"] == "controlled":
        lines.append("note: the joints were under control in this window; the identified modes are the closed "
                     "loop's, the model's are the locked arm's")
    if not r["pairs"]:
        lines.append("no mode identified (nothing rings above the noise in the window)")
        return "\n".join(lines)
    lines.append(f"{'identified Hz':>14} {'model Hz':>10} {'diff %':>8} {'zeta':>8} {'model zeta':>10} "
                 f"{'diff %':>8} {'share':>6}")
    for p in r["pairs"]:
        dz = "" if p["damping_diff_pct"] is None else f"{p['damping_diff_pct']:+8.1f}"
        lines.append(f"{p['identified_hz']:14.4f} {p['model_hz']:10.4f} {p['frequency_diff_pct']:+8.3f} "
                     f"{p['identified_damping']:8.5f} {p['model_damping']:10.5f} {dz:>8} {p['share']:6.3f}")
    return "\n".join(lines)
