"""The nominal rigid arm the reference firmware is written for, read from its parameter file.

A firmware knows its arm from the paper, data sheets and CAD, not from the plant it runs against:
joint names, axes and placements, gears and encoders, and each link as one rigid body (its mass
and centre of mass lumped with what is bolted to it). Example: configs/firmware/ella_nominal.toml.

File layout (SI units; keys carry their unit):

    [arm]          name, gravity_m_s2
    [[joint]]      name, axis, offset_m, rpy_rad, home_rad, gear_ratio, encoder_counts_per_rev
      [joint.link] name, mass_kg, com_m, length_m     (the link the joint drives)
    [imu]          link, station_m, rpy_rad
    [provenance]   "joint.<joint>.gear_ratio" = "published: ..." | "derived: ..." | "assumed: ..."

Frames: joint k sits in the frame of link k-1 (the base frame for the first joint) at offset_m,
turned by rpy_rad (R = Rz(yaw) Ry(pitch) Rx(roll)); link k's frame is the joint frame turned by
q_k about axis (right hand); com_m and the IMU (at station_m along the link's x axis, turned by
its rpy_rad) are given in the link frame. Every value needs a provenance entry naming its source.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from config_schema import MISSING, Document, Table, TextMemo, parse_toml, suggest

PROVENANCE_KINDS = ("published:", "derived:", "assumed:")
_TOP_KEYS = ("arm", "joint", "imu", "provenance")
_ARM_KEYS = ("name", "gravity_m_s2")
_JOINT_KEYS = ("name", "axis", "offset_m", "rpy_rad", "home_rad", "gear_ratio", "encoder_counts_per_rev", "link")
_LINK_KEYS = ("name", "mass_kg", "com_m", "length_m")
_IMU_KEYS = ("link", "station_m", "rpy_rad")


@dataclass(frozen=True)
class NominalLink:
    """One link as a rigid body: its mass and centre of mass [m, link frame], its length along x."""
    name: str
    mass_kg: float
    com_m: np.ndarray
    length_m: float


@dataclass(frozen=True)
class NominalJoint:
    """One revolute joint, its placement in the parent link's frame, its drive train and its link."""
    name: str
    axis: np.ndarray              # unit vector in the joint frame
    offset_m: np.ndarray
    rpy_rad: np.ndarray
    home_rad: float               # the angle at switch-on, from which the incremental encoder counts
    gear_ratio: float
    encoder_counts_per_rev: int   # at the motor shaft
    link: NominalLink


@dataclass(frozen=True)
class ImuMount:
    """The IMU on a link: at station_m along its x axis, axes turned by rpy_rad from the link frame."""
    link: str
    station_m: float
    rpy_rad: np.ndarray


@dataclass(frozen=True)
class NominalArm:
    """A serial chain of revolute joints from the base, as the firmware's parameter file states it."""
    name: str
    source: str
    gravity_m_s2: np.ndarray
    joints: tuple[NominalJoint, ...]
    imu: ImuMount
    provenance: dict[str, str]

    @property
    def joint_names(self) -> list[str]:
        return [j.name for j in self.joints]

    @property
    def gear_ratios(self) -> np.ndarray:
        return np.array([j.gear_ratio for j in self.joints])

    @property
    def counts_per_rev(self) -> np.ndarray:
        return np.array([j.encoder_counts_per_rev for j in self.joints])

    @property
    def home_rad(self) -> np.ndarray:
        return np.array([j.home_rad for j in self.joints])

    def link_index(self, name: str) -> int:
        return [j.link.name for j in self.joints].index(name)


def load_nominal_arm(path: str | Path) -> NominalArm:
    """Read and check a firmware parameter file; a bad value is a ConfigError naming file, key,
    value and the expected unit. A file read before unchanged gives the same NominalArm (never changed
    after it is made): a campaign worker's firmware reads it for every case."""
    return _LOADED.load(path)


