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

    # the link's health, from the run's counters (hil.logs.verdicts.link_health)
    max_rejected_commands = 0      # command frames rejected for their content (CRC, out of range, NaN, length)
    max_counter_rejections = 0     # command frames the rolling-counter check rejected (a repeat, a jump)
    max_watchdog_trips = 0         # command timeouts that put the drives in their safe state
    max_lost_commands = 0          # command frames lost (gaps in the rolling counter)
    max_missed_cycles = 0          # cycles the plant stepped without a fresh command
    max_command_age_p99_s = 0.002  # 99th percentile of the age of the command each cycle applies
    max_bus_errors = 0             # link errors: CRC or framing errors, garbage bytes, overruns, frames not sent

    # the run against a recording (the real arm's measured response: hil.logs.recordings reads it)
    within_record = { file = "bench.mf4", tolerance = { q_elbow = 2e-3, imu_gx = 0.05 }, window_s = [0.5, 3.0] }
                                   # each channel within its tolerance (its unit) of the recording, over the
                                   # window where both have samples; the recording interpolated at the run's
                                   # times; file relative to this file; optional time (the file's time column)

    # the requirement each target traces to (an ID and a text), by the target's key
    [verdict.requirements]
    settling_time_s = { id = "REQ-VS-012", text = "the tip settles within 1 s of the end of a move" }

    # temporal assertions on any logged column (Signal Temporal Logic: hil.logs.temporal)
    [[verdict.assert]]
    name = "brake_holds"           # the verdict's name: assert_brake_holds
    formula = "always (brake_elbow >= 1 implies abs(tau_elbow) <= 300)"
    requirement = { id = "REQ-DRV-007", text = "no torque above 300 N m while the brake holds" }

Without a fault scenario (no fault injected in the run), max_rejected_commands and max_watchdog_trips
default to 0: a firmware that sends one bad frame, or lets the watchdog trip, fails (LINK_DEFAULTS).
A fault scenario states its own limits, since its faults cause rejections and trips on purpose.

A problem raises config_schema.ConfigError naming the file, the key, the value and the unit.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import re

from config_schema import NAME_RE, ConfigError, Document, Table, load_toml, suggest
from hil.logs.recordings import read_checked
from hil.logs.temporal import FormulaError, columns, parse

KEYS = ("description", "setpoints_rad", "tolerance_rad", "settling_from_s", "settling_band_m", "settling_time_s",
        "max_tip_deflection_m", "max_torque_N_m", "max_current_A", "safe_state_within_s", "final_window_s",
        "max_rejected_commands", "max_counter_rejections", "max_watchdog_trips", "max_lost_commands",
        "max_missed_cycles",
        "max_command_age_p99_s", "max_bus_errors", "within_record", "requirements", "assert")
RECORD_KEYS = ("file", "tolerance", "window_s", "time")
MAX_RECORD_CHANNELS = 64      # channels one within_record verdict compares
# the link-health counts and their limits where the run injects no fault and the targets give none
LINK_DEFAULTS = {"max_rejected_commands": 0, "max_watchdog_trips": 0}
LINK_HEALTH_ONLY = "the link-health defaults"      # the source of the targets of a checked run that gives none
COUNT_LIMIT = 10 ** 12        # the largest count limit a target may give
MAX_ASSERTIONS = 64           # [[verdict.assert]] tables of one file
REQUIREMENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/\-]{0,63}")
MAX_REQUIREMENT_TEXT = 500


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
    max_rejected_commands: int | None = None
    max_counter_rejections: int | None = None
    max_watchdog_trips: int | None = None
    max_lost_commands: int | None = None
    max_missed_cycles: int | None = None
    max_command_age_p99_s: float | None = None
    max_bus_errors: int | None = None
    within_record: dict | None = None      # file (absolute), tolerance (channel -> limit), window_s, time
    requirements: dict[str, dict] = field(default_factory=dict)     # target key -> {"id", "text"}
    assertions: tuple[dict, ...] = ()      # {"name", "formula", "requirement"?}: [[verdict.assert]]

    def with_link_defaults(self, faults_injected: bool) -> Targets:
        """These targets with LINK_DEFAULTS for the link-health keys they leave out, in a run without faults."""
        if faults_injected:
            return self
        return replace(self, **{k: v for k, v in LINK_DEFAULTS.items() if getattr(self, k) is None})

    def check_joints(self, joints: list[str]) -> None:
        """ConfigError (one line, with a suggestion) for a per-joint key naming a joint the arm lacks: found
        before the run, not after it."""
        for key in ("setpoints_rad", "tolerance_rad", "max_torque_N_m", "max_current_A"):
            value = getattr(self, key)
            for joint in value if isinstance(value, dict) else ():
                if joint not in joints:
                    raise ConfigError(self.source, f"verdict.{key}.{joint}", value[joint],
                                      f"no such joint in the arm{suggest(joint, joints)}; its joints: "
                                      f"{', '.join(joints)}")

    def check_columns(self, columns: list[str]) -> None:
        """ConfigError (one line, with a suggestion) for a temporal assertion reading a column the run's log
        will not have: found before the run, not after it."""
        for k, a in enumerate(self.assertions):
            for name in formula_columns(a["formula"]):
                if name not in columns:
                    raise ConfigError(self.source, f"verdict.assert[{k}].formula", a["formula"],
                                      f"no column {name!r} in this run's log{suggest(name, columns)}")

    def as_dict(self) -> dict:
        """The targets as the run summary keeps them (``"targets"``, and as a targets file's [verdict] table):
        the keys that were given."""
        out = {k: v for k, v in asdict(self).items() if v not in (None, {}, "", ()) and k != "source"}
        if "assertions" in out:
            out["assert"] = [dict(a) for a in out.pop("assertions")]
        return out


