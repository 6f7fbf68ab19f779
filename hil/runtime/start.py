"""The start of a run: until the firmware's first valid command, the first sensor frames again.

A firmware may open its end of the link after the emulator sent its first frames, or flush its
input when it opens the port (pyserial does): the same frames (same counters) go out again after
`resend_s`, the interval doubling up to 1 s, until the first valid command (CANopen: the master's
first frame) arrives. No such frame within `start_timeout_s` fails the run (Emulator.abort).
"""
from __future__ import annotations

import time
from typing import Any

from firmware_bridge.link import Frame


def await_first_command(emu: Any, initial: list[Frame]) -> bool:
    """`emu`: a hil.runtime.loop.Emulator. True once the first valid command was taken in (held for the first cycle); False when
    stopped or after the start timeout (the run then fails)."""
    t_start = time.monotonic()
    deadline = t_start + emu.opt.start_timeout_s
    interval = emu.opt.resend_s
    resend_at = t_start + interval
    resent = 0
    started = False
    while not started and not emu.stop_requested and time.monotonic() < deadline:
        if emu.protocol is not None:
            emu.send_frames(emu.protocol.heartbeats())
        frame = emu.link.recv()
        if frame is None:
            now = time.monotonic()
            if emu.protocol is None and now >= resend_at:
                emu.send_sensors(initial)
                resent += 1
                interval = min(2 * interval, 1.0)
                resend_at = now + interval
            time.sleep(100e-6)
            continue
        if emu.recorder:
            emu.recorder.put(frame, received=True)
        if emu.protocol is not None and emu.protocol.receive(frame):
            started = True
        elif emu.take_command(frame):
            emu.held_fresh = started = True
    emu.start_report = {"waited_s": time.monotonic() - t_start, "resent": resent}
    if not started and not emu.stop_requested:
        emu.abort(f"start: no valid command within {emu.opt.start_timeout_s:g} s on {emu.link.name} "
                   f"(frames received {emu.link.counters.rx_frames}, commands rejected "
                   f"{dict((k, v) for k, v in emu.commands.reader.rejected.items() if v) or 'none'})")
    return started
