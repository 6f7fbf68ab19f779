"""What an arm measures: the ``[[sensor]]`` tables of a preset, as dataclasses.

Every sensor samples every ``divider``-th plant step (its output rate is 1 / (divider dt));
``hil.devices.sensors.SensorSuite`` states the models (equations, frames, signs). TOML keys, SI
units in the key names::

    [[sensor]]  kind = "encoder"      joint, lines_per_rev, quadrature (1|2|4), counter_bits
                                      (2..62), index (bool), index_count, divider, name
    [[sensor]]  kind = "abs_encoder"  joint, resolution_bits (1..32), zero_rad, divider, name
    [[sensor]]  kind = "imu"          name, station, rpy_rad, divider,
                                      [sensor.accel] (unit key m_s2), [sensor.gyro] (rad_s)
    [[sensor]]  kind = "strain"       name, station, plane (bending_y|bending_z), distance_m,
                                      divider + signal-chain keys (unit key strain)
    [[sensor]]  kind = "torque"       joint, divider, name + signal-chain keys (N_m)
    [[sensor]]  kind = "current"      joint, divider, name + signal-chain keys (A)

Signal-chain keys with the unit key U (all optional; the defaults make an ideal sensor):
``noise_density_U_rtHz`` (one-sided white-noise density, >= 0), ``bias_U`` (constant offset;
a 3-vector for an IMU triad), ``bias_walk_U_rts`` (bias random walk, U per sqrt(s), >= 0),
``range_U`` (saturation, > 0; default none), ``lsb_U`` (quantisation step, >= 0; 0 = none),
``lpf_hz`` (first-order low-pass corner, >= 0; 0 = none), ``scale_error`` (the sensitivity's
relative error, the datasheet's scale-factor tolerance: the element reads (1 + scale_error) times
its input; within +-MAX_SCALE_ERROR; a 3-vector for an IMU triad); an IMU triad also takes
``misalignment_rad`` (3x3 small-angle cross-axis matrix, zero diagonal).

A preset without ``[[sensor]]`` tables gets :func:`default_sensors`. Names default to the
channel prefix and joint (``enc_<joint>``, ``abs_<joint>``, ``torque_<joint>``,
``cur_<joint>``) or ``imu``; a strain gauge needs a name. Provenance keys read
``sensor.<name>.<key>`` (``sensor.<name>.accel.<key>`` for the IMU triads).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from config_schema import MISSING, Table, is_number, suggest
from hil.model.spec import Body, Model, Station

ENCODER = "encoder"
ABS_ENCODER = "abs_encoder"
IMU = "imu"
STRAIN = "strain"
TORQUE = "torque"
CURRENT = "current"
SENSOR_KINDS = (ENCODER, ABS_ENCODER, IMU, STRAIN, TORQUE, CURRENT)
STRAIN_PLANES = ("bending_y", "bending_z")
MAX_MISALIGNMENT_RAD = 0.1   # beyond this a small-angle cross-axis matrix is no longer a rotation


@dataclass
class SignalChain:
    """The analog path of one measured quantity (all zero/inf: an ideal sensor).

    noise_density: one-sided white-noise density [unit/sqrt(Hz)]; bias: constant offset [unit]
    (one value or one per axis); bias_walk: bias random-walk density [unit/sqrt(s)]; range:
    saturation limit [unit]; lsb: quantisation step [unit] (0: none); lpf_hz: first-order
    low-pass corner frequency [Hz] (0: none); scale_error: the sensitivity's relative error
    (one value or one per axis).
    """

    noise_density: float = 0.0
    bias: float | np.ndarray = 0.0
    bias_walk: float = 0.0
    range: float = math.inf
    lsb: float = 0.0
    lpf_hz: float = 0.0
    scale_error: float | np.ndarray = 0.0


@dataclass
class TriadChain(SignalChain):
    """A three-axis chain; misalignment M (3x3, rad, zero diagonal) mixes the axes as (I + M)."""

    misalignment: np.ndarray = field(default_factory=lambda: np.zeros((3, 3)))


@dataclass
class EncoderSpec:
    """Motor-side incremental encoder: lines per motor revolution, quadrature decoding, a signed
    counter of counter_bits, and an index mark at count index_count of every revolution."""

    kind: ClassVar[str] = ENCODER
    joint: str
    lines_per_rev: int = 4096
    quadrature: int = 4
    counter_bits: int = 32
    index: bool = True
    index_count: int = 0
    divider: int = 1
    name: str = ""

    @property
    def counts_per_rev(self) -> int:
        return self.lines_per_rev * self.quadrature


@dataclass
class AbsEncoderSpec:
    """Link-side single-turn absolute encoder of 2^resolution_bits positions per turn; reads 0 at
    joint angle zero_rad."""

    kind: ClassVar[str] = ABS_ENCODER
    joint: str
    resolution_bits: int = 17
    zero_rad: float = 0.0
    divider: int = 1
    name: str = ""


@dataclass
class ImuSpec:
    """Accelerometer and gyro triads at a station, mounted turned by rpy_rad from the station frame."""

    kind: ClassVar[str] = IMU
    station: str
    name: str = "imu"
    rpy_rad: np.ndarray = field(default_factory=lambda: np.zeros(3))
    accel: TriadChain = field(default_factory=TriadChain)
    gyro: TriadChain = field(default_factory=TriadChain)
    divider: int = 1


@dataclass
class StrainSpec:
    """Axial strain gauge at a station of a flexible body, distance_m from the neutral axis along
    body y (plane bending_y) or body z (plane bending_z)."""

    kind: ClassVar[str] = STRAIN
    name: str
    station: str
    plane: str = "bending_z"
    distance_m: float = 0.0
    chain: SignalChain = field(default_factory=SignalChain)
    divider: int = 1


@dataclass
class TorqueSpec:
    """Joint torque sensor: the torque the joint transmits about its axis."""

    kind: ClassVar[str] = TORQUE
    joint: str
    chain: SignalChain = field(default_factory=SignalChain)
    divider: int = 1
    name: str = ""


@dataclass
class CurrentSpec:
    """Motor current measurement of a joint's drive."""

    kind: ClassVar[str] = CURRENT
    joint: str
    chain: SignalChain = field(default_factory=SignalChain)
    divider: int = 1
    name: str = ""


