"""Command line interface: ``hil <command> ...`` (``hil --help`` lists the commands).

Subcommands live in the ``COMMANDS`` registry. Add one with the ``command`` decorator::

    def _add_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("config")

    @command("run", "real-time loop", _add_args)
    def _cmd_run(args: argparse.Namespace) -> int:
        ...

A ``passthrough`` command receives the remaining argv unparsed (``hil bench``).
User errors (bad config, bad input file, diverging simulation, missing file) print one
line on stderr and exit with status 2, without a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from .assembly import assemble
from .config import INTEGRATOR_METHODS, load_model
from .linearize import arm_frequencies_hz, component_frequencies_hz
from .model import DRIVE_PRESCRIBED, Model
from .plant import Plant, SimulationError, plan_integrator
from .runlog import open_writer
from .simulate import Progress, TorqueTable, run_columns, simulate

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


# ----------------------------------------------------------------------------- argument types
def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive number")
    return v


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 1")
    return v


def _integrator_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dt", type=_positive_float, metavar="DT",
                   help="outer step in s (overrides integrator.dt_s of the config)")
    p.add_argument("--method", choices=INTEGRATOR_METHODS, help="integrator (default: the config's)")
    p.add_argument("--substeps", type=_positive_int, metavar="N",
                   help="substeps per outer step (default: the config's, or automatic)")


def _load_model(path: str, dt: float | None) -> Model:
    model = load_model(path)
    if dt is not None:
        model.integrator.dt_s = dt
    return model


# ----------------------------------------------------------------------------- hil modes
MODES_JSON_HELP = """\
--json prints one object:
  config, model        the file and model name
  links                per flexible body: body, family, modes (mode labels in state order),
                       analytic_hz (closed-form reference frequency per label, for the beam
                       family), component_hz (component modes, ascending: eigenfrequencies of
                       the body with its attachments, joint locked, children removed)
  arm.locked_hz        whole arm linearised at the initial state, joints locked (ascending)
  arm.free_hz          same, torque-driven joints free (rigid-body modes show as ~0)
  f_max_hz             highest whole-arm frequency
  integrator           plan used by "hil simulate": method, substeps, dt_s, substep_s,
                       f_max_hz, f_explicit_hz
All frequencies in Hz; an unstable eigenvalue is reported as a negative frequency."""


def _modes_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="arm preset (TOML)")
    p.add_argument("--json", action="store_true", help="print one JSON object (keys below)")
    _integrator_arguments(p)


def modes_report(path: str, method: str | None = None, substeps: int | None = None,
                 dt: float | None = None) -> dict[str, Any]:
    """The data of ``hil modes`` (keys as in MODES_JSON_HELP)."""
    model = _load_model(path, dt)
    asm = assemble(model)
    names = asm.layout.body_names
    links = []
    for body, comp in component_frequencies_hz(asm).items():
        k = names.index(body)
        links.append({"body": body, "family": model.bodies[k].beam.family, "modes": list(asm.layout.mode_labels[k]),
                      "analytic_hz": asm.modes[k].analytic_frequency_hz.tolist(), "component_hz": comp.tolist()})
    arm = arm_frequencies_hz(asm)
    plan = plan_integrator(asm, method, substeps)
    integrator = {**asdict(plan), "substep_s": plan.dt_s / plan.substeps}
    return {"config": str(path), "model": model.name, "links": links,
            "arm": {"locked_hz": arm.locked_hz.tolist(), "free_hz": arm.free_hz.tolist()},
            "f_max_hz": plan.f_max_hz, "integrator": integrator}


def _column(values: list[float], i: int) -> str:
    return f"{values[i]:12.3f}" if i < len(values) else " " * 12


def format_modes(report: dict[str, Any]) -> str:
    """Human-readable tables of a ``modes_report``."""
    lines = [f"{report['model']} ({report['config']})"]
    for link in report["links"]:
        lines += ["", f"{link['body']} ({link['family']} modes) [Hz]",
                  f"  {'mode':<14}{'analytic':>12}   {'component modes (ascending)':>12}"]
        n = max(len(link["modes"]), len(link["component_hz"]))
        for i in range(n):
            label = link["modes"][i] if i < len(link["modes"]) else ""
            lines.append(f"  {label:<14}{_column(link['analytic_hz'], i)}   {_column(link['component_hz'], i)}")
        lines.append("  (analytic: closed-form frequency of each shape for the family, without attachments "
                     "except a clamped_mass tip)")
    locked, free = report["arm"]["locked_hz"], report["arm"]["free_hz"]
    lines += ["", "whole arm at the initial state [Hz]", f"  {'#':>3}    {'joints locked':>12}    {'joints free':>12}"]
    for i in range(max(len(locked), len(free))):
        lines.append(f"  {i + 1:>3}    {_column(locked, i)}    {_column(free, i)}")
    it = report["integrator"]
    lines += ["", f"highest frequency: {report['f_max_hz']:.3f} Hz",
              f"integrator: {it['method']}, {it['substeps']} substep(s) of {it['substep_s'] * 1e6:.1f} us "
              f"per {it['dt_s'] * 1e3:g} ms step"]
    return "\n".join(lines)


@command("modes", "mode frequencies of each flexible link and of the whole arm; integrator plan",
         _modes_arguments, description=MODES_JSON_HELP)
def _cmd_modes(args: argparse.Namespace) -> int:
    report = modes_report(args.config, args.method, args.substeps, args.dt)
    print(json.dumps(report, indent=2) if args.json else format_modes(report))
    return 0


# ----------------------------------------------------------------------------- hil simulate
SIMULATE_HELP = """\
Runs the plant offline as fast as possible from the config's initial state.
--input CSV: columns t and tau_<joint> (drive torque in N m; absent joints get zero),
  t strictly increasing; linearly interpolated, held constant outside the table,
  sampled at the start of each step and held over it.
