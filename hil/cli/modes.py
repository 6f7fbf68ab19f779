"""`hil modes`: component and whole-arm frequencies, the integrator plan."""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from hil.cli.registry import command
from hil.cli.simulate import integrator_arguments, load_model_with_dt
from hil.dynamics.plant import plan_integrator
from hil.model.assembly import assemble
from hil.model.linearize import arm_frequencies_hz, component_frequencies_hz

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
    integrator_arguments(p)


def modes_report(path: str, method: str | None = None, substeps: int | None = None,
                 dt: float | None = None) -> dict[str, Any]:
    """The data of ``hil modes`` (keys as in MODES_JSON_HELP)."""
    model = load_model_with_dt(path, dt)
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
    from hil.model.presets import resolve
    report = modes_report(resolve("preset", args.config), args.method, args.substeps, args.dt)
    print(json.dumps(report, indent=2) if args.json else format_modes(report))
    return 0