SensorSpec = EncoderSpec | AbsEncoderSpec | ImuSpec | StrainSpec | TorqueSpec | CurrentSpec


IMU_AXES = ("ax", "ay", "az", "gx", "gy", "gz")


def spec_channels(spec: SensorSpec, first_imu: bool) -> list[str]:
    """The bus channel names of one sensor, in the order hil.devices.sensors.SensorSuite lays them out;
    the first IMU of a suite is ``imu_*``, any other ``<name>_*``."""
    if isinstance(spec, EncoderSpec):
        j = spec.joint
        return [f"enc_{j}"] + ([f"index_{j}"] if spec.index else []) + [f"vel_{j}"]
    if isinstance(spec, ImuSpec):
        prefix = "imu" if first_imu else spec.name
        return [f"{prefix}_{a}" for a in IMU_AXES]
    if isinstance(spec, StrainSpec):
        return [f"strain_{spec.name}"]
    prefix = {ABS_ENCODER: "abs", TORQUE: "torque", CURRENT: "cur"}[spec.kind]
    return [f"{prefix}_{spec.joint}"]


def channel_names(specs: list[SensorSpec]) -> list[list[str]]:
    """spec_channels of every spec."""
    out, imus = [], 0
    for spec in specs:
        out.append(spec_channels(spec, imus == 0))
        imus += isinstance(spec, ImuSpec)
    return out


