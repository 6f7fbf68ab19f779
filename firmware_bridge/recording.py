"""Recording bus traffic with python-can's own writers (ASC, BLF, CSV, ... by file suffix).

The loop thread only appends (frame, direction) to a bounded queue; a writer thread
converts them to can.Message and hands them to can.Logger, so file I/O never runs in
the loop. A full queue drops and counts.
"""
from __future__ import annotations

import queue
import threading
import time

import can

from .link import Frame


class BusRecorder:
    """Writes every frame the emulator sends and receives to a python-can log file."""

    def __init__(self, path: str, depth: int = 16384):
        self.path = path
        self._writer = can.Logger(path)
        self._queue: queue.Queue = queue.Queue(depth)
        self.dropped = 0
        self.written = 0
        self._thread = threading.Thread(target=self._drain, name="bus-record", daemon=True)
        self._thread.start()

    def put(self, frame: Frame, received: bool) -> None:
        """Queue a frame (received = True for firmware -> emulator), stamped now if unstamped."""
        try:
            self._queue.put_nowait((frame, received, frame.timestamp or time.monotonic()))
        except queue.Full:
            self.dropped += 1

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            frame, received, stamp = item
            self._writer.on_message_received(can.Message(
                timestamp=stamp, arbitration_id=frame.arbitration_id, data=frame.data, is_fd=frame.is_fd,
                is_extended_id=frame.is_extended_id, is_rx=received, channel="hil"))
            self.written += 1

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5.0)
        self._writer.stop()
