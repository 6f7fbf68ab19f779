"""`hil campaign FILE --out DIR [--engine local|dask --address ...] [--workers N] [--report]`,
`hil campaign search FILE --out DIR [--budget N] [--popsize N] [--seed N]` (hil.campaign.search), and
`hil campaign query DIR "SQL" [--max-rows N] [--json]` (hil.campaign.query)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from hil.cli.registry import CliError, command, int_in, positive_int

CONFIRM_CASES = 10_000      # more cases than this to run need --limit or --yes


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="campaign file, or the name of a shipped one (configs/campaigns/*.toml: payload_spread); "
                                "or query: then DIR and SQL follow; or search: then the campaign file")
    p.add_argument("query", nargs="*", metavar="DIR SQL",
                   help="after query: a results folder and an SQL query over its table results (DuckDB), e.g. "
                        "\"select floor(payload_kg) as bin, max(settling_s) from results group by bin\"")
    p.add_argument("--budget", type=int_in(1, 100_000), default=60,
                   help="search: cases in all, shared by the campaign's firmware x scenarios (default 60)")
    p.add_argument("--popsize", type=int_in(2, 1000), default=None,
                   help="search: cases per CMA-ES generation (default: CMA-ES's own, 4 + 3 ln(parameters))")
    p.add_argument("--seed", type=int_in(0, 2 ** 31 - 1), default=None, help="search: its seed (default: the campaign's)")
    p.add_argument("--max-rows", type=int_in(1, 1_000_000), default=1000,
                   help="query: at most N rows printed (default 1000, at most 1e6)")
    p.add_argument("--out", help="results folder (default: out/campaigns/<campaign name>); a rerun resumes it")
    p.add_argument("--engine", choices=("local", "dask"), default="local",
                   help="local: cases in worker processes of this machine (default); dask: on the Dask cluster at "
                        "--address")
    p.add_argument("--address", help="--engine dask: the scheduler, e.g. tcp://127.0.0.1:8786")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="--engine local: cases at a time (default: the CPUs this process may use)")
    p.add_argument("--limit", type=positive_int, default=None, help="run at most N of the cases still to do")
    p.add_argument("--fresh-process", action="store_true",
                   help="every case in a `hil run` process of its own, the reference firmware in another (by "
                        "default a lockstep case of the reference firmware runs in a long-lived worker process, "
                        "the firmware in it: the same log, without the start-up per case)")
    p.add_argument("--yes", action="store_true",
                   help=f"run a campaign of more than {CONFIRM_CASES} cases without --limit (it is not asked otherwise)")
    p.add_argument("--report", action="store_true",
                   help="write DIR/report.html from the results (no case is run): pass/fail matrix, worst cases, "
                        "sensitivity")
    p.add_argument("--junit", metavar="FILE", help="write the results as JUnit XML (hil.logs.junit): one testcase per "
                                                   "case, a failing verdict with its value, limit and requirement")
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")


@command("campaign", "a test campaign: firmware x fault scenarios x parameter spreads, one results table "
                     "(Parquet), resumable; locally or on a Dask cluster", _arguments)
def _cmd_campaign(args: argparse.Namespace) -> int:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise CliError("hil campaign needs pyarrow for its results table: pip install 'ella-hil[campaign]'") from None
    if args.file == "query":
        return _query(args)
    if args.file == "search":
        return _search(args)
    if args.query:
        raise CliError(f"{' '.join(args.query)}: a campaign takes one file; SQL goes after `hil campaign query DIR`")
    from hil.campaign.engine import default_workers
    from hil.campaign.spec import load_campaign

    if args.engine == "dask" and not args.address:
        raise CliError("--engine dask needs --address tcp://HOST:PORT (a running dask scheduler)")
    if args.engine != "dask" and args.address:
        raise CliError("--address is for --engine dask")
    from hil.model.presets import resolve
    args.file = resolve("campaign", args.file)
    out = Path(args.out) if args.out else Path("out") / "campaigns" / load_campaign(args.file).name
    if args.report:
        from hil.campaign.report import write_report
        print(write_report(args.file, out))
        _write_junit(args.junit, load_campaign(args.file).name, out)
        return 0
    from hil.campaign.run import run_campaign
    from hil.campaign.spec import case_bound
    cases = case_bound(load_campaign(args.file))
    if cases > CONFIRM_CASES and args.limit is None and not args.yes:
        raise CliError(f"{args.file}: {cases} cases (more than {CONFIRM_CASES}): give --limit N to run a part, or "
                       "--yes to run them all")
    from hil.cli.campaign_case import run_case
    outcome = run_campaign(args.file, out, args.engine, args.address, args.workers or default_workers(), args.limit,
                           case_runner=None if args.fresh_process else run_case)
    result = {"table": str(outcome.table), "cases": outcome.total, "skipped": outcome.skipped, "ran": outcome.ran,
              "duplicates_refused": outcome.duplicates, "corrupt_parts": outcome.corrupt, "status": outcome.counts}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{outcome.table}: {outcome.total} cases ({outcome.skipped} done before, {outcome.ran} run now); "
              + ", ".join(f"{k} {v}" for k, v in sorted(outcome.counts.items())))
    _write_junit(args.junit, load_campaign(args.file).name, out)
    return 0


def _search(args: argparse.Namespace) -> int:
    """hil campaign search FILE --out DIR: CMA-ES over the campaign's variations (hil.campaign.search)."""
    from hil.campaign.engine import default_workers
    from hil.campaign.search import search
    from hil.cli.campaign_case import run_case
    from hil.model.presets import resolve
    if len(args.query) != 1 or not args.out:
        raise CliError("hil campaign search FILE --out DIR: expected one campaign file and a results folder")
    outcome = search(resolve("campaign", args.query[0]), Path(args.out), args.budget, args.popsize, args.seed,
                     args.engine, args.address, args.workers or default_workers(), run_case)
    if args.json:
        print(json.dumps({"summary": str(outcome.summary), "cells": outcome.cells}, default=str))
        return 0
    for cell in outcome.cells:
        low = cell["least_robust"]
        print(f"{cell['firmware']} / {cell['scenario']}: {cell['cases']} cases, {len(cell['failing'])} failing, "
              f"least robust {low['case_id']} ({low['robustness']:+.4g}) at "
              + ", ".join(f"{k} = {v:.6g}" if isinstance(v, float) else f"{k} = {v}" for k, v in low["params"].items()))
    print(f"{outcome.summary} (each found case: its parameters, seed, rerun command and report)")
    return 0


def _query(args: argparse.Namespace) -> int:
    from hil.campaign.query import format_table, query
    if len(args.query) != 2:
        raise CliError("hil campaign query DIR \"SQL\": expected a results folder and one SQL query (quoted)")
    folder, sql = args.query
    answer = query(folder, sql, args.max_rows)
    if args.json:
        print(json.dumps({"columns": answer.columns, "rows": [list(r) for r in answer.rows], "more": answer.more},
                         default=str))
    else:
        print(format_table(answer))
    return 0


def _write_junit(path: str | None, name: str, out: Path) -> None:
    """The results table as JUnit XML at `path` (nothing without one)."""
    if path is None:
        return
    from hil.campaign.results import read_results
    from hil.logs import junit
    try:
        junit.write(path, [junit.campaign_suite(read_results(out), name, out)])
    except OSError as exc:
        raise CliError(f"--junit {path}: {exc.strerror or exc}") from None
