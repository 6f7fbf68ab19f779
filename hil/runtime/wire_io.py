"""The emulator's side of the wire: the link (through its fault layer), the frames a cycle reads, the
frames it sends, the bus recording, and what the firmware was sent and whether it answers.

A cycle reads every frame waiting on the link within its receive budget (hil.runtime.receive), the
frames read just before the previous cycle's sensor frames went out first (``receive``,
``read_early``); the loop's waits (lockstep, start) take single frames (``recv``). Every frame read or
sent is recorded when a recording is open. In lockstep a mirror of the firmware's receiver
(hil.runtime.lockstep.FirmwareCue) sees the frames as they went out, and says whether the cycle
expects an answer (``answer_expected``); an unanswered cycle makes the firmware ``silent`` until it
answers again. Another protocol on the same link (``side``: XCP on CAN, hil.runtime.xcp_server) takes
its frames out of what the loop reads, before any decoder sees them.
"""
from __future__ import annotations

import select
import time

from firmware_bridge.links.base import Frame, Link
from firmware_bridge.links.faults import FaultyLink
from firmware_bridge.links.in_process import PumpedLink
from firmware_bridge.links.recording import BusRecorder
from hil.runtime.lockstep import FirmwareCue
from hil.runtime.receive import ReceiveBudget
from hil.runtime.start import link_poller


class WireIO:
    """The link of one emulator and the frames that cross it (module docstring). `link`: the link behind
    its fault layer (hil.runtime.wire_plan.WirePlan.fault_layer), `raw` the link itself (its descriptor
    is polled while the loop waits); `budget`: the receive budget; `cue`: the lockstep mirror of the
    firmware's receiver, or None."""

    def __init__(self, link: FaultyLink, raw: Link, budget: ReceiveBudget, cue: FirmwareCue | None):
        self.link = link
        self._poll = link_poller(raw)
        self._waits_pass = isinstance(raw, PumpedLink)      # nothing arrives while an in-process firmware waits
        self._passed_s = 0.0
        self.receive_budget = budget
        self.recorder: BusRecorder | None = None
        self._cue = cue
        if cue is not None:
            self.link.tap = cue.see
        self._early: list[Frame] = []       # frames read just before the sensor frames went out
        self._received: list[Frame] = []    # this cycle's frames (reused)
        self.answer_expected = True         # lockstep: the last cycle's sensor frames cue the firmware
        self.silent = False                 # lockstep: the firmware left a sensor frame unanswered
        self.silent_cycles = 0
        self.rejected_answers = 0           # lockstep: cycles answered with a frame the emulator rejected
        self.rejecting = False              # lockstep: the last cycle was so answered (no valid command since)
        self.last_sensor_frames: list[Frame] = []
        self.resent_frames = 0              # lockstep: unanswered sensor frames sent again
        self.dropped_while_silent = 0
        self.side = None            # claims(frame) -> bool and take(frame): another protocol's frames

    # ------------------------------------------------------------------ reading
    def receive(self) -> list[Frame]:
        """Every frame waiting on the link, within the receive budget, recorded when recording; the
        frames read just before the last sensor frames went out come first. The list is reused."""
        frames = self._received
        frames.clear()
        if self._early:
            frames.extend(self._early)
            self._early.clear()
        self._read_into(frames)
        if self.side is not None:
            self._divert(frames)
        return frames

    def _divert(self, frames: list[Frame]) -> None:
        """The side protocol's frames out of ``frames`` (in place), to it."""
        claims = self.side.claims
        if any(claims(f) for f in frames):
            kept = []
            for f in frames:
                if claims(f):
                    self.side.take(f)
                else:
                    kept.append(f)
            frames[:] = kept

    def read_early(self) -> None:
        """Read what arrived while the plant stepped (it answers older frames): the next cycle's first."""
        self._read_into(self._early)

    def _read_into(self, frames: list[Frame]) -> None:
        self.receive_budget.take(self.link, frames, self.recorder.received if self.recorder else None)

    def recv(self) -> Frame | None:
        """One frame off the link now, recorded when recording, or None."""
        frame = self.link.recv()
        if frame is not None and self.recorder:
            self.recorder.put(frame, received=True)
        if frame is not None and self.side is not None and self.side.claims(frame):
            self.side.take(frame)
            return None
        return frame

    def now(self) -> float:
        """The lockstep waits' clock [s]: monotonic, plus the waits passed at once (idle)."""
        return time.monotonic() + self._passed_s

    def idle(self, remaining_s: float) -> None:
        """Wait for input without spinning (lockstep, start): on the link's descriptor where it has
        one (at most 5 ms: a fault layer may hold frames of its own), else 20 us; a pty whose other
        end nobody has opened yet only hangs up, so then 1 ms. With the firmware in this process
        nothing can arrive meanwhile: the wait passes at once on the clock of ``now``."""
        if self._waits_pass:
            self._passed_s += max(remaining_s, 20e-6)
        elif self._poll is None:
            time.sleep(20e-6)
        elif remaining_s > 0:
            events = self._poll.poll(min(remaining_s, 5e-3) * 1e3)
            if events and not events[0][1] & select.POLLIN:
                time.sleep(1e-3)

    # ------------------------------------------------------------------ sending
    def send(self, frames: list[Frame]) -> bool:
        """Send frames; True if any went out on the wire (a bus fault may withhold them)."""
        before = self.link.counters.tx_frames
        for frame in frames:
            self.link.send(frame)
            if self.recorder:
                self.recorder.put(frame, received=False)
        return self.link.counters.tx_frames > before

    def send_sensors(self, frames: list[Frame]) -> None:
        """A cycle's sensor frames, kept for a resend; frames a silent firmware leaves unread are counted
        apart (no link error: it does not listen)."""
        dropped = self.link.counters.tx_dropped
        cue = self._cue
        if cue is not None:
            cue.cued = False
        went_out = self.send(frames)
        self.answer_expected = went_out if cue is None else cue.cued
        if self.silent:
            self.dropped_while_silent += self.link.counters.tx_dropped - dropped
        self.last_sensor_frames = frames

    # ------------------------------------------------------------------ the firmware's answers (lockstep)
    def resend_unanswered(self) -> None:
        """The last sensor frames again (same counters: a firmware that lost them answers)."""
        self.send(self.last_sensor_frames)
        self.resent_frames += len(self.last_sensor_frames)

    def answered(self) -> None:
        self.silent = self.rejecting = False

    def answered_rejected(self) -> None:
        """The firmware answered the last sensor frames with a command frame the emulator rejected."""
        self.silent = False
        self.rejecting = True
        self.rejected_answers += 1

    def unanswered(self) -> None:
        """The firmware left the last sensor frames unanswered within its time: silent from now."""
        self.silent = True
        self.silent_cycles += 1

    def lockstep_summary(self) -> dict:
        return {"silent_cycles": self.silent_cycles, "rejected_answers": self.rejected_answers,
                "resent_frames": self.resent_frames,
                "dropped_while_silent": self.dropped_while_silent, "waits_passed_s": self._passed_s}

    def close(self) -> None:
        """Close the bus recording, if one is open."""
        if self.recorder:
            self.recorder.close()
