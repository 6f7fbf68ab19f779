"""Verdicts: a run log judged against a firmware's own targets (hil.logs.targets), and the tip
metrics every run reports.

A verdict is ``{"name", "description", "value", "limit", "unit", "passed"}`` (the run summary's
``"verdicts"``), with ``"requirement": {"id", "text"}`` where the targets trace it to one; `value`
is None when the run gives nothing to measure (no settling, no fault injected, no current
channel), and such a verdict fails. A temporal assertion's value is its robustness (how far inside
its formula the run stays, hil.logs.temporal), its limit 0.

Settling: the final position is the mean over the last `final_window_s` of the run; the tip has
settled at the first instant after which it stays within the band around it to the end, and only
if that stretch is longer than the final window itself. A slow sway that is still going at the
end of the run (wider than the band) therefore never settles, however slowly it moves.

A log is a file, streamed in constant memory (hil.logs.streaming: one pass for the final values,
one for the rest), or a RunLog in memory.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from hil.logs.streaming import TIP, Log, Peak, Settling, open_log, scan, tail
from hil.logs.recordings import read_checked
from hil.logs.targets import Targets
from hil.logs import temporal
from hil.logs.temporal import Trace, first_violation, parse, robustness, satisfied, unit_of
from hil.logs.units import describe

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
    """The first time >= from_s after which |x - final| <= band to the end (x in memory); None if
    x never settles (outside the band within the final window, or the run ends before from_s)."""
    x = x.reshape(len(t), -1)
    settling = Settling(final_value(t, x, window_s), band, from_s)
    settling.feed(np.column_stack([t, x]))
    return settling.settled_at(window_s)


def tip_metrics(log: Log, band_m: float = DEFAULT_BAND_M, window_s: float = 0.1) -> dict:
    """What the tip did, judged against nothing but itself: residual vibration (peak to peak over
    the last second), its final position, and since when it stays within band_m of it."""
    end = tail(log, TIP, max(RESIDUAL_WINDOW_S, window_s))
    if not len(end):
        return {}
    t = end[:, 0]
    last = end[t >= t[-1] - RESIDUAL_WINDOW_S, 1:]
    final = final_value(t, end[:, 1:], window_s)
    settling = Settling(final, band_m)
    rows, _ = scan(log, [(TIP, settling.feed)])
    if rows < 2:
        return {}
    return {"residual_pp_mm": float(np.linalg.norm(last.max(axis=0) - last.min(axis=0)) * 1e3),
            "final_m": final.tolist(), "band_m": band_m, "settled_at_s": settling.settled_at(window_s),
            "last_outside_band_s": settling.last_outside_s}


def evaluate(targets: Targets, log: Log, joints: list[str]) -> list[dict]:
    """Every verdict the targets ask for, in a fixed order."""
    goals = {j: g for j, g in targets.setpoints_rad.items() if j in joints}
    end = tail(log, [*TIP, *(f"q_{j}" for j in goals)], targets.final_window_s)
    if not len(end):
        return [_too_short()]
    final = end[:, 1:].mean(axis=0)
    tip = Settling(final[:3], targets.settling_band_m or np.inf, targets.settling_from_s)
    columns = open_log(log).columns
    torques = _peaks(targets.max_torque_N_m, joints, "tau_{}", columns)
    currents = _peaks(targets.max_current_A, joints, "cur_{}_true", columns)
    rows, events = scan(log, [(TIP, tip.feed)] + [((c,), p.feed) for c, p in (*torques.values(), *currents.values())
                                                   if p is not None])
    if rows < 2:
        return [_too_short()]
    out = _setpoints(targets, joints, dict(zip(goals, final[3:])))
    out += _tip(targets, tip)
    out += _peak_verdicts(targets.max_torque_N_m, torques, "max_torque", "N m", "drive torque")
    out += _peak_verdicts(targets.max_current_A, currents, "max_current", "A", "motor current")
    if targets.safe_state_within_s is not None:
        out.append(_safe_state(events, targets.safe_state_within_s))
    out += record_band(targets.within_record, log, columns) + assertions(targets, log, columns)
    return traced(targets, out)


# the target key each verdict comes from, by the verdict's name (or its prefix before a joint or channel)
TARGET_OF = {"setpoint": "setpoints_rad", "settling_time": "settling_time_s", "max_tip_deflection": "max_tip_deflection_m",
             "max_torque": "max_torque_N_m", "max_current": "max_current_A", "safe_state": "safe_state_within_s",
             "record": "within_record", "rejected_commands": "max_rejected_commands",
             "watchdog_trips": "max_watchdog_trips", "counter_rejections": "max_counter_rejections",
             "lost_commands": "max_lost_commands", "missed_cycles": "max_missed_cycles",
             "command_age_p99": "max_command_age_p99_s", "bus_errors": "max_bus_errors"}


def traced(targets: Targets, verdicts: list[dict]) -> list[dict]:
    """`verdicts` with the requirement their target traces to (``[verdict.requirements]``), where one is given."""
    for v in verdicts:
        key = next((key for prefix, key in TARGET_OF.items()
                    if v["name"] == prefix or v["name"].startswith(prefix + "_")), None)
        if key in targets.requirements and "requirement" not in v:
            v["requirement"] = dict(targets.requirements[key])
    return verdicts


def assertions(targets: Targets, log: Log, columns: list[str]) -> list[dict]:
    """One verdict per temporal assertion (hil.logs.temporal): its robustness, and the first violation's time."""
    if not targets.assertions:
        return []
    trees = [parse(a["formula"]) for a in targets.assertions]
    wanted = list(dict.fromkeys(c for tree in trees for c in temporal.columns(tree) if c in columns and c != "t"))
    blocks: list[np.ndarray] = []
    scan(log, [(wanted, blocks.append)])
    rows = np.concatenate(blocks) if blocks else np.zeros((0, 1 + len(wanted)))
    t = rows[:, 0]
    values = {"t": t, **{c: rows[:, 1 + k] for k, c in enumerate(wanted)}}
    last = t >= t[-1] - targets.final_window_s if len(t) else np.zeros(0, bool)
    trace = Trace(t, values, {c: float(v[last].mean()) for c, v in values.items()} if len(t) else {})
    return [_assertion(a, tree, trace, columns) for a, tree in zip(targets.assertions, trees)]


