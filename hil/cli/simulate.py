"""`hil simulate`: the plant offline from a torque table, into a run log."""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from hil.cli.registry import CliError, command, duration_s, float_in, int_in, positive_float, positive_int
from hil.dynamics.integrator_plan import judge
from hil.dynamics.offline import INPUT_HOLDS, OfflineStepper
from hil.dynamics.plant import FORMULATIONS, Plant
from hil.dynamics.simulate import ControllerSource, Progress, TorqueTable, load_controller, run_columns, simulate
from hil.logs.run_writers import open_writer
from hil.model.config import INTEGRATOR_METHODS, MAX_SUBSTEPS, MIN_DT_S, load_model
from hil.model.presets import resolve
from hil.model.spec import DRIVE_PRESCRIBED, Model


def integrator_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dt", type=float_in(MIN_DT_S, 1.0, "s"), metavar="DT",
                   help="outer step in s (overrides integrator.dt_s of the config)")
    p.add_argument("--method", choices=INTEGRATOR_METHODS, help="integrator (default: the config's)")
    p.add_argument("--substeps", type=int_in(1, MAX_SUBSTEPS), metavar="N",
                   help="substeps per outer step (default: the config's, or automatic)")
    p.add_argument("--formulation", choices=FORMULATIONS, default="aba",
                   help="the plant's kernel: articulated-body algorithm (default) or seed 000's screw-theoretic DAE")
    p.add_argument("--bandwidth", type=positive_float, metavar="HZ",
                   help="auto keeps the modes below HZ accurate (overrides integrator.bandwidth_hz; default: all)")


def load_model_with_dt(path: str, dt: float | None, bandwidth: float | None = None) -> Model:
    model = load_model(path)
    if dt is not None:
        model.integrator.dt_s = dt
    if bandwidth is not None:
        model.integrator.bandwidth_hz = bandwidth
    return model


SIMULATE_HELP = """\
Runs the plant offline as fast as possible from the config's initial state.
--input CSV: columns t and tau_<joint> (drive torque in N m; absent joints get zero),
  t strictly increasing; linearly interpolated, held constant outside the table,
  sampled at the start of each step and held over it.
--out: .csv (plain) or .msgpack (stream: header map, then one float array per row;
  read with hil.logs.runlog.read_run). Columns: t, q_<joint>, qd_<joint>, tau_<joint>,
  eta_<body>_<mode>, theta_/thetad_<joint> (elastic joints), tip_x, tip_y, tip_z, energy;
  with --wrenches also w_<joint>_mx, _my, _mz, _fx, _fy, _fz: the wrench the parent exerts on
  the joint's child body, in the child frame at the joint (docs/model.md "Conventions").
--input-hold linear: the plant sees the table as it is, its linear interpolation at every
  integrator stage's time, however fine the table (default zoh: sampled at the step's start and
  held, as the real-time loop's DAC holds a command); rk4, imex_midpoint or fitted_midpoint.
--tol TOL: RK4 with an error-controlled substep count: every substep's embedded error
  estimate (positions and rates) within TOL x (1 + |value|); rows stay on the outer step.
--controller MODULE:FACTORY: drive torques from an in-process controller instead of a table:
  FACTORY(plant) returns tau = controller(t, measured), measured = [q_1..q_n, qd_1..qd_n]
  (ideal joint angles and rates), called at the start of each step (hil.dynamics.simulate
  .ControllerSource), e.g. tools.seed000_experiment:controller.
--devices: the preset's drives and sensors between the table and the plant, as in the real-time
  loop (hil.devices.arm): the table's tau_<joint> are the drive commands; columns t, q_, qd_,
  tau_ (delivered), tip_x/y/z, every sensor channel as measured and <channel>_true; the rows an
  FMU of the preset (hil fmu export) gives for the same commands."""


