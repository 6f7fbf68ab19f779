"""In-memory links for tests: the Link protocol without I/O."""
from __future__ import annotations

from collections import deque

from firmware_bridge.link import Frame, LinkCounters


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
