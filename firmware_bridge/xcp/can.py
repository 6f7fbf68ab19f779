"""XCP on CAN: the slave on the emulator's own CAN link, beside the firmware's frames.

Two identifiers: the master's commands (``master_id``) and the slave's responses and DAQ packets
(``slave_id``); an id above 0x7FF is an extended one. No header: a frame's payload is one packet,
sent at its length (a CAN FD frame longer than 8 bytes padded to the next valid length). Packet
sizes: classic CAN 8 and 8 (a float64 then cannot be in a DAQ list: a master measures it on CAN FD,
64 and 64).

Threads: the loop that owns the link hands the command frames over (``take``) and sends what is
ready at its cycle start (``outbound``) and its DAQ packets (``send_dto``); the commands are answered
on this transport's own thread, so that a calibration that re-assembles the model never holds up
the loop. The slave therefore answers while the loop runs, from its next cycle on.
"""
from __future__ import annotations

import itertools
import queue
import threading
from collections import deque
from collections.abc import Callable

import numpy as np

from firmware_bridge.links.base import Frame
from firmware_bridge.xcp.slave import XcpSlave

FD_LENGTHS = (12, 16, 20, 24, 32, 48, 64)
CLASSIC_PACKET = 8
FD_PACKET = 64
MAX_ID = 0x1FFFFFFF
MAX_WAITING = 256           # command frames waiting for the slave's thread; more are dropped and counted


def packet_sizes(fd: bool) -> tuple[int, int]:
    """(MAX_CTO, MAX_DTO) on a classic CAN or a CAN FD link."""
    size = FD_PACKET if fd else CLASSIC_PACKET
    return size, size


def frame_length(n: int) -> int:
    """A CAN FD frame's length for ``n`` bytes of payload."""
    return n if n <= 8 else next(k for k in FD_LENGTHS if k >= n)


class CanXcpTransport:
    """Serves ``slave`` on a CAN link through the loop's hands (module docstring); ``send(frames)``:
    the loop's way to put frames on the link (True if they went out)."""

    def __init__(self, slave: XcpSlave, master_id: int, slave_id: int, fd: bool,
                 send: Callable[[list[Frame]], bool]):
        for name, ident in (("master", master_id), ("slave", slave_id)):
            if not 0 <= ident <= MAX_ID:
                raise ValueError(f"XCP on CAN: the {name} id {ident:#x}: expected 0 .. {MAX_ID:#x}")
        if master_id == slave_id:
            raise ValueError(f"XCP on CAN: the master and the slave need two ids, not {master_id:#x} twice")
        self.slave, self.master_id, self.slave_id, self.fd, self._send = slave, master_id, slave_id, fd, send
        self.extended = (master_id > 0x7FF, slave_id > 0x7FF)
        self.address = f"CAN {master_id:#x} -> {slave_id:#x}"
        self.counter = itertools.count()        # DAQ packets carry none on CAN; the plan's interface
        self.outbound: deque[Frame] = deque()
        self._inbound: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.dto_sent = self.dto_lost = self.malformed = 0
        self._thread = threading.Thread(target=self._serve, name="xcp-can", daemon=True)

    def claims(self, frame: Frame) -> bool:
        """A frame the master sent to this slave."""
        return frame.arbitration_id == self.master_id and frame.is_extended_id == self.extended[0]

    def take(self, frame: Frame) -> None:
        """A command frame from the loop's receive; answered on this transport's thread (a flood beyond
        MAX_WAITING frames is dropped and counted: a master waits for each answer)."""
        if self._inbound.qsize() >= MAX_WAITING:
            self.slave.counts["commands_dropped"] += 1
            return
        self._inbound.put(bytes(frame.data))

    def flush(self) -> None:
        """The responses ready, onto the link (the loop's thread, at its cycle start)."""
        frames = []
        while self.outbound:
            frames.append(self.outbound.popleft())
        if frames and not self._send(frames):
            self.slave.counts["responses_lost"] += len(frames)

    def send_dto(self, buffer: np.ndarray) -> bool:
        """One DAQ packet now (the loop's thread)."""
        went = self._send([self._frame(buffer.tobytes())])
        self.dto_sent += went
        self.dto_lost += not went
        return went

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._inbound.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def _serve(self) -> None:
        while (packet := self._inbound.get()) is not None:
            if not packet:
                self.malformed += 1
                continue
            reply = self.slave.handle(packet)
            if reply is not None:
                self.outbound.append(self._frame(reply))

    def _frame(self, packet: bytes) -> Frame:
        long = len(packet) > 8
        data = packet + bytes(frame_length(len(packet)) - len(packet)) if long else packet
        return Frame(self.slave_id, data, is_fd=self.fd and long, is_extended_id=self.extended[1])