class _Reader:
    def __init__(self, source: str):
        self.doc = Document(source)
        self.values: list[str] = []     # dotted keys of every value read: each needs a provenance entry

    def arm(self, data: dict) -> NominalArm:
        top = self.doc.root(data, _TOP_KEYS)
        arm = top.table("arm", _ARM_KEYS, required=True)
        gravity = self._value(arm, "gravity_m_s2", lambda k: arm.vector(k, unit="m/s^2"))
        joints = tuple(self._joint(raw, k) for k, raw in
                       enumerate(top.array_of_tables("joint", required=True, what="one [[joint]] table per joint")))
        self._unique(joints)
        imu = self._imu(top.table("imu", _IMU_KEYS, required=True), joints)
        return NominalArm(arm.string("name"), self.doc.source, gravity, joints, imu, self._provenance(top))

    def _value(self, t: Table, key: str, read):
        self.values.append(f"{t.path}.{key}")
        return _read_only(read(key))

    def _joint(self, raw: dict, index: int) -> NominalJoint:
        name = raw.get("name")
        label = name if isinstance(name, str) else f"#{index}"
        t = Table(self.doc, raw, f"joint[{label}]", f"joint.{label}", _JOINT_KEYS)
        name = t.name()
        axis = self._value(t, "axis", lambda k: t.vector(k, unit=""))
        if not np.linalg.norm(axis) > 0:
            raise t.error("axis", t.raw("axis"), "expected a non-zero 3-vector (the joint axis)")
        return NominalJoint(
            name, _read_only(axis / np.linalg.norm(axis)),
            self._value(t, "offset_m", lambda k: t.vector(k, unit="m")),
            self._value(t, "rpy_rad", lambda k: t.vector(k, unit="rad")),
            self._value(t, "home_rad", lambda k: t.number(k, unit="rad")),
            self._value(t, "gear_ratio", lambda k: t.number(k, unit="", positive=True)),
            self._value(t, "encoder_counts_per_rev",
                        lambda k: t.integer(k, minimum=1, unit="counts per motor revolution")),
            self._link(t.table("link", _LINK_KEYS, required=True, what="the [joint.link] the joint drives")))

    def _link(self, t: Table) -> NominalLink:
        return NominalLink(t.name(),
                           self._value(t, "mass_kg", lambda k: t.number(k, unit="kg", nonneg=True)),
                           self._value(t, "com_m", lambda k: t.vector(k, unit="m")),
                           self._value(t, "length_m", lambda k: t.number(k, unit="m", nonneg=True)))

    def _unique(self, joints: tuple[NominalJoint, ...]) -> None:
        seen: set[tuple[str, str]] = set()
        for j in joints:
            for kind, key, name in (("joint", f"joint[{j.name}].name", j.name),
                                    ("link", f"joint[{j.name}].link.name", j.link.name)):
                if (kind, name) in seen:
                    raise self.doc.error(key, name, f"expected a {kind} name not used before")
                seen.add((kind, name))

    def _imu(self, t: Table, joints: tuple[NominalJoint, ...]) -> ImuMount:
        links = {j.link.name: j.link for j in joints}
        link = t.string("link", what="the name of the link the IMU is mounted on")
        if link not in links:
            raise t.error("link", link, f"expected one of the links {', '.join(links)}{suggest(link, links)}")
        station = self._value(t, "station_m", lambda k: t.number(k, unit="m", lower=0.0, upper=links[link].length_m))
        return ImuMount(link, station, self._value(t, "rpy_rad", lambda k: t.vector(k, unit="rad")))

    def _provenance(self, top: Table) -> dict[str, str]:
        raw = top.raw("provenance", {})
        if not isinstance(raw, dict):
            raise self.doc.error("provenance", raw, 'expected a table of "dotted.key" = "source" strings')
        for key, text in raw.items():
            where = f'provenance."{key}"'
            if key not in self.values:
                raise self.doc.error(where, text,
                                     f"expected the key to name a value of this file{suggest(key, self.values)}")
            if not isinstance(text, str) or not text.startswith(PROVENANCE_KINDS):
                raise self.doc.error(where, text, "expected a string starting with " + ", ".join(PROVENANCE_KINDS))
        for key in self.values:
            if key not in raw:
                raise self.doc.error(f'provenance."{key}"', MISSING,
                                     "required: every nominal value states its source (published, derived or assumed)")
        return dict(raw)


def _read_only(value):
    """Arrays of a NominalArm read-only: every reader of the same file shares it."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    return value


_LOADED: TextMemo[NominalArm] = TextMemo(4, lambda text, source: _Reader(source).arm(parse_toml(text, source)))
