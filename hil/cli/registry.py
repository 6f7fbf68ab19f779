"""The command registry of ``hil``: a subcommand is a function registered with ``command``::

    def _add_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("config")

    @command("run", "real-time loop", _add_args)
    def _cmd_run(args: argparse.Namespace) -> int:
        ...

A ``passthrough`` command receives the remaining argv unparsed (``hil bench``). User errors
(``USER_ERRORS``: a configuration, an option, an input file or request refused, a missing or unreadable
file, a diverged offline plant) print one line on stderr and exit with status 2, without a traceback;
any other exception is a bug: its traceback, a line asking to report it, exit status 70 (EX_SOFTWARE).
"""
from __future__ import annotations

import argparse
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from config_schema import UserError
from hil.dynamics.plant import SimulationError

EXIT_USAGE = 2
EXIT_RECORDS_INCOMPLETE = 4  # hil run: the run log or its summary file could not be written whole (disk full, ...)
EXIT_INTERNAL = 70          # sysexits.h EX_SOFTWARE: an internal error, a bug
EXIT_INTERRUPTED = 130


class CliError(UserError):
    """A user-facing error raised by a command (printed without traceback, exit status 2)."""


USER_ERRORS = (UserError, OSError, SimulationError)   # UserError: ConfigError, InputError, RunLogError, CliError...


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    run: Callable[..., int]                 # run(args: Namespace) or, if passthrough, run(argv: list[str])
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    description: str | None = None
    passthrough: bool = False


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, add_arguments: Callable[[argparse.ArgumentParser], None] | None = None,
            description: str | None = None, passthrough: bool = False) -> Callable:
    """Decorator registering ``run`` as subcommand ``name``."""
    def register(run: Callable[..., int]) -> Callable[..., int]:
        COMMANDS[name] = Command(name, help, run, add_arguments, description, passthrough)
        return run
    return register


# argparse types of numeric options: argparse puts the option's name before the message
# ("argument --duration: 'nan': expected a positive number"), exit status 2.
def _float(text: str, ok: Callable[[float], bool], expected: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and ok(v)):
        raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
    return v


def _int(text: str, lo: int | None, hi: int | None) -> int:
    try:
        v = int(text)
    except ValueError:
        v = None
    if v is None or (lo is not None and v < lo) or (hi is not None and v > hi):
        expected = (f"an integer in {lo}..{hi}" if lo is not None and hi is not None
                    else f"an integer >= {lo}" if lo is not None else "an integer")
        raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
    return v


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    return _float(text, lambda v: v > 0, "a positive number")


MAX_DURATION_S = 1e7        # a run's simulated time: 115 days (its cycle count stays exact in a float)


def duration_s(text: str) -> float:
    """argparse type: a simulated duration in s, > 0 and at most MAX_DURATION_S."""
    return _float(text, lambda v: 0 < v <= MAX_DURATION_S, f"a duration in s, > 0 and at most {MAX_DURATION_S:g}")


def float_in(lo: float, hi: float, unit: str) -> Callable[[str], float]:
    """argparse type: a number in [lo, hi] (unit named in the error)."""
    def parse(text: str) -> float:
        return _float(text, lambda v: lo <= v <= hi, f"a number in {lo:g} .. {hi:g} {unit}")
    parse.__name__ = f"number in {lo:g}..{hi:g} {unit}"
    return parse


def nonnegative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    return _float(text, lambda v: v >= 0, "a finite number >= 0")


def finite_float(text: str) -> float:
    """argparse type: any finite number."""
    return _float(text, lambda v: True, "a finite number")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int(text, 1, None)


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _int(text, 0, None)


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """argparse type: an integer in lo..hi."""
    def parse(text: str) -> int:
        return _int(text, lo, hi)
    parse.__name__ = f"integer in {lo}..{hi}"
    return parse


def cpu_index(text: str) -> int:
    """argparse type: the number of a CPU of this machine."""
    return _int(text, 0, (os.cpu_count() or 1) - 1)


def output_file(path: str, suffix: str) -> Path:
    """The file a command writes: `suffix` its ending, in a folder that exists (CliError otherwise)."""
    out = Path(path)
    if out.suffix != suffix or not out.parent.is_dir() or out.is_dir():
        raise CliError(f"--out {path}: expected a {suffix} file in an existing folder")
    return out


def file_with_suffix(*suffixes: str) -> Callable[[str], str]:
    """argparse type: a file name ending in one of `suffixes` (the format written is the one named)."""
    def parse(text: str) -> str:
        if not text.lower().endswith(suffixes):
            raise argparse.ArgumentTypeError(f"{text!r}: expected a file name ending in {' or '.join(suffixes)} "
                                             "(the format written)")
        return text
    parse.__name__ = f"{'/'.join(suffixes)} file"
    return parse
