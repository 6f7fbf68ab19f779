"""The run logger: per-cycle rows and events from the loop thread to a writer thread, never lost
silently.

The loop fills a row buffer (``row()``), then hands it over (``put(row)``); file I/O runs on the
writer thread (firmware_bridge.recording.BackgroundWriter) behind a bounded queue, so the loop
never waits on it. When the writer falls behind and the queue is full, the row is dropped whole
and counted, and the stretch of dropped cycles is written into the log as a gap record (cycle
range, row count) ahead of the next row that gets through: the log holds every row it shows
exactly as logged, and says which it does not hold. Events (fault injections, watchdog trips) are
never dropped: one that finds the queue full waits in order with the gap records and goes ahead
of the next row.

Rows come from a preallocated ring two longer than the queue; the ring moves on only when a row
was queued, so a buffer is reused only after the writer has taken it (queued rows, the one the
writer holds and the one the loop fills are all distinct). A `tap` (an object with ``row(row)``
and ``event(event)``, e.g. the live view hil.viz.live.LiveView) sees every record on the writer's
thread; without a `path` only the tap gets them.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from firmware_bridge.recording import BackgroundWriter
from hil.logs.runlog import MsgpackRunWriter

GAPS_REPORTED = 20      # the first gaps listed in the summary (all of them are in the log)


class RunLogger:
    """Rows (with a ``cycle`` and a ``t`` column) and events to a run log on a writer thread."""

    def __init__(self, path: str | None, header: dict, columns: list[str], depth: int = 4096, tap=None):
        self.writer = MsgpackRunWriter(path, {**header, "columns": columns}) if path else None
        self.tap = tap
        self._worker = BackgroundWriter(self._write, "hil-log", depth)
        self._rows = np.zeros((depth + 2, len(columns)))
        self._next = 0
        self._cycle, self._t = columns.index("cycle"), columns.index("t")
        self._pending: deque = deque()          # events and gap records waiting for room, in order
        self._open_gap: list | None = None      # [first cycle, last cycle, rows, t] while still pending
        self.dropped = 0                        # rows dropped whole
        self.gaps = 0
        self.first_gaps: list[tuple[int, int]] = []

    def row(self) -> np.ndarray:
        """The buffer for the next record (fill it, then put() it)."""
        return self._rows[self._next]

    def put(self, row: np.ndarray) -> None:
        """Queue the filled row; when the queue is full, drop it whole and record the gap."""
        if self._flush_pending() and self._worker.offer(row):
            self._next = (self._next + 1) % len(self._rows)
            self._open_gap = None
            return
        self._drop(row)

    def event(self, event: dict) -> None:
        """Queue an event (a dict: event, cycle, t, ...); it waits for room rather than being lost."""
        self._pending.append(event)
        self._flush_pending()

    def _flush_pending(self) -> bool:
        """Queue what waits; True once nothing is left waiting."""
        while self._pending:
            if not self._worker.offer(self._pending[0]):
                return False
            item = self._pending.popleft()
            if item is self._open_gap:
                self._open_gap = None           # the writer may read it now: a new drop starts a new gap
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

    def report(self) -> dict:
        """The logger's counts for the run summary: rows dropped and the gaps they left."""
        return {"dropped_rows": self.dropped, "gaps": self.gaps, "first_gaps": self.first_gaps}

    def _write(self, item: np.ndarray | dict | list) -> None:
        if isinstance(item, list):              # a gap record
            if len(self.first_gaps) < GAPS_REPORTED:
                self.first_gaps.append((item[0], item[1]))
            if self.writer is not None:
                self.writer.write_gap(*item)
            return
        event = isinstance(item, dict)
        if self.writer is not None:
            (self.writer.write_event if event else self.writer.write)(item)
        if self.tap is not None:
            (self.tap.event if event else self.tap.row)(item)

    def close(self) -> None:
        """Queue what still waits (waiting for room), write everything, close the file."""
        while self._pending:
            item = self._pending.popleft()
            self._worker.put_waiting(item)
        self._open_gap = None
        self._worker.close()
        if self.writer is not None:
            self.writer.close()
