"""A firmware's loop on a link (serve; FirmwareSession, frame by frame): wait for each cycle's sensor frames,
ask the control law for the joint torques, answer with the command frames; for a CANopen map also the master's part (the
drives' enabling, NMT start, one SYNC per cycle, NMT stop at the end). Plain Python.

Time is the emulator's cycle counter (the SYNCs sent, on a CANopen map) times the map's cycle, so
a lockstep run gives the same torques on any machine. The law is asked once per cycle: a sensor
frame sent again for a cycle already answered (a lockstep emulator repeats an unanswered frame)
is answered again with the same torques, under a new rolling counter.

The loop ends when the emulator's time reaches `duration_s` (after answering that cycle), when no
frame has come for `idle_timeout_s` (the emulator is gone: a lockstep emulator repeats its last
frame every second while it waits), or, with `parent_pid`, as soon as that process (the emulator
that started this one) has exited.
"""
from __future__ import annotations

import os
import select
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from firmware_bridge.links.base import Frame, Link
from .endpoint import FirmwareWire, SensorInput
from .latency import LatencyHistogram

IDLE_TIMEOUT_S = 10.0     # no frame for this long: the emulator is gone (a busy machine can hold a pty's
                          # data for seconds; a lockstep emulator sends an unanswered frame again every second)

ControlLaw = Callable[[SensorInput, int], "Sequence[float] | None"]


@dataclass
class ServeResult:
    cycles: int                    # the last cycle seen (SYNCs sent, on a CANopen map)
    answered: int                  # cycles the control law was asked for
    repeats: int                   # sensor frames of an answered cycle, answered again
    link: dict                     # the link's counters
    sensors: dict                  # the sensor reader's counts: accepted, ignored, lost, resyncs, rejected by kind
    command_to_sensor_us: dict     # command sent -> next sensor frame received (computed with it)
    canopen: dict | None           # CANopen maps: the master's counters
    ended_by: str                  # "duration", "idle", "parent_exited"


class FirmwareSession:
    """A firmware's side of a run, frame by frame: `handle` takes one frame from the emulator and sends
    the answers on `link`; `pump` handles every frame waiting on `link` (a firmware run in the emulator's
    own process is pumped by it: firmware_bridge.links.in_process). `done` once the emulator's time has
    reached `duration_s` (after answering that cycle)."""

    def __init__(self, wire: FirmwareWire, link: Link, control: ControlLaw, duration_s: float | None = None):
        self.wire, self.link, self.control, self.duration_s = wire, link, control, duration_s
        self.latency = LatencyHistogram()
        self.sent_at: float | None = None
        self.answered_cycle: int | None = None
        self.torques = None
        self.answered = self.repeats = 0
        self.cycle = wire.sensors.cycle
        self.done = False

    def pump(self) -> int:
        """Handle the frames waiting on the link (none once done); how many."""
        n = 0
        while not self.done:
            frame = self.link.recv()
            if frame is None:
                break
            self.handle(frame, time.monotonic())
            n += 1
        return n

    def handle(self, frame: Frame, now: float) -> bool:
        """One frame received at `now` (monotonic s); True if it came from the emulator (not only the
        CANopen master's own traffic before the start)."""
        sensors, master, link = self.wire.sensors, self.wire.master, self.link
        if master is not None and master.is_protocol(frame):
            starting = not master.started
            for f in master.on_frame(frame):       # the drives' enabling, NMT start and the first SYNC
                link.send(f)
            return starting
        if not sensors.feed(frame):
            return True
        if self.sent_at is not None:
            self.latency.add((now - self.sent_at) * 1e6)
        cycle = self.cycle = sensors.cycle if master is None else master.syncs
        if cycle == self.answered_cycle:
            self.repeats += 1
        else:
            self.torques = self.control(sensors, cycle)
            self.answered_cycle, self.answered = cycle, self.answered + 1
        if self.torques is not None:
            for f in self.wire.commands.frames(self.torques, cycle):
                link.send(f)
        self.done = self.duration_s is not None and cycle * self.wire.bus.cycle_s >= self.duration_s
        if master is not None:
            link.send(master.stop() if self.done else master.sync())
        self.sent_at = time.monotonic() if self.torques is not None else None
        return True

    def result(self, ended_by: str) -> ServeResult:
        sensors, master = self.wire.sensors, self.wire.master
        return ServeResult(sensors.cycle if master is None else self.cycle, self.answered, self.repeats,
                           self.link.counters.as_dict(), sensors.reader.stats(), self.latency.summary(),
                           None if master is None else master.stats(), ended_by)


def serve(wire: FirmwareWire, link: Link, control: ControlLaw, duration_s: float | None = None,
          idle_timeout_s: float = IDLE_TIMEOUT_S, parent_pid: int | None = None) -> ServeResult:
    """Run `control(sensors, cycle) -> torques` (one per joint of `wire`, N m; None: send no
    command this cycle) on every cycle the emulator sends over `link`."""
    session = FirmwareSession(wire, link, control, duration_s)
    last_rx = time.monotonic()
    fd = _descriptor(link)
    while True:
        frame = link.recv()
        if frame is None:   # idle: only now the timeout counts (a firmware process that was not scheduled for
            # a while finds the frames that waited meanwhile first)
            if parent_pid is not None and os.getppid() != parent_pid:
                return session.result("parent_exited")  # the emulator is gone (its pty or bus may still look alive)
            if time.monotonic() - last_rx >= idle_timeout_s:
                return session.result("idle")
            _wait(fd)
            continue
        now = time.monotonic()
        if session.handle(frame, now):
            last_rx = now
        if session.done:
            return session.result("duration")


def _descriptor(link: Link) -> int | None:
    try:
        return link.fileno()
    except (AttributeError, NotImplementedError, OSError):
        return None


def _wait(fd: int | None) -> None:
    """Block briefly for input: select on the link's descriptor if it has one, else a short sleep."""
    if fd is not None and fd >= 0:
        select.select([fd], [], [], 1e-3)
    else:
        time.sleep(50e-6)
