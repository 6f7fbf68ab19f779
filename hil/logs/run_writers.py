"""Run log writers: the checked msgpack stream (hil.logs.runlog describes the format) and plain CSV,
chosen by the file's suffix (``open_writer``); both flush at least every FLUSH_INTERVAL_S seconds."""
from __future__ import annotations

import time
import zlib
from pathlib import Path
from typing import Any, Protocol

import msgpack
import numpy as np

from hil.logs.run_format import CRC, EXT_EVENT, EXT_GAP, FORMAT, SUFFIXES, VERSION, RunLogError, row_dtype

FLUSH_INTERVAL_S = 0.5
_FLUSH_CHECK_ROWS = 64      # rows between looks at the clock


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

def _ext_record(kind: int, payload: bytes) -> bytes:
    return msgpack.packb(msgpack.ExtType(kind, payload + CRC.pack(zlib.crc32(payload))))

class MsgpackRunWriter:
    """Stream writer: header map, then one checked record per row, event or gap (preallocated row record)."""

    def __init__(self, path: str | Path, header: dict[str, Any]):
        n = len(header["columns"])
        self.path = str(path)
        self._file = open(path, "wb")
        self._file.write(msgpack.packb({**header, "format": FORMAT, "version": VERSION}, use_bin_type=True))
        self._file.flush()
        prefix, dtype = row_dtype(n, checked=True)
        self._record = np.zeros(1, dtype)
        self._record["prefix"] = np.frombuffer(prefix, np.uint8)
        self._record["cells"]["tag"] = 0xCB    # msgpack float 64
        self._record["crc_tag"] = 0xCE         # msgpack uint 32
        self._values = self._record["cells"]["value"][0]
        self._bytes = memoryview(self._record.view(np.uint8))
        self._checked = self._bytes[:dtype.itemsize - 4]
        self._crc = self._record["crc"]
        self._flush = _TimedFlush(self._file)

    def write(self, row: np.ndarray) -> None:
        self._values[:] = row
        self._crc[0] = zlib.crc32(self._checked)
        self._file.write(self._bytes)
        self._flush.tick()

    def write_event(self, event: dict[str, Any]) -> None:
        """An event between rows (a map with "event", "cycle" and "t")."""
        self._file.write(_ext_record(EXT_EVENT, msgpack.packb(event, use_bin_type=True)))
        self._flush.tick()

    def write_gap(self, first_cycle: int, last_cycle: int, rows: int, t: float) -> None:
        """Rows of cycles first_cycle..last_cycle (from time t) that were dropped, not written."""
        gap = {"first_cycle": int(first_cycle), "last_cycle": int(last_cycle), "rows": int(rows), "t": float(t)}
        self._file.write(_ext_record(EXT_GAP, msgpack.packb(gap)))
        self._flush.tick()

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "MsgpackRunWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