def default_sensors(model: Model) -> list[SensorSpec]:
    """An ideal x4 4096-line 32-bit encoder on every joint's motor, an ideal IMU at station "tip"."""
    out: list[SensorSpec] = [EncoderSpec(joint=b.joint.name, name=f"enc_{b.joint.name}") for b in model.bodies]
    if any(s.name == "tip" for s in model.stations):
        out.append(ImuSpec(station="tip"))
    return out


# ----------------------------------------------------------------------------- parsing
_COMMON = ("kind", "name", "divider")
_CHAIN = ("noise_density_{u}_rtHz", "bias_{u}", "bias_walk_{u}_rts", "range_{u}", "lsb_{u}", "lpf_hz", "scale_error")
MAX_SCALE_ERROR = 0.5
_KEYS = {
    ENCODER: _COMMON + ("joint", "lines_per_rev", "quadrature", "counter_bits", "index", "index_count"),
    ABS_ENCODER: _COMMON + ("joint", "resolution_bits", "zero_rad"),
    IMU: _COMMON + ("station", "rpy_rad", "accel", "gyro"),
    STRAIN: _COMMON + ("station", "plane", "distance_m") + tuple(k.format(u="strain") for k in _CHAIN),
    TORQUE: _COMMON + ("joint",) + tuple(k.format(u="N_m") for k in _CHAIN),
    CURRENT: _COMMON + ("joint",) + tuple(k.format(u="A") for k in _CHAIN),
}
_UNITS = {"m_s2": "m/s^2", "rad_s": "rad/s", "strain": "(strain, m/m)", "N_m": "N m", "A": "A"}
_NAME_PREFIX = {ENCODER: "enc", ABS_ENCODER: "abs", TORQUE: "torque", CURRENT: "cur"}


def sensor_label(i: int, rs: Any, imus_before: int) -> str:
    """The name of the i-th [[sensor]] table as given or defaulted (error messages, provenance keys and
    model paths use it); `imus_before`: the IMUs of the tables before it."""
    if not isinstance(rs, dict):
        return f"#{i + 1}"
    name, kind, joint = rs.get("name"), rs.get("kind"), rs.get("joint")
    if isinstance(name, str) and name:
        return name
    if isinstance(kind, str) and kind in _NAME_PREFIX and isinstance(joint, str):
        return f"{_NAME_PREFIX[kind]}_{joint}"
    if kind == IMU:
        return "imu" if imus_before == 0 else f"imu{imus_before + 1}"
    return f"#{i + 1}"


def sensor_labels(tables: list) -> list[str]:
    """The names of a preset's [[sensor]] tables, in order (sensor_label)."""
    labels, imus = [], 0
    for i, rs in enumerate(tables):
        labels.append(sensor_label(i, rs, imus))
        imus += isinstance(rs, dict) and rs.get("kind") == IMU
    return labels


def parse_sensors(top: Table, bodies: list[Body], stations: list[Station]) -> list[SensorSpec]:
    """The ``[[sensor]]`` tables of a preset (``top``: its top-level table), or the default set
    if it has none. Errors name the file, the key, the value and the expected unit."""
    raw = top.array_of_tables("sensor", what="an array of [[sensor]] tables")
    if not raw:
        return default_sensors(Model(name="", bodies=bodies, stations=stations))
    parser = _SensorParser(top, bodies, stations)
    return [parser.sensor(i, rs) for i, rs in enumerate(raw)]


