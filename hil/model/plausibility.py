"""Plausibility of a model's parameters: values a file accepts (finite, of the right sign) but no
physical arm has, reported as warnings with the value and the range (a model may be an
experiment, so nothing here refuses it).

Ranges (SI): beam E 1e6 .. 1.2e12 Pa (elastomers to diamond), G 3e5 .. 5e11 Pa, density 10 ..
23000 kg/m^3 (foams to osmium), length 1 mm .. 100 m, area 1e-10 .. 1 m^2, second moments 1e-24 ..
1 m^4, modal damping ratios 0 .. 1; masses up to 2e5 kg (the largest payloads a space manipulator
moves are about 1.2e5 kg); gravity up to 30 m/s^2 (Jupiter: 24.8); gear ratios 0.1 .. 1e4; joint
spring stiffness 1 .. 1e9 N m/rad.

``static_deflection_warnings`` judges the arm at rest: a link whose static deflection under
gravity exceeds a tenth of its length is beyond the small-deflection range in which the assumed
modes hold (a heavy payload, a soft material, a strong gravity), whatever the single values.
"""
from __future__ import annotations

import warnings

import numpy as np

from config_schema import fmt_float
from hil.model.spec import Model

BEAM_RANGES = {   # key: (low, high, unit, what spans the range)
    "length_m": (1e-3, 100.0, "m", "a link of 1 mm to 100 m"),
    "E_Pa": (1e6, 1.2e12, "Pa", "elastomers to diamond"),
    "G_Pa": (3e5, 5e11, "Pa", "elastomers to diamond"),
    "rho_kg_m3": (10.0, 23000.0, "kg/m^3", "foams to osmium"),
    "area_m2": (1e-10, 1.0, "m^2", "a hair to a 1 m^2 section"),
    "Iy_m4": (1e-24, 1.0, "m^4", "sections of a hair to 1 m^2"),
    "Iz_m4": (1e-24, 1.0, "m^4", "sections of a hair to 1 m^2"),
    "torsion_constant_m4": (1e-24, 1.0, "m^4", "sections of a hair to 1 m^2"),
}
MAX_MASS_KG = 2e5
MAX_GRAVITY_M_S2 = 30.0
GEAR_RANGE = (0.1, 1e4)
STIFFNESS_RANGE_N_M_RAD = (1.0, 1e9)
MAX_DEFLECTION_OF_LENGTH = 0.1


class PlausibilityWarning(UserWarning):
    """A model parameter outside the range of physical arms (the message has the value and the range)."""


def _outside(where: str, value: float, low: float, high: float, unit: str, why: str) -> str | None:
    if low <= value <= high:
        return None
    return f"{where} = {fmt_float(value)} {unit}: outside the physical range {low:g} .. {high:g} {unit} ({why})"


def plausibility_problems(model: Model) -> list[str]:
    """One line per implausible parameter, naming the file and the key."""
    out = []
    g = float(np.linalg.norm(model.gravity_m_s2))
    out.append(_outside("model.gravity_m_s2 (magnitude)", g, 0.0, MAX_GRAVITY_M_S2, "m/s^2", "no planet pulls harder"))
    for body in model.bodies:
        key = f"body[{body.name}]"
        if body.beam is not None:
            for name, (low, high, unit, why) in BEAM_RANGES.items():
                out.append(_outside(f"{key}.beam.{name}", getattr(body.beam, name), low, high, unit, why))
            for k, zeta in enumerate(np.atleast_1d(body.beam.damping_ratio)):
                out.append(_outside(f"{key}.beam.damping_ratio[{k}]", float(zeta), 0.0, 1.0, "", "critical damping"))
        if body.rigid is not None:
            out.append(_outside(f"{key}.rigid.mass_kg", body.rigid.mass_kg, 0.0, MAX_MASS_KG, "kg",
                                "the heaviest payloads arms move"))
        for a in body.attachments:
            out.append(_outside(f"{key}.attachment[{a.name}].mass_kg", a.mass_kg, 0.0, MAX_MASS_KG, "kg",
                                "the heaviest payloads arms move"))
        j = body.joint
        out.append(_outside(f"{key}.joint.gear_ratio", abs(j.gear_ratio), *GEAR_RANGE, "", "direct drives to worm gears"))
        if j.elasticity is not None:
            out.append(_outside(f"{key}.joint.elasticity.stiffness_N_m_rad", j.elasticity.stiffness_N_m_rad,
                                *STIFFNESS_RANGE_N_M_RAD, "N m/rad", "harmonic drives to rubber couplings"))
    return [f"{model.source}: {p}" for p in out if p is not None]


def warn_implausible(model: Model) -> None:
    """Issue a PlausibilityWarning for each implausible parameter."""
    for problem in plausibility_problems(model):
        warnings.warn(problem, PlausibilityWarning, stacklevel=3)


def static_deflection_problems(source: str, bodies: list[str], eta_by_body: list[np.ndarray],
                               lengths_m: list[float]) -> list[str]:
    """Links whose static deflection (largest modal coordinate: a tip amplitude, m or rad) exceeds
    MAX_DEFLECTION_OF_LENGTH of their length."""
    out = []
    for name, eta, length in zip(bodies, eta_by_body, lengths_m):
        if length > 0 and len(eta) and np.max(np.abs(eta)) > MAX_DEFLECTION_OF_LENGTH * length:
            out.append(f"{source}: body[{name}] deflects {np.max(np.abs(eta)):.3g} m at rest under gravity, more "
                       f"than {MAX_DEFLECTION_OF_LENGTH:g} of its length {length:g} m: beyond the small-deflection "
                       "range of its modes (check the payload, E_Pa, the section and gravity)")
    return out


def warn_static_deflection(plant) -> None:
    """Issue a PlausibilityWarning for each link of `plant` (a hil.dynamics.plant.Plant at its static
    equilibrium) that deflects beyond the small-deflection range."""
    model = plant.asm.model
    beams = [(b.name, b.beam.length_m) for b in model.bodies if b.beam is not None]
    for problem in static_deflection_problems(model.source, [n for n, _ in beams],
                                              [plant.eta(n) for n, _ in beams], [length for _, length in beams]):
        warnings.warn(problem, PlausibilityWarning, stacklevel=2)
