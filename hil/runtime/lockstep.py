"""Lockstep: the firmware's commands are the clock (one plant step per answered cycle).

After each cycle's sensor frames the loop waits for the command that answers them
(``wait_for_command``; CANopen maps: for the master's SYNC, ``wait_for_sync``). A command frame the
emulator rejects (CRC, out of range, NaN, length) is the firmware's answer too when no valid command
follows it within ``REJECTED_GRACE_S`` (at once once the firmware has answered a cycle so, until it
sends a valid command again): the cycle steps on without a new command (the watchdog acts) and
counts as answered with a rejected frame, not as silence. A firmware that sends a bad frame and
then its good one is answered by the good one, whatever the load (unless the two are more than the
grace apart); a repeated rolling counter (a copy of an earlier frame) answers nothing. An unanswered frame
goes out again every ``lockstep_resend_s`` (same counter: a firmware that lost it answers, one that
has answered already rejects the repeat) and after ``lockstep_timeout_s`` the firmware is silent:
the plant steps on without commands (the watchdog acts), waiting ``lockstep_silent_poll_s`` per cycle.
While it waits the loop says why, at most every ``PROGRESS_S`` (``Emulator.progress``). With the firmware in
the emulator's process (hil.cli.in_process) nothing can arrive while the loop waits (the firmware runs when
the link is read), so a wait passes at once on the loop's clock (WireIO.now): the same resends and timeouts,
in no time.

Which cycles are answered: those whose sensor frames, as they went out on the wire (after the bus
faults), a receiver following the bus map's rules computes on (:class:`FirmwareCue`, the firmware
side's own reader firmware_bridge.wire.signals.SensorInput: CRC, the E2E counter with its resync, all
of a cycle's encoder frames). A cycle whose frames a bus fault withheld or damaged expects none,
and neither does the first frame after a gap longer than the counter window (a bus-off): the
receiver rejects it and takes up the new sequence with the next. A firmware that computes on frames
these rules reject runs one cycle behind from then on (its extra answer is taken for the next
cycle).
"""
from __future__ import annotations

from typing import Any

from config_schema import ConfigError
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.firmware.endpoint import SensorInput
from hil.runtime.start import PROGRESS_S, REJECTED_GRACE_S, rejections



class FirmwareCue:
    """A mirror of the firmware's receiver, fed with every sensor frame that went out on the wire:
    ``cued`` is true once a frame completed a cycle the firmware computes on (reset per cycle)."""

    def __init__(self, bus: BusMap, joint_names: list[str]):
        self.receiver = SensorInput(bus, joint_names)
        self.cued = False

    def see(self, item: Frame | bytes) -> None:
        """One item as transmitted (raw bytes: a packet a fault damaged below the framing)."""
        if isinstance(item, Frame) and self.receiver.feed(item):
            self.cued = True


def firmware_cue(bus: BusMap, joint_names: list[str]) -> FirmwareCue | None:
    """The cue for a map whose sensor frames carry every joint's encoder; None (every cycle that
    sent a frame expects an answer) for a map without them."""
    try:
        return FirmwareCue(bus, joint_names)
    except ConfigError:
        return None


def wait_for_command(emu: Any) -> bool:
    """`emu`: a hil.runtime.loop.Emulator. Poll the link until the firmware answered: a valid command
    frame taken in, or a command frame rejected (module docstring); False only when stopped (CANopen:
    or no SYNC within the timeout). Without an answer in time the firmware is silent and the plant steps
    on; with no answer expected there is nothing to wait for."""
    if emu.protocol is not None:
        return wait_for_sync(emu)
    if emu.held_fresh:                 # the first command, taken in while starting
        return True
    io = emu.io
    if not io.answer_expected:
        return True
    start = io.now()
    timeout = emu.opt.lockstep_silent_poll_s if io.silent else emu.opt.lockstep_timeout_s
    deadline, resend_at, report_at = start + timeout, start + emu.opt.lockstep_resend_s, start + PROGRESS_S
    rejected, rejected_at = rejections(emu), None
    while not emu.stop_requested and io.now() < deadline:
        frame = io.recv()
        if frame is None:
            now = io.now()
            if rejected_at is not None and (io.rejecting or now - rejected_at >= REJECTED_GRACE_S):
                io.answered_rejected()                 # its only answer was a rejected frame
                return True
            if not io.silent and now >= resend_at:      # lost, or a firmware that is alive
                io.resend_unanswered()                 # only while it hears from the plant
                resend_at += emu.opt.lockstep_resend_s
            if now >= report_at:
                emu.progress(f"lockstep: after cycle {emu.cycle} (t = {emu.plant.t:.3f} s) the loop waits "
                             f"{now - start:.0f} s for the firmware's answer; sensor frames sent again every "
                             f"{emu.opt.lockstep_resend_s:g} s, silent after {timeout:g} s")
                report_at += PROGRESS_S
            grace_end = deadline if rejected_at is None else rejected_at + REJECTED_GRACE_S
            io.idle(min(deadline, resend_at, report_at, grace_end) - io.now())
            continue
        if emu.hold_command(frame):
            io.answered()
            return True
        if rejected_at is None and rejections(emu) > rejected:
            rejected_at = io.now()
    if emu.stop_requested:
        return False
    if not io.silent:
        emu.progress(f"lockstep: no answer after cycle {emu.cycle} (t = {emu.plant.t:.3f} s) within {timeout:g} s: "
                     "the firmware is silent; the plant steps on without commands until it answers")
    io.unanswered()
    return True


def wait_for_sync(emu: Any) -> bool:
    """Lockstep on a CANopen map: take frames (NMT, RPDOs) until a SYNC, or the timeout; the
    nodes' heartbeats keep going out meanwhile."""
    io = emu.io
    deadline = io.now() + emu.opt.lockstep_timeout_s
    while not emu.stop_requested and io.now() < deadline:
        io.send(emu.protocol.heartbeats())
        if emu.protocol.step_due:
            return True
        frame = io.recv()
        if frame is None:
            io.idle(deadline - io.now())
            continue
        emu.hold_frame(frame)
    return emu.protocol.step_due