--out: .csv (plain) or .msgpack (stream: header map, then one float array per row;
  read with hil.runlog.read_run). Columns: t, q_<joint>, qd_<joint>, tau_<joint>,
  eta_<body>_<mode>, theta_/thetad_<joint> (elastic joints), tip_x, tip_y, tip_z, energy."""


def _simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="arm preset (TOML)")
    p.add_argument("--duration", type=_positive_float, required=True, metavar="T", help="simulated time in s")
    p.add_argument("--input", metavar="CSV", help="drive torques over time (see above)")
    p.add_argument("--out", metavar="FILE", help="run log: .csv or .msgpack")
    p.add_argument("--every", type=_positive_int, default=1, metavar="N", help="write every N-th step (default 1)")
    p.add_argument("--progress", action="store_true", help="progress bar even when stderr is not a terminal")
    _integrator_arguments(p)


@command("simulate", "offline simulation with a torque table; writes a run log", _simulate_arguments,
         description=SIMULATE_HELP)
def _cmd_simulate(args: argparse.Namespace) -> int:
    plant = Plant(_load_model(args.config, args.dt), args.method, args.substeps)
    source = None
    if args.input:
        prescribed = tuple(b.joint.name for b in plant.asm.model.bodies if b.joint.drive == DRIVE_PRESCRIBED)
        source = TorqueTable.from_csv(args.input, plant.layout.joint_names, prescribed)
    sink = None
    if args.out:
        header = {"columns": run_columns(plant.layout), "config": str(args.config), "model": plant.asm.model.name,
                  "dt_s": plant.dt, "every": args.every, "integrator": asdict(plant.plan)}
        sink = open_writer(args.out, header)
    progress = Progress() if args.progress or sys.stderr.isatty() else None
    try:
        summary = simulate(plant, args.duration, source, args.every, sink, progress)
    finally:
        if sink is not None:
            sink.close()
    print(summary.describe() + (f"\nrun log: {args.out}" if args.out else ""))
    return 0


# ----------------------------------------------------------------------------- hil bench
BENCHES = {"kernel": "tools.bench_kernel", "loop": "tools.bench_loop", "components": "tools.bench_components"}


def _bench_module(name: str):
    """A benchmark module of tools/, importable from the repository checkout (not part of the package)."""
    module = BENCHES[name]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name not in ("tools", module):
            raise
    root = Path(__file__).resolve().parent.parent
    if not (root / (module.replace(".", "/") + ".py")).is_file():
        raise CliError(f"{module} is not available (it lives in the repository checkout)")
    sys.path.insert(0, str(root))
    return importlib.import_module(module)


@command("bench", "benchmarks: `hil bench kernel ...` (default), `hil bench loop ...` or `hil bench components ...`; "
                  "arguments are passed on",
         passthrough=True)
def _cmd_bench(argv: list[str]) -> int:
    name = argv[0] if argv and argv[0] in BENCHES else "kernel"
    rest = argv[1:] if argv and argv[0] in BENCHES else argv
    return int(_bench_module(name).main(rest) or 0)


# ----------------------------------------------------------------------------- entry point
def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per registered command."""
    parser = argparse.ArgumentParser(prog="hil", description="Hardware-in-the-loop emulator of flexible robot arms.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for cmd in COMMANDS.values():
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.description or cmd.help,
                           formatter_class=argparse.RawDescriptionHelpFormatter, add_help=not cmd.passthrough)
        if cmd.add_arguments is not None:
            cmd.add_arguments(p)
    return parser


def _register_hil_commands() -> None:
    """`run`, `firmware` and `log` live in hil.cli_hil (they import the firmware bridge)."""
    from . import cli_hil  # noqa: F401  (registers its commands)


def main(argv: list[str] | None = None) -> int:
    """Run ``hil`` with argv (default: sys.argv[1:]); returns the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    name = argv[0] if argv else None
    _register_hil_commands()
    try:
        if name in COMMANDS and COMMANDS[name].passthrough:
            return COMMANDS[name].run(argv[1:])
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command].run(args)
    except USER_ERRORS as exc:
        print(f"hil {name}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"hil {name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
