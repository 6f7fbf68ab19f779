"""Fit files (``hil fit FIT.toml``): which model, which recordings, which parameters, which channels.

Schema (every key checked; a problem raises config_schema.ConfigError naming the file, the key,
the value and what was expected with its unit)::

    [fit]          model (arm preset: a file, relative to the fit file, or a shipped name), description, max_evaluations (plant
                   replays the fit may spend, 1 .. MAX_EVALUATIONS; default 200), shooting_s
                   (> 0, optional: multiple shooting, the replay's joint angles and rates
                   restarted from the recording every shooting_s; needs q_<joint>, and qd_<joint>
                   or their derivative), jobs (local processes the replays of a Jacobian's
                   columns run on, 1 .. MAX_JOBS; default the machine's processor count),
                   prescribe_joints (true: every replay's joints follow the recordings'
                   q_<joint>, hil.fit.prescribed: for the links' parameters and what moves the
                   modes; no joint parameter, no delay, no shooting_s with it; default false),
                   prescribe_knot_s (> 0: the spline's knots that far apart, for quantised
                   encoder angles; default every row)
    [[recording]]  file (relative to the fit file: a run log of hil run, .msgpack or .csv; CSV,
                   MDF4 .mf4, Parquet, MCAP: hil.logs.recordings), role ("training" |
                   "validation"), input ("torque": the drives' torques tau_<joint> step the
                   replay; "current": the measured motor currents cur_<joint> through each
                   motor's torque constant and current sensor, hil.replay.plant_replay; default
                   "torque"), window_s = [t0, t1] (s; default the whole run): the rows the
                   residual takes; time (the file's time column in CSV and Parquet; default "t");
                   columns (a table: model column = "file column" or {column, scale, offset},
                   model = scale x file + offset; default: the model's own names); at least one
                   recording of each role
    [[parameter]]  path (a model path, as campaign variations name them:
                   body.link1.beam.E_Pa, body.link2.beam.damping_ratio, one element of a list
                   as body.link2.beam.frequency_scale[0] (a mode's frequency, hil.model.modal),
                   sensor.imu.gyro.bias_rad_s[2], sensor.imu.gyro.scale_error[0],
                   body.link1.joint.motor.torque_constant_N_m_A (with input = "current"), ...;
                   or DELAY_PATH, the
                   recordings' transport delay between command and measurement: their drive
                   torques act that much later than logged, 0 s at the start, lower >= 0), lower, upper (its
                   bounds, lower < upper, in its unit), unit (the path's unit suffix, e.g. "Pa";
                   "1" for a ratio or scale): at most MAX_PARAMETERS
    [[channel]]    name (a measured channel of the recordings: imu_gx, strain_root, enc_elbow, ...),
                   weight (> 0; default 1), window_s = [t0, t1] (s; default all: the channel's
                   rows, within each recording's window; a channel a fault spoilt from some time
                   on is matched up to it), each name once
    [validation]   max_nrmse (> 0): the largest normalised rms residual (rms of measured minus
                   simulated over the window, divided by the measured channel's standard
                   deviation there) any channel of any validation recording may keep
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from config_schema import Document, Table, is_number, load_toml
from hil.campaign.overrides import Preset, element
from hil.fit.workers import MAX_JOBS, default_jobs
from hil.logs.recordings import ColumnMap
from hil.model.presets import resolve
from hil.replay.plant_replay import DRIVE_INPUTS

TOP_KEYS = ("fit", "recording", "parameter", "channel", "validation")
FIT_KEYS = ("model", "description", "max_evaluations", "shooting_s", "jobs", "prescribe_joints", "prescribe_knot_s")
RECORDING_KEYS = ("file", "role", "input", "window_s", "time", "columns")
PARAMETER_KEYS = ("path", "lower", "upper", "unit")
CHANNEL_KEYS = ("name", "weight", "window_s")
ROLES = ("training", "validation")
MAX_EVALUATIONS = 10_000     # plant replays of one fit
MAX_PARAMETERS = 32
MAX_RECORDINGS = 64
MAX_COLUMNS = 256            # entries of one recording's column map
MAX_CHANNELS = 256           # channels one fit matches
DIMENSIONLESS = ("ratio", "scale", "factor", "seed")
DELAY_PATH = "recording.delay_s"     # not a model path: the replay's command delay (hil.replay.plant_replay)


@dataclass(frozen=True)
class RecordingSpec:
    file: Path
    role: str
    window_s: tuple[float, float]
    time: str = "t"
    columns: dict = field(default_factory=dict)      # model column -> ColumnMap
    input: str = "torque"                            # what steps the replay: DRIVE_INPUTS


@dataclass(frozen=True)
class ParameterSpec:
    path: str
    lower: float
    upper: float
    unit: str


@dataclass(frozen=True)
class ChannelSpec:
    name: str
    weight: float
    window_s: tuple[float, float]


@dataclass(frozen=True)
class FitSpec:
    source: str
    model: str
    description: str
    max_evaluations: int
    shooting_s: float | None
    jobs: int
    prescribe_joints: bool
    prescribe_knot_s: float | None
    recordings: tuple[RecordingSpec, ...]
    parameters: tuple[ParameterSpec, ...]
    channels: tuple[ChannelSpec, ...]
    max_nrmse: float
    preset: Preset


def _unit_fits(path: str, unit: str) -> bool:
    leaf = element(path)[0].rsplit(".", 1)[-1]
    if unit == "1":
        return any(word in leaf for word in DIMENSIONLESS)
    return leaf.endswith("_" + unit.replace(" ", "_").replace("/", "_"))


def _column_map(t: Table) -> dict[str, ColumnMap]:
    raw = t.raw("columns", {})
    if not isinstance(raw, dict):
        raise t.error("columns", raw, "expected a table: model column = \"file column\" or {column, scale, offset}")
    out = {}
    for model_name, entry in raw.items():
        if len(out) >= MAX_COLUMNS:
            raise t.error("columns", f"{len(raw)} entries", f"expected at most {MAX_COLUMNS}")
        if isinstance(entry, str):
            out[model_name] = ColumnMap(entry)
            continue
        m = Table(t.doc, entry, f"{t.key('columns')}.{model_name}", "recording.columns", ("column", "scale", "offset"),
                  "a file column's name or a table {column, scale, offset}")
        out[model_name] = ColumnMap(m.string("column"), m.number("scale", 1.0, unit=""), m.number("offset", 0.0, unit=""))
    return out


def _tables(root: Table, key: str, allowed: tuple[str, ...], limit: int) -> list[Table]:
    """The [[key]] tables (at least one, at most `limit`), each checked for unknown keys."""
    raw = root.array_of_tables(key, required=True, what=f"a [[{key}]] table")
    if len(raw) > limit:
        raise root.error(key, f"{len(raw)} tables", f"expected at most {limit}")
    return [Table(root.doc, t, f"{key}[{i}]", key, allowed, f"a [[{key}]] table") for i, t in enumerate(raw)]


def _window(t: Table) -> tuple[float, float]:
    window = t.raw("window_s", None)
    if window is None:
        return float("-inf"), float("inf")
    if not (isinstance(window, list) and len(window) == 2 and all(is_number(v) for v in window)
            and window[0] < window[1]):
        raise t.error("window_s", window, "expected [t0, t1] in s with t0 < t1")
    return float(window[0]), float(window[1])


def _recording(t: Table, folder: Path) -> RecordingSpec:
    return RecordingSpec(folder / t.string("file"), t.choice("role", "training", ROLES), _window(t),
                         t.string("time", "t"), _column_map(t), t.choice("input", "torque", DRIVE_INPUTS))


def _channel(t: Table) -> ChannelSpec:
    return ChannelSpec(t.string("name"), t.number("weight", 1.0, unit="", positive=True), _window(t))


def _parameter(t: Table, preset: Preset, source: str) -> ParameterSpec:
    path = t.string("path")
    if path != DELAY_PATH:
        preset.check_path(source, t.key("path"), path)
    unit = t.string("unit")
    if not _unit_fits(path, unit):
        raise t.error("unit", unit, f"expected the unit of {path} (its key's suffix; \"1\" for a ratio or scale)")
    lower, upper = t.number("lower", unit=unit), t.number("upper", unit=unit)
    if not lower < upper:
        raise t.error("upper", upper, f"expected more than lower = {lower:g} {unit}")
    if path == DELAY_PATH and not 0.0 <= lower:
        raise t.error("lower", lower, "expected at least 0 s (a command acts after it was sent)")
    return ParameterSpec(path, lower, upper, unit)


def _check_prescribed(head: Table, parameters: list[ParameterSpec]) -> None:
    """With the joints following the record, nothing of theirs (nor the delay) can be fitted."""
    if head.has("shooting_s"):
        raise head.error("prescribe_joints", True, "expected no shooting_s with it (the joints follow the "
                                                   "recording throughout: there is nothing to restart)")
    for p in parameters:
        if p.path == DELAY_PATH or ".joint." in p.path:
            raise head.error("prescribe_joints", True, f"expected no joint parameter or delay with it ({p.path}: "
                                                       "the joints follow the recording, it would have no effect); "
                                                       "fit it in a fit without prescribe_joints")


def load_fit(path: str | Path) -> FitSpec:
    """Read and check a fit file (module docstring)."""
    source = str(path)
    doc = Document(source)
    root = doc.root(load_toml(path), TOP_KEYS)
    head = root.table("fit", FIT_KEYS, required=True)
    folder = Path(path).resolve().parent
    named = head.string("model")
    model = folder / named if (folder / named).is_file() else resolve("preset", named)     # beside the fit file
    preset = Preset(str(model))
    recordings = [_recording(t, folder) for t in _tables(root, "recording", RECORDING_KEYS, MAX_RECORDINGS)]
    for role in ROLES:
        if not any(r.role == role for r in recordings):
            raise doc.error("recording", None, f"at least one recording with role = \"{role}\" (the fit is "
                                               "judged on recordings it was not fitted to)")
    parameters = [_parameter(t, preset, source) for t in _tables(root, "parameter", PARAMETER_KEYS, MAX_PARAMETERS)]
    if len({p.path for p in parameters}) != len(parameters):
        raise doc.error("parameter", None, "each path once")
    constants = [p.path for p in parameters if p.path.endswith(".torque_constant_N_m_A")]
    if constants and not any(r.input == "current" and r.role == "training" for r in recordings):
        raise doc.error("parameter", constants[0], "a training recording with input = \"current\" (replayed "
                                                   "from the drive torques, the torque constant has no effect)")
    channels = [_channel(t) for t in _tables(root, "channel", CHANNEL_KEYS, MAX_CHANNELS)]
    if len({c.name for c in channels}) != len(channels):
        raise doc.error("channel", None, "each name once")
    validation = root.table("validation", ("max_nrmse",), required=True)
    prescribe = head.boolean("prescribe_joints", False)
    if prescribe:
        _check_prescribed(head, parameters)
    elif head.has("prescribe_knot_s"):
        raise head.error("prescribe_knot_s", head.raw("prescribe_knot_s"), "expected it only with prescribe_joints = true")
    return FitSpec(source, str(model), head.string("description", ""),
                   head.integer("max_evaluations", 200, minimum=1, maximum=MAX_EVALUATIONS),
                   head.number("shooting_s", None, unit="s", positive=True),
                   head.integer("jobs", default_jobs(), minimum=1, maximum=MAX_JOBS), prescribe,
                   head.number("prescribe_knot_s", None, unit="s", positive=True), tuple(recordings),
                   tuple(parameters), tuple(channels), validation.number("max_nrmse", unit="", positive=True), preset)
