"""A campaign case in the worker's own process (hil.campaign.worker): `hil run` parsed and run here with the
reference firmware in the same process, or `hil simulate --controller` with the campaign's in-process
controller, as `hil campaign` hands it to the engine. A controller's module is imported once per worker
(module-level state of it outlives a case; its factory makes each case's controller afresh)."""
from __future__ import annotations

import argparse
import contextlib
import functools
import io
import sys

from config_schema import UserError
from hil.campaign.runner import run_case as run_in_worker
from hil.campaign.worker import CaseTimeout, alarm
from hil.cli.registry import COMMANDS, CliError
from hil.cli import simulate  # noqa: F401 - registers `hil simulate` in COMMANDS
from hil.cli.run import run

STDERR_LINES = 5


def run_case(case: dict, settings: dict) -> dict:
    """hil.campaign.runner.run_case, the cases that may run in this process (run_inside)."""
    return run_in_worker(case, settings, run_inside)


def run_inside(argv: list[str], timeout_s: float, folder: str) -> tuple[dict | None, str | None, str | None]:
    """`hil ARGV` (a `run` or `simulate` command line) in this process, modules of the campaign's `folder`
    importable (a controller's): (summary, error, status) as hil.campaign.runner gives them for a process of
    its own (`simulate`: an empty summary; the runner judges its log); its output kept from the campaign's
    terminal."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err), alarm(timeout_s), \
                _importable(folder):
            args = _parse(argv)
            if argv[0] == "simulate":
                status = COMMANDS["simulate"].run(args)
                if status != 0:
                    return None, f"hil simulate exited with status {status}: {_tail(err)}", "error"
                return {}, None, None
            summary = run(args)
    except CaseTimeout:
        return None, f"no result within timeout_s = {timeout_s:g} s (wall clock); stopped", "timeout"
    except (UserError, CliError, ValueError) as exc:
        return None, f"hil {argv[0]} refused the case: {exc}", "error"
    except SystemExit:
        return None, f"hil {argv[0]} refused the case: {_tail(err)}", "error"
    if summary.get("run_failures"):
        return summary, "; ".join(summary["run_failures"]), "run_failed"
    return summary, None, None


def _tail(err: io.StringIO) -> str:
    return " | ".join(err.getvalue().strip().splitlines()[-STDERR_LINES:])


@contextlib.contextmanager
def _importable(folder: str):
    """`folder` first on the module path in the block (a controller module beside the campaign file)."""
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        sys.path.remove(folder)


def _parse(argv: list[str]) -> argparse.Namespace:
    """The arguments of `hil run` or `hil simulate` (argv[0])."""
    return _parser(argv[0]).parse_args(argv[1:])


@functools.lru_cache(maxsize=None)
def _parser(command: str) -> argparse.ArgumentParser:
    """The parser of `hil COMMAND`, made once per worker (parsing leaves it unchanged)."""
    parser = argparse.ArgumentParser(prog=f"hil {command}")
    COMMANDS[command].add_arguments(parser)
    return parser
