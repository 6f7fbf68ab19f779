"""The ``[[body]]`` tables of an arm preset: joint (profile, elasticity, motor), rigid body or beam
(modes, damping, user shapes), attachments and initial modal coordinates.

The schema and its units are stated in :mod:`hil.model.config`, which reads the rest of the file;
both walk the parsed TOML with :mod:`config_schema` tables, so every error names the file, the key
(``body[link1].beam.E_Pa``), the value and what was expected with its unit.
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from config_schema import MISSING, NAME_RE, ConfigError, Document, Table, fmt_float, is_number, suggest
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
    Joint,
    JointElasticity,
    Profile,
    RigidInertia,
    drive_problems,
    joint_problems,
)

DRIVES = (DRIVE_TORQUE, DRIVE_PRESCRIBED)
PROFILE_KINDS = (PROFILE_SPINUP, PROFILE_CYCLOIDAL, PROFILE_TABLE, PROFILE_CONSTANT)
MAX_QUADRATURE_POINTS = 256    # lumped nodes per beam: each costs every evaluation (and the Gauss rule N^2 memory)
MAX_MODES_PER_KIND = 24        # modes of one kind per beam: a body's modal blocks cost its mode count cubed per
                               # evaluation, and the 24th bending mode of ELLA's link 1 (clamped-free estimate
                               # (2n - 1)^2 pi / (8 L^2) sqrt(EI / rho A)) already lies near 35 kHz
PROFILE_KEYS = {
    PROFILE_SPINUP: ("kind", "omega_rad_s", "T_s"),
    PROFILE_CYCLOIDAL: ("kind", "k_rad_s", "T_s"),
    PROFILE_TABLE: ("kind", "t_s", "q_rad"),
    PROFILE_CONSTANT: ("kind",),
}
BODY_KEYS = ("name", "parent", "initial_eta", "joint", "rigid", "beam", "attachment")
JOINT_KEYS = ("name", "axis", "station_m", "offset_m", "rpy_rad", "q0_rad", "qd0_rad_s",
              "rotor_inertia_kg_m2", "gear_ratio", "viscous_N_m_s_rad", "coulomb_N_m",
              "coulomb_smoothing_rad_s", "stribeck_N_m", "stribeck_velocity_rad_s",
              "backlash_rad", "drive", "profile", "elasticity", "motor")
ELASTICITY_KEYS = ("stiffness_N_m_rad", "damping_N_m_s_rad")
# [body.joint.motor]: the DriveSpec fields (checked by hil.model.spec.drive_problems) and the rotor inertia
MOTOR_KEYS = ("interface", *DRIVE_UNITS, "rotor_inertia_kg_m2")
RIGID_KEYS = ("mass_kg", "com_m", "inertia_kg_m2")
BEAM_KEYS = ("length_m", "E_Pa", "G_Pa", "rho_kg_m3", "area_m2", "Iy_m4", "Iz_m4",
             "torsion_constant_m4", "polar_moment_m4", "rotary_inertia", "family",
             "damping_ratio", "frequency_scale", "quadrature_points", "modes", "user_shapes")
FREQUENCY_SCALE = (0.1, 10.0)    # a mode's stiffness 0.01 .. 100 times what the section gives
MODES_KEYS = MODE_KINDS
USER_SHAPE_KEYS = ("x_m", "values")
ATTACHMENT_KEYS = ("name", "station_m", "mass_kg", "offset_m", "inertia_kg_m2")

_AXIS_MIN_NORM = 1e-9
_REL_TOL = 1e-9


class BodyReader:
    """Reads the ``[[body]]`` tables of one preset in file order: a parent must come before its
    children, and body and joint names are unique across the file."""

    def __init__(self, doc: Document, raw_bodies: list[dict]):
        self.doc = doc
        self.raw_bodies = raw_bodies
        self.all_names = [b.get("name") for b in raw_bodies]
        self.by_name: dict[str, Body] = {}
        self.joint_names: dict[str, str] = {}

    def read(self) -> tuple[list[Body], dict[str, np.ndarray]]:
        """The bodies, and the initial modal coordinates of those that set initial_eta."""
        bodies: list[Body] = []
        initial_eta: dict[str, np.ndarray] = {}
        for i, rb in enumerate(self.raw_bodies):
            body, eta = self._body(i, rb)
            bodies.append(body)
            self.by_name[body.name] = body
            if eta is not None:
                initial_eta[body.name] = eta
        return bodies, initial_eta

    def _body(self, i: int, rb: dict) -> tuple[Body, np.ndarray | None]:
        by_name = self.by_name
        nm = rb.get("name")
        label = nm if isinstance(nm, str) and NAME_RE.match(nm) else f"#{i + 1}"
        where = f"body[{label}]"
        bt = Table(self.doc, rb, where, f"body.{label}", BODY_KEYS)
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
            if parent in self.all_names:
                raise bt.error("parent", parent, parent_expected
                               + "; bodies must be listed parents first (topological order)")
            raise bt.error("parent", parent, parent_expected + "; no body has this name"
                           + suggest(parent, [BASE, *by_name]))
        parent_body = by_name.get(parent)

        has_rigid, has_beam = bt.has("rigid"), bt.has("beam")
        if has_rigid == has_beam:
            got = "both [rigid] and [beam] given" if has_rigid else "neither [rigid] nor [beam] given"
            raise self.doc.error(where, rb,
                                 f"expected exactly one of the tables [body.rigid] (rigid body) or "
                                 f"[body.beam] (flexible beam along x); {got}")

        joint = self._joint(bt, parent, parent_body)

        rigid = beam = None
        if has_rigid:
            rt = bt.table("rigid", RIGID_KEYS)
            rigid = RigidInertia(
                mass_kg=rt.number("mass_kg", unit="kg", positive=True),
                com_m=rt.vector("com_m", np.zeros(3), unit="m"),
                inertia_kg_m2=inertia_tensor(rt, "inertia_kg_m2", np.zeros((3, 3))),
            )
        else:
            beam = self._beam(bt)

        length = beam.length_m if beam is not None else None
        attachments: list[Attachment] = []
        seen_att: set[str] = set()
        for j, ra in enumerate(bt.array_of_tables("attachment",
                                                  what="an array of [[body.attachment]] tables")):
            an = ra.get("name")
            alabel = an if isinstance(an, str) and NAME_RE.match(an) else f"#{j + 1}"
            at = Table(self.doc, ra, f"{where}.attachment[{alabel}]",
                       f"body.{name}.attachment.{alabel}", ATTACHMENT_KEYS)
            aname = at.name("name")
            if aname in seen_att:
                raise at.error("name", aname, f"expected a unique attachment name on body {name!r}")
            seen_att.add(aname)
            station = station_position(at, length, name)
            attachments.append(Attachment(
                name=aname,
                station_m=station,
                mass_kg=at.number("mass_kg", unit="kg", positive=True),
                offset_m=at.vector("offset_m", np.zeros(3), unit="m"),
                inertia_kg_m2=inertia_tensor(at, "inertia_kg_m2", np.zeros((3, 3))),
            ))

        eta = None
        if bt.has("initial_eta"):
            n = beam.n_modes if beam is not None else 0
            v = bt.raw("initial_eta")
            expected = (f"a list of {n} numbers in m or rad (one per mode of this body)"
                        if beam is not None else "no initial_eta (a rigid body has no modes)")
            if (not isinstance(v, list) or len(v) != n
                    or not all(is_number(x) and math.isfinite(float(x)) for x in v)):
                raise bt.error("initial_eta", v, f"expected {expected}")
            eta = np.array([float(x) for x in v], dtype=float)

        return Body(name=name, parent=parent, joint=joint, rigid=rigid, beam=beam,
                    attachments=attachments), eta

    # ---------------------------------------------------------------- joints
    def _joint(self, bt: Table, parent: str, parent_body: Body | None) -> Joint:
        jt = bt.table("joint", JOINT_KEYS, required=True,
                      what="a [body.joint] table (every body hangs from a joint)")
        name = jt.name("name")
        if name in self.joint_names:
            raise jt.error("name", name,
                           f"expected a unique joint name (already used by body {self.joint_names[name]!r})")
        self.joint_names[name] = bt.data["name"]

        axis = jt.vector("axis", unit="(direction, normalised on load)")
        norm = float(np.linalg.norm(axis))
        if not norm > _AXIS_MIN_NORM:
            raise jt.error("axis", jt.raw("axis"),
                           "expected a non-zero 3-vector (the joint axis direction; it is normalised)")
        axis = axis / norm

        plen = parent_body.beam.length_m if (parent_body is not None and parent_body.beam) else None
        station = station_position(jt, plen, parent)

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
            et = jt.table("elasticity", ELASTICITY_KEYS)
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

    def _motor(self, jt: Table, joint: Joint) -> DriveSpec:
        """The [body.joint.motor] table; may set the joint's rotor inertia."""
        mt = jt.table("motor", MOTOR_KEYS)
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

    def _profile(self, jt: Table) -> Profile:
        raw = jt.raw("profile")
        if not isinstance(raw, dict):
            raise jt.error("profile", raw, "expected a [body.joint.profile] table")
        kind = raw.get("kind", PROFILE_CONSTANT)
        if not isinstance(kind, str) or kind not in PROFILE_KINDS:
            did = suggest(kind, PROFILE_KINDS) if isinstance(kind, str) else ""
            raise self.doc.error(f"{jt.key('profile')}.kind", kind, "expected one of "
                                 + ", ".join(json.dumps(k) for k in PROFILE_KINDS) + did)
        pt = jt.table("profile", PROFILE_KEYS[kind])
        # accept every profile key for provenance, whatever the kind
        for ks in PROFILE_KEYS.values():
            for k in ks:
                self.doc.known.add(f"{pt.path}.{k}")
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
                               f"(t_s[{k}] = {fmt_float(t[k])} <= t_s[{k - 1}] = {fmt_float(t[k - 1])})")
            q = pt.vector("q_rad", n=None, unit="rad")
            if len(q) != len(t):
                raise pt.error("q_rad", pt.raw("q_rad"),
                               f"expected {len(t)} angles in rad (one per entry of t_s)")
            return Profile(kind=kind, t_s=t, q_rad=q)
        return Profile(kind=PROFILE_CONSTANT)

    # ---------------------------------------------------------------- beams
    def _beam(self, bt: Table) -> Beam:
        b = bt.table("beam", BEAM_KEYS)
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
        quad = b.integer("quadrature_points", dflt.quadrature_points, minimum=0, maximum=MAX_QUADRATURE_POINTS,
                         what="lumped nodes of the beam; 0 = chosen from the mode count")

        counts = {"bending_y": dflt.n_bending_y, "bending_z": dflt.n_bending_z,
                  "torsion": dflt.n_torsion, "axial": dflt.n_axial}
        mt = b.table("modes", MODES_KEYS)
        if mt is not None:
            for kind in MODE_KINDS:
                counts[kind] = mt.integer(kind, counts[kind], minimum=0, maximum=MAX_MODES_PER_KIND,
                                          what=f"number of {kind} modes")
        beam = Beam(**kw, n_bending_y=counts["bending_y"], n_bending_z=counts["bending_z"],
                    n_torsion=counts["torsion"], n_axial=counts["axial"], family=family,
                    rotary_inertia=rotary, polar_moment_m4=polar, quadrature_points=quad)
        n = beam.n_modes

        beam.damping_ratio = _per_mode(b, "damping_ratio", counts, n, 0.0, (0.0, np.inf),
                                       "a non-negative modal damping ratio (dimensionless)")
        if b.has("frequency_scale"):         # else empty: every mode as its section gives it
            beam.frequency_scale = _per_mode(b, "frequency_scale", counts, n, 1.0, FREQUENCY_SCALE,
                                             f"a factor on the mode's frequency from the section, "
                                             f"{FREQUENCY_SCALE[0]:g} .. {FREQUENCY_SCALE[1]:g}")
        if b.has("user_shapes"):
            beam.user_shapes = _user_shapes(b, counts, length, family)
        if family == "user":
            have = beam.user_shapes or {}
            for kind in MODE_KINDS:
                if counts[kind] > 0 and kind not in have:
                    raise self.doc.error(f"{b.key('user_shapes')}.{kind}", MISSING,
                                         f'required with family = "user" and modes.{kind} = '
                                         f"{counts[kind]}; expected a table with x_m (m) and values")
        return beam


