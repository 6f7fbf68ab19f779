"""A finished run judged: whether it failed as a run, and its verdicts against the firmware's targets.

A run fails (it proves nothing about the firmware) when the firmware process exited before the
end, no valid command came within the start timeout, no cycle ran, or the link could not carry
the frames (frames the emulator could not send, except those a firmware left unread after it fell
silent in lockstep). `hil run` exits non-zero and the test harness
raises on any of these; the verdicts are judged only on a run that did not fail.
"""
from __future__ import annotations

from pathlib import Path

from hil.logs.targets import Targets
from hil.logs.verdicts import evaluate, tip_metrics


def failures(summary: dict) -> list[str]:
    """Why the run failed as a run, one reason per entry; [] for a valid run."""
    out = [summary["failed"]] if summary.get("failed") else []
    if summary["cycles"] == 0 and not out:
        out.append("the run made no cycle")
    dropped = summary["link"].get("tx_dropped", 0) - summary.get("lockstep", {}).get("dropped_while_silent", 0)
    if dropped:
        out.append(f"link: {dropped} frames could not be sent (tx_dropped): the firmware's end of the link "
                   "is not open, or it does not read")
    return out


def judge(summary: dict, log_path: str | Path, joints: list[str], targets: Targets | None) -> None:
    """Add the tip metrics (`"tip_metrics"`) and, with targets, `"targets"`, `"targets_file"` and
    `"verdicts"` to the summary: passes over the log in constant memory (hil.logs.streaming)."""
    summary["tip_metrics"] = tip_metrics(log_path)
    if targets is not None:
        summary["targets"] = targets.as_dict()
        summary["targets_file"] = targets.source
        summary["verdicts"] = evaluate(targets, log_path, joints)


def all_passed(summary: dict) -> bool:
    """True when every verdict passed (also when there were none)."""
    return all(v["passed"] for v in summary.get("verdicts", []))
