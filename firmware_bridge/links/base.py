"""What every link (CAN, serial, loopback) offers the real-time loop.

A link moves Frames without blocking: send() and recv() return at once, from the
loop thread, with no helper threads. Everything that goes wrong is counted in
LinkCounters, never raised into the loop.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol


@dataclass(slots=True)
class Frame:
    """One message on the wire: a CAN frame, or one serial packet (id byte + payload)."""

    arbitration_id: int
    data: bytes
    is_fd: bool = False
    is_extended_id: bool = False
    timestamp: float = 0.0      # receive time, time.monotonic() seconds


@dataclass(slots=True)
class LinkCounters:
    tx_frames: int = 0
    rx_frames: int = 0
    tx_dropped: int = 0         # send would have blocked or the bus refused the frame
    rx_crc_errors: int = 0      # framing-level CRC (serial)
    rx_framing_errors: int = 0  # COBS / slcan syntax / truncated packet
    rx_garbage_bytes: int = 0   # bytes discarded while resynchronising
    rx_overruns: int = 0        # receive buffer overflowed
    rx_over_budget: int = 0     # frames dropped unread once the receiver's per-cycle budget was spent

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class Link(Protocol):
    name: str
    counters: LinkCounters

    def send(self, frame: Frame) -> bool:
        """Queue a frame without blocking; False (and counted) if it could not be sent."""

    def recv(self) -> Frame | None:
        """The next received frame, or None at once if there is none (a bounded amount of work)."""

    def close(self) -> None:
        ...

# A link may also offer ``discard() -> int``: drop what waits to be received, in bounded time (the
# frames dropped, also counted in ``rx_over_budget``; raw bytes in ``rx_garbage_bytes``). The loop
# calls it when a cycle's receive budget is spent (hil.runtime.receive).
