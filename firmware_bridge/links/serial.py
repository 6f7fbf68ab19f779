"""Non-blocking serial Link: COBS + CRC-16 packets over a UART or a pseudo-terminal.

Real ports are opened and configured by pyserial; I/O then goes straight through ``os.read`` /
``os.write`` on the non-blocking fd (FdStream), so both ends of a pty (pyserial on the slave path, a
plain fd on the master) share one code path; a pair of MemoryStreams carries the same bytes between
two links in one process without a system call (firmware_bridge.links.in_process). See
``firmware_bridge.wire.framing`` for the packet format.
"""
from __future__ import annotations

import fcntl
import os
import struct
import termios
import time
import tty
from collections import deque

import serial

from firmware_bridge.links.base import Frame, LinkCounters
from firmware_bridge.wire.framing import MAX_PAYLOAD, StreamDecoder, encode_frame

READ_SIZE = 2048        # bytes read (and decoded) by one recv() at most: bounded work per call
MEMORY_CAPACITY = 65536  # bytes a MemoryStream holds unread, as a socket's buffer: a write beyond it would block


def _make_raw_nonblocking(fd: int) -> None:
    """Set O_NONBLOCK, and raw termios (no echo, no CR/LF translation) if ``fd`` is a tty."""
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
    if os.isatty(fd):
        tty.setraw(fd, termios.TCSANOW)


def open_pty_pair() -> tuple[int, str]:
    """A raw pty: the master fd (for ``SerialLink.from_fd``) and the slave path (for ``SerialLink``).

    The slave fd is closed again; until a process opens the slave path, reads on the master fail
    with EIO, which ``SerialLink.recv`` treats as "nothing received".
    """
    master, slave = os.openpty()
    try:
        tty.setraw(master, termios.TCSANOW)
        tty.setraw(slave, termios.TCSANOW)
        return master, os.ttyname(slave)
    finally:
        os.close(slave)


