"""Run logs of offline simulations: CSV and msgpack stream writers and a reader.

A msgpack run log is a stream of msgpack objects: first a header map ::

    {"format": "hil-run", "version": 1, "columns": [...], "config": path, "dt_s": ...,
     "every": ..., "integrator": {...}, ...}

then one record per output row, an array of float64 with one entry per column, and, between
rows, event maps (the emulator's fault injections and clearances, watchdog trips)::

    {"event": "inject" | "clear" | "watchdog_tripped" | "watchdog_cleared" | ...,
     "cycle": int, "t": float [s], "fault": str (faults only), "detail": str (faults only)}

the reader returns them in ``header["events"]``. ``RunLog.read(path)`` gives columns by name. The
stream is flushed at least every ``FLUSH_INTERVAL_S`` seconds, and a reader stops at
the last complete record, so the log of a killed writer is readable.

A CSV run log has one header line of column names and one line per row (floats in
shortest round-trip form, so CSV and msgpack logs of one run hold the same values).
"""
from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import msgpack
import numpy as np

__all__ = ["FORMAT", "VERSION", "RunLog", "RunLogError", "RunWriter", "CsvRunWriter", "MsgpackRunWriter",
           "open_writer", "read_run"]

FORMAT = "hil-run"
VERSION = 1
SUFFIXES = (".csv", ".msgpack")
FLUSH_INTERVAL_S = 0.5
_FLUSH_CHECK_ROWS = 64   # rows between looks at the clock


class RunLogError(ValueError):
    """Unreadable or unsupported run log; the message names the file."""


class RunWriter(Protocol):
    """Destination of output rows (one float per column)."""

    def write(self, row: np.ndarray) -> None: ...

    def close(self) -> None: ...


class _TimedFlush:
    """Flush a binary or text file when FLUSH_INTERVAL_S has passed (checked every few rows)."""

    def __init__(self, file):
        self._file = file
        self._rows = 0
        self._last = time.monotonic()

    def tick(self) -> None:
        self._rows += 1
        if self._rows % _FLUSH_CHECK_ROWS == 0:
            now = time.monotonic()
            if now - self._last >= FLUSH_INTERVAL_S:
                self._file.flush()
                self._last = now


class MsgpackRunWriter:
    """Stream writer: header map, then one float64 array per row (preallocated record buffer)."""

    def __init__(self, path: str | Path, header: dict[str, Any]):
        n = len(header["columns"])
        self.path = str(path)
        self._n = n
        self._file = open(path, "wb")
        self._file.write(msgpack.packb({"format": FORMAT, "version": VERSION, **header}, use_bin_type=True))
        self._file.flush()
        prefix = _array_prefix(n)
        self._record = bytearray(len(prefix) + 9 * n)
        self._record[: len(prefix)] = prefix
        fields = np.frombuffer(self._record, dtype=[("tag", "u1"), ("value", ">f8")], offset=len(prefix))
        fields["tag"] = 0xCB   # msgpack float 64
        self._values = fields["value"]
        self._flush = _TimedFlush(self._file)

    def write(self, row: np.ndarray) -> None:
        self._values[:] = row
        self._file.write(self._record)
        self._flush.tick()

    def write_event(self, event: dict[str, Any]) -> None:
        """An event between rows (a map with an "event" key)."""
        self._file.write(msgpack.packb(event, use_bin_type=True))
        self._flush.tick()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "MsgpackRunWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _array_prefix(n: int) -> bytes:
    """msgpack array header for n elements."""
    if n < 16:
        return bytes([0x90 | n])
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


class CsvRunWriter:
    """Plain CSV: a line of column names, then one line of floats per row."""

    def __init__(self, path: str | Path, header: dict[str, Any]):
        self.path = str(path)
        self._file = open(path, "w", encoding="utf-8", newline="")
        self._file.write(",".join(header["columns"]) + "\n")
        self._flush = _TimedFlush(self._file)

    def write(self, row: np.ndarray) -> None:
        self._file.write(",".join(map(repr, row.tolist())) + "\n")
        self._flush.tick()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "CsvRunWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_writer(path: str | Path, header: dict[str, Any]) -> CsvRunWriter | MsgpackRunWriter:
    """Writer chosen by the file suffix (.csv or .msgpack); ``header["columns"]`` is required.
    Missing parent folders are created."""
    suffix = Path(path).suffix.lower()
    if suffix in SUFFIXES:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        return CsvRunWriter(path, header)
    if suffix == ".msgpack":
        return MsgpackRunWriter(path, header)
    raise RunLogError(f"{path}: unknown run log format {suffix!r}; expected one of {', '.join(SUFFIXES)}")


