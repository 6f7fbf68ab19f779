"""Command line interface: ``hil <command> ...`` (``hil --help`` lists the commands)."""
from __future__ import annotations

import argparse
import gc
import re
import sys
import traceback
import warnings

from hil import collector_paused

with collector_paused():
    # each module registers its commands (in this order in `hil --help`)
    from hil.cli import modes, simulate, run, firmware, log, bench, report, replay, bus, campaign, doctor, fit, fmu, xcp  # noqa: F401
    from hil.cli.registry import COMMANDS, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_USAGE, USER_ERRORS, CliError
    from config_schema import suggest


class OneLineParser(argparse.ArgumentParser):
    """A parser whose usage errors are one line with where to look, not the whole usage."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}; {self.prog} --help lists the options\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The top-level parser with one subparser per registered command (in `parser.commands`); with
    `command`, only that subparser gets its arguments (the others are only named in ``hil --help``:
    building them all costs the start-up their imports)."""
    parser = OneLineParser(prog="hil", description="Hardware-in-the-loop emulator of flexible robot arms.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=OneLineParser)
    parser.commands = {}
    for cmd in COMMANDS.values():
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.description or cmd.help,
                           formatter_class=argparse.RawDescriptionHelpFormatter, add_help=not cmd.passthrough)
        if cmd.add_arguments is not None and command in (None, cmd.name):
            cmd.add_arguments(p)
        parser.commands[cmd.name] = p
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse argv; an unknown option is reported in one line with the nearest option of its command."""
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        raise CliError(unknown_arguments(parser.commands[args.command], args.command, unknown))
    return args


def unknown_arguments(sub: argparse.ArgumentParser, command: str, unknown: list[str]) -> str:
    """One line: the arguments `command` does not take, each option with a suggestion."""
    options = sorted(set(re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", sub.format_help())))
    parts = [f"{word}{suggest(word.split('=')[0], options)}" if word.startswith("-") else repr(word) for word in unknown]
    return (f"unrecognized argument{'s' if len(unknown) > 1 else ''} {', '.join(parts)}; "
            f"hil {command} --help lists the options")


NANOBIND_MODULES = {"duckdb"}


def main(argv: list[str] | None = None) -> int:
    """Run ``hil`` with argv (default: sys.argv[1:]); returns the exit status.

    Without argv (the process's own command line: the ``hil`` script, ``python -m hil``) the objects
    of the start-up are frozen out of the garbage collector once the command's arguments are read
    (the modules, numba's typing and the loaded kernels live until the process ends), and everything
    is frozen before the return: the process exits next, and the collector's passes over the
    ~100 000 objects of numba at the interpreter's shutdown (~0.1 s) find nothing to free; not after
    a command that loaded a module built with nanobind (DuckDB's, ``hil campaign query``), which
    reports the objects a freeze keeps from being freed as leaks at the exit."""
    process = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[0] if argv else None
    warnings.formatwarning = _one_line
    try:
        if name in COMMANDS and COMMANDS[name].passthrough:
            return COMMANDS[name].run(argv[1:])
        args = parse(argv)
        if process:
            gc.freeze()
        return COMMANDS[args.command].run(args)
    except USER_ERRORS as exc:
        print(f"hil {name}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"hil {name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception:
        traceback.print_exc()
        print(f"hil {name}: internal error (a bug in hil; please report it with the traceback above)",
              file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        if process and not NANOBIND_MODULES & sys.modules.keys():
            gc.freeze()


def _one_line(message, category, filename, lineno, line=None) -> str:
    """A warning as the CLI prints it: one line, no source location."""
    return f"hil: warning: {message}\n"


if __name__ == "__main__":
    sys.exit(main())
