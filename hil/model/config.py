"""TOML arm presets -> :class:`hil.model.spec.Model`, with strict validation.

Usage::

    from hil.model.config import load_model
    model = load_model("configs/ella.toml")

Every parameter carries its SI unit in its key name (``length_m``, ``E_Pa``,
``viscous_N_m_s_rad`` ...). Only names and structure are required (``model.name``,
each body's ``name``/``parent``/``joint``/one of ``rigid``|``beam``, a joint's
``name`` and ``axis``, the parameters of a beam or rigid body that have no
dataclass default); everything else falls back to the defaults of ``hil.model.spec``.

Any problem raises :class:`config_schema.ConfigError`, a ``ValueError`` whose message names the
file, the dotted key, the offending value and what was expected, e.g.::

    configs/ella.toml: body[link1].beam.E_Pa = -2e11: expected a positive number in Pa

Schema (see the presets in ``configs/`` for complete examples)::

    [model]        name, description, gravity_m_s2 (3-vector), foreshortening (bool),
                   sensor_seed (integer >= 0, seed of the sensor noise generator)
    [integrator]   method (auto|fitted_midpoint|rk4|imex_midpoint|euler), dt_s > 0, substeps >= 0
                   (0 = auto), safety in (0, 1], bandwidth_hz >= 0 (auto keeps the modes below it
                   accurate; 0 = all), budget_fraction in (0, 1] (share of the period a step may take),
                   motion_tolerance_rad >= 0 (auto: the joint angles of a probe motion within it of a
                   converged solution over 2 s; 0 = off), energy_tolerance >= 0 (auto: the undamped arm's
                   energy within it over 10 s; 0 = off), judged_by (free text, with a pinned method and
                   substeps only: the plan's joint motion was judged elsewhere, e.g. by a campaign at the
                   corners of its parameter space; the run skips its own motion probe and reports this)
    [[body]]       name, parent ("base" or an EARLIER body), initial_eta (one number per mode)
      [body.joint]     name, axis (normalised, non-zero), station_m, offset_m, rpy_rad, q0_rad,
                       qd0_rad_s, rotor_inertia_kg_m2, gear_ratio (> 0), viscous_N_m_s_rad,
                       coulomb_N_m, coulomb_smoothing_rad_s (> 0), stribeck_N_m (>= 0, extra
                       breakaway torque), stribeck_velocity_rad_s (> 0, required with
                       stribeck_N_m > 0), backlash_rad (>= 0, total dead band of the joint
                       spring; only with elasticity), drive (torque|prescribed)
        [body.joint.profile]     kind = spinup (omega_rad_s, T_s) | cycloidal (k_rad_s, T_s)
                                 | table (t_s strictly increasing, q_rad) | constant;
                                 only with drive = "prescribed" (default: constant)
        [body.joint.motor]       the joint's PMDC motor drive (hil.devices.drives; none: an ideal torque
                                 drive without limits); not for prescribed joints:
                                 interface (torque|current|voltage), resistance_ohm,
                                 inductance_H, torque_constant_N_m_A, back_emf_V_s_rad (> 0;
                                 motor side), rotor_inertia_kg_m2 (instead of the joint's),
                                 gear_efficiency in (0, 1], torque_limit_N_m (> 0, link side),
                                 current_limit_A (> 0; only with torque_constant_N_m_A, for
                                 every interface), current_bandwidth_hz (> 0), supply_V
                                 (> 0), brake_torque_N_m (>= 0, link side: the holding torque),
                                 brake_kinetic_N_m (> 0, at most brake_torque_N_m: the slipping
                                 torque; default brake_torque_N_m), brake_smoothing_rad_s (> 0;
                                 default from the integrator's stability bound). Required:
                                 current: torque_constant_N_m_A, current_bandwidth_hz; voltage:
                                 resistance_ohm, inductance_H, torque_constant_N_m_A,
                                 back_emf_V_s_rad, supply_V. The motor values and the joint's
                                 friction and backlash are checked by hil.model.spec.drive_problems
                                 and joint_problems, also for models built in code
        [body.joint.elasticity]  stiffness_N_m_rad > 0, damping_N_m_s_rad >= 0; not for
                                 prescribed joints
      [body.rigid]     mass_kg > 0, com_m, inertia_kg_m2 (3x3 | [Ixx,Iyy,Izz] |
                       [Ixx,Iyy,Izz,Ixy,Ixz,Iyz]; tensor entries about the CoM, body axes,
                       i.e. Ixy = I[0][1] = -sum(m x y); symmetric PSD, triangle inequality)
      [body.beam]      length_m, E_Pa, G_Pa, rho_kg_m3, area_m2, Iy_m4, Iz_m4,
                       torsion_constant_m4 (all > 0, required), polar_moment_m4 (> 0, optional),
                       rotary_inertia, family (clamped_free|clamped_mass|user),
                       damping_ratio (>= 0; scalar broadcasts, list = one per mode in the
                       order bending_y, bending_z, torsion, axial), frequency_scale (0.1 .. 10,
                       default 1; scalar or one per mode as damping_ratio: each mode's frequency
                       that many times what the section gives, hil.model.modal), quadrature_points 0..256
        [body.beam.modes]        bending_y, bending_z, torsion, axial (integers >= 0;
                                 defaults 2, 2, 0, 0)
        [body.beam.user_shapes.<kind>]  x_m (strictly increasing, from 0 to length_m),
                                 values (one row per mode of that kind); family = "user" only,
                                 required then for every kind with modes
      [[body.attachment]] name, station_m, mass_kg > 0, offset_m, inertia_kg_m2
    [[station]]    name, body, station_m, offset_m
    [[sensor]]     kind = encoder | abs_encoder | imu | strain | torque | current and its keys
                   (see hil.model.sensor_specs); none: the default sensor set
    [provenance]   "dotted.key" = "published: ..." | "derived: ..." | "assumed: ..."

Positions along a body: on a flexible body ``station_m`` must lie in [0, length_m];
on a rigid body (and on the base) it must be 0 and the point is placed with
``offset_m``. Provenance keys use names, not indices:
``body.<body>.joint.<key>``, ``body.<body>.beam.modes.<kind>``,
``body.<body>.attachment.<name>.<key>``, ``station.<name>.<key>``, ``sensor.<name>.<key>``,
``model.<key>``, ``integrator.<key>``; they must name a parameter of the schema for an
existing body/station/sensor (typos are errors).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from config_schema import NAME_RE, Document, Table, bare_key, load_toml, parse_toml, suggest
from hil.model.preset_bodies import BodyReader, station_position
from hil.model.sensor_specs import parse_sensors
from hil.model.plausibility import warn_implausible
from hil.model.spec import Body, IntegratorSettings, Model, Station

__all__ = ["load_model", "load_model_from_string", "parameter_paths", "INTEGRATOR_METHODS"]

INTEGRATOR_METHODS = ("auto", "fitted_midpoint", "rk4", "imex_midpoint", "euler")

TOP_KEYS = ("model", "integrator", "body", "station", "sensor", "provenance")
MAX_BODIES = 256        # bodies of one arm: a chain this deep steps in ~1 ms; every recursion over it stays shallow
MAX_SUBSTEPS = 4096     # substeps per step: ELLA's 4096 take 62 ms (fitted midpoint) to 118 ms (RK4) per 1 ms step
MIN_DT_S = 1e-6         # the shortest step: 1 MHz, beyond any drive or bus this emulator serves
MODEL_KEYS = ("name", "description", "gravity_m_s2", "foreshortening", "sensor_seed")
INTEGRATOR_KEYS = ("method", "dt_s", "substeps", "safety", "bandwidth_hz", "budget_fraction", "motion_tolerance_rad",
                   "energy_tolerance", "judged_by")
MAX_NOTE_CHARS = 1000   # a free-text note of the model's (integrator.judged_by)
STATION_KEYS = ("name", "body", "station_m", "offset_m")


def load_model(path: str | Path) -> Model:
    """Load and validate an arm preset (TOML) into a :class:`hil.model.spec.Model`; a missing,
    unreadable or binary file is a ConfigError naming it."""
    source = str(path)
    return _read_preset(load_toml(path), source)


def load_model_from_string(text: str, source: str = "<string>") -> Model:
    """Parse preset TOML text (``source`` names it in error messages)."""
    return _read_preset(parse_toml(text, source), source)


def parameter_paths(data: dict, source: str) -> set[str]:
    """Every dotted parameter path the parsed preset `data` may set (the names its [provenance]
    keys may use: ``body.link1.beam.E_Pa``, ``body.link2.attachment.payload.mass_kg``); the preset
    is validated on the way (ConfigError)."""
    doc = Document(source)
    _read_preset(data, source, doc)
    return set(doc.known)


def _read_preset(data: dict, source: str, doc: Document | None = None) -> Model:
    doc = doc or Document(source)
    top = doc.root(data, TOP_KEYS)

    mt = top.table("model", MODEL_KEYS, required=True, what="a [model] table with a name")
    name = mt.string("name", what="a string (the model name)")
    if not name.strip():
        raise mt.error("name", name, "expected a non-empty string (the model name: logs, reports and campaigns show it)")
    if mt.has("description"):
        mt.string("description", what="a string (free text)")
    gravity = mt.vector("gravity_m_s2", np.array([0.0, 0.0, -9.81]), unit="m/s^2")
    foreshortening = mt.boolean("foreshortening", True)
    sensor_seed = mt.integer("sensor_seed", 0, minimum=0, what="seed of the sensor noise generator")

    integ = IntegratorSettings()
    it = top.table("integrator", INTEGRATOR_KEYS)
    if it is not None:
        integ = IntegratorSettings(
            method=it.choice("method", integ.method, INTEGRATOR_METHODS),
            dt_s=it.number("dt_s", integ.dt_s, unit="s", lower=MIN_DT_S, upper=1.0),
            substeps=it.integer("substeps", integ.substeps, minimum=0, maximum=MAX_SUBSTEPS,
                                what="inner steps per dt_s, 0 = automatic"),
            safety=it.number("safety", integ.safety, unit="(fraction of the stability bound)",
                             positive=True, upper=1.0),
            bandwidth_hz=it.number("bandwidth_hz", integ.bandwidth_hz, unit="Hz", nonneg=True),
            budget_fraction=it.number("budget_fraction", integ.budget_fraction, unit="(fraction of the period)",
                                      positive=True, upper=1.0),
            motion_tolerance_rad=it.number("motion_tolerance_rad", integ.motion_tolerance_rad, unit="rad",
                                           nonneg=True),
            energy_tolerance=it.number("energy_tolerance", integ.energy_tolerance,
                                       unit="(fraction of the largest kinetic energy)", nonneg=True),
            judged_by=_judged_by(it),
        )

    raw_bodies = top.array_of_tables("body", required=True, what="at least one [[body]] table")
    if len(raw_bodies) > MAX_BODIES:
        raise doc.error("body", f"{len(raw_bodies)} [[body]] tables",
                        f"at most {MAX_BODIES} bodies (the kernels' arrays and the chain's depth are bounded by it)")
    bodies, initial_eta = BodyReader(doc, raw_bodies).read()
    by_name = {b.name: b for b in bodies}

    stations: list[Station] = []
    seen: set[str] = set()
    for i, rs in enumerate(top.array_of_tables("station", what="an array of [[station]] tables")):
        stations.append(_station(doc, i, rs, by_name, seen))

    sensors = parse_sensors(top, bodies, stations)
    provenance = _provenance(doc, top)

    model = Model(
        name=name,
        bodies=bodies,
        gravity_m_s2=gravity,
        foreshortening=foreshortening,
        integrator=integ,
        stations=stations,
        initial_eta=initial_eta,
        provenance=provenance,
        source=source,
        sensors=sensors,
        sensor_seed=sensor_seed,
    )
    warn_implausible(model)     # accepted, but no physical arm has such values: said at load
    return model


def _station(doc: Document, i: int, rs: dict, by_name: dict[str, Body], seen: set[str]) -> Station:
    nm = rs.get("name")
    label = nm if isinstance(nm, str) and NAME_RE.match(nm) else f"#{i + 1}"
    st = Table(doc, rs, f"station[{label}]", f"station.{label}", STATION_KEYS)
    name = st.name("name")
    if name in seen:
        raise st.error("name", name, "expected a unique station name")
    seen.add(name)
    body_name = st.string("body", what="the name of a body")
    if body_name not in by_name:
        raise st.error("body", body_name, "expected one of the bodies "
                       + ", ".join(repr(n) for n in by_name) + suggest(body_name, by_name))
    body = by_name[body_name]
    station = station_position(st, body.beam.length_m if body.beam else None, body_name)
    return Station(name=name, body=body_name, station_m=station,
                   offset_m=st.vector("offset_m", np.zeros(3), unit="m"))


def _judged_by(it: Table) -> str:
    """integrator.judged_by: only beside a pinned method and substeps (the plan it speaks of)."""
    note = it.string("judged_by", "", what="a string (who judged the pinned plan's joint motion, and how)")
    if note and (it.raw("method", "auto") == "auto" or not it.raw("substeps", 0)):
        raise it.error("judged_by", note, "expected it only beside a pinned integrator.method and substeps "
                                          "(the plan it speaks of)")
    if len(note) > MAX_NOTE_CHARS:
        raise it.error("judged_by", note[:40] + "...", f"expected at most {MAX_NOTE_CHARS} characters")
    return note


def _provenance(doc: Document, top: Table) -> dict:
    """The [provenance] table: every key must name a parameter of the schema read above."""
    raw = top.raw("provenance", {})
    if not isinstance(raw, dict):
        raise doc.error("provenance", raw, 'expected a table of "dotted.key" = "source" strings')
    out: dict[str, str] = {}
    for k, v in raw.items():
        key = f"provenance.{bare_key(k)}"
        if isinstance(v, dict):
            raise doc.error(key, v, 'expected a string; quote dotted keys ("body.link1.beam.E_Pa" = "...")')
        if not isinstance(v, str):
            raise doc.error(key, v, "expected a string naming the source of the value")
        if k not in doc.known:
            raise doc.error(key, v, "expected the key to name a parameter of this file, e.g. "
                            f"'body.<body>.beam.E_Pa'{suggest(k, sorted(doc.known))}")
        out[k] = v
    return out
