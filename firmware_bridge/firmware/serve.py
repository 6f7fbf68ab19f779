"""A firmware's loop on a link: wait for each cycle's sensor frames, ask the control law for the
joint torques, answer with the command frames; for a CANopen map also the master's part (the
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

from firmware_bridge.links.base import Link
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


def serve(wire: FirmwareWire, link: Link, control: ControlLaw, duration_s: float | None = None,
          idle_timeout_s: float = IDLE_TIMEOUT_S, parent_pid: int | None = None) -> ServeResult:
    """Run `control(sensors, cycle) -> torques` (one per joint of `wire`, N m; None: send no
    command this cycle) on every cycle the emulator sends over `link`."""
    sensors, master, cycle_s = wire.sensors, wire.master, wire.bus.cycle_s
    last_rx = time.monotonic()
    fd = _descriptor(link)
    sent_at = None
    latency = LatencyHistogram()
    answered_cycle, torques, answered, repeats = None, None, 0, 0
    cycle = sensors.cycle
    while True:
        frame = link.recv()
        if frame is None:   # idle: only now the timeout counts (a firmware process that was not scheduled for
            # a while finds the frames that waited meanwhile first)
            if parent_pid is not None and os.getppid() != parent_pid:
                ended_by = "parent_exited"  # the emulator is gone (its pty or bus may still look alive)
                break
            if time.monotonic() - last_rx >= idle_timeout_s:
                ended_by = "idle"
                break
            _wait(fd)
            continue
        if master is not None and master.is_protocol(frame):
            if not master.started:
                last_rx = time.monotonic()
            for f in master.on_frame(frame):       # the drives' enabling, NMT start and the first SYNC
                link.send(f)
            continue
        last_rx = time.monotonic()
        if not sensors.feed(frame):
            continue
        if sent_at is not None:
            latency.add((last_rx - sent_at) * 1e6)
        cycle = sensors.cycle if master is None else master.syncs
        if cycle == answered_cycle:
            repeats += 1
        else:
            torques = control(sensors, cycle)
            answered_cycle, answered = cycle, answered + 1
        if torques is not None:
            for f in wire.commands.frames(torques, cycle):
                link.send(f)
        done = duration_s is not None and cycle * cycle_s >= duration_s
        if master is not None:
            link.send(master.stop() if done else master.sync())
        sent_at = time.monotonic() if torques is not None else None
        if done:
            ended_by = "duration"
            break
    return ServeResult(sensors.cycle if master is None else cycle, answered, repeats, link.counters.as_dict(),
                       sensors.reader.stats(), latency.summary(), None if master is None else master.stats(),
                       ended_by)


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