def _simulate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="arm preset: a TOML file or a shipped name (ella, ...)")
    p.add_argument("--duration", type=duration_s, required=True, metavar="T", help="simulated time in s")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--input", metavar="CSV", help="drive torques over time (see above)")
    source.add_argument("--controller", metavar="MODULE:FACTORY", help="in-process controller (see above)")
    p.add_argument("--wrenches", action="store_true", help="add the joint interaction wrench columns")
    p.add_argument("--out", metavar="FILE", help="run log: .csv or .msgpack")
    p.add_argument("--every", type=positive_int, default=1, metavar="N", help="write every N-th step (default 1)")
    p.add_argument("--progress", action="store_true", help="progress bar even when stderr is not a terminal")
    p.add_argument("--input-hold", choices=INPUT_HOLDS, default="zoh",
                   help="torque within a step: held (zoh, default) or interpolated (linear; see above)")
    p.add_argument("--tol", type=positive_float, metavar="TOL", help="error-controlled RK4 substeps (see above)")
    p.add_argument("--devices", action="store_true", help="the preset's drives and sensors too (see above)")
    integrator_arguments(p)


@command("simulate", "offline simulation with a torque table; writes a run log", _simulate_arguments,
         description=SIMULATE_HELP)
def _cmd_simulate(args: argparse.Namespace) -> int:
    args.config = resolve("preset", args.config)
    if args.tol is not None and args.method not in (None, "rk4"):
        raise CliError(f"--tol {args.tol:g} uses RK4's embedded error estimate; not with --method {args.method}")
    if args.input_hold == "linear" and args.controller:
        raise CliError("--input-hold linear interpolates a torque table; a controller's torque is held over the step")
    if args.devices:
        return _simulate_devices(args)
    method = "rk4" if args.tol is not None else args.method
    plant = Plant(load_model_with_dt(args.config, args.dt, args.bandwidth), method, args.substeps, args.formulation)
    if args.tol is None:
        judge(plant.asm, plant.plan)      # a pinned plan's accuracy and motion error for the summary
    source = None
    if args.controller:
        source = ControllerSource(load_controller(args.controller, plant), plant)
    elif args.input:
        prescribed = tuple(b.joint.name for b in plant.asm.model.bodies if b.joint.drive == DRIVE_PRESCRIBED)
        source = TorqueTable.from_csv(args.input, plant.layout.joint_names, prescribed)
    stepper = None
    if args.tol is not None or args.input_hold != "zoh":
        stepper = OfflineStepper(plant, args.input_hold, args.tol, source if args.input else None)
    sink = None
    if args.out:
        header = {"columns": run_columns(plant.layout, args.wrenches), "config": str(args.config),
                  "model": plant.asm.model.name, "dt_s": plant.dt, "every": args.every,
                  "integrator": {**plant.plan_identity(), "plan": asdict(plant.plan), "input_hold": args.input_hold,
                                 "tol": args.tol},
                  "formulation": plant.formulation, "controller": args.controller}
        sink = open_writer(args.out, header)
    progress = Progress() if args.progress or sys.stderr.isatty() else None
    try:
        summary = simulate(plant, args.duration, source, args.every, sink, progress, args.wrenches, stepper)
    finally:
        if sink is not None:
            sink.close()
    print(summary.describe() + (f"\nrun log: {args.out}" if args.out else ""))
    return 0


def _simulate_devices(args: argparse.Namespace) -> int:
    """hil simulate --devices: the arm with its drives and sensors (hil.devices.arm)."""
    import time

    from hil.devices.arm import DeviceArm, simulate_arm
    for option, given in (("--controller", args.controller), ("--tol", args.tol), ("--wrenches", args.wrenches),
                          ("--input-hold linear", args.input_hold != "zoh")):
        if given:
            raise CliError(f"--devices steps the drives once per step with the table's command held; not with {option}")
    arm = DeviceArm(load_model_with_dt(args.config, args.dt, args.bandwidth), args.method, args.substeps,
                    args.formulation)
    prescribed = tuple(b.joint.name for b in arm.plant.asm.model.bodies if b.joint.drive == DRIVE_PRESCRIBED)
    commands = TorqueTable.from_csv(args.input, arm.joints, prescribed) if args.input else None
    header = {"columns": arm.columns, "config": str(args.config), "model": arm.plant.asm.model.name,
              "dt_s": arm.dt, "every": args.every, "integrator": arm.plant.plan_identity(), "devices": True}
    sink = open_writer(args.out, header) if args.out else None
    t0 = time.perf_counter()
    try:
        n = simulate_arm(arm, args.duration, commands, args.every, sink)
    finally:
        if sink is not None:
            sink.close()
    print(f"{n} steps of {arm.dt:g} s with drives and sensors in {time.perf_counter() - t0:.2f} s"
          + (f"\nrun log: {args.out}" if args.out else ""))
    return 0
