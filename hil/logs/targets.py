"""A firmware's own targets: the ``[verdict]`` table of a scenario file or of a targets file.

Every key is optional; each one given becomes a verdict (hil.logs.verdicts)::

    [verdict]
    description = "PD firmware: seed 000 set-points"
    setpoints_rad = { base_yaw = 0.6922, shoulder_pitch = -0.4928, elbow = 0.4270 }
    tolerance_rad = 2e-3           # |set-point - final joint angle| (number, or a table per joint)
    settling_from_s = 1.2          # when the manoeuvre ends: settling and deflection count from here
    settling_band_m = 2e-4         # the tip stays within this distance of its final position ...
    settling_time_s = 1.0          # ... from at most this long after settling_from_s on
    max_tip_deflection_m = 0.05    # largest distance of the tip from its final position after settling_from_s
    max_torque_N_m = 250.0         # largest |drive torque| on each joint (number, or a table per joint)
    max_current_A = 30.0           # largest |motor current| (needs the preset's current sensors)
    safe_state_within_s = 0.05     # after the first fault injection, the drives in their safe state within
    final_window_s = 0.1           # the final value of a signal: its mean over the run's last stretch

A problem raises config_schema.ConfigError naming the file, the key, the value and the unit.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from config_schema import Document, Table, load_toml

KEYS = ("description", "setpoints_rad", "tolerance_rad", "settling_from_s", "settling_band_m", "settling_time_s",
        "max_tip_deflection_m", "max_torque_N_m", "max_current_A", "safe_state_within_s", "final_window_s")


@dataclass(frozen=True)
class Targets:
    source: str = "<code>"
    description: str = ""
    setpoints_rad: dict[str, float] = field(default_factory=dict)
    tolerance_rad: float | dict[str, float] | None = None
    settling_from_s: float = 0.0
    settling_band_m: float | None = None
    settling_time_s: float | None = None
    max_tip_deflection_m: float | None = None
    max_torque_N_m: float | dict[str, float] | None = None
    max_current_A: float | dict[str, float] | None = None
    safe_state_within_s: float | None = None
    final_window_s: float = 0.1

    def as_dict(self) -> dict:
        """The targets as the run summary keeps them (``"targets"``): the keys that were given."""
        return {k: v for k, v in asdict(self).items() if v not in (None, {}, "") and k != "source"}


def read_verdict(doc: Document, data: object, where: str = "verdict") -> Targets:
    """The targets of a ``[verdict]`` table (already parsed) of the file `doc` names."""
    t = Table(doc, data, where, where, KEYS)
    setpoints = _per_joint(t, "setpoints_rad", "rad", positive=False) or {}
    tolerance = _per_joint(t, "tolerance_rad", "rad", positive=True)
    if setpoints and tolerance is None:
        raise t.error("tolerance_rad", None, "required with setpoints_rad; expected a positive number in rad "
                                             "or a table of them per joint")
    if isinstance(tolerance, dict) and set(tolerance) != set(setpoints):
        raise t.error("tolerance_rad", tolerance, f"expected one tolerance per set-point joint: {', '.join(setpoints)}")
    band = t.number("settling_band_m", None, unit="m", positive=True)
    settling = t.number("settling_time_s", None, unit="s", nonneg=True)
    if (band is None) != (settling is None):
        key = "settling_time_s" if settling is None else "settling_band_m"
        raise t.error(key, None, "required with " + ("settling_band_m" if settling is None else "settling_time_s"))
    return Targets(
        source=doc.source, description=t.string("description", ""), setpoints_rad=setpoints, tolerance_rad=tolerance,
        settling_from_s=t.number("settling_from_s", 0.0, unit="s", nonneg=True), settling_band_m=band,
        settling_time_s=settling, max_tip_deflection_m=t.number("max_tip_deflection_m", None, unit="m", positive=True),
        max_torque_N_m=_per_joint(t, "max_torque_N_m", "N m", positive=True),
        max_current_A=_per_joint(t, "max_current_A", "A", positive=True),
        safe_state_within_s=t.number("safe_state_within_s", None, unit="s", positive=True),
        final_window_s=t.number("final_window_s", 0.1, unit="s", positive=True))


def _per_joint(t: Table, key: str, unit: str, positive: bool) -> float | dict[str, float] | None:
    """A number, or a table of numbers keyed by joint name (None when absent)."""
    if not t.has(key):
        return None
    raw = t.raw(key)
    if isinstance(raw, dict):
        sub = Table(t.doc, raw, t.key(key), f"{t.path}.{key}", tuple(raw))
        return {j: sub.number(j, unit=unit, positive=positive) for j in raw}
    return t.number(key, unit=unit, positive=positive)


def load_targets(path: str | Path) -> Targets:
    """A targets file: a TOML file with one ``[verdict]`` table."""
    doc = Document(str(path))
    root = doc.root(load_toml(path), ("verdict",))
    return read_verdict(doc, root.data.get("verdict", {}))
