"""Model description of a flexible serial (or tree) manipulator, in SI units.

These dataclasses are what a TOML arm preset is parsed into (see ``hil.model.config``)
and what ``hil.model.assembly`` turns into the flat arrays of the numba kernels.
``drive_problems`` and ``joint_problems`` are the one statement of the valid drive,
friction and backlash parameters: ``hil.model.config`` reports their problems for a preset,
``hil.model.assembly`` and ``hil.devices.drives`` for a model built in code, with the same text.
Frames and signs are stated once, in the manual, docs/model.md "Conventions".
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Collection

import numpy as np

from config_schema import Problem, in_unit

BASE = "base"

DRIVE_TORQUE = "torque"
DRIVE_PRESCRIBED = "prescribed"

INTERFACE_TORQUE = "torque"        # motor drive takes a link-side torque, ideal torque source
INTERFACE_CURRENT = "current"      # link-side torque -> current reference of a first-order current loop
INTERFACE_VOLTAGE = "voltage"      # PWM duty in [-1, 1] of the supply voltage across the winding
INTERFACES = (INTERFACE_TORQUE, INTERFACE_CURRENT, INTERFACE_VOLTAGE)

PROFILE_SPINUP = "spinup"          # seed 003 / Kane-Ryan-Banerjee smooth spin-up law
PROFILE_CYCLOIDAL = "cycloidal"    # seed 004 eq. (44): q = k (t - T/pi sin(pi t / T))
PROFILE_TABLE = "table"            # tabulated angle, cubic spline
PROFILE_CONSTANT = "constant"      # hold q0

MODE_FAMILIES = ("clamped_free", "clamped_mass", "user")
MODE_KINDS = ("bending_y", "bending_z", "torsion", "axial")


@dataclass
class Profile:
    """Prescribed joint angle q(t) [rad] (built-in law or table)."""

    kind: str = PROFILE_CONSTANT
    omega_rad_s: float = 0.0      # spinup: final spin rate
    T_s: float = 1.0              # spinup: ramp duration; cycloidal: half period
    k_rad_s: float = 0.0          # cycloidal: rate constant
    t_s: np.ndarray | None = None  # table: sample times
    q_rad: np.ndarray | None = None  # table: angles


@dataclass
class JointElasticity:
    """Spong joint: motor-side angle (referred to the link side) and a spring to the link."""

    stiffness_N_m_rad: float
    damping_N_m_s_rad: float = 0.0


@dataclass
class DriveSpec:
    """Motor drive of one joint: a permanent-magnet DC motor behind the joint's gear.

    The model and its sign conventions are stated in ``hil.devices.drives``. Motor quantities (R, L,
    Kt, Ke, current) are at the motor shaft; torque limit and brake torque at the joint (link
    side). The rotor inertia and gear ratio are the joint's (``Joint.rotor_inertia_kg_m2``,
    ``Joint.gear_ratio``). A limit of ``inf`` means none. Valid values: ``drive_problems``.
    """

    interface: str = INTERFACE_TORQUE
    resistance_ohm: float = 0.0            # winding resistance R
    inductance_H: float = 0.0              # winding inductance L
    torque_constant_N_m_A: float = 0.0     # Kt
    back_emf_V_s_rad: float = 0.0          # Ke
    gear_efficiency: float = 1.0           # eta in (0, 1]
    torque_limit_N_m: float = float("inf")   # link side
    current_limit_A: float = float("inf")
    current_bandwidth_hz: float = 0.0      # current interface: first-order loop bandwidth
    supply_V: float = 0.0                  # voltage interface: bridge supply voltage
    brake_torque_N_m: float = 0.0          # holding brake's static (holding) torque, link side; 0: no brake
    brake_kinetic_N_m: float | None = None      # its torque while slipping, <= the holding torque; None: equal
    brake_smoothing_rad_s: float | None = None  # ramp width of the slipping brake and its stick velocity;
                                                # None: from the integrator


@dataclass
class Joint:
    """Revolute joint from a station on the parent body into the child body's frame.

    The joint frame sits at ``station_m`` along the parent's beam axis (x), moved by
    ``offset_m`` and turned by ``rpy_rad`` (fixed-axis roll, pitch, yaw, i.e.
    R = Rz(yaw) Ry(pitch) Rx(roll)), rigidly attached to the parent's deformed
    cross-section at that station. The child frame is the joint frame turned by q
    about ``axis``. Valid friction and backlash values: ``joint_problems``.
    """

    name: str
    axis: np.ndarray
    station_m: float = 0.0
    offset_m: np.ndarray = field(default_factory=lambda: np.zeros(3))
    rpy_rad: np.ndarray = field(default_factory=lambda: np.zeros(3))
    q0_rad: float = 0.0
    qd0_rad_s: float = 0.0
    rotor_inertia_kg_m2: float = 0.0   # motor rotor, motor side
    gear_ratio: float = 1.0            # motor angle / joint angle
    viscous_N_m_s_rad: float = 0.0
    coulomb_N_m: float = 0.0
    coulomb_smoothing_rad_s: float = 1e-3  # tanh(qd / v_s) smoothing of Coulomb friction; a lower bound
                                           # (Plant.stabilize_friction widens it where a substep cannot keep it)
    stribeck_N_m: float = 0.0              # breakaway torque above the Coulomb level; 0: none
    stribeck_velocity_rad_s: float = 0.0   # its decay exp(-(qd / v_st)^2)
    backlash_rad: float = 0.0              # total dead band of the Spong joint spring
    drive: str = DRIVE_TORQUE
    profile: Profile | None = None
    elasticity: JointElasticity | None = None
    motor: DriveSpec | None = None         # None: an ideal torque drive without limits

    @property
    def armature_kg_m2(self) -> float:
        """Rotor inertia reflected through the gear to the joint side, n^2 J_r."""
        return self.gear_ratio ** 2 * self.rotor_inertia_kg_m2


@dataclass
class RigidInertia:
    mass_kg: float
    com_m: np.ndarray                 # centre of mass in the body frame
    inertia_kg_m2: np.ndarray         # 3x3 about the centre of mass, body axes


@dataclass
class Beam:
    """Euler-Bernoulli beam along the body x axis from x = 0 (clamped at the joint) to L.

    bending_y: deflection along body y (bending in the x-y plane, stiffness E*Iz);
    bending_z: deflection along body z (bending in the x-z plane, stiffness E*Iy);
    torsion: twist about x (stiffness G*J); axial: stretch along x (stiffness E*A).
    """

    length_m: float
    E_Pa: float
    G_Pa: float
    rho_kg_m3: float
    area_m2: float
    Iy_m4: float
    Iz_m4: float
    torsion_constant_m4: float
    n_bending_y: int = 2
    n_bending_z: int = 2
    n_torsion: int = 0
    n_axial: int = 0
    family: str = "clamped_free"
    damping_ratio: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per mode, in mode order
    frequency_scale: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per mode (empty: all 1), modal.beam_modes
    rotary_inertia: bool = True
    polar_moment_m4: float | None = None   # for torsional rotary inertia; default Iy + Iz
    quadrature_points: int = 0             # 0: chosen from the mode count
    user_shapes: dict | None = None        # kind -> (x_m array, values array (n_modes, len(x)))

    @property
    def n_modes(self) -> int:
        return self.n_bending_y + self.n_bending_z + self.n_torsion + self.n_axial


@dataclass
class Attachment:
    """Rigid body carried by a link (motor housing, payload) at a station."""

    name: str
    station_m: float
    mass_kg: float
    offset_m: np.ndarray = field(default_factory=lambda: np.zeros(3))   # CoM from the station point
    inertia_kg_m2: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))  # about CoM


@dataclass
class Body:
    name: str
    parent: str                  # body name or BASE
    joint: Joint
    rigid: RigidInertia | None = None
    beam: Beam | None = None
    attachments: list[Attachment] = field(default_factory=list)

    @property
    def flexible(self) -> bool:
        return self.beam is not None


@dataclass
class IntegratorSettings:
    method: str = "auto"       # auto | fitted_midpoint | rk4 | imex_midpoint | euler
    dt_s: float = 1e-3         # outer step (the real-time period)
    substeps: int = 0          # 0: automatic (auto: by accuracy; a named method: its stability bound)
    safety: float = 0.5        # fraction of the method's stability bound used
    bandwidth_hz: float = 0.0  # auto keeps the modes below this accurate; 0: every retained mode
    budget_fraction: float = 0.5   # share of the period a plant step may take (auto's time budget)
    motion_tolerance_rad: float = 1e-6   # auto: the probe's joint angles within this over 2 s; 0: off
    energy_tolerance: float = 0.0  # auto: max energy deviation of the undamped arm over 10 s / max kinetic energy; 0: off
    judged_by: str = ""        # a pinned plan whose joint motion was judged elsewhere (a campaign's corners): who, how


@dataclass
class Station:
    """A named point of interest (tip, sensor site) on a body."""

    name: str
    body: str
    station_m: float
    offset_m: np.ndarray = field(default_factory=lambda: np.zeros(3))


@dataclass
class Model:
    name: str
    bodies: list[Body]
    gravity_m_s2: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    foreshortening: bool = True
    integrator: IntegratorSettings = field(default_factory=IntegratorSettings)
    stations: list[Station] = field(default_factory=list)
    initial_eta: dict = field(default_factory=dict)   # body name -> initial modal coordinates
    provenance: dict = field(default_factory=dict)    # dotted parameter key -> where the value comes from
    source: str = "<memory>"
    sensors: list = field(default_factory=list)       # hil.model.sensor_specs specs; empty: hil.model.sensor_specs.default_sensors
    sensor_seed: int = 0                              # seed of the sensor noise generator


# ----------------------------------------------------------------------------- parameter checks
# DriveSpec's numeric fields and their units; the ones each interface needs
DRIVE_UNITS = {
    "resistance_ohm": "ohm", "inductance_H": "H", "torque_constant_N_m_A": "N m/A",
    "back_emf_V_s_rad": "V s/rad",
    "gear_efficiency": "(output power / input power when the motor drives the load)",
    "torque_limit_N_m": "N m (link side)", "current_limit_A": "A", "current_bandwidth_hz": "Hz",
    "supply_V": "V", "brake_torque_N_m": "N m (link side)", "brake_kinetic_N_m": "N m (link side)",
    "brake_smoothing_rad_s": "rad/s",
}
DRIVE_REQUIRED = {
    INTERFACE_CURRENT: ("torque_constant_N_m_A", "current_bandwidth_hz"),
    INTERFACE_VOLTAGE: ("resistance_ohm", "inductance_H", "torque_constant_N_m_A", "back_emf_V_s_rad", "supply_V"),
}
# the motor parameters that only some interfaces use: 0 (the default) leaves them unset
_DRIVE_OPTIONAL = ("resistance_ohm", "inductance_H", "torque_constant_N_m_A", "back_emf_V_s_rad",
                   "current_bandwidth_hz", "supply_V")
# Joint's friction and backlash fields (those joint_problems checks) and their units
JOINT_FRICTION_UNITS = {
    "viscous_N_m_s_rad": "N m s/rad", "coulomb_N_m": "N m", "coulomb_smoothing_rad_s": "rad/s",
    "stribeck_N_m": "N m", "stribeck_velocity_rad_s": "rad/s", "backlash_rad": "rad",
}


def _positive(key: str, value: Any, unit: str, context: str = "") -> Problem | None:
    """A problem unless value > 0 (nan fails)."""
    return None if value > 0 else Problem(key, value, f"expected a positive number{in_unit(unit)}{context}")


def _nonneg(key: str, value: Any, unit: str) -> Problem | None:
    """A problem unless value >= 0 (nan fails)."""
    return None if value >= 0 else Problem(key, value, f"expected a non-negative number{in_unit(unit)}")


def _given(obj: Any, names: Collection[str], given: Collection[str] | None) -> set[str]:
    """The fields among `names` set explicitly: `given`, or by default those that differ from the
    dataclass defaults (nan included)."""
    if given is not None:
        return set(given) & set(names)
    defaults = {f.name: f.default for f in fields(obj)}
    return {n for n in names if not getattr(obj, n) == defaults[n]}


def drive_problems(spec: DriveSpec, given: Collection[str] | None = None) -> list[Problem]:
    """Every invalid parameter of a drive: each field on its own (field order), then the rules
    between fields. `given`: the parameters set explicitly (a TOML table's keys); default: those
    that differ from DriveSpec's defaults. A given electrical parameter (_DRIVE_OPTIONAL) must be
    positive even where the interface does not use it; left at 0 it is unset, which only the
    interface's required ones (DRIVE_REQUIRED) may not be. An unknown interface is the only problem
    reported (the others depend on it)."""
    if spec.interface not in INTERFACES:
        return [Problem("interface", spec.interface, "expected one of " + ", ".join(f'"{i}"' for i in INTERFACES))]
    given = _given(spec, _DRIVE_OPTIONAL, given)
    problems = [_drive_field(spec, key, key in given) for key in DRIVE_UNITS]
    problems += _drive_relations(spec)
    return [p for p in problems if p is not None]


def _drive_field(spec: DriveSpec, key: str, given: bool) -> Problem | None:
    """The problem of one DriveSpec field on its own, if any."""
    value, unit = getattr(spec, key), DRIVE_UNITS[key]
    if key in _DRIVE_OPTIONAL:
        if key in DRIVE_REQUIRED.get(spec.interface, ()):
            return _positive(key, value, unit, f' with interface = "{spec.interface}"')
        return _positive(key, value, unit) if given else None
    if key == "gear_efficiency":
        ok = 0 < value <= 1
        return None if ok else Problem(key, value, f"expected a positive number{in_unit(unit)}, at most 1.0")
    if key == "brake_torque_N_m":
        return _nonneg(key, value, unit)
    if value is None:                  # brake_kinetic_N_m, brake_smoothing_rad_s: None means the default
        return None
    return _positive(key, value, unit)


def _drive_relations(spec: DriveSpec) -> list[Problem]:
    """The rules between a drive's fields. A current limit needs Kt whatever the interface: Kt
    turns it into the torque limit n eta Kt i_max (torque, current) and the winding current into
    torque (voltage)."""
    kinetic, holding = spec.brake_kinetic_N_m, spec.brake_torque_N_m
    problems = []
    if kinetic is not None and kinetic > holding:
        problems.append(Problem("brake_kinetic_N_m", kinetic,
                                f"expected at most brake_torque_N_m = {holding} N m (link side): "
                                "a brake slips at no more than it holds"))
    if math.isfinite(spec.current_limit_A) and not spec.torque_constant_N_m_A > 0:
        problems.append(Problem("current_limit_A", spec.current_limit_A,
                                "expected no current limit in A without torque_constant_N_m_A (N m/A), "
                                "which turns the current into a torque"))
    return problems


def joint_problems(joint: Joint, given: Collection[str] | None = None) -> list[Problem]:
    """Every invalid friction or backlash parameter of a joint (JOINT_FRICTION_UNITS), in field
    order. `given`: the keys set explicitly (a TOML table's); default: the fields that differ from
    Joint's defaults. The Stribeck velocity must be positive when given or with stribeck_N_m > 0;
    backlash needs the joint's elasticity (the dead band sits in its spring)."""
    given = _given(joint, ("stribeck_velocity_rad_s",), given)
    problems = []
    for key, unit in JOINT_FRICTION_UNITS.items():
        value = getattr(joint, key)
        if key == "coulomb_smoothing_rad_s":
            problems.append(_positive(key, value, unit))
        elif key == "stribeck_velocity_rad_s":
            if joint.stribeck_N_m > 0:
                problems.append(_positive(key, value, unit, " (with stribeck_N_m > 0)"))
            elif key in given:
                problems.append(_positive(key, value, unit))
        else:
            problems.append(_nonneg(key, value, unit))
    if joint.backlash_rad > 0 and joint.elasticity is None:
        problems.append(Problem("backlash_rad", joint.backlash_rad,
                                "expected 0 rad without joint elasticity (a [body.joint.elasticity] table, "
                                "Joint.elasticity): the dead band of total width backlash_rad sits in the "
                                "joint spring"))
    return [p for p in problems if p is not None]
