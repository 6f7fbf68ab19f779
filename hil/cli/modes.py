"""`hil modes`: component and whole-arm frequencies, the integrator plan and how faithfully it keeps each
mode's frequency."""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from config_schema import UserError
from hil.cli.registry import CliError, command, int_in
from hil.fit.log_modes import DEFAULT_CHANNELS, MODES_FROM_LOG_HELP, format_modes_from_log, modes_from_log, parse_window
from hil.fit.modal_id import MAX_ORDER
from hil.cli.simulate import integrator_arguments, load_model_with_dt
from hil.dynamics.integrator_plan import DAMPING_RESOLUTION, FREQUENCY_TOLERANCE, judge, plan_integrator
from hil.model.assembly import assemble
from hil.model.linearize import arm_frequencies_hz, component_frequencies_hz
from hil.model.presets import resolve

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
                       f_max_hz, f_explicit_hz, bandwidth_hz (null: every retained mode is judged),
                       accurate (every judged mode within 0.1 % in frequency and with numerical
                       damping below its damping ratio), note (what auto could not meet), and
                       modes: per retained (elastic) mode of the arm linearised at rest, from the
                       discrete-time map of the plan's substep: true_hz, integrated_hz, error
                       (integrated / true - 1), damping_ratio, numerical_damping (integrated minus
                       true damping ratio), in_band; integrated_hz, error and numerical_damping
                       are null above the substep's Nyquist frequency; motion: the joint angles
                       of a probe motion against a converged solution (hil.dynamics.motion_error:
                       max_error_rad over probe_s, per_step_rad, the reference and its own error
                       estimate); energy: null unless judged
All frequencies in Hz; an unstable eigenvalue is reported as a negative frequency."""


def _window(text: str) -> tuple[float, float]:
    try:
        return parse_window(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--window {text!r}: ")) from None


def _modes_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", nargs="?", help="arm preset: a TOML file or a shipped name (ella, ...); with --from-log "
                                             "the model to compare with (default: the log's own)")
    p.add_argument("--json", action="store_true", help="print one JSON object (keys below)")
    p.add_argument("--from-log", metavar="RUN", help="identify the modes from this run log's measured vibration "
                                                     "(see below)")
    p.add_argument("--window", type=_window, metavar="T0:T1", help="--from-log: the time window in s (default: the "
                                                                   "longest brake stop, else the whole run)")
    p.add_argument("--channels", nargs="+", default=list(DEFAULT_CHANNELS), metavar="GLOB",
                   help="--from-log: the measured channels (default: imu_a* imu_g* strain_*)")
    p.add_argument("--order", type=int_in(2, MAX_ORDER), default=40,
                   help="--from-log: the largest model order fitted, even (default 40: up to 20 modes, noise included)")
    integrator_arguments(p)


def modes_report(path: str, method: str | None = None, substeps: int | None = None, dt: float | None = None,
                 bandwidth: float | None = None) -> dict[str, Any]:
    """The data of ``hil modes`` (keys as in MODES_JSON_HELP)."""
    model = load_model_with_dt(path, dt, bandwidth)
    asm = assemble(model)
    names = asm.layout.body_names
    links = []
    for body, comp in component_frequencies_hz(asm).items():
        k = names.index(body)
        links.append({"body": body, "family": model.bodies[k].beam.family, "modes": list(asm.layout.mode_labels[k]),
                      "analytic_hz": asm.modes[k].analytic_frequency_hz.tolist(), "component_hz": comp.tolist()})
    arm = arm_frequencies_hz(asm)
    plan = judge(asm, plan_integrator(asm, method, substeps))
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
              f"per {it['dt_s'] * 1e3:g} ms step", *format_accuracy(it)]
    return "\n".join(lines)


def format_accuracy(it: dict[str, Any]) -> list[str]:
    """The per-mode accuracy table of an integrator plan (MODES_JSON_HELP "modes")."""
    band = f"below {it['bandwidth_hz']:g} Hz" if it["bandwidth_hz"] else "all retained modes"
    lines = ["", f"retained modes under the integrator (arm at rest, joints sliding; judged: {band}) [Hz]",
             f"  {'true':>10}  {'integrated':>10}  {'error':>9}  {'num. damping':>12}  {'damping ratio':>13}"]
    for m in it["modes"]:
        if m["error"] is None:
            cells = f"{'aliased':>10}  {'':>9}  {'':>12}"
        else:
            cells = f"{m['integrated_hz']:10.3f}  {m['error']:+9.4%}  {m['numerical_damping']:+12.2e}"
        ok = m["error"] is not None and abs(m["error"]) <= FREQUENCY_TOLERANCE and abs(m["numerical_damping"]) <= \
            max(m["damping_ratio"], DAMPING_RESOLUTION)
        mark = "" if not m["in_band"] else ("  ok" if ok else "  OFF")
        lines.append(f"  {m['true_hz']:10.3f}  {cells}  {m['damping_ratio']:13.2e}{mark}")
    lines.append(f"  every judged mode within {FREQUENCY_TOLERANCE:.1%} in frequency and its numerical damping below "
                 f"its damping ratio: {'yes' if it['accurate'] else 'no'}")
    motion = it.get("motion")
    if motion is not None:
        lines.append(f"  the joint motion: within {motion['max_error_rad']:.1e} rad of a converged solution "
                     f"({motion['reference']}) over the {motion['probe_s']:g} s probe, {motion['per_step_rad']:.1e} "
                     f"rad per step")
    elif it.get("judged_by"):
        lines.append(f"  the joint motion: judged by {it['judged_by']}")
    energy = it.get("energy")
    lines.append("  the undamped arm's energy over 10 s: not judged (integrator.energy_tolerance = 0)" if energy is None
                 else f"  the undamped arm's energy over {energy['duration_s']:g} s: max |E - E(0)| "
                      f"{energy['max_deviation']:.1e}, drift {energy['drift']:+.1e} of its largest kinetic energy")
    if it["note"]:
        lines.append(f"  {it['note']}")
    return lines


@command("modes", "mode frequencies of each flexible link and of the whole arm; integrator plan; modes "
                  "identified from a run", _modes_arguments, description=MODES_JSON_HELP + "\n\n" + MODES_FROM_LOG_HELP)
def _cmd_modes(args: argparse.Namespace) -> int:
    if args.from_log is not None:
        model = resolve("preset", args.config) if args.config else None
        found = modes_from_log(args.from_log, model, args.window, tuple(args.channels), args.order)
        print(json.dumps(found, indent=2) if args.json else format_modes_from_log(found))
        return 0
    if args.config is None:
        raise CliError("expected an arm preset (hil modes ella) or --from-log RUN")
    report = modes_report(resolve("preset", args.config), args.method, args.substeps, args.dt, args.bandwidth)
    print(json.dumps(report, indent=2) if args.json else format_modes(report))
    return 0