def _per_mode(b: Table, key: str, counts: dict[str, int], n: int, default: float, bounds: tuple[float, float],
              what: str) -> np.ndarray:
    """A per-mode value of the beam: one for all n modes, or one per mode, each within `bounds`."""
    expected = (f"{what} or a list of {n} of them (one per mode: {counts['bending_y']} bending_y, "
                f"{counts['bending_z']} bending_z, {counts['torsion']} torsion, {counts['axial']} axial)")
    raw = b.raw(key, default)
    if is_number(raw):
        values = np.full(n, float(raw))
    elif isinstance(raw, list) and all(is_number(z) for z in raw):
        if len(raw) != n:
            raise b.error(key, raw, f"expected {expected}; got {len(raw)} values")
        values = np.array([float(z) for z in raw], dtype=float)
    else:
        raise b.error(key, raw, f"expected {expected}")
    if not np.all(np.isfinite(values)) or np.any(values < bounds[0]) or np.any(values > bounds[1]):
        raise b.error(key, raw, f"expected {expected}")
    return values


def _user_shapes(b: Table, counts: dict[str, int], length: float, family: str) -> dict:
    """The beam's tabulated mode shapes per kind: (x_m, values), checked against its mode counts."""
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
        st = us.table(kind, USER_SHAPE_KEYS)
        x = st.vector("x_m", n=None, unit="m")
        if (len(x) < 2 or np.any(np.diff(x) <= 0) or abs(x[0]) > _REL_TOL * length
                or abs(x[-1] - length) > _REL_TOL * length):
            raise st.error("x_m", st.raw("x_m"),
                           f"expected at least 2 strictly increasing stations in m "
                           f"from 0 to {fmt_float(length)} (the beam length)")
        vals = st.raw("values", MISSING)
        exp_v = (f"{nk} rows (one per {kind} mode) of {len(x)} numbers "
                 f"(shape values at x_m, per unit modal coordinate)")
        if (not isinstance(vals, list) or len(vals) != nk
                or not all(isinstance(r, list) and len(r) == len(x)
                           and all(is_number(v) and math.isfinite(float(v)) for v in r)
                           for r in vals)):
            raise st.error("values", vals,
                           f"{'required; ' if vals is MISSING else ''}expected {exp_v}")
        shapes[kind] = (x, np.array(vals, dtype=float))
    return shapes


