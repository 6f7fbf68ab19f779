"""TOML arm presets -> :class:`hil.model.spec.Model`, with strict validation.

Usage::

    from hil.model.config import load_model, ConfigError
    model = load_model("configs/ella.toml")

Every parameter carries its SI unit in its key name (``length_m``, ``E_Pa``,
``viscous_N_m_s_rad`` ...). Only names and structure are required (``model.name``,
each body's ``name``/``parent``/``joint``/one of ``rigid``|``beam``, a joint's
``name`` and ``axis``, the parameters of a beam or rigid body that have no
dataclass default); everything else falls back to the defaults of ``hil.model.spec``.

Any problem raises :class:`ConfigError`, a ``ValueError`` whose message names the
file, the dotted key, the offending value and what was expected, e.g.::

    configs/ella.toml: body[link1].beam.E_Pa = -2e11: expected a positive number in Pa

Schema (see the presets in ``configs/`` for complete examples)::

    [model]        name, description, gravity_m_s2 (3-vector), foreshortening (bool),
                   sensor_seed (integer >= 0, seed of the sensor noise generator)
    [integrator]   method (auto|rk4|imex_midpoint|euler), dt_s > 0, substeps >= 0 (0 = auto),
                   safety in (0, 1]
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
                       order bending_y, bending_z, torsion, axial), quadrature_points >= 0
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

import difflib
import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hil.model.spec import (
    BASE,
    DRIVE_PRESCRIBED,
    DRIVE_TORQUE,
    DRIVE_UNITS,
    JOINT_FRICTION_UNITS,
    MODE_FAMILIES,
    MODE_KINDS,
    PROFILE_CONSTANT,
    PROFILE_CYCLOIDAL,
    PROFILE_SPINUP,
    PROFILE_TABLE,
    Attachment,
    Beam,
    Body,
    DriveSpec,
    IntegratorSettings,
    Joint,
    JointElasticity,
    Model,
    Problem,
    Profile,
    RigidInertia,
    Station,
    drive_problems,
    in_unit,
    joint_problems,
)

__all__ = ["ConfigError", "load_model", "load_model_from_string", "reject", "INTEGRATOR_METHODS"]

INTEGRATOR_METHODS = ("auto", "rk4", "imex_midpoint", "euler")
DRIVES = (DRIVE_TORQUE, DRIVE_PRESCRIBED)
PROFILE_KINDS = (PROFILE_SPINUP, PROFILE_CYCLOIDAL, PROFILE_TABLE, PROFILE_CONSTANT)
PROFILE_KEYS = {
    PROFILE_SPINUP: ("kind", "omega_rad_s", "T_s"),
    PROFILE_CYCLOIDAL: ("kind", "k_rad_s", "T_s"),
    PROFILE_TABLE: ("kind", "t_s", "q_rad"),
    PROFILE_CONSTANT: ("kind",),
}

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")
_AXIS_MIN_NORM = 1e-9
_REL_TOL = 1e-9


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


# ----------------------------------------------------------------------------- errors
def _fmt_float(x: float) -> str:
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x != 0.0 and not 1e-4 <= abs(x) < 1e6:
        # shortest scientific form that round-trips: 2e+11 -> 2e11, 1e-05 -> 1e-5 (TOML-like)
        for p in range(1, 18):
            s = f"{x:.{p - 1}e}"
            if float(s) == x:
                break
        mant, exp = s.split("e")
        if "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        return f"{mant}e{int(exp)}"
    s = repr(x)
    return s


def _fmt(value: Any, depth: int = 0) -> str:
    """Render a (TOML) value compactly for an error message."""
    if value is _MISSING:
        return "<missing>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return _fmt_float(float(value))
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        items = [_fmt(v, depth + 1) for v in value[:8]]
        if len(value) > 8:
            items.append(f"... ({len(value)} items)")
        return "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        keys = list(value)
        shown = ", ".join(str(k) for k in keys[:8]) + (", ..." if len(keys) > 8 else "")
        return "{" + shown + "}"
    return repr(value)


class ConfigError(ValueError):
    """Invalid arm preset (or drive or joint parameters of a model built in code, ``reject``).
    ``str(err)`` is ``"<file>: <key> = <value>: <expected>"``.

    Attributes ``file``, ``key``, ``value`` (the offending value as read) and
    ``expected`` (what was expected, with the unit) are kept for programmatic use.
    """

    def __init__(self, file: str, key: str | None, value: Any, expected: str,
                 *, message: str | None = None):
        self.file = str(file)
        self.key = key
        self.value = value
        self.expected = expected
        if message is None:
            message = f"{self.file}: {key} = {_fmt(value)}: {expected}"
        super().__init__(message)


# ----------------------------------------------------------------------------- reader
def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _bare(key: str) -> str:
    """Render a key as in TOML (quote it unless it is a bare key)."""
    return key if re.fullmatch(r"[A-Za-z0-9_\-]+", key) else json.dumps(key)


class _Table:
    """One TOML table being parsed: checks unknown keys and typed reads.

    ``where`` is the human path used in error messages (``body[link1].beam``),
    ``prov`` the dotted provenance path (``body.link1.beam``).
    """

    def __init__(self, loader: "_Loader", data: Any, where: str, prov: str,
                 allowed: tuple[str, ...] | list[str], what: str = "a table"):
        self.loader = loader
        self.where = where
        self.prov = prov
        self.allowed = tuple(allowed)
        if not isinstance(data, dict):
            raise loader.error(where, data, f"expected {what}")
        self.data = data
        for k, v in data.items():
            if k not in self.allowed:
                hint = difflib.get_close_matches(k, self.allowed, n=1)
                did = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise loader.error(self.key(k), v,
                                   f"unknown key{did}; allowed keys here: {', '.join(self.allowed)}")
        for k in self.allowed:
            loader.known.add(f"{prov}.{k}" if prov else k)

    # -- helpers
    def key(self, k: str) -> str:
        return f"{self.where}.{_bare(k)}" if self.where else _bare(k)

    def error(self, k: str, value: Any, expected: str) -> ConfigError:
        return self.loader.error(self.key(k), value, expected)

    def has(self, k: str) -> bool:
        return k in self.data

    def raw(self, k: str, default: Any = _MISSING) -> Any:
        return self.data.get(k, default)

    def _get(self, k: str, default: Any, expected: str) -> Any:
        if k in self.data:
            return self.data[k]
        if default is _MISSING:
            raise self.error(k, _MISSING, f"required; expected {expected}")
        return default

    # -- typed reads
    def number(self, k: str, default: Any = _MISSING, *, unit: str,
               positive: bool = False, nonneg: bool = False,
               upper: float | None = None) -> float:
        if positive:
            expected = f"a positive number{in_unit(unit)}"
        elif nonneg:
            expected = f"a non-negative number{in_unit(unit)}"
        else:
            expected = f"a finite number{in_unit(unit)}"
        if upper is not None:
            expected += f", at most {_fmt_float(upper)}"
        v = self._get(k, default, expected)
        if k not in self.data:
            return float(v) if v is not None else None
        if not _is_number(v) or not math.isfinite(float(v)):
            raise self.error(k, v, f"expected {expected}")
        v = float(v)
        if (positive and not v > 0) or (nonneg and v < 0) or (upper is not None and v > upper):
            raise self.error(k, self.data[k], f"expected {expected}")
        return v

    def checked_later(self, k: str, default: Any) -> float | None:
        """The value at k as a float (`default` when absent) for hil.model.spec's checks (drive_problems,
        joint_problems) to judge; nan for anything but a finite number, which they reject with their
        expectation and unit (the error then shows the value as written)."""
        if k not in self.data:
            return default
        v = self.data[k]
        return float(v) if _is_number(v) and math.isfinite(float(v)) else math.nan

    def reject(self, problems: Sequence[Problem]) -> None:
        """Raise the first of `problems` (hil.model.spec's checks of values read from this table) as a
        ConfigError naming its key and the value as written; a key left out is reported as required."""
        if not problems:
            return
        key, _, expected = problems[0]
        if self.has(key):
            raise self.error(key, self.raw(key), expected)
        raise self.error(key, _MISSING, f"required; {expected}")

    def integer(self, k: str, default: Any = _MISSING, *, minimum: int = 0, what: str = "") -> int:
        expected = f"an integer >= {minimum}" + (f" ({what})" if what else "")
        v = self._get(k, default, expected)
        if k not in self.data:
            return int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise self.error(k, v, f"expected {expected}")
        return int(v)

    def boolean(self, k: str, default: Any = _MISSING) -> bool:
        v = self._get(k, default, "true or false")
        if not isinstance(v, bool):
            raise self.error(k, v, "expected true or false")
        return v

    def string(self, k: str, default: Any = _MISSING, *, what: str = "a string") -> str:
        v = self._get(k, default, what)
        if not isinstance(v, str):
            raise self.error(k, v, f"expected {what}")
        return v

    def name(self, k: str = "name") -> str:
        what = "a name (letters, digits, '_' or '-', not starting with a digit)"
        v = self.string(k, what=what)
        if not _NAME_RE.match(v):
            raise self.error(k, v, f"expected {what}")
        return v

    def choice(self, k: str, default: Any, choices: tuple[str, ...]) -> str:
        expected = "one of " + ", ".join(json.dumps(c) for c in choices)
        v = self._get(k, default, expected)
        if not isinstance(v, str) or v not in choices:
            raise self.error(k, v, f"expected {expected}")
        return v

    def vector(self, k: str, default: Any = _MISSING, *, n: int | None = 3, unit: str,
               nonneg: bool = False) -> np.ndarray:
        size = f"{n}-vector" if n is not None else "list"
        expected = f"a {size} of {'non-negative ' if nonneg else ''}numbers{in_unit(unit)}"
        v = self._get(k, default, expected)
        if k not in self.data:
            return np.array(v, dtype=float)
        if (not isinstance(v, list) or (n is not None and len(v) != n)
                or not all(_is_number(x) and math.isfinite(float(x)) for x in v)
                or (nonneg and any(x < 0 for x in v))):
            raise self.error(k, v, f"expected {expected}")
        return np.array([float(x) for x in v], dtype=float)

    def inertia(self, k: str, default: Any = _MISSING) -> np.ndarray:
        expected = ("a symmetric positive semidefinite inertia tensor in kg m^2 about the CoM "
                    "(3x3, [Ixx, Iyy, Izz] or [Ixx, Iyy, Izz, Ixy, Ixz, Iyz])")
        v = self._get(k, default, expected)
        if k not in self.data:
            return np.array(v, dtype=float)

        def bad(extra: str = "") -> ConfigError:
            return self.error(k, v, f"expected {expected}{extra}")

        if not isinstance(v, list):
            raise bad()
        if len(v) == 3 and all(isinstance(r, list) for r in v):
            if not all(len(r) == 3 and all(_is_number(x) for x in r) for r in v):
                raise bad()
            I = np.array(v, dtype=float)
        elif len(v) in (3, 6) and all(_is_number(x) for x in v):
            f = [float(x) for x in v]
            I = np.diag(f[:3])
            if len(f) == 6:
                I[0, 1] = I[1, 0] = f[3]
                I[0, 2] = I[2, 0] = f[4]
                I[1, 2] = I[2, 1] = f[5]
        else:
            raise bad()
        if not np.all(np.isfinite(I)):
            raise bad()
        scale = float(np.max(np.abs(I))) if I.size else 0.0
        tol = 1e-9 * scale + 1e-300
        if np.max(np.abs(I - I.T)) > 1e-6 * scale + 1e-300:
            raise bad(" (it is not symmetric)")
        I = 0.5 * (I + I.T)
        eig = np.linalg.eigvalsh(I)
        if eig[0] < -tol:
            raise bad(f" (eigenvalue {_fmt_float(float(eig[0]))} < 0)")
        a, b, c = eig
        if a + b < c - tol:
            raise bad(f" (principal moments {_fmt_float(a)}, {_fmt_float(b)}, {_fmt_float(c)} "
                      "violate the triangle inequality I1 + I2 >= I3)")
        return I

    def table(self, k: str, allowed: tuple[str, ...], *, where: str | None = None,
              prov: str | None = None, required: bool = False,
              what: str = "a table") -> "_Table | None":
        if k not in self.data:
            if required:
                raise self.error(k, _MISSING, f"required; expected {what}")
            return None
        return _Table(self.loader, self.data[k], where or self.key(k),
                      prov or (f"{self.prov}.{k}" if self.prov else k), allowed, what)

    def array_of_tables(self, k: str, *, required: bool = False, what: str) -> list:
        if k not in self.data:
            if required:
                raise self.error(k, _MISSING, f"required; expected {what}")
            return []
        v = self.data[k]
        if not isinstance(v, list) or not all(isinstance(t, dict) for t in v):
            raise self.error(k, v, f"expected {what}")
        return v


# ----------------------------------------------------------------------------- loader
_TOP_KEYS = ("model", "integrator", "body", "station", "sensor", "provenance")
_MODEL_KEYS = ("name", "description", "gravity_m_s2", "foreshortening", "sensor_seed")
_INTEGRATOR_KEYS = ("method", "dt_s", "substeps", "safety")
_BODY_KEYS = ("name", "parent", "initial_eta", "joint", "rigid", "beam", "attachment")
_JOINT_KEYS = ("name", "axis", "station_m", "offset_m", "rpy_rad", "q0_rad", "qd0_rad_s",
               "rotor_inertia_kg_m2", "gear_ratio", "viscous_N_m_s_rad", "coulomb_N_m",
               "coulomb_smoothing_rad_s", "stribeck_N_m", "stribeck_velocity_rad_s",
               "backlash_rad", "drive", "profile", "elasticity", "motor")
_ELASTICITY_KEYS = ("stiffness_N_m_rad", "damping_N_m_s_rad")
# [body.joint.motor]: the DriveSpec fields (checked by hil.model.spec.drive_problems) and the rotor inertia
_MOTOR_KEYS = ("interface", *DRIVE_UNITS, "rotor_inertia_kg_m2")
_RIGID_KEYS = ("mass_kg", "com_m", "inertia_kg_m2")
_BEAM_KEYS = ("length_m", "E_Pa", "G_Pa", "rho_kg_m3", "area_m2", "Iy_m4", "Iz_m4",
              "torsion_constant_m4", "polar_moment_m4", "rotary_inertia", "family",
              "damping_ratio", "quadrature_points", "modes", "user_shapes")
_MODES_KEYS = MODE_KINDS
_USER_SHAPE_KEYS = ("x_m", "values")
_ATTACHMENT_KEYS = ("name", "station_m", "mass_kg", "offset_m", "inertia_kg_m2")
_STATION_KEYS = ("name", "body", "station_m", "offset_m")


class _Loader:
    def __init__(self, source: str):
        self.source = source
        self.known: set[str] = set()

    def error(self, key: str, value: Any, expected: str) -> ConfigError:
        return ConfigError(self.source, key, value, expected)

    # ---------------------------------------------------------------- top level
    def load(self, data: dict) -> Model:
        top = _Table(self, data, "", "", _TOP_KEYS)

        mt = top.table("model", _MODEL_KEYS, required=True, what="a [model] table with a name")
        name = mt.string("name", what="a string (the model name)")
        if mt.has("description"):
            mt.string("description", what="a string (free text)")
        gravity = mt.vector("gravity_m_s2", np.array([0.0, 0.0, -9.81]), unit="m/s^2")
        foreshortening = mt.boolean("foreshortening", True)
        sensor_seed = mt.integer("sensor_seed", 0, minimum=0, what="seed of the sensor noise generator")

        integ = IntegratorSettings()
        it = top.table("integrator", _INTEGRATOR_KEYS)
        if it is not None:
            integ = IntegratorSettings(
                method=it.choice("method", integ.method, INTEGRATOR_METHODS),
                dt_s=it.number("dt_s", integ.dt_s, unit="s", positive=True),
                substeps=it.integer("substeps", integ.substeps, minimum=0,
                                    what="inner steps per dt_s, 0 = automatic"),
                safety=it.number("safety", integ.safety, unit="(fraction of the stability bound)",
                                 positive=True, upper=1.0),
            )

        raw_bodies = top.array_of_tables("body", required=True,
                                         what="an array of [[body]] tables")
        if not raw_bodies:
            raise self.error("body", raw_bodies, "expected at least one [[body]] table")

        bodies: list[Body] = []
        by_name: dict[str, Body] = {}
        all_names = [b.get("name") for b in raw_bodies]
        joint_names: dict[str, str] = {}
        initial_eta: dict[str, np.ndarray] = {}
        for i, rb in enumerate(raw_bodies):
            body, eta = self._body(i, rb, by_name, all_names, joint_names)
            bodies.append(body)
            by_name[body.name] = body
            if eta is not None:
                initial_eta[body.name] = eta

        stations: list[Station] = []
        seen_st: set[str] = set()
        for i, rs in enumerate(top.array_of_tables("station", what="an array of [[station]] tables")):
            st = self._station(i, rs, by_name, seen_st)
            stations.append(st)

        from hil.model.sensor_specs import parse_sensors   # it builds on this module's _Table
        sensors = parse_sensors(top, bodies, stations)

        provenance = self._provenance(top)

        return Model(
            name=name,
            bodies=bodies,
            gravity_m_s2=gravity,
            foreshortening=foreshortening,
            integrator=integ,
            stations=stations,
            initial_eta=initial_eta,
            provenance=provenance,
            source=self.source,
            sensors=sensors,
            sensor_seed=sensor_seed,
        )

    # ---------------------------------------------------------------- bodies
    def _body(self, i: int, rb: dict, by_name: dict[str, Body], all_names: list,
              joint_names: dict[str, str]) -> tuple[Body, np.ndarray | None]:
        nm = rb.get("name")
        label = nm if isinstance(nm, str) and _NAME_RE.match(nm) else f"#{i + 1}"
        where = f"body[{label}]"
        bt = _Table(self, rb, where, f"body.{label}", _BODY_KEYS)
        name = bt.name("name")
        if name == BASE:
            raise bt.error("name", name, f"expected a body name other than the reserved {BASE!r}")
        if name in by_name:
            raise bt.error("name", name, "expected a unique body name (already used by an earlier body)")

        parent_expected = (f"expected {BASE!r} or the name of an earlier body "
                           f"({', '.join(repr(n) for n in by_name) or 'none defined yet'})")
        parent = bt.string("parent", what=f"a string: {BASE!r} or an earlier body's name")
        if parent != BASE and parent not in by_name:
            if parent == name:
                raise bt.error("parent", parent, parent_expected + "; a body cannot be its own parent")
            if parent in all_names:
                raise bt.error("parent", parent, parent_expected
                               + "; bodies must be listed parents first (topological order)")
            raise bt.error("parent", parent, parent_expected + "; no body has this name")
        parent_body = by_name.get(parent)

        has_rigid, has_beam = bt.has("rigid"), bt.has("beam")
        if has_rigid == has_beam:
            got = "both [rigid] and [beam] given" if has_rigid else "neither [rigid] nor [beam] given"
            raise self.error(where, rb,
                             f"expected exactly one of the tables [body.rigid] (rigid body) or "
                             f"[body.beam] (flexible beam along x); {got}")

        joint = self._joint(bt, parent, parent_body, joint_names)

        rigid = beam = None
        if has_rigid:
            rt = bt.table("rigid", _RIGID_KEYS)
            rigid = RigidInertia(
                mass_kg=rt.number("mass_kg", unit="kg", positive=True),
                com_m=rt.vector("com_m", np.zeros(3), unit="m"),
                inertia_kg_m2=rt.inertia("inertia_kg_m2", np.zeros((3, 3))),
            )
        else:
            beam = self._beam(bt)

        length = beam.length_m if beam is not None else None
        attachments: list[Attachment] = []
        seen_att: set[str] = set()
        for j, ra in enumerate(bt.array_of_tables("attachment",
                                                  what="an array of [[body.attachment]] tables")):
            an = ra.get("name")
            alabel = an if isinstance(an, str) and _NAME_RE.match(an) else f"#{j + 1}"
            at = _Table(self, ra, f"{where}.attachment[{alabel}]",
                        f"body.{name}.attachment.{alabel}", _ATTACHMENT_KEYS)
            aname = at.name("name")
            if aname in seen_att:
                raise at.error("name", aname, f"expected a unique attachment name on body {name!r}")
            seen_att.add(aname)
            station = self._station_value(at, length, name)
            attachments.append(Attachment(
                name=aname,
                station_m=station,
                mass_kg=at.number("mass_kg", unit="kg", positive=True),
                offset_m=at.vector("offset_m", np.zeros(3), unit="m"),
                inertia_kg_m2=at.inertia("inertia_kg_m2", np.zeros((3, 3))),
            ))

        eta = None
        if bt.has("initial_eta"):
            n = beam.n_modes if beam is not None else 0
            v = bt.raw("initial_eta")
            expected = (f"a list of {n} numbers in m or rad (one per mode of this body)"
                        if beam is not None else "no initial_eta (a rigid body has no modes)")
            if (not isinstance(v, list) or len(v) != n
                    or not all(_is_number(x) and math.isfinite(float(x)) for x in v)):
                raise bt.error("initial_eta", v, f"expected {expected}")
            eta = np.array([float(x) for x in v], dtype=float)

        return Body(name=name, parent=parent, joint=joint, rigid=rigid, beam=beam,
                    attachments=attachments), eta

    def _station_value(self, t: _Table, length: float | None, body_name: str,
                       key: str = "station_m") -> float:
        """station_m on a body of the given beam length (None: rigid body or base)."""
        if length is None:
            what = "the base" if body_name == BASE else f"rigid body {body_name!r}"
            v = t.number(key, 0.0, unit="m")
            if v != 0.0:
                raise t.error(key, t.raw(key),
                              f"expected 0 m on {what} (place the point with offset_m instead)")
            return v
        expected = (f"a number in m within [0, {_fmt_float(length)}] "
                    f"(the beam length of body {body_name!r})")
        v = t._get(key, 0.0, expected)
        if key in t.data:
            if not _is_number(v) or not math.isfinite(float(v)):
                raise t.error(key, v, f"expected {expected}")
            v = float(v)
            if v < 0.0 or v > length * (1.0 + _REL_TOL):
                raise t.error(key, t.raw(key), f"expected {expected}")
            v = min(v, length)
        return float(v)

    # ---------------------------------------------------------------- joints
    def _joint(self, bt: _Table, parent: str, parent_body: Body | None,
               joint_names: dict[str, str]) -> Joint:
        jt = bt.table("joint", _JOINT_KEYS, required=True,
                      what="a [body.joint] table (every body hangs from a joint)")
        name = jt.name("name")
        if name in joint_names:
            raise jt.error("name", name,
                           f"expected a unique joint name (already used by body {joint_names[name]!r})")
        joint_names[name] = bt.data["name"]

        axis = jt.vector("axis", unit="(direction, normalised on load)")
        norm = float(np.linalg.norm(axis))
        if not norm > _AXIS_MIN_NORM:
            raise jt.error("axis", jt.raw("axis"),
                           "expected a non-zero 3-vector (the joint axis direction; it is normalised)")
        axis = axis / norm

        plen = parent_body.beam.length_m if (parent_body is not None and parent_body.beam) else None
        station = self._station_value(jt, plen, parent)

        d = Joint(name=name, axis=axis)
        drive = jt.choice("drive", d.drive, DRIVES)
        joint = Joint(
            name=name,
            axis=axis,
            station_m=station,
            offset_m=jt.vector("offset_m", np.zeros(3), unit="m"),
            rpy_rad=jt.vector("rpy_rad", np.zeros(3), unit="rad"),
            q0_rad=jt.number("q0_rad", d.q0_rad, unit="rad"),
            qd0_rad_s=jt.number("qd0_rad_s", d.qd0_rad_s, unit="rad/s"),
            rotor_inertia_kg_m2=jt.number("rotor_inertia_kg_m2", d.rotor_inertia_kg_m2,
                                          unit="kg m^2", nonneg=True),
            gear_ratio=jt.number("gear_ratio", d.gear_ratio,
                                 unit="(motor angle / joint angle)", positive=True),
            drive=drive,
            **{k: jt.checked_later(k, getattr(d, k)) for k in JOINT_FRICTION_UNITS},
        )

        if jt.has("profile"):
            if drive != DRIVE_PRESCRIBED:
                raise jt.error("profile", jt.raw("profile"),
                               f'expected no profile table unless drive = "{DRIVE_PRESCRIBED}"')
            joint.profile = self._profile(jt)
        elif drive == DRIVE_PRESCRIBED:
            joint.profile = Profile(kind=PROFILE_CONSTANT)

        if jt.has("elasticity"):
            if drive == DRIVE_PRESCRIBED:
                raise jt.error("elasticity", jt.raw("elasticity"),
                               "expected no elasticity table for a prescribed joint "
                               "(the link angle is imposed; a prescribed joint must be rigid)")
            et = jt.table("elasticity", _ELASTICITY_KEYS)
            joint.elasticity = JointElasticity(
                stiffness_N_m_rad=et.number("stiffness_N_m_rad", unit="N m/rad", positive=True),
                damping_N_m_s_rad=et.number("damping_N_m_s_rad", 0.0, unit="N m s/rad", nonneg=True),
            )
        jt.reject(joint_problems(joint, jt.data))

        if jt.has("motor"):
            if drive == DRIVE_PRESCRIBED:
                raise jt.error("motor", jt.raw("motor"),
                               "expected no motor table for a prescribed joint (its motion is imposed)")
            joint.motor = self._motor(jt, joint)
        return joint

    def _motor(self, jt: _Table, joint: Joint) -> DriveSpec:
        """The [body.joint.motor] table; may set the joint's rotor inertia."""
        mt = jt.table("motor", _MOTOR_KEYS)
        d = DriveSpec()
        spec = DriveSpec(interface=mt.raw("interface", d.interface),
                         **{k: mt.checked_later(k, getattr(d, k)) for k in DRIVE_UNITS})
        mt.reject(drive_problems(spec, mt.data))
        if mt.has("rotor_inertia_kg_m2"):
            if jt.has("rotor_inertia_kg_m2"):
                raise mt.error("rotor_inertia_kg_m2", mt.raw("rotor_inertia_kg_m2"),
                               "expected the rotor inertia in kg m^2 in one place only "
                               "([body.joint] sets rotor_inertia_kg_m2 too)")
            joint.rotor_inertia_kg_m2 = mt.number("rotor_inertia_kg_m2", unit="kg m^2", nonneg=True)
        return spec

    def _profile(self, jt: _Table) -> Profile:
        raw = jt.raw("profile")
        if not isinstance(raw, dict):
            raise jt.error("profile", raw, "expected a [body.joint.profile] table")
        kind = raw.get("kind", PROFILE_CONSTANT)
        if not isinstance(kind, str) or kind not in PROFILE_KINDS:
            raise self.error(f"{jt.key('profile')}.kind", kind,
                             "expected one of " + ", ".join(json.dumps(k) for k in PROFILE_KINDS))
        pt = jt.table("profile", PROFILE_KEYS[kind])
        # accept every profile key for provenance, whatever the kind
        for ks in PROFILE_KEYS.values():
            for k in ks:
                self.known.add(f"{pt.prov}.{k}")
        d = Profile()
        if kind == PROFILE_SPINUP:
            return Profile(kind=kind,
                           omega_rad_s=pt.number("omega_rad_s", d.omega_rad_s, unit="rad/s"),
                           T_s=pt.number("T_s", d.T_s, unit="s", positive=True))
        if kind == PROFILE_CYCLOIDAL:
            return Profile(kind=kind,
                           k_rad_s=pt.number("k_rad_s", d.k_rad_s, unit="rad/s"),
                           T_s=pt.number("T_s", d.T_s, unit="s", positive=True))
        if kind == PROFILE_TABLE:
            t = pt.vector("t_s", n=None, unit="s")
            if len(t) < 2:
                raise pt.error("t_s", pt.raw("t_s"), "expected at least 2 sample times in s")
            bad = np.nonzero(np.diff(t) <= 0)[0]
            if bad.size:
                k = int(bad[0]) + 1
                raise pt.error("t_s", pt.raw("t_s"),
                               f"expected strictly increasing sample times in s "
                               f"(t_s[{k}] = {_fmt_float(t[k])} <= t_s[{k - 1}] = {_fmt_float(t[k - 1])})")
            q = pt.vector("q_rad", n=None, unit="rad")
            if len(q) != len(t):
                raise pt.error("q_rad", pt.raw("q_rad"),
                               f"expected {len(t)} angles in rad (one per entry of t_s)")
            return Profile(kind=kind, t_s=t, q_rad=q)
        return Profile(kind=PROFILE_CONSTANT)

    # ---------------------------------------------------------------- beams
    def _beam(self, bt: _Table) -> Beam:
        b = bt.table("beam", _BEAM_KEYS)
        length = b.number("length_m", unit="m", positive=True)
        kw = dict(
            length_m=length,
            E_Pa=b.number("E_Pa", unit="Pa", positive=True),
            G_Pa=b.number("G_Pa", unit="Pa", positive=True),
            rho_kg_m3=b.number("rho_kg_m3", unit="kg/m^3", positive=True),
            area_m2=b.number("area_m2", unit="m^2", positive=True),
            Iy_m4=b.number("Iy_m4", unit="m^4", positive=True),
            Iz_m4=b.number("Iz_m4", unit="m^4", positive=True),
            torsion_constant_m4=b.number("torsion_constant_m4", unit="m^4", positive=True),
        )
        dflt = Beam(**kw)
        polar = b.number("polar_moment_m4", None, unit="m^4", positive=True)
        rotary = b.boolean("rotary_inertia", dflt.rotary_inertia)
        family = b.choice("family", dflt.family, MODE_FAMILIES)
        quad = b.integer("quadrature_points", dflt.quadrature_points, minimum=0,
                         what="0 = chosen from the mode count")

        counts = {"bending_y": dflt.n_bending_y, "bending_z": dflt.n_bending_z,
                  "torsion": dflt.n_torsion, "axial": dflt.n_axial}
        mt = b.table("modes", _MODES_KEYS)
        if mt is not None:
            for kind in MODE_KINDS:
                counts[kind] = mt.integer(kind, counts[kind], minimum=0,
                                          what=f"number of {kind} modes")
        beam = Beam(**kw, n_bending_y=counts["bending_y"], n_bending_z=counts["bending_z"],
                    n_torsion=counts["torsion"], n_axial=counts["axial"], family=family,
                    rotary_inertia=rotary, polar_moment_m4=polar, quadrature_points=quad)
        n = beam.n_modes

        expected = (f"a non-negative modal damping ratio (dimensionless) or a list of {n} of them "
                    f"(one per mode: {counts['bending_y']} bending_y, {counts['bending_z']} bending_z, "
                    f"{counts['torsion']} torsion, {counts['axial']} axial)")
        zeta = b.raw("damping_ratio", 0.0)
        if _is_number(zeta):
            zeta_arr = np.full(n, float(zeta))
        elif isinstance(zeta, list) and all(_is_number(z) for z in zeta):
            if len(zeta) != n:
                raise b.error("damping_ratio", zeta, f"expected {expected}; got {len(zeta)} values")
            zeta_arr = np.array([float(z) for z in zeta], dtype=float)
        else:
            raise b.error("damping_ratio", zeta, f"expected {expected}")
        if not np.all(np.isfinite(zeta_arr)) or np.any(zeta_arr < 0):
            raise b.error("damping_ratio", zeta, f"expected {expected}")
        beam.damping_ratio = zeta_arr

        if b.has("user_shapes"):
            if family != "user":
                raise b.error("user_shapes", b.raw("user_shapes"),
                              'expected no user_shapes unless family = "user"')
            us = b.table("user_shapes", MODE_KINDS)
            shapes = {}
            for kind in MODE_KINDS:
                if not us.has(kind):
                    continue
                nk = counts[kind]
                if nk == 0:
                    raise us.error(kind, us.raw(kind),
                                   f"expected no {kind} shapes (modes.{kind} = 0)")
                st = us.table(kind, _USER_SHAPE_KEYS)
                x = st.vector("x_m", n=None, unit="m")
                if (len(x) < 2 or np.any(np.diff(x) <= 0) or abs(x[0]) > _REL_TOL * length
                        or abs(x[-1] - length) > _REL_TOL * length):
                    raise st.error("x_m", st.raw("x_m"),
                                   f"expected at least 2 strictly increasing stations in m "
                                   f"from 0 to {_fmt_float(length)} (the beam length)")
                vals = st.raw("values", _MISSING)
                exp_v = (f"{nk} rows (one per {kind} mode) of {len(x)} numbers "
                         f"(shape values at x_m, per unit modal coordinate)")
                if (not isinstance(vals, list) or len(vals) != nk
                        or not all(isinstance(r, list) and len(r) == len(x)
                                   and all(_is_number(v) and math.isfinite(float(v)) for v in r)
                                   for r in vals)):
                    raise st.error("values", vals,
                                   f"{'required; ' if vals is _MISSING else ''}expected {exp_v}")
                shapes[kind] = (x, np.array(vals, dtype=float))
            beam.user_shapes = shapes
        if family == "user":
            have = beam.user_shapes or {}
            for kind in MODE_KINDS:
                if counts[kind] > 0 and kind not in have:
                    raise self.error(f"{b.key('user_shapes')}.{kind}", _MISSING,
                                     f'required with family = "user" and modes.{kind} = '
                                     f"{counts[kind]}; expected a table with x_m (m) and values")
        return beam

    # ---------------------------------------------------------------- stations
    def _station(self, i: int, rs: dict, by_name: dict[str, Body], seen: set[str]) -> Station:
        nm = rs.get("name")
        label = nm if isinstance(nm, str) and _NAME_RE.match(nm) else f"#{i + 1}"
        st = _Table(self, rs, f"station[{label}]", f"station.{label}", _STATION_KEYS)
        name = st.name("name")
        if name in seen:
            raise st.error("name", name, "expected a unique station name")
        seen.add(name)
        body_name = st.string("body", what="the name of a body")
        if body_name not in by_name:
            raise st.error("body", body_name, "expected one of the bodies "
                           + ", ".join(repr(n) for n in by_name))
        body = by_name[body_name]
        station = self._station_value(st, body.beam.length_m if body.beam else None, body_name)
        return Station(name=name, body=body_name, station_m=station,
                       offset_m=st.vector("offset_m", np.zeros(3), unit="m"))

    # ---------------------------------------------------------------- provenance
    def _provenance(self, top: _Table) -> dict:
        raw = top.raw("provenance", {})
        if not isinstance(raw, dict):
            raise self.error("provenance", raw, 'expected a table of "dotted.key" = "source" strings')
        out: dict[str, str] = {}
        for k, v in raw.items():
            key = f"provenance.{_bare(k)}"
            if isinstance(v, dict):
                raise self.error(key, v, 'expected a string; quote dotted keys ("body.link1.beam.E_Pa" = "...")')
            if not isinstance(v, str):
                raise self.error(key, v, "expected a string naming the source of the value")
            if k not in self.known:
                hint = difflib.get_close_matches(k, sorted(self.known), n=1)
                did = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise self.error(key, v, "expected the key to name a parameter of this file, e.g. "
                                 f"'body.<body>.beam.E_Pa'{did}")
            out[k] = v
        return out


# ----------------------------------------------------------------------------- API
def parse_toml(text: str, source: str) -> dict:
    """TOML text as a dict; a syntax error becomes a ConfigError naming ``source``."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, None, _MISSING, "valid TOML",
                          message=f"{source}: not valid TOML: {exc}") from exc


def reject(source: str, where: str, problems: Sequence[Problem]) -> None:
    """Raise the first of `problems` (hil.model.spec.drive_problems, joint_problems of a model built in
    code) as a ConfigError, a ValueError, naming `source` and the key ``<where>.<key>``
    (``body[link1].joint.motor``): the message a preset with that value gets."""
    if problems:
        key, value, expected = problems[0]
        raise ConfigError(source, f"{where}.{key}", value, expected)


def load_model_from_string(text: str, source: str = "<string>") -> Model:
    """Parse preset TOML text (``source`` names it in error messages)."""
    return _Loader(source).load(parse_toml(text, source))


def load_model(path: str | Path) -> Model:
    """Load and validate an arm preset (TOML) into a :class:`hil.model.spec.Model`."""
    source = str(path)
    text = Path(path).read_text(encoding="utf-8")
    return load_model_from_string(text, source)
