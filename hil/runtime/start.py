"""The start of a run: one period checked, and until the firmware's first valid command, the
first sensor frames again.

A firmware may open its end of the link after the emulator sent its first frames, or flush its
input when it opens the port (pyserial does): the same frames (same counters) go out again after
`resend_s`, the interval doubling up to 1 s, until the first valid command (CANopen: the master's
first frame) arrives. No such frame within `start_timeout_s` fails the run (Emulator.abort).
"""
from __future__ import annotations

import math
import select
import time
from dataclasses import replace
from typing import Any

from firmware_bridge.links.base import Frame
from config_schema import UserError


def await_first_command(emu: Any, initial: list[Frame]) -> dict:
    """`emu`: a hil.runtime.loop.Emulator. Waits until the first valid command was taken in (held for
    the first cycle), the loop is stopped, or the start timeout fails the run; returns how the run
    started (waited_s, resent)."""
    t_start = time.monotonic()
    deadline = t_start + emu.opt.start_timeout_s
    interval = emu.opt.resend_s
    resend_at = t_start + interval
    resent = 0
    started = False
    while not started and not emu.stop_requested and time.monotonic() < deadline:
        if emu.protocol is not None:
            emu.io.send(emu.protocol.heartbeats())
        frame = emu.io.recv()
        if frame is None:
            now = time.monotonic()
            if emu.protocol is None and now >= resend_at:
                emu.send_sensors(initial)
                resent += 1
                interval = min(2 * interval, 1.0)
                resend_at = now + interval
            emu.io.idle(min(resend_at, deadline) - time.monotonic())
            continue
        if emu.protocol is not None and emu.protocol.receive(frame):
            started = True
        else:
            started = emu.hold_command(frame)
    report = {"waited_s": time.monotonic() - t_start, "resent": resent}
    if not started and not emu.stop_requested:
        emu.abort(f"start: no valid command within {emu.opt.start_timeout_s:g} s on {emu.link.name} "
                   f"(frames received {emu.link.counters.rx_frames}, commands rejected "
                   f"{dict((k, v) for k, v in emu.commands.reader.rejected.items() if v) or 'none'})")
    return report


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

