"""Recording bus traffic with python-can's own writers (ASC, BLF, CSV, ... by file suffix).

The loop thread only appends (frame, direction) to a bounded queue; a writer thread
(BackgroundWriter, also used for the run log) converts them to can.Message and hands
them to can.Logger, so file I/O never runs in the loop. A full queue drops and counts.
"""
from __future__ import annotations

import queue
import threading
import time

import can

from .base import Frame


class BackgroundWriter:
    """Runs write(item) for queued items on its own thread, so a loop thread never waits on
    file I/O; put() never blocks: a full queue drops the item and counts it."""

    def __init__(self, write, name: str, depth: int):
        self._write = write
        self._queue: queue.Queue = queue.Queue(depth)
        self.dropped = 0
        self.written = 0
        self._thread = threading.Thread(target=self._drain, name=name, daemon=True)
        self._thread.start()

    def put(self, item) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self.dropped += 1

    def offer(self, item) -> bool:
        """Queue an item if there is room; False (not counted) if not, for a caller that keeps it."""
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            return False
        return True

    def put_waiting(self, item, timeout_s: float = 5.0) -> None:
        """Queue an item, waiting for room (at the end of a run, when nothing must be lost)."""
        self._queue.put(item, timeout=timeout_s)

    def full(self) -> bool:
        return self._queue.full()

    def backlog(self) -> int:
        """Items queued and not yet taken by the writer thread."""
        return self._queue.qsize()

    def _drain(self) -> None:
        while (item := self._queue.get()) is not None:
            self._write(item)
            self.written += 1

    def close(self) -> None:
        """Write what is queued, then stop the thread."""
        self._queue.put(None)
        self._thread.join(timeout=5.0)


class BusRecorder:
    """Writes every frame the emulator sends and receives to a python-can log file."""

    def __init__(self, path: str, depth: int = 16384):
        self.path = path
        # frames are stamped on the monotonic clock; the files carry wall-clock time (an ASC header's date
        # comes from the first stamp)
        self._to_wall_s = time.time() - time.monotonic()
        self._logger = can.Logger(path)
        self._worker = BackgroundWriter(self._write, "bus-record", depth)

    @property
    def dropped(self) -> int:
        return self._worker.dropped

    @property
    def written(self) -> int:
        return self._worker.written

    def put(self, frame: Frame, received: bool) -> None:
        """Queue a frame (received = True for firmware -> emulator), stamped now if unstamped."""
        self._worker.put((frame, received, frame.timestamp or time.monotonic()))

    def received(self, frame: Frame) -> None:
        """Queue a frame the firmware sent."""
        self.put(frame, received=True)

    def _write(self, item) -> None:
        frame, received, stamp = item
        self._logger.on_message_received(can.Message(
            timestamp=stamp + self._to_wall_s, arbitration_id=frame.arbitration_id, data=frame.data, is_fd=frame.is_fd,
            is_extended_id=frame.is_extended_id, is_rx=received, channel="hil"))

    def close(self) -> None:
        self._worker.close()
        self._logger.stop()
