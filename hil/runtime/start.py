"""The start of a run: one period checked, and until the firmware's first answer, the first sensor
frames again.

A firmware may open its end of the link after the emulator sent its first frames, or flush its
input when it opens the port (pyserial does): the same frames (same counters) go out again after
`resend_s`, the interval doubling up to 1 s, until the firmware's first answer arrives: a valid
command, or a command frame the emulator rejects for its content (ANSWERING_REJECTIONS: the firmware
is there, its commands are wrong; the link-health verdicts judge them) (CANopen: the master's first
frame). No answer within `start_timeout_s` fails the run (Emulator.abort), with a hint when the
frames that came are not the bus map's commands.
"""
from __future__ import annotations

import math
import select
from dataclasses import replace
from typing import Any

from firmware_bridge.links.base import Frame
from config_schema import UserError

PROGRESS_S = 2.0        # a wait longer than this is reported (Emulator.progress), and then again as often
ANSWERING_REJECTIONS = ("crc", "range", "nan", "length")   # a rejected command frame that answers its cycle
REJECTED_GRACE_S = 0.1  # a rejected command answers when no valid one follows within this (hil.runtime.lockstep)


def await_first_command(emu: Any, initial: list[Frame]) -> dict:
    """`emu`: a hil.runtime.loop.Emulator. Waits until the firmware's first answer (a valid command is
    held for the first cycle), the loop is stopped, or the start timeout fails the run; returns how the run
    started (started, waited_s, resent). Every PROGRESS_S it says that it waits (Emulator.progress)."""
    t_start = emu.io.now()
    deadline = t_start + emu.opt.start_timeout_s
    interval = emu.opt.resend_s
    resend_at, report_at = t_start + interval, t_start + PROGRESS_S
    resent = 0
    started = False
    seen = FramesSeen()
    rejected, rejected_at = rejections(emu), None
    while not started and not emu.stop_requested and emu.io.now() < deadline:
        if emu.protocol is not None:
            emu.io.send(emu.protocol.heartbeats())
        frame = emu.io.recv()
        if frame is None:
            now = emu.io.now()
            if rejected_at is not None and now - rejected_at >= REJECTED_GRACE_S:
                started = True              # the firmware answered, with a rejected command only
                break
            if emu.protocol is None and now >= resend_at:
                emu.send_sensors(initial)
                resent += 1
                interval = min(2 * interval, 1.0)
                resend_at = now + interval
            if now >= report_at:
                emu.progress(f"waiting for the firmware's first command on {emu.link.name}: {now - t_start:.0f} s "
                             f"of the start timeout's {emu.opt.start_timeout_s:g} s; {seen.describe()}")
                report_at += PROGRESS_S
            grace_end = deadline if rejected_at is None else rejected_at + REJECTED_GRACE_S
            emu.io.idle(min(resend_at, deadline, report_at, grace_end) - emu.io.now())
            continue
        seen.add(frame)
        if emu.protocol is not None and emu.protocol.receive(frame):
            started = True
        else:     # the first answer starts the run: a valid command, or a rejected one with none after it
            started = emu.hold_command(frame)
            if not started and rejected_at is None and rejections(emu) > rejected:
                rejected_at = emu.io.now()
    report = {"started": started, "waited_s": emu.io.now() - t_start, "resent": resent}
    if not started and not emu.stop_requested:
        rejected = {k: v for k, v in emu.commands.reader.rejected.items() if v}
        emu.abort(f"start: no valid command within {emu.opt.start_timeout_s:g} s on {emu.link.name} "
                  f"(frames received {emu.link.counters.rx_frames}, commands rejected {rejected or 'none'})"
                  + seen.mismatch(emu.expected_commands))
    return report


class FramesSeen:
    """The first distinct (id, payload length) pairs received while the run waits to start."""

    LIMIT = 4

    def __init__(self):
        self.kinds: list[tuple[int, int]] = []

    def add(self, frame: Frame) -> None:
        kind = (frame.arbitration_id, len(frame.data))
        if kind not in self.kinds and len(self.kinds) < self.LIMIT:
            self.kinds.append(kind)

    def describe(self) -> str:
        if not self.kinds:
            return "nothing received yet"
        return "received " + ", ".join(f"id 0x{i:X} ({n} bytes)" for i, n in self.kinds)

    def mismatch(self, expected: list[tuple[str, int, int]]) -> str:
        """A hint when frames came but none has the id and length of a command the map expects: the two
        sides probably use different bus maps."""
        wanted = {(i, n) for _, i, n in expected}
        if not self.kinds or any(kind in wanted for kind in self.kinds):
            return ""
        return (f"; {self.describe()}, but the bus map expects " + ", ".join(
            f"{name} id 0x{i:X} ({n} bytes)" for name, i, n in expected) +
            ": does the firmware use the same bus map?")


def rejections(emu: Any) -> int:
    """The command frames rejected so far for a cause that makes a rejected frame an answer."""
    rejected = emu.commands.reader.rejected
    return sum(rejected.get(cause, 0) for cause in ANSWERING_REJECTIONS)


def check_period(options: Any, plant: Any, plan: Any) -> Any:
    """The options with the cycle period set: the plant step, which the bus map's cycle_s (`plan`: a
    hil.runtime.wire_plan.WirePlan) and a given period_s must equal (the emulator steps the plant once
    per cycle); ValueError if not."""
    dt, source = plant.dt, plant.asm.model.source
    if not math.isclose(plan.cycle_s, dt, rel_tol=1e-9):
        raise UserError(f"{plan.source}: bus.cycle_s = {plan.cycle_s:g} s differs from the plant step "
                         f"integrator.dt_s = {dt:g} s of {source}: one cycle is one plant step; make them equal")
    if options.period_s is not None and not math.isclose(options.period_s, dt, rel_tol=1e-9):
        raise UserError(f"period {options.period_s:g} s differs from the plant step integrator.dt_s = {dt:g} s of "
                         f"{source}: one cycle is one plant step; leave the period out (it is the plant step) "
                         "or change the preset's dt_s")
    return replace(options, period_s=dt)


def link_poller(link: Any) -> select.poll | None:
    """A poll object on the descriptor that turns readable when the link receives, if it has one."""
    try:
        fd = link.fileno()
    except (AttributeError, NotImplementedError, OSError):
        return None
    if not isinstance(fd, int) or fd < 0:
        return None
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return poller

