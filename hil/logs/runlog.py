"""Run logs: CSV and msgpack stream writers, and a streaming reader that checks every record.

A msgpack run log (version 2) is a stream of msgpack objects: first a header map ::

    {"format": "hil-run", "version": 2, "columns": [...], "config": path, "dt_s": ...,
     "every": ..., "integrator": {...}, ...}

then records, each protected by its own CRC-32 (zlib's, of the bytes before it):

* a row: an array of the row's float64 values (one per column) followed by the unsigned 32-bit
  CRC of the array header and values (``[v_0, ..., v_n-1, crc]``, n + 1 items, fixed size);
* an event (ext type 1): the packed event map followed by the 4-byte big-endian CRC of it. Event
  maps are ``{"event": kind, "cycle": int, "t": float [s], "fault": str, "detail": str}`` (fault
  and detail for faults): the emulator's fault injections and clearances, watchdog trips;
* a gap (ext type 2): ``{"first_cycle", "last_cycle", "rows", "t"}`` and its CRC: rows the
  writer dropped whole because it fell behind (the run logger never overwrites a queued row).

The reader returns the events in ``header["events"]`` (a gap also as a ``log_gap`` event, so that
timelines and exports show it), the gaps in ``header["gaps"]``, and every stretch of bytes that
failed its check in ``header["corrupt"]`` (``{"offset", "bytes", "after_cycle"}``): a damaged
record is reported and skipped, never returned as data. The stream is flushed at least every
``FLUSH_INTERVAL_S`` seconds; a reader stops at the last complete record, so the log of a killed
writer is readable (``header["trailing_bytes"]``: the size of the cut record). Version 1 logs
(rows without CRC, plain event maps) are read too. Reading streams the file in blocks
(``RunLogReader.blocks``: constant memory); ``read_run`` collects them into one array, and
``RunLog.read(path)`` gives that array's columns by name, with the events.

A CSV run log has one header line of column names and one line per row (floats in
shortest round-trip form, so CSV and msgpack logs of one run hold the same values).
"""
from __future__ import annotations

import csv
import math
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from hil.logs.run_format import (CRC, EXT_EVENT, EXT_GAP, FORMAT, READABLE_VERSIONS, SUFFIXES, VERSION, RunLogError,
                                 row_dtype)
from hil.logs.run_writers import FLUSH_INTERVAL_S, CsvRunWriter, MsgpackRunWriter, RunWriter, open_writer

__all__ = ["FORMAT", "VERSION", "SUFFIXES", "FLUSH_INTERVAL_S", "RunLog", "RunLogError", "RunWriter", "CsvRunWriter",
           "MsgpackRunWriter", "RunLogReader", "open_writer", "read_run", "integrity_text"]

_CHUNK_BYTES = 1 << 22      # bytes read from the file at a time
_WINDOW_ROWS = 4096         # rows checked for their layout at a time
_MAX_EXT_BYTES = 1 << 20    # the longest event or gap record taken (a longer length is damage)
_EXT_FIXED = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}       # fixext code -> data length
_EXT_SIZED = {0xC7: (1, ">B"), 0xC8: (2, ">H"), 0xC9: (4, ">I")}   # ext 8/16/32 -> (length bytes, format)


# ----------------------------------------------------------------------------- reading
def _checked_header(path: str, header: Any) -> dict[str, Any]:
    """The stored header, validated: a map of this format and a readable version with its columns."""
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise RunLogError(f"{path}: not a {FORMAT} msgpack log")
    if header.get("version") not in READABLE_VERSIONS:
        raise RunLogError(f"{path}: {FORMAT} version {header.get('version')!r} is not supported "
                          f"(this reader: {', '.join(map(str, READABLE_VERSIONS))})")
    columns = header.get("columns")
    if (not isinstance(columns, list) or not columns or not all(isinstance(c, str) for c in columns)
            or len(set(columns)) != len(columns)):
        raise RunLogError(f"{path}: header \"columns\" = {columns!r:.80}: expected a list of distinct column names")
    return header


