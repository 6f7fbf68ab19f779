"""One campaign case, run where an engine puts it: `hil run` in its own process on this machine
(its link, a pty pair or UDP on 127.0.0.1, never leaves it), or a lockstep case of the reference firmware
in the worker's own process (hil.campaign.worker), judged, reduced to one results row.

The process boundary is what lets the campaign go on whatever a case does: a case that crashes
(the emulator, the firmware, a model the plant refuses) is a row with status "error" or
"run_failed" and its message; a case that hangs is killed, with its firmware, after the campaign's
`timeout_s` of wall-clock time (status "timeout"). Statuses: passed, failed (a verdict failed),
run_failed (the run proves nothing: hil.runtime.outcome), error, timeout.
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from hil.campaign.worker import in_process_argv

STATUSES = ("passed", "failed", "run_failed", "error", "timeout")
STDERR_LINES = 5


def safe_name(case_id: str) -> str:
    return case_id.replace("/", "__")


# `hil run|simulate ARGV` in this process within a timeout, from a folder: (summary, error, status)
Inside = Callable[[list[str], float, str], tuple]


def run_case(case: dict, settings: dict, inside: Inside | None = None) -> dict:
    """Run the case (hil.campaign.cases.Case.as_dict()) with the campaign's `settings`
    (hil.campaign.engine.settings): its results row. Never raises for what the case does. `inside`: how a
    case runs in this process (hil.cli.campaign_case.run_inside), for the cases that may (runs_inside);
    without it every case gets its own process."""
    started = time.monotonic()
    row = {"case_id": case["case_id"], "index": case["index"], "firmware": case["firmware"]["name"],
           "scenario": Path(case["scenario"]).stem, "sample": case["sample"], "seed": case["seed"],
           "worker": f"{socket.gethostname()}:{os.getpid()}"}
    row.update({f"param:{k}": _cell(v) for k, v in case["overrides"].items()})
    log = Path(settings["out"]) / "logs" / f"{safe_name(case['case_id'])}.msgpack"
    try:
        summary, error, status = _run(case, settings, log, inside)
    except Exception as exc:     # noqa: BLE001 - anything the case does is recorded, never raised
        summary, error, status = None, f"{type(exc).__name__}: {exc}", "error"
    row.update(metrics(summary) if summary else {})
    passed = status is None and all(v["passed"] for v in summary.get("verdicts", []))
    row["status"] = status or ("passed" if passed else "failed")
    row["error"] = error or ""
    row["passed"] = passed
    keep = settings["logs"] == "all" or (settings["logs"] == "failing" and not passed)
    if not keep or not log.exists():
        log.unlink(missing_ok=True)
        Path(str(log) + ".summary.json").unlink(missing_ok=True)
    row["log"] = str(log.relative_to(settings["out"])) if log.exists() else ""
    row["wall_s"] = time.monotonic() - started
    row["ended_unix_s"] = time.time()      # comparable between the workers of one machine
    row["worker_rss_mb"] = resident_mb()
    return row


def resident_mb(pid: int | str = "self") -> float:
    """A process's resident memory [MB] (by default this one's: a long-lived worker's after each case, which
    should stay flat)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def command(case: dict, settings: dict, model: Path, log: Path) -> list[str]:
    """The `hil run` command line of the case."""
    fw = case["firmware"]
    argv = [sys.executable, "-m", "hil", "run", str(model), "--bus", settings["bus"], "--mode", settings["mode"],
            "--duration", repr(settings["duration_s"]), "--seed", str(case["seed"]), "--log", str(log), "--json",
            "--link", _link(settings, case)]
    if case["scenario"] != "none":
        argv += ["--scenario", case["scenario"]]
    if settings["targets"]:
        argv += ["--targets", settings["targets"]]
    if fw["kind"] == "controller":
        return [sys.executable, "-m", "hil", "simulate", str(model), "--duration", repr(settings["duration_s"]),
                "--controller", fw["controller"], "--out", str(log)]
    if fw["kind"] == "reference":
        argv += ["--spawn-firmware", "--move-time", repr(fw["move_time_s"])]
        argv += ["--vibration-suppression"] if fw["vibration_suppression"] else []
        argv += ["--firmware-params", fw["params"]] if fw["params"] else []
    else:
        argv += ["--firmware", fw["command"]]
    return argv


def _link(settings: dict, case: dict) -> str:
    if settings["link"] == "pty":
        return "pty"
    return f"{settings['bus_kind']}:udp_loopback:c{os.getpid()}x{case['index']}"


