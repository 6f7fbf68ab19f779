"""Recordings as a lab has them, on the grid the plant replays: the emulator's own run log
(.msgpack, .csv), CSV, MDF4 (asammdf), Parquet (pyarrow) and MCAP (JSON-encoded messages,
as ``hil log export --mcap`` and Foxglove write them).

Every channel is read with its own time base (an MDF4 file's channel groups, an MCAP topic's
log times), in s. A column map names, for each model column the fit needs, the file's column and
an optional scale and offset (model = scale x file + offset: a motor current into a joint
torque, encoder counts into radians); a model column the map leaves out is read by its own
name. Needed: ``tau_<joint>`` (the drive torque the plant received, N m), the fitted channels,
and, where the file has them, ``q_<joint>``, ``qd_<joint>`` and ``brake_<joint>``.

The rows: one per plant step dt (the preset's integrator.dt_s), from the latest first sample to
the earliest last sample of the needed channels. A channel sampled on that grid already is taken
as it is; any other is resampled and the result says so (``resampled``: channel -> what was
done): torques and brakes held from their last sample (a command is held until the next one,
as the drives hold it), measured channels interpolated linearly. Refused, with a one-line error
naming the file and the channel: a channel missing (the file's names listed), a time base not
strictly increasing (the first offending sample named), a NaN or infinite sample inside the span,
an unreadable or damaged file, fewer than MIN_ROWS rows.
"""
from __future__ import annotations

import gc
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from config_schema import UserError, suggest

MIN_ROWS = 10
GRID_TOLERANCE = 1e-9          # s: a channel whose samples sit this close to the grid is on it
HELD = ("tau_", "brake_")      # model columns held between samples (commands, brake states)
SUFFIXES = (".msgpack", ".csv", ".mf4", ".mdf", ".parquet", ".mcap")


@dataclass(frozen=True)
class ColumnMap:
    column: str                # the file's name for it
    scale: float = 1.0
    offset: float = 0.0


