"""Verdicts: a run log judged against a firmware's own targets (hil.logs.targets), and the tip
metrics every run reports.

A verdict is ``{"name", "description", "value", "limit", "unit", "passed"}`` (the run summary's
``"verdicts"``); `value` is None when the run gives nothing to measure (no settling, no fault
injected, no current channel), and such a verdict fails.

Settling: the final position is the mean over the last `final_window_s` of the run; the tip has
settled at the first instant after which it stays within the band around it to the end, and only
if that stretch is longer than the final window itself. A slow sway that is still going at the
end of the run (wider than the band) therefore never settles, however slowly it moves.
"""
from __future__ import annotations

import numpy as np

from hil.logs.runlog import RunLog
from hil.logs.targets import Targets

TIP = ("tip_x", "tip_y", "tip_z")
RESIDUAL_WINDOW_S = 1.0
DEFAULT_BAND_M = 2e-4


def verdict(name: str, description: str, value: float | None, limit: float | None, unit: str,
            passed: bool | None = None) -> dict:
    """One verdict; passed defaults to value <= limit (False without a value)."""
    if passed is None:
        passed = value is not None and limit is not None and value <= limit
    return {"name": name, "description": description, "value": None if value is None else float(value),
            "limit": None if limit is None else float(limit), "unit": unit, "passed": bool(passed)}


def final_value(t: np.ndarray, x: np.ndarray, window_s: float) -> np.ndarray:
    """The mean of x over the last window_s of the run."""
    return x[t >= t[-1] - window_s].mean(axis=0)


def settled_at(t: np.ndarray, x: np.ndarray, band: float, from_s: float, window_s: float) -> float | None:
    """The first time >= from_s after which |x - final| <= band to the end; None if x never
    settles (outside the band within the final window, or the run ends before from_s)."""
    offset = x - final_value(t, x, window_s)
    deviation = np.abs(offset) if offset.ndim == 1 else np.linalg.norm(offset, axis=1)
    after = t >= from_s
    if not after.any():
        return None
    outside = np.flatnonzero(after & (deviation > band))
    if not outside.size:
        return float(t[after][0])
    if outside[-1] + 1 >= len(t):
        return None
    t_settled = float(t[outside[-1] + 1])
    return t_settled if t[-1] - t_settled > window_s else None


def tip_metrics(log: RunLog, band_m: float = DEFAULT_BAND_M, window_s: float = 0.1) -> dict:
    """What the tip did, judged against nothing but itself: residual vibration (peak to peak over
    the last second), its final position, and since when it stays within band_m of it."""
    t = log.t
    if len(t) < 2:
        return {}
    tip = np.column_stack([log.column(c) for c in TIP])
    last = tip[t >= t[-1] - RESIDUAL_WINDOW_S]
    final = final_value(t, tip, window_s)
    outside = np.flatnonzero(np.linalg.norm(tip - final, axis=1) > band_m)
    return {"residual_pp_mm": float(np.linalg.norm(last.max(axis=0) - last.min(axis=0)) * 1e3),
            "final_m": final.tolist(), "band_m": band_m,
            "settled_at_s": settled_at(t, tip, band_m, float(t[0]), window_s),
            "last_outside_band_s": float(t[outside[-1]]) if outside.size else None}


def evaluate(targets: Targets, log: RunLog, joints: list[str]) -> list[dict]:
    """Every verdict the targets ask for, in a fixed order."""
    out: list[dict] = []
    t = log.t
    if len(t) < 2:
        return [verdict("run", "the run logged fewer than two cycles", None, None, "", False)]
    out += _setpoints(targets, log, t, joints)
    out += _tip(targets, log, t)
    out += _peaks(log, targets.max_torque_N_m, joints, "tau_{}", "max_torque", "N m", "drive torque")
    out += _peaks(log, targets.max_current_A, joints, "cur_{}_true", "max_current", "A", "motor current")
    if targets.safe_state_within_s is not None:
        out.append(_safe_state(log, targets.safe_state_within_s))
    return out


def _limit(limits: float | dict[str, float], joint: str) -> float | None:
    return limits.get(joint) if isinstance(limits, dict) else limits


def _setpoints(targets: Targets, log: RunLog, t: np.ndarray, joints: list[str]) -> list[dict]:
    out = []
    for joint, goal in targets.setpoints_rad.items():
        tol = _limit(targets.tolerance_rad, joint)
        name = f"setpoint_{joint}"
        if joint not in joints:
            out.append(verdict(name, f"no joint {joint!r} in the arm (joints: {', '.join(joints)})", None, tol, "rad"))
            continue
        q = final_value(t, log.column(f"q_{joint}"), targets.final_window_s)
        out.append(verdict(name, f"{joint} ends {q - goal:+.5f} rad from its set-point {goal:g} rad "
                                 f"(final angle {q:.5f} rad)", abs(q - goal), tol, "rad"))
    return out


def _tip(targets: Targets, log: RunLog, t: np.ndarray) -> list[dict]:
    out = []
    tip = np.column_stack([log.column(c) for c in TIP])
    start = targets.settling_from_s
    if targets.settling_band_m is not None:
        at = settled_at(t, tip, targets.settling_band_m, start, targets.final_window_s)
        text = (f"the tip stays within {targets.settling_band_m * 1e3:g} mm of its final position from "
                f"t = {at:.3f} s on" if at is not None else
                f"the tip does not settle within {targets.settling_band_m * 1e3:g} mm of its final position "
                "before the run ends")
        out.append(verdict("settling_time", f"{text} (counted from {start:g} s)",
                           None if at is None else at - start, targets.settling_time_s, "s"))
    if targets.max_tip_deflection_m is not None:
        after = t >= start
        deviation = np.linalg.norm(tip[after] - final_value(t, tip, targets.final_window_s), axis=1)
        peak = float(deviation.max()) if deviation.size else None
        out.append(verdict("max_tip_deflection", f"largest distance of the tip from its final position after "
                                                 f"{start:g} s", peak, targets.max_tip_deflection_m, "m"))
    return out


def _peaks(log: RunLog, limits, joints: list[str], column: str, name: str, unit: str, what: str) -> list[dict]:
    if limits is None:
        return []
    out = []
    for joint in (limits if isinstance(limits, dict) else joints):
        col = column.format(joint)
        if not log.has(col):
            out.append(verdict(f"{name}_{joint}", f"no {what} of {joint} in the log (column {col})", None,
                               _limit(limits, joint), unit))
            continue
        peak = float(np.abs(log.column(col)).max())
        out.append(verdict(f"{name}_{joint}", f"largest |{what}| of {joint}", peak, _limit(limits, joint), unit))
    return out


def _safe_state(log: RunLog, within_s: float) -> dict:
    faults = [e for e in log.events if e["event"] == "inject"]
    if not faults:
        return verdict("safe_state", "no fault was injected, so no safe state to reach", None, within_s, "s")
    t_fault = float(faults[0]["t"])
    trips = [float(e["t"]) for e in log.events if e["event"] == "watchdog_tripped" and e["t"] >= t_fault]
    if not trips:
        return verdict("safe_state", f"the drives never entered their safe state after the fault at {t_fault:.3f} s",
                       None, within_s, "s")
    return verdict("safe_state", f"the drives' safe state {trips[0] - t_fault:.3f} s after the fault "
                                 f"{faults[0].get('fault', '')} at {t_fault:.3f} s", trips[0] - t_fault, within_s, "s")
