"""`hil replay` (the plant re-simulated from a run log) and `hil compare` (two runs, signal by signal)."""
from __future__ import annotations

import argparse
import json

from typing import TYPE_CHECKING

from hil.cli.registry import CliError, command

if TYPE_CHECKING:
    import numpy as np

EXIT_DIFFERENT = 1


def _check_replayable(path: str, header: dict, rows) -> None:
    """CliError for a log that has nothing to replay (no row) or whose time is not a finite increasing sequence:
    a verdict on it would be a verdict on nothing."""
    import numpy as np
    if len(rows) == 0:
        raise CliError(f"{path}: the log has no rows: nothing to replay")
    t = rows[:, header["columns"].index("t")] if "t" in header.get("columns", []) else None
    if t is None or not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0):
        raise CliError(f"{path}: the log's time column t is missing, not finite or not increasing: it cannot be "
                       "replayed")


def _replay_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("log", help="run log (.msgpack or .csv) of hil run")
    p.add_argument("--out", help="write the replayed states as a run log (.msgpack or .csv), e.g. for hil compare")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


@command("replay", "re-simulate the plant from a run log's drive torques and brakes; largest deviation from the "
         "logged states", _replay_arguments,
         description="Steps the plant with the logged link-side drive torques (tau_<joint>, what the drives "
                     "delivered) and the logged brake states, as fast as it computes, and reports the largest "
                     "deviation of the replayed joint angles, rates, modal coordinates and tip from the log. "
                     "A lockstep log replays bit for bit.")
def _cmd_replay(args: argparse.Namespace) -> int:
    from hil.logs.runlog import open_writer, read_run
    from hil.replay.plant_replay import replay

    header, rows = read_run(args.log)
    _check_replayable(args.log, header, rows)
    result = replay(header, rows)
    if args.out:
        with open_writer(args.out, {"columns": result.columns, "config": header.get("config"),
                                    "config_text": header.get("config_text"), "replay_of": args.log}) as w:
            for row in result.rows:
                w.write(row)
    name, worst = result.largest if result.deviation else ("", 0.0)
    out = {"log": args.log, "rows": len(rows), "wall_s": result.wall_s,
           "speed_x_realtime": (float(result.rows[-1, 0]) / result.wall_s) if len(rows) and result.wall_s else None,
           "bit_identical": result.bit_identical, "largest_deviation": {"column": name, "value": worst},
           "first_deviation_t_s": result.first_deviation_t, "missing_rows": result.missing_rows,
           "integrator": result.plan, "deviation": result.deviation}
    if args.json:
        print(json.dumps(out))
    else:
        print(f"replayed {len(rows)} rows in {result.wall_s:.2f} s"
              + (f" ({out['speed_x_realtime']:.1f} x real time)" if out["speed_x_realtime"] else ""))
        print(_plan_line(result.plan))
        if result.missing_rows:
            print(f"{result.missing_rows} cycles are missing from the log (dropped rows): their torques are lost")
        print("bit for bit identical to the log" if result.bit_identical else
              f"largest deviation {worst:.3g} in {name}, first deviation at t = {result.first_deviation_t:.4f} s")
    return 0


def _plan_line(check: dict | None) -> str:
    if check is None:
        return "integrator plan: the preset's (the run log names none)"
    plan = f"{check['logged']['method']} x{check['logged']['substeps']}"
    if not check["differences"]:
        return f"integrator plan: {plan}, as logged"
    return (f"integrator plan: {plan}, NOT as logged: {', '.join(check['differences'])} differ (another planning "
            "code, BLAS or machine): the replay need not be bit-identical")


def _compare_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", help="reference run log, or another tool's recording (MDF4 .mf4, Parquet, MCAP): its "
                             "channels interpolated at the run's times")
    p.add_argument("b", help="run log compared with it")
    p.add_argument("--tol", action="append", default=[], metavar="[GLOB=]TOL",
                   help="absolute tolerance: a number for every signal (default 0: identical), GLOB=number for "
                        "matching signals (first match wins), e.g. --tol 1e-9 --tol 'q_*=1e-4' --tol 'imu_*=0.05'")
    p.add_argument("--ignore", action="append", default=[], metavar="GLOB",
                   help="signals not compared (always ignored: *_us, the wall-clock timings, unless --include)")
    p.add_argument("--include", action="append", default=[], metavar="GLOB", help="compare these even if ignored")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")


@command("compare", "compare two runs signal by signal; exit status 1 beyond tolerance", _compare_arguments)
def _cmd_compare(args: argparse.Namespace) -> int:
    from hil.logs.compare import DEFAULT_IGNORE, compare_runs, parse_tolerances
    from hil.logs.runlog import read_run

    default_tol, per_glob = parse_tolerances(args.tol)
    hb, b = read_run(args.b)
    ha, a, b = _reference(args.a, hb, b)
    result = compare_runs(ha["columns"], a, hb["columns"], b, default_tol, per_glob,
                          DEFAULT_IGNORE + tuple(args.ignore), tuple(args.include))
    if args.json:
        print(json.dumps(result.as_dict()))
    else:
        print(format_comparison(result, args.a, args.b))
    return 0 if result.passed else EXIT_DIFFERENT


def _reference(path: str, header_b: dict, b: np.ndarray) -> tuple[dict, np.ndarray, np.ndarray]:
    """Run A and the rows of B to compare it with: a run log as it is; another tool's recording (hil.logs.recordings)
    as its channels that B also has, interpolated linearly at B's times where the recording covers them."""
    from pathlib import Path

    import numpy as np

    from hil.logs.recordings import read_checked, read_signals
    from hil.logs.runlog import read_run

    if Path(path).suffix.lower() in (".msgpack", ".csv"):
        header, a = read_run(path)
        return header, a, b
    columns = header_b["columns"]
    shared = [c for c in read_signals(Path(path), set())[1] if c in columns and c != "t"]
    if not shared:
        raise CliError(f"{path}: no channel in common with the run")
    signals = read_checked(Path(path), shared)
    t = b[:, columns.index("t")]
    inside = np.ones(len(t), bool)
    for ts, _ in signals.values():
        inside &= (t >= ts[0]) & (t <= ts[-1])
    a = np.column_stack([t[inside]] + [np.interp(t[inside], *signals[c]) for c in shared])
    return {"columns": ["t", *shared]}, a, b[inside]


def format_comparison(result, a: str, b: str) -> str:
    lines = [f"{b} against {a}: {result.matched} rows matched ({result.rows_a} and {result.rows_b}), "
             f"{len(result.signals)} signals compared, {len(result.failed)} beyond tolerance"]
    if result.rows_a != result.rows_b or result.matched != result.rows_a:
        lines.append("  the runs differ in length")
    worst = sorted(result.signals, key=lambda d: (d.passed, -d.max_abs))
    for d in worst[:20]:
        if d.max_abs == 0.0:
            break
        at = "" if d.t is None else f" at t = {d.t:.4f} s"
        lines.append(f"  {'FAIL' if not d.passed else 'ok  '} {d.name:28s} max |b - a| {d.max_abs:11.4g}{at} "
                     f"(tolerance {d.tolerance:g})")
    if result.only_a:
        lines.append(f"  only in {a}: {', '.join(result.only_a)}")
    if result.only_b:
        lines.append(f"  only in {b}: {', '.join(result.only_b)}")
    lines.append("PASSED" if result.passed else "FAILED")
    return "\n".join(lines)