def _run(case: dict, settings: dict, log: Path, inside: Inside | None) -> tuple[dict | None, str | None, str | None]:
    """(summary, error, status): status None for a run that was judged."""
    from hil.runtime.sysguard import exit_with_parent

    log.parent.mkdir(parents=True, exist_ok=True)
    model = Path(_case_folder()) / "model.toml"
    model.write_text(model_text(case, settings), encoding="utf-8")
    if inside is not None and runs_inside(case, settings):
        summary, error, status = inside(in_process_argv(command(case, settings, model, log)[3:]),
                                        settings["timeout_s"], settings["cwd"])
        if status is None and case["firmware"]["kind"] == "controller":
            summary = offline_summary(log, settings["targets"])
        return summary, error, status
    parent = os.getpid()      # a worker that dies takes its case's processes with it
    proc = subprocess.Popen(command(case, settings, model, log), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, cwd=settings["cwd"],
                            preexec_fn=lambda: exit_with_parent(parent))
    try:
        out, err = proc.communicate(timeout=settings["timeout_s"])
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return None, f"no result within timeout_s = {settings['timeout_s']:g} s (wall clock); killed", "timeout"
    if case["firmware"]["kind"] == "controller":
        if proc.returncode != 0:
            tail = " | ".join(err.strip().splitlines()[-STDERR_LINES:])
            return None, f"hil simulate exited with status {proc.returncode}: {tail}", "error"
        return offline_summary(log, settings["targets"]), None, None
    summary = _last_json(out)
    if summary is None:
        tail = " | ".join(err.strip().splitlines()[-STDERR_LINES:])
        return None, f"hil run exited with status {proc.returncode} without a summary: {tail}", "error"
    if summary.get("run_failures"):
        return summary, "; ".join(summary["run_failures"]), "run_failed"
    return summary, None, None


_folders: dict[tuple[int, int], str] = {}      # (process, thread) -> its folder for its cases' model files


def _case_folder() -> str:
    """This thread's folder for the model file of its case, one case after the other: made at its first case
    (the folders of workers killed before they could remove theirs removed then), removed when the process
    ends."""
    from hil.runtime.sysguard import remove_stale_folders, temp_folder

    key = (os.getpid(), threading.get_ident())       # a forked worker makes its own
    folder = _folders.get(key)
    if folder is None or not os.path.isdir(folder):
        remove_stale_folders("case")
        folder = _folders[key] = temp_folder("case")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def runs_inside(case: dict, settings: dict) -> bool:
    """Whether the case runs in its worker's own process (hil.campaign.worker): a lockstep case of the reference
    firmware, or an in-process controller's (`hil simulate --controller`), unless the campaign asks for a
    fresh process per case."""
    kind = case["firmware"]["kind"]
    return settings["in_process"] and (kind == "controller" or (kind == "reference" and settings["mode"] == "lockstep"))


def offline_summary(log: Path, targets: str | None) -> dict:
    """An offline run's log judged as `hil run` judges a run (hil.runtime.outcome.judge)."""
    from hil.logs.runlog import RunLog
    from hil.logs.targets import load_targets
    from hil.logs.verdicts import evaluate, tip_metrics

    run = RunLog.read(str(log))
    joints = [c[2:] for c in run.columns if c.startswith("q_")]
    summary = {"joints": joints, "q": [float(run.column(f"q_{j}")[-1]) for j in joints], "cycles": len(run.column("t")),
               "t_s": float(run.column("t")[-1]), "tip_metrics": tip_metrics(str(log))}
    if targets:
        summary["verdicts"] = evaluate(load_targets(targets), str(log), joints)
    return summary


def model_text(case: dict, settings: dict) -> str:
    """The case's model file: the preset with the case's overrides and the campaign's plan (hil.campaign.plan)."""
    pinned = (settings.get("plan") or {}).get("overrides", {})
    return preset(settings["arm"]).with_overrides({**case["overrides"], **pinned}, settings["arm"], validate=False)


@functools.lru_cache(maxsize=4)
def preset(path: str):
    """The campaign's preset, read once per worker process (its ranges were validated at load)."""
    from hil.campaign.overrides import Preset
    return Preset(path)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()


def _last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def metrics(summary: dict) -> dict:
    """The key numbers of a run: each verdict (passed, value), the final joint angles, the tip's
    settling and residual vibration, overruns, command age, watchdog trips, faults injected."""
    out: dict = {}
    for v in summary.get("verdicts", []):
        out[f"verdict:{v['name']}"] = bool(v["passed"])
        out[f"value:{v['name']}"] = v["value"]
        out[f"limit:{v['name']}"] = v["limit"]
        if v.get("requirement"):
            out[f"requirement:{v['name']}"] = v["requirement"]["id"]
    for joint, q in zip(summary.get("joints", []), summary.get("q", [])):
        out[f"q_final_rad:{joint}"] = float(q)
    tip = summary.get("tip_metrics") or {}
    out["tip_settled_at_s"] = tip.get("settled_at_s")
    out["tip_residual_pp_mm"] = tip.get("residual_pp_mm")
    age = (summary.get("firmware_timing") or {}).get("cmd_age_us") or {}
    out["cmd_age_p99_us"] = age.get("p99")
    out["cmd_age_max_us"] = age.get("max")
    out["missed_cycles"] = (summary.get("firmware_timing") or {}).get("missed_cycles")
    out["overruns"] = (summary.get("pacer") or {}).get("overruns")
    out["loop_s"] = (summary.get("pacer") or {}).get("elapsed_s")      # the case's own cycles
    out["watchdog_trips"] = (summary.get("watchdog") or {}).get("trips")
    out["cycles"] = summary["cycles"]
    out["t_s"] = float(summary["t_s"])
    out["faults_injected"] = (summary.get("faults") or {}).get("injections", 0)
    return out


def _cell(value):
    return json.dumps(value) if isinstance(value, (list, dict)) else value