class FdStream:
    """The raw byte I/O of a SerialLink on a non-blocking fd (a UART, a pty end, a socket)."""

    def __init__(self, fd: int):
        self.fd = fd

    def write(self, data: bytes) -> int:
        return os.write(self.fd, data)

    def read(self, size: int) -> bytes:
        return os.read(self.fd, size)

    def waiting(self) -> bool:
        """FIONREAD before read: on a tty, read() with an empty line discipline waits for the
        kernel's flush worker (tty_buffer_flush_work), which competes for CPU with ordinary tasks
        and stalled a SCHED_FIFO loop for milliseconds; the ioctl never waits. Bytes still in
        flight are read next time."""
        try:
            return self._unread() > 0
        except OSError:
            return True

    def flush_input(self) -> int:
        """Drop the bytes waiting to be read; how many."""
        try:
            waiting = self._unread()
            termios.tcflush(self.fd, termios.TCIFLUSH)
        except OSError:
            waiting = 0
        return waiting

    def _unread(self) -> int:
        return struct.unpack("i", fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0"))[0]

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        os.close(self.fd)


class MemoryStream:
    """One end of an in-process byte pipe pair (memory_pair): what one end writes the other reads at once.
    At most MEMORY_CAPACITY bytes wait unread; a write beyond them blocks (BlockingIOError), as a full
    socket buffer does. No descriptor: a waiting reader sleeps (hil.runtime.wire_io)."""

    def __init__(self, inbox: bytearray, outbox: bytearray):
        self.inbox, self.outbox = inbox, outbox

    def write(self, data: bytes) -> int:
        if len(self.outbox) + len(data) > MEMORY_CAPACITY:
            raise BlockingIOError
        self.outbox += data
        return len(data)

    def read(self, size: int) -> bytes:
        chunk = bytes(self.inbox[:size])
        del self.inbox[:size]
        return chunk

    def waiting(self) -> bool:
        return bool(self.inbox)

    def flush_input(self) -> int:
        waiting = len(self.inbox)
        self.inbox.clear()
        return waiting

    def fileno(self) -> int:
        raise OSError("an in-process byte pipe has no descriptor")

    def close(self) -> None:
        self.inbox.clear()


def memory_pair() -> tuple[MemoryStream, MemoryStream]:
    """Two connected MemoryStreams."""
    one, other = bytearray(), bytearray()
    return MemoryStream(one, other), MemoryStream(other, one)


class SerialLink:
    """A ``Link`` over a serial port path (pyserial), an already open fd (``from_fd``) or one end of an
    in-process byte pipe (``over``).

    ``send`` writes a whole packet or nothing: if the OS buffer is full the frame is dropped and
    counted in ``tx_dropped``. Should the OS take only part of a packet, the rest is kept in a
    pending buffer (counted in ``tx_partial_writes``) and written before anything else, at the
    next ``send``/``recv``. OS errors on reading (e.g. EIO after the peer closed a pty) are
    counted in ``rx_io_errors`` and reported as "no frame".
    """

    def __init__(self, port_or_fd: str | int | MemoryStream, baudrate: int = 1_000_000, name: str | None = None,
                 max_payload: int = MAX_PAYLOAD):
        self._serial = None
        if isinstance(port_or_fd, MemoryStream):
            self._stream = port_or_fd
        else:
            if isinstance(port_or_fd, str):
                self._serial = serial.Serial(port_or_fd, baudrate, timeout=0, write_timeout=0)
            fd = port_or_fd if isinstance(port_or_fd, int) else self._serial.fileno()
            _make_raw_nonblocking(fd)
            self._stream = FdStream(fd)
        self._open = True
        self.name = name if name is not None else f"serial:{port_or_fd}"
        self.counters = LinkCounters()
        self.max_payload = max_payload
        self.tx_partial_writes = 0
        self.rx_io_errors = 0
        self._decoder = StreamDecoder(self.counters, max_payload)
        self._received: deque[Frame] = deque()
        self._pending = b""

    @classmethod
    def from_fd(cls, fd: int, name: str | None = None, max_payload: int = MAX_PAYLOAD) -> SerialLink:
        """Wrap an open fd, e.g. a pty master; the link owns it and closes it in ``close``."""
        return cls(fd, name=name if name is not None else f"fd:{fd}", max_payload=max_payload)

    @classmethod
    def over(cls, stream: MemoryStream, name: str, max_payload: int = MAX_PAYLOAD) -> SerialLink:
        """A link over one end of an in-process byte pipe (memory_pair)."""
        return cls(stream, name=name, max_payload=max_payload)

    def fileno(self) -> int:
        """The fd to wait on with select/poll (OSError where there is none)."""
        return self._stream.fileno()

    def send(self, frame: Frame) -> bool:
        """Write one packet without blocking; False (counted in ``tx_dropped``) if it can't go."""
        try:
            packet = encode_frame(frame, self.max_payload)
        except ValueError:
            self.counters.tx_dropped += 1
            return False
        return self.send_packet(packet)

    def send_packet(self, packet: bytes) -> bool:
        """Write the wire bytes of one packet as given, delimiter included (the way
        ``firmware_bridge.links.faults`` puts a packet with a damaged CRC on the line); the same
        whole-or-pending rules and counters as ``send``."""
        if self._pending and not self._flush_pending():
            self.counters.tx_dropped += 1
            return False
        try:
            written = self._stream.write(packet)
        except OSError:
            self.counters.tx_dropped += 1
            return False
        if written < len(packet):
            self._pending = packet[written:]
            self.tx_partial_writes += 1
        self.counters.tx_frames += 1
        return True

    def recv(self) -> Frame | None:
        """The next received frame, or None at once; reads the OS buffer only when none is queued."""
        if self._pending:
            self._flush_pending()
        if not self._received:
            if not self._stream.waiting():
                return None
            try:
                data = self._stream.read(READ_SIZE)
            except BlockingIOError:
                return None
            except OSError:
                self.rx_io_errors += 1
                return None
            self._received.extend(self._decoder.feed(data, time.monotonic()))
            if not self._received:
                return None
        return self._received.popleft()

    def discard(self) -> int:
        """Drop everything waiting to be received: decoded frames (returned, and counted in
        ``rx_over_budget``), the bytes in the OS buffer and an unfinished packet (``rx_garbage_bytes``)."""
        frames = len(self._received)
        self._received.clear()
        self.counters.rx_garbage_bytes += self._stream.flush_input()
        self._decoder.reset()
        self.counters.rx_over_budget += frames
        return frames

    def close(self) -> None:
        """Close the port or fd; idempotent."""
        if not self._open:
            return
        if self._serial is not None:
            self._serial.close()
        else:
            self._stream.close()
        self._open = False

    def _flush_pending(self) -> bool:
        """Write the rest of a partly written packet; True once nothing is pending."""
        try:
            written = self._stream.write(self._pending)
        except BlockingIOError:
            return False
        except OSError:
            self._pending = b""
            return True
        self._pending = self._pending[written:]
        return not self._pending
