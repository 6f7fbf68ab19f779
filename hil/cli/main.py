"""Command line interface: ``hil <command> ...`` (``hil --help`` lists the commands)."""
from __future__ import annotations

import argparse
import sys
import warnings

from hil.cli import modes, simulate, run, firmware, log, bench, report, replay, bus, campaign  # noqa: F401  (each registers its commands)
from hil.cli.registry import COMMANDS, EXIT_INTERRUPTED, EXIT_USAGE, USER_ERRORS


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per registered command (in `parser.commands`)."""
    parser = argparse.ArgumentParser(prog="hil", description="Hardware-in-the-loop emulator of flexible robot arms.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parser.commands = {}
    for cmd in COMMANDS.values():
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.description or cmd.help,
                           formatter_class=argparse.RawDescriptionHelpFormatter, add_help=not cmd.passthrough)
        if cmd.add_arguments is not None:
            cmd.add_arguments(p)
        parser.commands[cmd.name] = p
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse argv; an unknown option is reported with the usage of its command, not the top level's."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run ``hil`` with argv (default: sys.argv[1:]); returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[0] if argv else None
    warnings.formatwarning = _one_line
    try:
        if name in COMMANDS and COMMANDS[name].passthrough:
            return COMMANDS[name].run(argv[1:])
        args = parse(argv)
        return COMMANDS[args.command].run(args)
    except USER_ERRORS as exc:
        print(f"hil {name}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"hil {name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _one_line(message, category, filename, lineno, line=None) -> str:
    """A warning as the CLI prints it: one line, no source location."""
    return f"hil: warning: {message}\n"


if __name__ == "__main__":
    sys.exit(main())