def station_position(t: Table, length: float | None, body_name: str, key: str = "station_m") -> float:
    """station_m of t on a body of the given beam length (None: a rigid body or the base)."""
    if length is None:
        what = "the base" if body_name == BASE else f"rigid body {body_name!r}"
        v = t.number(key, 0.0, unit="m")
        if v != 0.0:
            raise t.error(key, t.raw(key),
                          f"expected 0 m on {what} (place the point with offset_m instead)")
        return v
    expected = (f"a number in m within [0, {fmt_float(length)}] "
                f"(the beam length of body {body_name!r})")
    v = t.raw(key, 0.0)
    if key in t.data:
        if not is_number(v) or not math.isfinite(float(v)):
            raise t.error(key, v, f"expected {expected}")
        v = float(v)
        if v < 0.0 or v > length * (1.0 + _REL_TOL):
            raise t.error(key, t.raw(key), f"expected {expected}")
        v = min(v, length)
    return float(v)


def inertia_tensor(t: Table, k: str, default: Any = MISSING) -> np.ndarray:
    """The inertia tensor at k (3x3, [Ixx, Iyy, Izz] or [Ixx, Iyy, Izz, Ixy, Ixz, Iyz]) in kg m^2
    about the CoM: symmetric, positive semidefinite, principal moments obeying the triangle
    inequality."""
    expected = ("a symmetric positive semidefinite inertia tensor in kg m^2 about the CoM "
                "(3x3, [Ixx, Iyy, Izz] or [Ixx, Iyy, Izz, Ixy, Ixz, Iyz])")
    if not t.has(k):
        if default is MISSING:
            raise t.error(k, MISSING, f"required; expected {expected}")
        return np.array(default, dtype=float)
    v = t.raw(k)

    def bad(extra: str = "") -> ConfigError:
        return t.error(k, v, f"expected {expected}{extra}")

    if not isinstance(v, list):
        raise bad()
    if len(v) == 3 and all(isinstance(r, list) for r in v):
        if not all(len(r) == 3 and all(is_number(x) for x in r) for r in v):
            raise bad()
        I = np.array(v, dtype=float)
    elif len(v) in (3, 6) and all(is_number(x) for x in v):
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
        raise bad(f" (eigenvalue {fmt_float(float(eig[0]))} < 0)")
    a, b, c = eig
    if a + b < c - tol:
        raise bad(f" (principal moments {fmt_float(a)}, {fmt_float(b)}, {fmt_float(c)} "
                  "violate the triangle inequality I1 + I2 >= I3)")
    return I