def _checked_event(path: str, index: int, event: Any) -> dict[str, Any]:
    """An event map with its kind, cycle and time, else a RunLogError naming it."""
    if not isinstance(event, dict):
        raise RunLogError(f"{path}: event {index} = {event!r:.80}: expected a map")
    for key, kinds, what in (("event", (str,), "a string"), ("cycle", (int,), "an integer"),
                             ("t", (int, float), "a number in s")):
        value = event.get(key)
        if not isinstance(value, kinds) or isinstance(value, bool) or (key == "t" and not math.isfinite(value)):
            raise RunLogError(f"{path}: event {index} {event!r:.80}: \"{key}\" = {value!r}: expected {what}")
    return event


class MissingEvent(AssertionError):
    """An event a test expected is not in the run log."""


class RunLogReader:
    """A msgpack run log read block by block: ``blocks()`` yields arrays of rows (only the asked
    columns) in constant memory; ``events``, ``gaps``, ``corrupt`` and ``trailing_bytes`` are
    complete once the blocks are exhausted. Damaged records are skipped and reported."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        with open(path, "rb") as f:
            self._start, header = self._read_header(f)
        self.header = _checked_header(self.path, header)
        self.columns: list[str] = header["columns"]
        self.checked = header["version"] >= 2
        self.events: list[dict] = []
        self.gaps: list[dict] = []
        self.corrupt: list[dict] = []
        self.trailing_bytes = 0
        self.rows_read = 0
        self._prefix, self._dtype = row_dtype(len(self.columns), self.checked)
        self._marker = self._prefix + b"\xcb"
        self._cycle = self.columns.index("cycle") if "cycle" in self.columns else None
        self._last_cycle: int | None = None

    def _read_header(self, f) -> tuple[int, Any]:
        unpacker = msgpack.Unpacker(f, raw=False, max_buffer_size=1 << 26)
        try:
            header = next(unpacker)
        except (StopIteration, ValueError, msgpack.UnpackException) as exc:
            raise RunLogError(f"{self.path}: no complete run log header") from exc
        return unpacker.tell(), header

    def full_header(self) -> dict[str, Any]:
        """The stored header with events, gaps, corrupt stretches and trailing bytes (after reading)."""
        return {**self.header, "events": self.events, "gaps": self.gaps, "corrupt": self.corrupt,
                "trailing_bytes": self.trailing_bytes}

    def blocks(self, columns: list[str] | None = None) -> Iterator[np.ndarray]:
        """Arrays (rows x columns, float64) of consecutive rows, in file order."""
        pick = None if columns is None else [self._column(c) for c in columns]
        with open(self.path, "rb") as f:
            f.seek(self._start)
            carry = b""
            offset = self._start                  # file offset of carry[0]
            while True:
                chunk = f.read(_CHUNK_BYTES)
                buf = carry + chunk if carry else chunk
                if not buf:
                    return
                for block in self._records(buf, offset, at_end=not chunk):
                    yield block if pick is None else block[:, pick]
                if not chunk:
                    return
                carry = buf[self._consumed:]
                offset += self._consumed

    def _column(self, name: str) -> int:
        try:
            return self.columns.index(name)
        except ValueError:
            raise RunLogError(f"{self.path}: no column {name!r}") from None

    def _records(self, buf: bytes, offset: int, at_end: bool) -> Iterator[np.ndarray]:
        """Rows of `buf` in blocks, events and gaps on the way; sets _consumed (bytes fully read)."""
        pos, size = 0, len(buf)
        record = self._dtype.itemsize
        while pos < size:
            if size - pos < len(self._marker) and not at_end and buf.startswith(self._marker[:size - pos], pos):
                break                         # a row's first bytes at the end of the chunk: more bytes needed
            if buf.startswith(self._marker, pos):
                if size - pos < record:
                    break
                count, block = self._rows(buf, pos, offset)
                pos += count * record
                if block is not None:
                    yield block
                continue
            end = self._other(buf, pos, offset)
            if end is None:                   # incomplete: more bytes needed (or the writer was cut)
                break
            pos = end
        self._consumed = pos
        if at_end and pos < size:
            self._tail(buf, pos, offset)

    def _rows(self, buf: bytes, pos: int, offset: int) -> tuple[int, np.ndarray | None]:
        """(records taken, their good rows) of the run of row records at pos."""
        count = min((len(buf) - pos) // self._dtype.itemsize, _WINDOW_ROWS)
        recs = np.frombuffer(buf, self._dtype, count=count, offset=pos)
        laid = (recs["prefix"] == np.frombuffer(self._prefix, np.uint8)).all(axis=1)
        laid &= (recs["cells"]["tag"] == 0xCB).all(axis=1)
        if self.checked:
            laid &= recs["crc_tag"] == 0xCE
        run = int(np.argmin(laid)) if not laid.all() else count
        if run == 0:                          # the marker, but not a row: damaged
            self._damaged(offset + pos, 1)
            return 1, None                    # resynchronise one byte further on
        recs = recs[:run]
        good = self._crc_ok(buf, pos, run) if self.checked else np.ones(run, bool)
        values = recs["cells"]["value"]
        size = self._dtype.itemsize
        for k in range(run) if not good.all() else ():
            if good[k]:
                self._passed(values[k])
            else:
                self._damaged(offset + pos + k * size, size)
        values = values[good].astype(np.float64)
        if not len(values):
            return run, None
        self.rows_read += len(values)
        self._passed(values[-1])
        return run, values

    def _passed(self, row: np.ndarray) -> None:
        """A good row read: its cycle is where later damage is placed."""
        if self._cycle is not None:
            cycle = float(row[self._cycle])
            self._last_cycle = int(cycle) if math.isfinite(cycle) else None

    def _crc_ok(self, buf: bytes, pos: int, run: int) -> np.ndarray:
        size = self._dtype.itemsize
        view = memoryview(buf)
        crc = zlib.crc32
        stored = np.frombuffer(buf, self._dtype, count=run, offset=pos)["crc"]
        computed = np.fromiter((crc(view[p:p + size - 4]) for p in range(pos, pos + run * size, size)),
                               np.uint32, count=run)
        return computed == stored

    def _other(self, buf: bytes, pos: int, offset: int) -> int | None:
        """Take the event or gap at pos; its end, or None when it runs past the buffer."""
        if not self.checked:
            return self._plain_event(buf, pos, offset)
        parsed = _ext_at(buf, pos)
        if parsed is None:
            return None
        kind, data, end = parsed
        if kind not in (EXT_EVENT, EXT_GAP) or len(data) < 4 or zlib.crc32(data[:-4]) != CRC.unpack(data[-4:])[0]:
            self._damaged(offset + pos, 1)
            return pos + 1
        try:
            item = msgpack.unpackb(data[:-4], raw=False)
        except (ValueError, msgpack.UnpackException) as exc:
            raise RunLogError(f"{self.path}: record at byte {offset + pos}: {exc}") from None
        if kind == EXT_EVENT:
            self.events.append(_checked_event(self.path, len(self.events), item))
        else:
            self._gap(item)
        return end

    def _plain_event(self, buf: bytes, pos: int, offset: int) -> int | None:
        """Version 1: an event map between rows (no checksum: anything else is an error)."""
        unpacker = msgpack.Unpacker(raw=False)
        unpacker.feed(buf[pos:pos + (1 << 20)])
        try:
            item = next(unpacker)
        except StopIteration:
            return None
        except (ValueError, msgpack.UnpackException) as exc:
            raise RunLogError(f"{self.path}: corrupt record at byte {offset + pos}: {exc}") from exc
        if not isinstance(item, dict) or "event" not in item:
            raise RunLogError(f"{self.path}: record at byte {offset + pos} is neither a row of "
                              f"{len(self.columns)} numbers nor an event")
        self.events.append(_checked_event(self.path, len(self.events), item))
        return pos + unpacker.tell()

    def _gap(self, gap: Any) -> None:
        if not (isinstance(gap, dict) and all(isinstance(gap.get(k), int) for k in ("first_cycle", "last_cycle", "rows"))
                and isinstance(gap.get("t"), float)):
            raise RunLogError(f"{self.path}: gap record {gap!r:.80}: expected first_cycle, last_cycle, rows and t")
        self.gaps.append(gap)
        self.events.append({"event": "log_gap", "cycle": gap["first_cycle"], "t": gap["t"],
                            "detail": f"cycles {gap['first_cycle']}..{gap['last_cycle']} ({gap['rows']} rows) not "
                                      "logged: the log writer fell behind"})

    def _damaged(self, at: int, size: int) -> None:
        """Bytes that failed their check: merged into the last stretch when adjacent."""
        if self.corrupt and self.corrupt[-1]["offset"] + self.corrupt[-1]["bytes"] == at:
            self.corrupt[-1]["bytes"] += size
        else:
            self.corrupt.append({"offset": at, "bytes": size, "after_cycle": self._last_cycle})

    def _tail(self, buf: bytes, pos: int, offset: int) -> None:
        """What is left at the end: a record cut by a killed writer, or damage."""
        rest = len(buf) - pos
        if not self.checked or buf.startswith(self._marker[:rest], pos) or _ext_cut(buf, pos):
            self.trailing_bytes = rest
        else:
            self._damaged(offset + pos, rest)


def _ext_at(buf: bytes, pos: int) -> tuple[int, bytes, int] | None:
    """(type, data, end) of a msgpack ext object at pos; None if cut off; type -1 if none is there."""
    code = buf[pos]
    if code in _EXT_FIXED:
        start, length = pos + 2, _EXT_FIXED[code]
    elif code in _EXT_SIZED:
        nbytes, fmt = _EXT_SIZED[code]
        if pos + 2 + nbytes > len(buf):
            return None
        length = struct.unpack_from(fmt, buf, pos + 1)[0]
        start = pos + 2 + nbytes
    else:
        return -1, b"", pos + 1
    if length > _MAX_EXT_BYTES:
        return -1, b"", pos + 1
    if start + length > len(buf):
        return None
    kind = struct.unpack_from(">b", buf, start - 1)[0]
    return kind, buf[start:start + length], start + length


def _ext_cut(buf: bytes, pos: int) -> bool:
    """Whether the bytes from pos are the start of an ext record cut off by the end of the file."""
    return buf[pos] in _EXT_FIXED or buf[pos] in _EXT_SIZED


def read_run(path: str | Path) -> tuple[dict[str, Any], np.ndarray]:
    """(header, rows) of a run log; rows has shape (n_rows, n_columns).

    For msgpack logs the header is the stored map plus ``events`` (in stream order, a dropped
    stretch of rows as a ``log_gap`` event), ``gaps``, ``corrupt`` (stretches of bytes that failed
    their check, skipped) and ``trailing_bytes``: the size of an incomplete record at the end
    (non-zero when the writer was killed mid-record). A CSV log gives ``{"format": "csv",
    "columns": [...]}``.
    """
    if not Path(path).is_file():         # a FIFO or a device would block or mislead the reader
        raise RunLogError(f"{path}: not a regular file; expected a run log (.msgpack or .csv)")
    if Path(path).suffix.lower() == ".csv":
        return read_csv(path)
    reader = RunLogReader(path)
    n = len(reader.columns)
    rows = np.empty((Path(path).stat().st_size // reader._dtype.itemsize + 1, n))
    k = 0
    for block in reader.blocks():
        if k + len(block) > len(rows):          # a live log grew while read
            grown = np.empty((max(2 * len(rows), k + len(block)), n))
            grown[:k] = rows[:k]
            rows = grown
        rows[k:k + len(block)] = block
        k += len(block)
    return reader.full_header(), rows[:k].copy() if k < len(rows) // 2 else rows[:k]


def integrity_text(header: dict[str, Any]) -> str:
    """One line on what a log lacks: rows dropped by the writer, damaged records, a cut record ('' if none)."""
    parts = []
    gaps = header.get("gaps") or []
    if gaps:
        shown = ", ".join(f"{g['first_cycle']}..{g['last_cycle']}" for g in gaps[:5])
        parts.append(f"{sum(g['rows'] for g in gaps)} rows dropped by the writer in {len(gaps)} gaps "
                     f"(cycles {shown}{', ...' if len(gaps) > 5 else ''})")
    corrupt = header.get("corrupt") or []
    if corrupt:
        parts.append(f"{sum(c['bytes'] for c in corrupt)} damaged bytes in {len(corrupt)} stretches skipped "
                     f"(first at byte {corrupt[0]['offset']}, after cycle {corrupt[0]['after_cycle']})")
    if header.get("trailing_bytes"):
        parts.append(f"{header['trailing_bytes']} trailing bytes of a cut record ignored")
    return "; ".join(parts)


def read_csv(path: str | Path) -> tuple[dict[str, Any], np.ndarray]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.reader(f)
            columns = next(reader, None)
            if not columns:
                raise RunLogError(f"{path}: empty CSV (expected a line of column names)")
            try:
                rows = [[float(v) for v in r] for r in reader if r]
            except ValueError as exc:
                raise RunLogError(f"{path}: line {reader.line_num}: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise RunLogError(f"{path}: not a text file (byte {exc.start} is not UTF-8); expected a CSV run log") from None
    if any(len(r) != len(columns) for r in rows):
        raise RunLogError(f"{path}: rows must have {len(columns)} values (one per column)")
    return {"format": "csv", "columns": columns}, np.array(rows, dtype=float).reshape(len(rows), len(columns))


@dataclass
class RunLog:
    """A run log's rows by column name, and its events (maps with "event", "cycle", "t" and, for
    faults, "fault" and "detail"; see the module doc), read whole through ``read_run`` (checksums
    checked, gaps and damage in the header). ``blocks`` serves the streaming measures
    (hil.logs.streaming) as a RunLogReader does."""

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

    def blocks(self, columns: list[str] | None = None) -> Iterator[np.ndarray]:
        """The rows (only the asked columns) as one block."""
        if len(self.rows):
            yield self.rows if columns is None else self.rows[:, [self.columns.index(c) for c in columns]]

    def column(self, name: str) -> np.ndarray:
        try:
            return self.rows[:, self.columns.index(name)]
        except ValueError:
            raise KeyError(f"no column {name!r}; columns: {', '.join(self.columns)}") from None

    def event_time(self, event: str, fault: str | None = None) -> float:
        """Time [s] of the first event of this kind (and fault name); MissingEvent (an AssertionError: a test
        that expects the event fails, saying which events the run had) if none."""
        for e in self.events:
            if e["event"] == event and (fault is None or e.get("fault") == fault):
                return float(e["t"])
        had = ", ".join(f"{e['event']}{' ' + str(e['fault']) if e.get('fault') else ''} at {float(e['t']):.3f} s"
                        for e in self.events[:8]) or "none"
        raise MissingEvent(f"the run had no {event!r} event" + (f" of fault {fault!r}" if fault else "") +
                           f" (its events: {had}{', ...' if len(self.events) > 8 else ''})")

    def window(self, t0: float, t1: float = np.inf) -> RunLog:
        """The rows with t0 <= t < t1."""
        t = self.t
        return RunLog(self.header, self.rows[(t >= t0) & (t < t1)])