def _assertion(a: dict, tree: temporal.Node, trace: Trace, columns: list[str]) -> dict:
    name, formula = f"assert_{a['name']}", a["formula"]
    missing = [c for c in temporal.columns(tree) if c not in columns and c != "t"]
    unit = unit_of(tree, {c: describe(c)[0] for c in temporal.columns(tree)})
    if missing or len(trace.t) < 2:
        why = f"the log has no column {missing[0]}" if missing else "the run logged fewer than two cycles"
        out = verdict(name, f"{formula}: {why}", None, 0.0, unit, False)
    else:
        rho, held = float(robustness(tree, trace)[0]), bool(satisfied(tree, trace)[0] == 1.0)
        at = first_violation(tree, trace)
        text = (f"{formula}: holds (robustness {rho:.4g})" if held
                else f"{formula}: first violated at t = {at:.3f} s (robustness {rho:.4g})")
        out = verdict(name, text, rho, 0.0, unit, held)
        out["first_violation_s"] = at
    if "requirement" in a:
        out["requirement"] = dict(a["requirement"])
    return out


class _Band:
    """A channel of the run against a recording: the largest deviation, where it is, the first beyond the limit."""

    def __init__(self, t: np.ndarray, v: np.ndarray, limit: float, window: tuple[float, float]):
        self.t, self.v, self.limit = t, v, limit
        self.lo, self.hi = max(window[0], t[0]), min(window[1], t[-1])
        self.largest, self.at, self.first, self.compared = 0.0, None, None, 0

    def feed(self, rows: np.ndarray) -> None:
        inside = (rows[:, 0] >= self.lo) & (rows[:, 0] <= self.hi)
        if not inside.any():
            return
        t, run = rows[inside, 0], rows[inside, 1]
        deviation = np.abs(run - np.interp(t, self.t, self.v))
        deviation[np.isnan(deviation)] = np.inf
        self.compared += len(t)
        k = int(np.argmax(deviation))
        if deviation[k] > self.largest or self.at is None:
            self.largest, self.at = float(deviation[k]), float(t[k])
        beyond = np.flatnonzero(deviation > self.limit)
        if self.first is None and beyond.size:
            self.first = float(t[beyond[0]])