def read_run(path: str | Path) -> tuple[dict[str, Any], np.ndarray]:
    """(header, rows) of a run log; rows has shape (n_rows, n_columns).

    For msgpack logs the header is the stored map plus ``events`` (the event maps, in stream
    order) and ``trailing_bytes``: the size of an incomplete record at the end (non-zero when
    the writer was killed mid-record).
    A CSV log gives ``{"format": "csv", "columns": [...]}``.
    """
    if Path(path).suffix.lower() == ".csv":
        return _read_csv(path)
    return _read_msgpack(path)


def _read_msgpack(path: str | Path) -> tuple[dict[str, Any], np.ndarray]:
    with open(path, "rb") as f:
        unpacker = msgpack.Unpacker(f, raw=False)
        try:
            header = next(unpacker)
        except (StopIteration, ValueError, msgpack.UnpackException) as exc:
            raise RunLogError(f"{path}: no complete run log header") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise RunLogError(f"{path}: not a {FORMAT} msgpack log")
        if header.get("version") != VERSION:
            raise RunLogError(f"{path}: {FORMAT} version {header.get('version')!r} is not supported "
                              f"(this reader: {VERSION})")
        n = len(header["columns"])
        rows = []
        events = []
        end = unpacker.tell()
        try:
            for record in unpacker:
                if isinstance(record, dict) and "event" in record:
                    events.append(record)
                    end = unpacker.tell()
                    continue
                if not isinstance(record, list) or len(record) != n:
                    raise RunLogError(f"{path}: record {len(rows)} is not a list of {n} numbers")
                rows.append(record)
                end = unpacker.tell()
        except (ValueError, msgpack.UnpackException) as exc:
            raise RunLogError(f"{path}: corrupt record after row {len(rows)}: {exc}") from exc
        size = f.seek(0, 2)
    header["events"] = events
    header["trailing_bytes"] = size - end
    return header, np.array(rows, dtype=float).reshape(len(rows), n)


def _read_csv(path: str | Path) -> tuple[dict[str, Any], np.ndarray]:
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        columns = next(reader, None)
        if not columns:
            raise RunLogError(f"{path}: empty CSV (expected a line of column names)")
        try:
            rows = [[float(v) for v in r] for r in reader if r]
        except ValueError as exc:
            raise RunLogError(f"{path}: line {reader.line_num}: {exc}") from exc
    if any(len(r) != len(columns) for r in rows):
        raise RunLogError(f"{path}: rows must have {len(columns)} values (one per column)")
    return {"format": "csv", "columns": columns}, np.array(rows, dtype=float).reshape(len(rows), len(columns))


@dataclass
class RunLog:
    """A run log's rows by column name, and its events (maps with "event", "cycle", "t" and, for
    faults, "fault" and "detail"; see the module doc)."""

    header: dict
    rows: np.ndarray

    @classmethod
    def read(cls, path: str | Path) -> RunLog:
        return cls(*read_run(path))

    @property
    def columns(self) -> list[str]:
        return self.header["columns"]

    @property
    def events(self) -> list[dict]:
        return self.header.get("events", [])

    @property
    def t(self) -> np.ndarray:
        return self.column("t")

    def has(self, name: str) -> bool:
        return name in self.columns

    def column(self, name: str) -> np.ndarray:
        try:
            return self.rows[:, self.columns.index(name)]
        except ValueError:
            raise KeyError(f"no column {name!r}; columns: {', '.join(self.columns)}") from None

    def event_time(self, event: str, fault: str | None = None) -> float:
        """Time [s] of the first event of this kind (and fault name); KeyError if none."""
        for e in self.events:
            if e["event"] == event and (fault is None or e.get("fault") == fault):
                return float(e["t"])
        raise KeyError(f"no {event!r} event" + (f" of fault {fault!r}" if fault else "") + f" in {self.events}")

    def window(self, t0: float, t1: float = np.inf) -> RunLog:
        """The rows with t0 <= t < t1."""
        t = self.t
        return RunLog(self.header, self.rows[(t >= t0) & (t < t1)])

