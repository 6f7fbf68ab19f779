"""A finished run judged: whether it failed as a run, and its verdicts against the firmware's targets.

A run fails (it proves nothing about the firmware) when the firmware process exited before the
end, no valid command came within the start timeout, no cycle ran, the plant diverged (unless the
scenario expects it), or the link could not carry the frames (frames the emulator could not send, except those a firmware left unread after it fell
silent in lockstep). `hil run` exits non-zero and the test harness
raises on any of these; the verdicts are judged only on a run that did not fail.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from hil.dynamics.plant import Plant
from hil.kernels.layout import JOINT_PRESCRIBED
from hil.logs.streaming import Steps, scan
from hil.logs.targets import Targets
from hil.model.linearize import motor_inertias
from hil.logs.verdicts import evaluate, link_health, tip_metrics


def failures(summary: dict) -> list[str]:
    """Why the run failed as a run, one reason per entry; [] for a valid run."""
    out = [summary["failed"]] if summary.get("failed") else []
    if summary["cycles"] == 0 and not out:
        out.append("the run made no cycle")
    diverged = summary.get("diverged")
    if diverged and not summary.get("divergence_expected"):
        out.append(f"the plant diverged at t = {diverged['t']:.3f} s (cycle {diverged['cycle']}): {diverged['detail']} "
                   "(a scenario that means to diverge it says expect_divergence = true)")
    dropped = summary["link"].get("tx_dropped", 0) - summary.get("lockstep", {}).get("dropped_while_silent", 0)
    if dropped:
        out.append(f"link: {dropped} frames could not be sent (tx_dropped): the firmware's end of the link "
                   "is not open, or it does not read")
    return out


def judge(summary: dict, log_path: str | Path, plant: Plant, period_s: float, targets: Targets | None) -> None:
    """Add the tip metrics (`"tip_metrics"`), the input hold's error (`"input_hold"`) and, with targets,
    `"targets"`, `"targets_file"` and `"verdicts"` to the summary of a run of `plant` with the period
    `period_s`: passes over the log in constant memory (hil.logs.streaming)."""
    summary["tip_metrics"] = tip_metrics(log_path)
    driven = np.flatnonzero(plant.km.drive[: plant.layout.n_joints] != JOINT_PRESCRIBED)
    summary["input_hold"] = input_hold(log_path, [plant.layout.joint_names[k] for k in driven],
                                       motor_inertias(plant.km, plant.layout, plant.asm.pos0)[driven], period_s)
    if targets is not None:
        targets = targets.with_link_defaults(faults_injected(summary))
        summary["targets"] = targets.as_dict()
        summary["targets_file"] = targets.source
        summary["verdicts"] = evaluate(targets, log_path, plant.layout.joint_names) + link_health(targets, summary)


def faults_injected(summary: dict) -> bool:
    """Whether the run injected a fault (plant, sensor or bus): the link's health is then the scenario's to judge."""
    faults = summary.get("faults") or {}
    return bool(faults.get("injections") or (faults.get("link") or {}).get("faults"))


def input_hold(log_path: str | Path, joints: list[str], inertias: np.ndarray, period_s: float) -> dict:
    """The zero-order hold's own error for the torques the plant received (tau_<joint>, held over each
    period as a DAC holds a command): physics the firmware lives with, not an integrator error. Within a
    period the held torque departs from the linear interpolation of the applied torques by at most the
    step to the next one, |dtau| = |tau_n+1 - tau_n|; over one period T that moves joint k's rate by about
    |dtau| T / (2 J_k) and its angle by about |dtau| T^2 / (6 J_k), J_k the inertia its drive meets at the
    initial pose (hil.model.linearize.motor_inertias): exact for a joint alone, an estimate on an arm
    whose other joints' steps also move it. `joints`: the torque-driven ones (a prescribed joint's torque
    moves nothing). Per joint: the largest and the rms step [N m] and the per-period rate [rad/s] and
    angle [rad] of the largest step."""
    columns = [f"tau_{j}" for j in joints]
    steps = Steps(len(columns))
    scan(log_path, [(columns, steps.feed)])
    J = np.asarray(inertias, float)
    return {"period_s": period_s,
            "joints": {j: {"largest_step_N_m": float(steps.largest[k]), "rms_step_N_m": float(steps.rms[k]),
                           "rate_bound_rad_s": float(steps.largest[k] * period_s / (2 * J[k])),
                           "angle_bound_rad": float(steps.largest[k] * period_s ** 2 / (6 * J[k]))}
                       for k, j in enumerate(joints)}}


def all_passed(summary: dict) -> bool:
    """True when every verdict passed (also when there were none)."""
    return all(v["passed"] for v in summary.get("verdicts", []))