def record_band(spec: dict | None, log: Log, columns: list[str]) -> list[dict]:
    """One verdict per channel of a within_record target (hil.logs.targets): the run's channel within its
    tolerance of the recording's, interpolated at the run's times, over the window both cover."""
    if spec is None:
        return []
    recorded = read_checked(Path(spec["file"]), list(spec["tolerance"]), spec["time"])
    name = Path(spec["file"]).name
    out, bands = [], {}
    for channel, limit in spec["tolerance"].items():
        if channel not in columns:
            out.append(verdict(f"record_{channel}", f"the run has no channel {channel} to compare with {name}", None,
                               limit, describe(channel)[0]))
            continue
        bands[channel] = _Band(*recorded[channel], limit, tuple(spec["window_s"]))
    scan(log, [((c,), b.feed) for c, b in bands.items()])
    for channel, b in bands.items():
        if not b.compared:
            out.append(verdict(f"record_{channel}", f"{channel}: the run and {name} share no time in the window",
                               None, b.limit, describe(channel)[0]))
            continue
        beyond = "" if b.first is None else f"; first beyond {b.limit:g} at t = {b.first:.3f} s"
        out.append(verdict(f"record_{channel}", f"{channel} stays within {b.limit:g} of {name}: largest deviation "
                                                f"{b.largest:.3g} at t = {b.at:.3f} s over {b.compared} samples{beyond}",
                           b.largest, b.limit, describe(channel)[0]))
    return out


# a command frame rejected for what it carries (the firmware's doing); the rolling-counter check's rejections are
# counted apart: frames lost on a busy link (a receive budget spent) make the counter jump and resynchronise too
REJECTION_CAUSES = ("crc", "range", "nan", "length")


def link_health(targets: Targets, summary: dict) -> list[dict]:
    """The verdicts on the link's counters in the run summary, one per link-health key the targets give."""
    commands, link = summary.get("commands") or {}, summary.get("link") or {}
    rejected = commands.get("rejected") or {}
    by_cause = ", ".join(f"{rejected[c]} {c}" for c in REJECTION_CAUSES if rejected.get(c))
    n_rejected = sum(int(rejected.get(c, 0)) for c in REJECTION_CAUSES)
    timing = summary.get("firmware_timing") or {}
    watchdog = summary.get("watchdog") or {}
    trips = [t for kind, t in watchdog.get("events") or [] if kind == "tripped"]
    bus_errors = {k: int(link.get(k, 0)) for k in ("rx_crc_errors", "rx_framing_errors", "rx_garbage_bytes",
                                                   "rx_overruns", "tx_dropped")}
    dropped_silent = (summary.get("lockstep") or {}).get("dropped_while_silent", 0)
    bus_errors["tx_dropped"] = max(0, bus_errors["tx_dropped"] - dropped_silent)
    age = (timing.get("cmd_age_us") or {}).get("p99")
    checks = [
        ("max_rejected_commands", "rejected_commands", n_rejected, "",
         f"command frames rejected ({by_cause})" if by_cause else "command frames rejected"),
        ("max_watchdog_trips", "watchdog_trips", int(watchdog.get("trips", 0)), "",
         "watchdog trips (command timeouts)" + (f", the first at t = {trips[0]:.3f} s" if trips else "")),
        ("max_counter_rejections", "counter_rejections", int(rejected.get("counter", 0)), "",
         "command frames rejected by the rolling-counter check (a repeat, or a jump until it resynchronises)"),
        ("max_lost_commands", "lost_commands", int(commands.get("lost", 0)), "",
         "command frames lost (gaps in the rolling counter)"),
        ("max_missed_cycles", "missed_cycles", timing.get("missed_cycles"), "",
         "cycles stepped without a fresh command"),
        ("max_command_age_p99_s", "command_age_p99", None if age is None else age * 1e-6, "s",
         "99th percentile of the age of the command each cycle applied"),
        ("max_bus_errors", "bus_errors", sum(bus_errors.values()), "",
         "link errors (" + ", ".join(f"{v} {k}" for k, v in bus_errors.items() if v) + ")"
         if any(bus_errors.values()) else "link errors"),
    ]
    return traced(targets, [verdict(name, text, value, getattr(targets, key), unit)
                            for key, name, value, unit, text in checks if getattr(targets, key) is not None])