class _SensorParser:
    def __init__(self, top: Table, bodies: list[Body], stations: list[Station]):
        self.doc = top.doc
        self.joints = {b.joint.name: b for b in bodies}
        self.bodies = {b.name: b for b in bodies}
        self.stations = {s.name: s for s in stations}
        self.names: set[str] = set()
        self.channels: set[str] = set()
        self.imus = 0

    def sensor(self, i: int, rs: Any) -> SensorSpec:
        label = self._label(i, rs)
        where, path = f"sensor[{label}]", f"sensor.{label}"
        if not isinstance(rs, dict):
            raise self.doc.error(where, rs, "expected a [[sensor]] table")
        kind = rs.get("kind", None)
        if not isinstance(kind, str) or kind not in SENSOR_KINDS:
            did = suggest(kind, SENSOR_KINDS) if isinstance(kind, str) else ""
            raise self.doc.error(f"{where}.kind", rs.get("kind", MISSING),
                                 "expected one of " + ", ".join(f'"{k}"' for k in SENSOR_KINDS) + did)
        keys = _KEYS[kind]
        t = Table(self.doc, rs, where, path, keys, "a [[sensor]] table")
        first_imu = self.imus == 0
        name = t.name("name") if t.has("name") or kind == STRAIN else label
        spec = getattr(self, f"_{kind}")(t, name)
        if spec.name in self.names:
            raise t.error("name", spec.name, "expected a unique sensor name")
        self.names.add(spec.name)
        channels = spec_channels(spec, first_imu)
        taken = [c for c in channels if c in self.channels]
        if taken:
            key = "joint" if t.has("joint") else "name"
            raise t.error(key, t.raw(key, spec.name),
                          f"expected a sensor whose channels ({', '.join(channels)}) no other sensor has "
                          f"({', '.join(taken)} taken)")
        self.channels.update(channels)
        return spec

    def _label(self, i: int, rs: Any) -> str:
        return sensor_label(i, rs, self.imus)

    # ---------------------------------------------------------------- common reads
    def _joint(self, t: Table) -> str:
        joint = t.string("joint", what="a joint name")
        if joint not in self.joints:
            raise t.error("joint", joint, "expected one of the joints " + ", ".join(repr(j) for j in self.joints)
                          + suggest(joint, self.joints))
        return joint

    def _station(self, t: Table) -> Station:
        name = t.string("station", what="a station name")
        if name not in self.stations:
            raise t.error("station", name, "expected one of the [[station]] names "
                          + ", ".join(repr(s) for s in self.stations) + suggest(name, self.stations))
        return self.stations[name]

    @staticmethod
    def _divider(t: Table) -> int:
        return t.integer("divider", 1, minimum=1, what="sample every divider-th plant step")

    def _chain(self, t: Table, u: str, triad: bool = False) -> SignalChain:
        unit = _UNITS[u]
        bare = unit[1:-1].split(",")[0] if unit.startswith("(") else unit
        kw = dict(
            noise_density=t.number(f"noise_density_{u}_rtHz", 0.0, unit=f"{bare}/sqrt(Hz)", nonneg=True),
            bias=(t.vector(f"bias_{u}", np.zeros(3), unit=unit) if triad else t.number(f"bias_{u}", 0.0, unit=unit)),
            bias_walk=t.number(f"bias_walk_{u}_rts", 0.0, unit=f"{bare}/sqrt(s)", nonneg=True),
            range=t.number(f"range_{u}", math.inf, unit=unit, positive=True),
            lsb=t.number(f"lsb_{u}", 0.0, unit=unit, nonneg=True),
            lpf_hz=t.number("lpf_hz", 0.0, unit="Hz", nonneg=True),
            scale_error=self._scale_error(t, triad),
        )
        if not triad:
            return SignalChain(**kw)
        return TriadChain(**kw, misalignment=self._misalignment(t))

    @staticmethod
    def _scale_error(t: Table, triad: bool) -> float | np.ndarray:
        bound = dict(lower=-MAX_SCALE_ERROR, upper=MAX_SCALE_ERROR)
        if triad:
            v = t.vector("scale_error", np.zeros(3), unit="")
            if np.any(np.abs(v) > MAX_SCALE_ERROR):
                raise t.error("scale_error", v.tolist(), f"expected 3 relative errors within +-{MAX_SCALE_ERROR}")
            return v
        return t.number("scale_error", 0.0, unit="", **bound)

    @staticmethod
    def _misalignment(t: Table) -> np.ndarray:
        expected = (f"a 3x3 small-angle cross-axis matrix in rad: zero diagonal, off-diagonal entries "
                    f"within +-{MAX_MISALIGNMENT_RAD}")
        v = t.raw("misalignment_rad", None)
        if v is None:
            return np.zeros((3, 3))
        ok = (isinstance(v, list) and len(v) == 3
              and all(isinstance(r, list) and len(r) == 3
                      and all(is_number(x) and math.isfinite(x) for x in r)
                      for r in v))
        M = np.array(v, dtype=float) if ok else None
        if M is None or np.any(np.diag(M) != 0.0) or np.max(np.abs(M)) > MAX_MISALIGNMENT_RAD:
            raise t.error("misalignment_rad", v, f"expected {expected}")
        return M

    # ---------------------------------------------------------------- kinds
    def _encoder(self, t: Table, name: str) -> EncoderSpec:
        joint = self._joint(t)
        lines = t.integer("lines_per_rev", 4096, minimum=1, what="optical lines per motor revolution")
        quad = t.integer("quadrature", 4, minimum=1, what="edges counted per line: 1, 2 or 4")
        if quad not in (1, 2, 4):
            raise t.error("quadrature", quad, "expected 1, 2 or 4 (edges counted per line)")
        cpr = lines * quad
        return EncoderSpec(
            joint=joint, lines_per_rev=lines, quadrature=quad,
            counter_bits=t.integer("counter_bits", 32, minimum=2, maximum=62, what="signed counter width in bits"),
            index=t.boolean("index", True),
            index_count=t.integer("index_count", 0, minimum=0, maximum=cpr - 1,
                                  what=f"count of the index mark within a revolution of {cpr} counts"),
            divider=self._divider(t), name=name)

    def _abs_encoder(self, t: Table, name: str) -> AbsEncoderSpec:
        joint = self._joint(t)
        return AbsEncoderSpec(
            joint=joint,
            resolution_bits=t.integer("resolution_bits", 17, minimum=1, maximum=32, what="positions per turn = 2^bits"),
            zero_rad=t.number("zero_rad", 0.0, unit="rad"),
            divider=self._divider(t), name=name)

    def _imu(self, t: Table, name: str) -> ImuSpec:
        station = self._station(t).name
        self.imus += 1
        triads = {}
        for part, u in (("accel", "m_s2"), ("gyro", "rad_s")):
            keys = tuple(k.format(u=u) for k in _CHAIN) + ("misalignment_rad",)
            sub = t.table(part, keys, what=f"a [sensor.{part}] table")
            triads[part] = TriadChain() if sub is None else self._chain(sub, u, triad=True)
        return ImuSpec(station=station, name=name, rpy_rad=t.vector("rpy_rad", np.zeros(3), unit="rad"),
                       divider=self._divider(t), **triads)

    def _strain(self, t: Table, name: str) -> StrainSpec:
        station = self._station(t)
        body = self.bodies[station.body]
        plane = t.choice("plane", "bending_z", STRAIN_PLANES)
        if body.beam is None:
            raise t.error("station", station.name, f"expected a station on a flexible body "
                          f"(station {station.name!r} is on rigid body {body.name!r})")
        n = body.beam.n_bending_y if plane == "bending_y" else body.beam.n_bending_z
        if n == 0:
            raise t.error("plane", plane, f"expected a plane with modes on body {body.name!r} "
                          f"(its beam has modes.{plane} = 0)")
        return StrainSpec(name=name, station=station.name, plane=plane,
                          distance_m=t.number("distance_m", 0.0, unit="m"),
                          chain=self._chain(t, "strain"), divider=self._divider(t))

    def _torque(self, t: Table, name: str) -> TorqueSpec:
        joint = self._joint(t)
        return TorqueSpec(joint=joint, chain=self._chain(t, "N_m"), divider=self._divider(t),
                          name=name)

    def _current(self, t: Table, name: str) -> CurrentSpec:
        joint = self._joint(t)
        return CurrentSpec(joint=joint, chain=self._chain(t, "A"), divider=self._divider(t),
                           name=name)
