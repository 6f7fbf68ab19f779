"""The per-cycle receive budget: how many frames, and how much time, one cycle spends taking frames
off the link.

A flood of frames (valid or not: any local process can write to a pty or send UDP datagrams to
udp_loopback) must not push a cycle past its deadline. A cycle takes frames until the link has
none, `frames` frames were taken, or (realtime mode only: afap and lockstep runs stay
deterministic) `seconds` have passed (looked at after each frame; one recv() does a bounded amount
of work on every link); then whatever still waits is dropped through
the link's ``discard()`` (bounded as well; counted in the link's ``rx_over_budget`` and
``rx_garbage_bytes``), and the cycle is counted as over budget. A firmware sends a few frames per
cycle, far below the default budget of 64 frames and half of a 1 ms period.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from config_schema import UserError


class ReceiveBudget:
    """Takes at most `frames` frames or `seconds` of receiving per call of `take`."""

    def __init__(self, frames: int = 64, seconds: float | None = 500e-6):
        if frames < 1 or (seconds is not None and not seconds > 0):
            raise UserError(f"receive budget: {frames} frames, {seconds} s: expected >= 1 frame and > 0 s")
        self.frames = frames
        self.seconds = seconds
        self._ns = 1 << 62 if seconds is None else round(seconds * 1e9)
        self.cycles_over = 0        # calls that spent the budget
        self.dropped = 0            # frames the links dropped unread after it

    def take(self, link, out: list, on_frame: Callable | None = None) -> None:
        """Append the link's waiting frames to `out` (calling `on_frame(frame)` for each), within the budget."""
        deadline = time.monotonic_ns() + self._ns
        taken = 0
        while (frame := link.recv()) is not None:
            out.append(frame)
            if on_frame is not None:
                on_frame(frame)
            taken += 1
            if taken >= self.frames or time.monotonic_ns() >= deadline:
                self._spent(link)
                return

    def _spent(self, link) -> None:
        self.cycles_over += 1
        discard = getattr(link, "discard", None)
        if discard is not None:
            self.dropped += discard()

    def summary(self) -> dict:
        return {"frames_per_cycle": self.frames, "seconds_per_cycle": self.seconds,
                "cycles_over_budget": self.cycles_over, "frames_dropped": self.dropped}