def _too_short() -> dict:
    return verdict("run", "the run logged fewer than two cycles", None, None, "", False)


def _limit(limits: float | dict[str, float], joint: str) -> float | None:
    return limits.get(joint) if isinstance(limits, dict) else limits


def _setpoints(targets: Targets, joints: list[str], final_q: dict[str, float]) -> list[dict]:
    out = []
    for joint, goal in targets.setpoints_rad.items():
        tol = _limit(targets.tolerance_rad, joint)
        name = f"setpoint_{joint}"
        if joint not in joints:
            out.append(verdict(name, f"no joint {joint!r} in the arm (joints: {', '.join(joints)})", None, tol, "rad"))
            continue
        q = float(final_q[joint])
        out.append(verdict(name, f"{joint} ends {q - goal:+.5f} rad from its set-point {goal:g} rad "
                                 f"(final angle {q:.5f} rad)", abs(q - goal), tol, "rad"))
    return out


def _tip(targets: Targets, tip: Settling) -> list[dict]:
    out = []
    start = targets.settling_from_s
    if targets.settling_band_m is not None:
        at = tip.settled_at(targets.final_window_s)
        text = (f"the tip stays within {targets.settling_band_m * 1e3:g} mm of its final position from "
                f"t = {at:.3f} s on" if at is not None else
                f"the tip does not settle within {targets.settling_band_m * 1e3:g} mm of its final position "
                "before the run ends")
        out.append(verdict("settling_time", f"{text} (counted from {start:g} s)",
                           None if at is None else at - start, targets.settling_time_s, "s"))
    if targets.max_tip_deflection_m is not None:
        out.append(verdict("max_tip_deflection", f"largest distance of the tip from its final position after "
                                                 f"{start:g} s", tip.peak, targets.max_tip_deflection_m, "m"))
    return out


def _peaks(limits, joints: list[str], column: str, columns: list[str]) -> dict[str, tuple[str, Peak | None]]:
    """Per joint with a limit: its column and a Peak tracker (None when the log lacks the column)."""
    if limits is None:
        return {}
    picked = {joint: column.format(joint) for joint in (limits if isinstance(limits, dict) else joints)}
    return {joint: (col, Peak() if col in columns else None) for joint, col in picked.items()}


def _peak_verdicts(limits, peaks: dict[str, tuple[str, Peak | None]], name: str, unit: str, what: str) -> list[dict]:
    out = []
    for joint, (col, peak) in peaks.items():
        if peak is None:
            out.append(verdict(f"{name}_{joint}", f"no {what} of {joint} in the log (column {col})", None,
                               _limit(limits, joint), unit))
        else:
            out.append(verdict(f"{name}_{joint}", f"largest |{what}| of {joint}", peak.value, _limit(limits, joint),
                               unit))
    return out


def _safe_state(events: list[dict], within_s: float) -> dict:
    faults = [e for e in events if e["event"] == "inject"]
    if not faults:
        return verdict("safe_state", "no fault was injected, so no safe state to reach", None, within_s, "s")
    t_fault = float(faults[0]["t"])
    trips = [float(e["t"]) for e in events if e["event"] == "watchdog_tripped" and e["t"] >= t_fault]
    if not trips:
        return verdict("safe_state", f"the drives never entered their safe state after the fault at {t_fault:.3f} s",
                       None, within_s, "s")
    return verdict("safe_state", f"the drives' safe state {trips[0] - t_fault:.3f} s after the fault "
                                 f"{faults[0].get('fault', '')} at {t_fault:.3f} s", trips[0] - t_fault, within_s, "s")