def _signals_run_log(path: Path, names: set[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    from hil.logs.runlog import read_run

    header, rows = read_run(path)
    columns = header["columns"]
    if "t" not in columns:
        raise UserError(f"{path}: no time column t")
    t = rows[:, columns.index("t")]
    return {c: (t, rows[:, i]) for i, c in enumerate(columns) if c in names}, columns


def _signals_parquet(path: Path, names: set[str], time: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:        # pyarrow's errors for a damaged file are many kinds
        raise UserError(f"{path}: not a readable Parquet file ({type(exc).__name__}: {exc})") from None
    if time not in table.column_names:
        raise UserError(f"{path}: no time column {time!r}{suggest(time, table.column_names)}")
    t = table.column(time).to_numpy().astype(float)
    return {c: (t, table.column(c).to_numpy().astype(float)) for c in table.column_names if c in names}, \
        table.column_names


def _signals_mdf4(path: Path, names: set[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    from asammdf import MDF

    problem = None
    try:
        mdf = MDF(path)
    except Exception as exc:        # asammdf raises a variety of errors for damaged files
        problem = f"{type(exc).__name__}: {exc}"
    if problem is not None:
        gc.collect()                # the half-opened reader fails in its finaliser: here, not in a later allocation
        raise UserError(f"{path}: not a readable MDF4 file ({problem})")
    out = {}
    try:
        available = sorted({ch.name for group in mdf.groups for ch in group.channels})
        for name in names & set(available):
            signal = mdf.get(name)
            out[name] = (np.asarray(signal.timestamps, float), np.asarray(signal.samples, float))
    except Exception as exc:
        raise UserError(f"{path}: damaged MDF4 data ({type(exc).__name__}: {exc})") from None
    finally:
        mdf.close()
    return out, available


def _signals_mcap(path: Path, names: set[str]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    from mcap.reader import make_reader

    series: dict[str, tuple[list, list]] = {}
    available: set[str] = set()
    try:
        with open(path, "rb") as f:
            for _, channel, message in make_reader(f).iter_messages():
                if channel.message_encoding != "json":
                    continue
                data = json.loads(message.data)
                if not isinstance(data, dict):
                    continue
                available.update(data)
                for key, value in data.items():
                    if key in names and isinstance(value, (int, float)):
                        ts, vs = series.setdefault(key, ([], []))
                        ts.append(message.log_time * 1e-9)
                        vs.append(float(value))
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: not a readable MCAP file ({exc})") from None
    except Exception as exc:        # the mcap reader's own errors for a damaged file
        raise UserError(f"{path}: damaged MCAP data ({type(exc).__name__}: {exc})") from None
    return {k: (np.array(t), np.array(v)) for k, (t, v) in series.items()}, sorted(available)


def _signals_csv(path: Path, names: set[str], time: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    from hil.logs.runlog import RunLogError, read_csv

    try:
        header, rows = read_csv(path)
    except RunLogError as exc:
        raise UserError(str(exc)) from None
    columns = header["columns"]
    if time not in columns:
        raise UserError(f"{path}: no time column {time!r}{suggest(time, columns)}")
    t = rows[:, columns.index(time)]
    return {c: (t, rows[:, i]) for i, c in enumerate(columns) if c in names}, columns


def read_signals(path: Path, names: set[str], time: str = "t") -> tuple[dict[str, tuple[np.ndarray, np.ndarray]],
                                                                         list[str]]:
    """The channels of `path` named in `names`, each as (time [s], values), and the names of every channel
    the file has; the reader by suffix."""
    if not path.is_file():
        raise UserError(f"{path}: no such recording")
    suffix = path.suffix.lower()
    if suffix == ".msgpack":
        return _signals_run_log(path, names)
    if suffix == ".csv":
        return _signals_csv(path, names, time)
    if suffix in (".mf4", ".mdf"):
        return _signals_mdf4(path, names)
    if suffix == ".parquet":
        return _signals_parquet(path, names, time)
    if suffix == ".mcap":
        return _signals_mcap(path, names)
    raise UserError(f"{path}: expected a recording ending in {', '.join(SUFFIXES)}")


def _check(path: Path, name: str, t: np.ndarray, v: np.ndarray) -> None:
    if len(t) < 2:
        raise UserError(f"{path}: channel {name} has {len(t)} sample(s)")
    steps = np.diff(t)
    bad = np.flatnonzero(~(steps > 0))
    if bad.size or not np.all(np.isfinite(t)):
        k = int(bad[0]) + 1 if bad.size else int(np.flatnonzero(~np.isfinite(t))[0])
        raise UserError(f"{path}: channel {name}: time not strictly increasing at sample {k} "
                        f"(t = {t[k - 1]:g} then {t[k]:g} s)")


def read_checked(path: Path, names: list[str], time: str = "t") -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The channels `names` of `path`, each (time, values), every one present with a strictly
    increasing time (UserError naming the file and the channel otherwise)."""
    signals, available = read_signals(path, set(names), time)
    for name in names:
        if name not in signals:
            raise UserError(f"{path}: no channel {name!r}{suggest(name, available)}")
        _check(path, name, *signals[name])
    return signals


def on_grid(path: Path, wanted: list[str], column_map: dict[str, ColumnMap], dt: float, optional: list[str] = (),
            time: str = "t") -> tuple[list[str], np.ndarray, dict[str, str]]:
    """The rows of the model columns `wanted` (and those of `optional` the file has) on the plant's
    grid: (columns with t first, rows, resampled: channel -> how)."""
    source = {name: column_map.get(name, ColumnMap(name)) for name in [*wanted, *optional]}
    signals, available = read_signals(path, {m.column for m in source.values()}, time)
    missing = [n for n in wanted if source[n].column not in signals]
    if missing:
        shown = source[missing[0]].column
        raise UserError(f"{path}: no channel {shown!r} (for {missing[0]}){suggest(shown, available)}; "
                        "map the file's names to the model's in the recording's columns table")
    present = [n for n in [*wanted, *optional] if source[n].column in signals]
    for n in present:
        _check(path, source[n].column, *signals[source[n].column])
    start = max(signals[source[n].column][0][0] for n in present)
    stop = min(signals[source[n].column][0][-1] for n in present)
    count = int(math.floor((stop - start) / dt + 1e-9)) + 1
    if count < MIN_ROWS:
        raise UserError(f"{path}: the channels overlap for {max(stop - start, 0):g} s: fewer than {MIN_ROWS} steps "
                        f"of {dt:g} s")
    grid = start + dt * np.arange(count)
    rows = np.empty((count, len(present) + 1))
    rows[:, 0] = grid
    resampled = {}
    for j, n in enumerate(present, start=1):
        m = source[n]
        t, v = signals[m.column]
        inside = (t >= start - GRID_TOLERANCE) & (t <= stop + GRID_TOLERANCE)
        bad = inside & ~np.isfinite(v)
        if bad.any():
            stretch = t[bad]
            raise UserError(f"{path}: channel {m.column} has NaN or infinite samples from t = {stretch[0]:g} to "
                            f"{stretch[-1]:g} s; cut them out with the recording's window or fill them in the file")
        if len(t[inside]) == count and np.all(np.abs(t[inside] - grid) <= GRID_TOLERANCE):
            values = v[inside]
        elif n.startswith(HELD):
            values = v[np.clip(np.searchsorted(t, grid + GRID_TOLERANCE, side="right") - 1, 0, len(t) - 1)]
            resampled[n] = f"held from its {_rate(t)} samples onto the {1 / dt:g} Hz grid"
        else:
            values = np.interp(grid, t, v)
            resampled[n] = f"interpolated linearly from its {_rate(t)} samples onto the {1 / dt:g} Hz grid"
        rows[:, j] = m.scale * values + m.offset
    return ["t", *present], rows, resampled


def _rate(t: np.ndarray) -> str:
    return f"{1.0 / float(np.median(np.diff(t))):.4g} Hz"
