"""The command registry of ``hil``: a subcommand is a function registered with ``command``::

    def _add_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("config")

    @command("run", "real-time loop", _add_args)
    def _cmd_run(args: argparse.Namespace) -> int:
        ...

A ``passthrough`` command receives the remaining argv unparsed (``hil bench``). User errors
(``CliError`` and the other ``USER_ERRORS``) print one line on stderr and exit with status 2,
without a traceback.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Callable

from hil.dynamics.plant import SimulationError

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A user-facing error raised by a command (printed without traceback, exit status 2)."""


USER_ERRORS = (CliError, ValueError, OSError, SimulationError)   # ConfigError, InputError, RunLogError are ValueErrors


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


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number")
    return v


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 1")
    return v
