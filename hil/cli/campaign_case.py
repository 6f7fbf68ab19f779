"""A campaign case in the worker's own process (hil.campaign.worker): `hil run` parsed and run here, with the
reference firmware in the same process, as `hil campaign` hands it to the engine."""
from __future__ import annotations

import argparse
import contextlib
import io

from config_schema import UserError
from hil.campaign.runner import run_case as run_in_worker
from hil.campaign.worker import CaseTimeout, alarm
from hil.cli.registry import COMMANDS, CliError
from hil.cli.run import run

STDERR_LINES = 5


def run_case(case: dict, settings: dict) -> dict:
    """hil.campaign.runner.run_case, the cases that may run in this process (run_inside)."""
    return run_in_worker(case, settings, run_inside)


def run_inside(argv: list[str], timeout_s: float) -> tuple[dict | None, str | None, str | None]:
    """`hil ARGV` (a `run` command line) in this process: (summary, error, status) as
    hil.campaign.runner gives them for a process of its own; its output kept from the campaign's terminal."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), alarm(timeout_s):
            summary = run(_parse(argv))
    except CaseTimeout:
        return None, f"no result within timeout_s = {timeout_s:g} s (wall clock); stopped", "timeout"
    except (UserError, CliError, ValueError) as exc:
        return None, f"hil run refused the case: {exc}", "error"
    except SystemExit:
        tail = " | ".join(err.getvalue().strip().splitlines()[-STDERR_LINES:])
        return None, f"hil run refused the case: {tail}", "error"
    if summary.get("run_failures"):
        return summary, "; ".join(summary["run_failures"]), "run_failed"
    return summary, None, None


def _parse(argv: list[str]) -> argparse.Namespace:
    """`hil run`'s arguments (argv[0] is "run")."""
    parser = argparse.ArgumentParser(prog="hil run")
    COMMANDS["run"].add_arguments(parser)
    return parser.parse_args(argv[1:])
