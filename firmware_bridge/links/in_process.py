"""A firmware in the emulator's own process: a private link pair whose emulator end lets the firmware
take in what was sent, and answer, before every read, so a lockstep run needs no second process.

The frames still cross a real link, through the same encoders, framings and decoders as between two
processes: for a serial map a pair of in-memory byte pipes with the serial framing on both ends
(SerialLink over MemoryStreams: the bytes a pty carries, without a system call per read or write), for
a CAN map a python-can ``virtual`` channel private to the pair. Both deliver at once (a written packet
is readable by the next read), so the firmware's answer to a cycle's sensor frames is there when the
emulator looks for it.
"""
from __future__ import annotations

import itertools
import os
from collections.abc import Callable

from .base import Frame, Link

_PAIRS = itertools.count()


class PumpedLink:
    """The emulator's end: before each recv() the firmware's `pump` handles what waits on its end."""

    def __init__(self, link: Link):
        self.link = link
        self.name = f"in-process {link.name}"
        self.pump: Callable[[], int] = lambda: 0

    @property
    def counters(self):
        return self.link.counters

    def send(self, frame: Frame) -> bool:
        return self.link.send(frame)

    def recv(self) -> Frame | None:
        self.pump()
        return self.link.recv()

    def __getattr__(self, name: str):      # what a particular link offers besides (fileno, read_early, ...)
        return getattr(self.link, name)

    def close(self) -> None:
        self.link.close()


def in_process_pair(kind: str) -> tuple[PumpedLink, Link]:
    """(the emulator's end, the firmware's end) for a bus map of `kind` (serial, can, canfd); set the
    emulator end's `pump` to the firmware's (firmware_bridge.firmware.serve.FirmwareSession.pump)."""
    if kind == "serial":
        from .serial import SerialLink, memory_pair
        ours, theirs = memory_pair()
        return (PumpedLink(SerialLink.over(ours, name="byte pipe")),
                SerialLink.over(theirs, name="byte pipe (firmware)"))
    from .connect import open_link
    spec = f"{kind}:virtual:in-process-{os.getpid()}-{next(_PAIRS)}"
    return PumpedLink(open_link(spec)), open_link(spec)
