"""The run logger: per-cycle rows and events from the loop thread to a writer, never lost silently.

The loop fills a row buffer (``row()``), then hands it over (``put(row)``); file I/O runs on the
writer, never in the loop. The writer is a thread (``WriterThread``, behind a bounded queue) or a
process (hil.logs.writer_process, behind a shared-memory ring; chosen with ``process=True``, for the
real-time loop, which must not share the interpreter lock with it). When the writer falls behind and
its queue or ring is full, the row is dropped whole and counted, and the stretch of dropped cycles is
written into the log as a gap record (cycle range, row count) ahead of the next row that gets
through: the log holds every row it shows exactly as logged, and says which it does not hold (a
writer that fails is reported instead: ``report()``'s writer_error and unwritten_rows). Events
(fault injections, watchdog trips) are never dropped: one that finds no room waits in order with the
gap records and goes ahead of the next row.

Rows of the writer thread come from a preallocated ring two longer than the queue; the ring moves on
only when a row was queued, so a buffer is reused only after the writer has taken it (queued rows,
the one the writer holds and the one the loop fills are all distinct). A `tap` (an object with
``row(row)`` and ``event(event)``, e.g. the live view hil.viz.live.LiveView) sees every record on the
writer thread; without a `path` only the tap gets them.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from firmware_bridge.links.recording import BackgroundWriter
from hil.logs.run_writers import MsgpackRunWriter
from hil.logs.writer_process import WriterProcess

GAPS_REPORTED = 20      # the first gaps listed in the summary (all of them are in the log)
PROCESS_DEPTH = 1 << 15  # the writer process's ring: 3.3 s of rows at 10 kHz, 33 s at 1 kHz


class WriterThread:
    """Rows and records to a writer thread (firmware_bridge.links.recording.BackgroundWriter) and a tap."""

    def __init__(self, path: str | None, header: dict, columns: int, depth: int, tap=None):
        self.writer = MsgpackRunWriter(path, header) if path else None
        self.tap = tap
        self.error: str | None = None
        self.unwritten = 0                      # rows handed over after the file failed
        self._rows = np.zeros((depth + 2, columns))
        self._next = 0
        self._worker = BackgroundWriter(self._write, "hil-log", depth)

    def slot(self) -> np.ndarray:
        return self._rows[self._next]

    def room(self) -> bool:
        return not self._worker.full()

    def offer_row(self, row: np.ndarray) -> bool:
        if not self._worker.offer(row):
            return False
        self._next = (self._next + 1) % len(self._rows)
        return True

    def offer(self, item: dict | list) -> bool:
        return self._worker.offer(item)

    def put_waiting(self, item: dict | list) -> None:
        self._worker.put_waiting(item)

    def backlog(self) -> int:
        """Records handed over and not yet written."""
        return self._worker.backlog()

    def _write(self, item: np.ndarray | dict | list) -> None:
        if self.error is not None:
            self.unwritten += isinstance(item, np.ndarray)
            return
        try:
            self._write_item(item)
        except OSError as exc:                  # a full disk: reported in the summary, the thread goes on
            self.error = f"{self.writer.path}: {exc}"
            self.unwritten += isinstance(item, np.ndarray)

    def _write_item(self, item: np.ndarray | dict | list) -> None:
        if isinstance(item, list):              # a gap record
            if self.writer is not None:
                self.writer.write_gap(*item)
            return
        event = isinstance(item, dict)
        if self.writer is not None:
            (self.writer.write_event if event else self.writer.write)(item)
        if self.tap is not None:
            (self.tap.event if event else self.tap.row)(item)

    def close(self) -> None:
        self._worker.close()
        if self.writer is not None:
            try:
                self.writer.close()
            except OSError as exc:              # the last bytes did not reach the disk either
                self.error = self.error or f"{self.writer.path}: {exc}"


class RunLogger:
    """Rows (with a ``cycle`` and a ``t`` column) and events to a run log on a writer thread, or with
    `process` (a `path`, no `tap`) on a writer process."""

    def __init__(self, path: str | None, header: dict, columns: list[str], depth: int | None = None, tap=None,
                 process: bool = False):
        if process and (path is None or tap is not None):
            raise ValueError("a writer process needs a path and takes no tap")
        header = {**header, "columns": columns}
        self.out = (WriterProcess(path, header, len(columns), depth or PROCESS_DEPTH) if process
                    else WriterThread(path, header, len(columns), depth or 4096, tap))
        self._cycle, self._t = columns.index("cycle"), columns.index("t")
        self._pending: deque = deque()          # events and gap records waiting for room, in order
        self._open_gap: list | None = None      # [first cycle, last cycle, rows, t] while still pending
        self.dropped = 0                        # rows dropped whole
        self.gaps = 0
        self._first_gaps: list[list] = []

    @property
    def writer_pid(self) -> int | None:
        """The writer process's pid; None for the writer thread."""
        return self.out.pid if isinstance(self.out, WriterProcess) else None

    def row(self) -> np.ndarray:
        """The buffer for the next record (fill it, then put() it)."""
        return self.out.slot()

    def put(self, row: np.ndarray) -> None:
        """Hand the filled row over; when the writer has no room, drop it whole and record the gap (sent
        ahead of the next row that gets through)."""
        if self.out.room() and self._flush_pending() and self.out.offer_row(row):
            self._open_gap = None
            return
        self._drop(row)

    def event(self, event: dict) -> None:
        """Queue an event (a dict: event, cycle, t, ...); it waits for room rather than being lost."""
        self._pending.append(event)
        self._flush_pending()

    def _flush_pending(self) -> bool:
        """Hand over what waits; True once nothing is left waiting."""
        while self._pending:
            if not self.out.offer(self._pending[0]):
                return False
            item = self._pending.popleft()
            if item is self._open_gap:
                self._open_gap = None           # handed over: a new drop starts a new gap
        return True

    def _drop(self, row: np.ndarray) -> None:
        cycle = int(row[self._cycle])
        self.dropped += 1
        gap = self._open_gap
        if gap is not None and self._pending[-1] is gap:   # nothing queued after it: extend it
            gap[1] = cycle
            gap[2] += 1
            return
        self._open_gap = [cycle, cycle, 1, float(row[self._t])]
        self._pending.append(self._open_gap)
        self.gaps += 1
        if len(self._first_gaps) < GAPS_REPORTED:
            self._first_gaps.append(self._open_gap)

    def report(self) -> dict:
        """The logger's counts for the run summary: the writer, rows dropped, the gaps they left, the
        writer's error (None when it wrote everything it was given) and the rows handed over that it did
        not write."""
        return {"writer": "thread" if self.writer_pid is None else "process",
                "dropped_rows": self.dropped, "gaps": self.gaps,
                "first_gaps": [(g[0], g[1]) for g in self._first_gaps], "writer_error": self.out.error,
                "unwritten_rows": self.out.unwritten}

    def close(self) -> None:
        """Hand over what still waits (waiting for room), write everything, close the file."""
        while self._pending:
            self.out.put_waiting(self._pending.popleft())
        self._open_gap = None
        self.out.close()
