"""`hil simulate`: the plant offline from a torque table, into a run log."""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from hil.cli.registry import command, positive_float, positive_int
from hil.dynamics.plant import Plant
from hil.dynamics.simulate import Progress, TorqueTable, run_columns, simulate
from hil.logs.runlog import open_writer
from hil.model.config import INTEGRATOR_METHODS, load_model
from hil.model.presets import resolve
from hil.model.spec import DRIVE_PRESCRIBED, Model


def integrator_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dt", type=positive_float, metavar="DT",
                   help="outer step in s (overrides integrator.dt_s of the config)")
    p.add_argument("--method", choices=INTEGRATOR_METHODS, help="integrator (default: the config's)")
    p.add_argument("--substeps", type=positive_int, metavar="N",
                   help="substeps per outer step (default: the config's, or automatic)")


def load_model_with_dt(path: str, dt: float | None) -> Model:
    model = load_model(path)
    if dt is not None:
        model.integrator.dt_s = dt
    return model


SIMULATE_HELP = """\
Runs the plant offline as fast as possible from the config's initial state.
--input CSV: columns t and tau_<joint> (drive torque in N m; absent joints get zero),
  t strictly increasing; linearly interpolated, held constant outside the table,
  sampled at the start of each step and held over it.
--out: .csv (plain) or .msgpack (stream: header map, then one float array per row;
  read with hil.logs.runlog.read_run). Columns: t, q_<joint>, qd_<joint>, tau_<joint>,
  eta_<body>_<mode>, theta_/thetad_<joint> (elastic joints), tip_x, tip_y, tip_z, energy."""


def _simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="arm preset: a TOML file or a shipped name (ella, ...)")
    p.add_argument("--duration", type=positive_float, required=True, metavar="T", help="simulated time in s")
    p.add_argument("--input", metavar="CSV", help="drive torques over time (see above)")
    p.add_argument("--out", metavar="FILE", help="run log: .csv or .msgpack")
    p.add_argument("--every", type=positive_int, default=1, metavar="N", help="write every N-th step (default 1)")
    p.add_argument("--progress", action="store_true", help="progress bar even when stderr is not a terminal")
    integrator_arguments(p)


@command("simulate", "offline simulation with a torque table; writes a run log", _simulate_arguments,
         description=SIMULATE_HELP)
def _cmd_simulate(args: argparse.Namespace) -> int:
    args.config = resolve("preset", args.config)
    plant = Plant(load_model_with_dt(args.config, args.dt), args.method, args.substeps)
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
