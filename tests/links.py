"""Links for tests: the Link protocol without I/O (a pair, and an end with the firmware folded in), and
waiting for bytes on a pty."""
from __future__ import annotations

import fcntl
import struct
import termios
import time
from collections import deque
from collections.abc import Callable, Iterable

from firmware_bridge.links.base import Frame, LinkCounters


class MemoryLink:
    """One end of an in-memory CAN-style link pair (the Link protocol): send() queues on the peer."""

    def __init__(self, name: str):
        self.name = name
        self.counters = LinkCounters()
        self.inbox: deque[Frame] = deque()
        self.peer: MemoryLink | None = None

    def send(self, frame: Frame) -> bool:
        self.counters.tx_frames += 1
        self.peer.inbox.append(Frame(frame.arbitration_id, bytes(frame.data), frame.is_fd, frame.is_extended_id))
        return True

    def recv(self) -> Frame | None:
        if not self.inbox:
            return None
        self.counters.rx_frames += 1
        return self.inbox.popleft()

    def close(self) -> None:
        pass


def memory_pair() -> tuple[MemoryLink, MemoryLink]:
    a, b = MemoryLink("emulator"), MemoryLink("firmware")
    a.peer, b.peer = b, a
    return a, b


class AnsweringLink(MemoryLink):
    """Emulator-side link with the firmware folded in (for Emulator.run(), one thread): each frame the
    emulator sends goes to `answer(frame)`, whose frames the emulator receives next; ``sent`` keeps them."""

    def __init__(self, answer: Callable[[Frame], Iterable[Frame]] = lambda frame: ()):
        super().__init__("answering")
        self.answer = answer
        self.sent: list[Frame] = []

    def send(self, frame: Frame) -> bool:
        self.counters.tx_frames += 1
        self.sent.append(frame)
        self.inbox.extend(self.answer(frame))
        return True


def on_cue(cue_id: int, answer: Callable[[int], Iterable[Frame]]) -> Callable[[Frame], Iterable[Frame]]:
    """An AnsweringLink's answer that calls `answer(k)` for the k-th frame with id `cue_id` (k = 0, 1, ...)
    and sends nothing back for any other frame."""
    cues = 0

    def answer_frame(frame: Frame) -> Iterable[Frame]:
        nonlocal cues
        if frame.arbitration_id != cue_id:
            return ()
        cues += 1
        return answer(cues - 1)
    return answer_frame


def readable_bytes(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, struct.pack("i", 0)))[0]


def wait_bytes(fd: int, n: int, timeout_s: float = 10.0) -> None:
    """Until at least n bytes can be read from fd: a pty delivers through a kernel worker, late on a busy
    machine."""
    deadline = time.monotonic() + timeout_s
    while readable_bytes(fd) < n:
        assert time.monotonic() < deadline, f"only {readable_bytes(fd)} of {n} bytes arrived"
        time.sleep(50e-6)