def formula_columns(formula: str) -> list[str]:
    """The log columns a (checked) formula reads."""
    return columns(parse(formula))


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
        final_window_s=t.number("final_window_s", 0.1, unit="s", positive=True),
        max_command_age_p99_s=t.number("max_command_age_p99_s", None, unit="s", positive=True),
        within_record=_within_record(t, Path(doc.source).resolve().parent),
        requirements=_requirements(t), assertions=_assertions(t),
        **{k: t.integer(k, None, maximum=COUNT_LIMIT, what="a count") for k in COUNT_KEYS})


def _requirement(t: Table, key: str) -> dict:
    """A requirement {id, text} (the text optional)."""
    r = t.table(key, ("id", "text"), what='a table { id = "REQ-...", text = "..." }')
    rid = r.string("id")
    if not REQUIREMENT_ID.fullmatch(rid):
        raise r.error("id", rid, "expected a requirement ID of letters, digits and _ . : / - (at most 64, e.g. REQ-VS-012)")
    text = r.string("text", "")
    if len(text) > MAX_REQUIREMENT_TEXT:
        raise r.error("text", f"{len(text)} characters", f"expected at most {MAX_REQUIREMENT_TEXT}")
    return {"id": rid, "text": text}


def _requirements(t: Table) -> dict[str, dict]:
    """[verdict.requirements]: a requirement per target key given in the table."""
    if not t.has("requirements"):
        return {}
    raw = t.raw("requirements")
    targets = [k for k in KEYS if k not in ("description", "requirements", "assert")]
    r = t.table("requirements", tuple(targets), what="a table of requirements by target key")
    for key in raw:
        if key not in t.data:
            raise r.error(key, raw[key], f"expected a target this table gives (requirements trace its targets); it gives "
                                         f"{', '.join(k for k in targets if k in t.data) or 'none'}")
    return {key: _requirement(r, key) for key in raw}


def _assertions(t: Table) -> tuple[dict, ...]:
    """[[verdict.assert]]: each a name, a formula that parses (hil.logs.temporal) and an optional requirement."""
    raw = t.array_of_tables("assert", what="[[verdict.assert]] tables")
    if len(raw) > MAX_ASSERTIONS:
        raise t.error("assert", f"{len(raw)} tables", f"expected at most {MAX_ASSERTIONS}")
    out, names = [], set()
    for k, data in enumerate(raw):
        a = Table(t.doc, data, f"{t.key('assert')}[{k}]", f"{t.path}.assert", ("name", "formula", "requirement"),
                  "a [[verdict.assert]] table")
        name = a.name("name", pattern=NAME_RE)
        if name in names:
            raise a.error("name", name, "expected a name no other assertion of this file has")
        names.add(name)
        formula = a.string("formula")
        try:
            parse(formula)
        except FormulaError as exc:
            raise a.error("formula", formula, f"expected a temporal formula (hil.logs.temporal): {exc}") from None
        entry = {"name": name, "formula": formula}
        if a.has("requirement"):
            entry["requirement"] = _requirement(a, "requirement")
        out.append(entry)
    return tuple(out)


def _within_record(t: Table, folder: Path) -> dict | None:
    """The within_record table: the recording's file (resolved, checked to exist) and a tolerance per channel."""
    if not t.has("within_record"):
        return None
    r = t.table("within_record", RECORD_KEYS)
    file = folder / r.string("file")
    if not file.is_file():
        raise r.error("file", str(file), "expected a recording file (run log, CSV, MDF4, Parquet or MCAP)")
    raw = r.raw("tolerance")
    if not isinstance(raw, dict) or not raw or len(raw) > MAX_RECORD_CHANNELS:
        raise r.error("tolerance", raw, f"expected a table of 1 to {MAX_RECORD_CHANNELS} channels, each with its "
                                        "tolerance in the channel's unit")
    tol = r.table("tolerance", tuple(raw))
    window = r.vector("window_s", [float("-inf"), float("inf")], n=2, unit="s")
    if not window[0] < window[1]:
        raise r.error("window_s", list(window), "expected [t0, t1] in s with t0 < t1")
    spec = {"file": str(file), "tolerance": {c: tol.number(c, unit="", positive=True) for c in raw},
            "window_s": [float(window[0]), float(window[1])], "time": r.string("time", "t")}
    read_checked(file, list(spec["tolerance"]), spec["time"])     # its channels found now, not after the run
    return spec


COUNT_KEYS = ("max_rejected_commands", "max_counter_rejections", "max_watchdog_trips", "max_lost_commands",
              "max_missed_cycles", "max_bus_errors")


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
