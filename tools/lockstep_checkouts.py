"""The lockstep logs of two checkouts, compared bit for bit: whether a change of the code moved anything the
emulator computes. For each run below, each checkout runs `hil run` with its own code (its folder first on
PYTHONPATH, its own numba cache) in lockstep against the reference firmware over a serial pty pair; the
two logs are then compared column by column, every column but the wall-clock timings (*_us), with no
tolerance (hil.logs.compare).

Runs: make run's joint PID and vibration-suppression runs, and three fault scenarios: the elbow encoder's
signal loss with the brakes as the safe state, the bus faults, the combined scenario.

    python -m tools.lockstep_checkouts PATH_A PATH_B [--duration 3] [--runs pid,vs,...] [--json]

Exit status 0 when every run is bit-identical, 1 when any differs, 2 when a run could not be made.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

RUNS = {
    "pid": [],
    "vs": ["--vibration-suppression"],
    "encoder_signal_loss": ["--scenario", "encoder_signal_loss", "--safe-state", "brake", "--watchdog", "0.02"],
    "bus_faults": ["--scenario", "bus_faults"],
    "combined": ["--scenario", "combined"],
}
MAX_DURATION_S = 30.0


def run_log(checkout: Path, run: str, duration: float, out: Path) -> None:
    """One lockstep run of `checkout`'s own code into the log `out` (RuntimeError with its output if it fails
    to make a log)."""
    if not (checkout / "hil").is_dir():
        raise RuntimeError(f"{checkout}: not a checkout of the emulator (no hil/ folder)")
    env = dict(os.environ, PYTHONPATH=str(checkout), NUMBA_CACHE_DIR=str(checkout / ".numba_cache"))
    cmd = [sys.executable, "-m", "hil", "run", "ella", "--bus", "serial_frame", "--link", "pty", "--spawn-firmware",
           "--mode", "lockstep", "--duration", str(duration), "--move-time", "1.0", "--log", str(out), *RUNS[run]]
    proc = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True, timeout=600)
    if not out.exists():
        raise RuntimeError(f"{checkout}: {run}: no log (exit status {proc.returncode}): {proc.stderr[-800:]}")


def compare(a: Path, b: Path) -> dict:
    from hil.logs.compare import DEFAULT_IGNORE, compare_runs
    from hil.logs.runlog import read_run

    ha, ra = read_run(a)
    hb, rb = read_run(b)
    result = compare_runs(ha["columns"], ra, hb["columns"], rb, 0.0, [], DEFAULT_IGNORE, ())
    return {"identical": result.passed, "rows": [len(ra), len(rb)], "differing": result.as_dict().get("failed", [])}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.lockstep_checkouts", description=__doc__.split("\n\n")[0])
    p.add_argument("a", type=Path, help="a checkout (e.g. a git worktree of the version before)")
    p.add_argument("b", type=Path, help="another checkout (e.g. .)")
    p.add_argument("--duration", type=float, default=3.0, help=f"simulated seconds per run (at most {MAX_DURATION_S:g})")
    p.add_argument("--runs", default=",".join(RUNS), help=f"comma-separated subset of {','.join(RUNS)}")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    runs = [r for r in args.runs.split(",") if r]
    unknown = [r for r in runs if r not in RUNS]
    if unknown or not 0 < args.duration <= MAX_DURATION_S:
        p.error(f"--runs: unknown {unknown}" if unknown else f"--duration: expected 0 < s <= {MAX_DURATION_S:g}")
    report = {}
    with tempfile.TemporaryDirectory(prefix="lockstep-checkouts-") as tmp:
        try:
            for run in runs:
                logs = [Path(tmp) / f"{run}-{side}.msgpack" for side in ("a", "b")]
                for checkout, log in zip((args.a.resolve(), args.b.resolve()), logs):
                    run_log(checkout, run, args.duration, log)
                report[run] = compare(*logs)
        except RuntimeError as exc:
            print(f"lockstep_checkouts: {exc}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(report))
    else:
        for run, r in report.items():
            verdict = "bit-identical" if r["identical"] else f"DIFFERS in {', '.join(r['differing'][:6])}"
            print(f"{run:22s} {r['rows'][0]} / {r['rows'][1]} rows: {verdict}")
    return 0 if all(r["identical"] for r in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
