"""CAN links for the real-time loop: any python-can bus, and an emulated slcan (LAWICEL) adapter.

* :class:`CanLink` wraps a ``can.Bus`` of any interface (socketcan, slcan, pcan, kvaser, virtual,
  udp_loopback, ...) and uses it without blocking: ``send(msg, timeout=0)``, ``recv(timeout=0)``,
  no Notifier, no periodic tasks, no threads.
* :class:`SlcanAdapterLink` plays the USB-serial CAN adapter on the master side of a pty, so that
  firmware-host code using python-can's ``slcan`` interface on the slave side talks to the plant.

Frames that a :class:`~firmware_bridge.links.base.Frame` cannot carry (remote and error frames) are
dropped and counted in ``rx_framing_errors``; nothing is raised into the loop for a bad frame.
"""
from __future__ import annotations

import fcntl
import os
import re
import struct
import termios
import time
import tty
from collections import deque

import can
from can.util import CAN_FD_DLC

from firmware_bridge.links.base import Frame, LinkCounters

_FD_CODE = {length: code for code, length in enumerate(CAN_FD_DLC)}


def frame_fits(frame: Frame, fd: bool) -> bool:
    """Whether ``frame`` is a valid classical CAN frame, or a valid CAN FD frame when ``fd``."""
    if not 0 <= frame.arbitration_id <= (0x1FFFFFFF if frame.is_extended_id else 0x7FF):
        return False
    if frame.is_fd:
        return fd and len(frame.data) in _FD_CODE
    return len(frame.data) <= 8


class CanLink:
    """A Link over a python-can bus opened by interface name, used without blocking.

    ``fd`` allows CAN FD frames; they go out with the bitrate switch set when ``data_bitrate``
    is given (it is passed to interfaces that configure it, such as pcan). ``bitrate`` and
    ``data_bitrate`` are only passed when set; other keywords go to ``can.Bus`` unchanged
    (for slcan pass ``sleep_after_open=0``). Receive timestamps are ``time.monotonic()``.
    """

    def __init__(self, interface: str, channel: str | int, *, fd: bool = False,
                 bitrate: int | None = None, data_bitrate: int | None = None,
                 receive_own_messages: bool = False, **kwargs: object) -> None:
        timing = {key: value for key, value in (("bitrate", bitrate), ("data_bitrate", data_bitrate))
                  if value is not None}
        self.bus = can.Bus(interface=interface, channel=channel, fd=fd,
                           receive_own_messages=receive_own_messages, **timing, **kwargs)
        self.name = f"can:{interface}:{channel}"
        self.counters = LinkCounters()
        self.fd = fd
        self.bitrate_switch = fd and data_bitrate is not None
        # a bus that drops malformed input itself (udp_loopback) counts it in rx_malformed: folded
        # into rx_framing_errors, so that every rejection shows in the link's counters
        self._bus_malformed = 0 if hasattr(self.bus, "rx_malformed") else None

    def send(self, frame: Frame) -> bool:
        """Hand ``frame`` to the bus at once; False (counted in tx_dropped) if invalid or refused."""
        if not frame_fits(frame, self.fd):
            self.counters.tx_dropped += 1
            return False
        msg = can.Message(arbitration_id=frame.arbitration_id, data=frame.data,
                          is_extended_id=frame.is_extended_id, is_fd=frame.is_fd,
                          bitrate_switch=frame.is_fd and self.bitrate_switch, check=False)
        try:
            self.bus.send(msg, timeout=0)
        except (can.CanError, OSError):
            self.counters.tx_dropped += 1
            return False
        self.counters.tx_frames += 1
        return True

    def recv(self) -> Frame | None:
        """The next received data frame, or None at once; a failing bus read counts a framing error.
        Error and remote frames are skipped (counted), at most _SKIPPED_PER_CALL per call."""
        for _ in range(_SKIPPED_PER_CALL):
            try:
                msg = self.bus.recv(timeout=0)
            except (can.CanError, OSError):
                self.counters.rx_framing_errors += 1
                return None
            if self._bus_malformed is not None:
                self._count_malformed()
            if msg is None:
                return None
            if msg.is_error_frame or msg.is_remote_frame:
                self.counters.rx_framing_errors += 1
                continue
            self.counters.rx_frames += 1
            return Frame(msg.arbitration_id, bytes(msg.data), msg.is_fd, msg.is_extended_id, time.monotonic())
        return None

    def _count_malformed(self) -> None:
        seen = self.bus.rx_malformed
        if seen != self._bus_malformed:
            self.counters.rx_framing_errors += seen - self._bus_malformed
            self._bus_malformed = seen

    def discard(self) -> int:
        """Drop what waits to be received (at most _DISCARD_LIMIT frames of a bus without a discard
        of its own); the frames dropped, also counted in ``rx_over_budget``."""
        if hasattr(self.bus, "discard"):
            dropped = self.bus.discard(_DISCARD_LIMIT)
        else:
            dropped = 0
            while dropped < _DISCARD_LIMIT:
                try:
                    if self.bus.recv(timeout=0) is None:
                        break
                except (can.CanError, OSError):
                    break
                dropped += 1
        self.counters.rx_over_budget += dropped
        return dropped

    def fileno(self) -> int:
        """A descriptor that turns readable when frames arrive; NotImplementedError if the bus has none."""
        return self.bus.fileno()

    def close(self) -> None:
        self.bus.shutdown()


_OK, _BELL = b"\r", b"\a"
_HEX = re.compile(rb"[0-9A-Fa-f]*")
_SETUP = re.compile(rb"S[0-9]|s[0-9A-Fa-f]{4}|Y[0-9]|[Mm][0-9A-Fa-f]{8}")
_MAX_LINE = 138                 # "D" + 8 id digits + dlc digit + 128 data digits
_READ_SIZE = 2048               # bytes read (and executed) by one recv() at most: bounded work per call
_SKIPPED_PER_CALL = 16          # error and remote frames one recv() skips at most
_DISCARD_LIMIT = 256            # frames a discard() takes off a bus without a discard of its own
_TX_LIMIT = 1 << 16             # bytes waiting for the pty; beyond this, frames are dropped
#: frame kind letter -> (extended id, FD, remote); b/B are FD frames with bitrate switch
_KINDS = {ord(kind): flags for kind, flags in (
    ("t", (False, False, False)), ("T", (True, False, False)),
    ("r", (False, False, True)), ("R", (True, False, True)),
    ("d", (False, True, False)), ("D", (True, True, False)),
    ("b", (False, True, False)), ("B", (True, True, False)))}


class SlcanAdapterLink:
    """An emulated LAWICEL/slcan USB-CAN adapter (CANable-2.0 style, CAN FD capable) on a tty.

    The host (firmware under test, e.g. python-can ``slcan`` on the pty slave) sends commands;
    the adapter answers them as python-can expects: ``\\r`` for O/L/C/Z0/Z1 and for setup
    (S0-S9, sXXYY, Y2/Y5, M/m, only while closed), ``V1013\\r``, ``N<serial>\\r``, ``F00\\r``,
    ``z\\r``/``Z\\r`` after a transmitted 11/29-bit frame, BELL (``\\a``) otherwise. Host frames
    (t/T/d/D/b/B; r/R are acknowledged but counted as framing errors) come out of ``recv()``;
    ``send()`` writes received-frame lines to the host, with a 4-digit millisecond timestamp
    after ``Z1``, and as b/B (bitrate switch) FD lines once the host set a data bitrate.

    While the channel is closed (and in listen-only mode, for host frames) frames are refused:
    ``send()`` returns False, host frames get BELL. Every BELL counts one ``rx_framing_errors``
    and the line's bytes as ``rx_garbage_bytes``. Empty lines are ignored. Writes that the pty
    cannot take yet wait in a buffer of ``_TX_LIMIT`` bytes, flushed by every send() and recv().
    """

    def __init__(self, fd_or_path: int | str, *, serial_number: str = "ELLA") -> None:
        """Serve the tty ``fd_or_path`` (a pty master fd, or a path to open); the link owns the fd."""
        if isinstance(fd_or_path, str):
            self._fd = os.open(fd_or_path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        else:
            self._fd = fd_or_path
            os.set_blocking(self._fd, False)
        if os.isatty(self._fd):
            tty.setraw(self._fd)    # on a pty master this sets the slave's mode: no echo, no CR mapping
        self.name = f"slcan-adapter:{fd_or_path}"
        self.counters = LinkCounters()
        self.serial_number = serial_number
        self.slave_path: str | None = None
        self._slave_fd: int | None = None
        self.channel_open = False
        self.listen_only = False
        self.timestamps = False
        self.bitrate_switch = False
        self._rx: deque[Frame] = deque()
        self._tx = bytearray()
        self._partial = b""
        self._skipping = False

    @classmethod
    def on_new_pty(cls, *, serial_number: str = "ELLA") -> SlcanAdapterLink:
        """An adapter on a fresh raw pty; hand ``link.slave_path`` to the host's slcan bus.

        The link keeps the slave open too, so the pty never hangs up between host sessions.
        """
        master, slave = os.openpty()
        tty.setraw(slave)
        link = cls(master, serial_number=serial_number)
        link._slave_fd, link.slave_path = slave, os.ttyname(slave)
        link.name = f"slcan-adapter:{link.slave_path}"
        return link

    def send(self, frame: Frame) -> bool:
        """Report ``frame`` to the host as received from the bus; False (tx_dropped) if it cannot."""
        if not self.channel_open or not frame_fits(frame, True) or not self._write(self._frame_line(frame)):
            self.counters.tx_dropped += 1
            return False
        self.counters.tx_frames += 1
        return True

    def recv(self) -> Frame | None:
        """The next frame the host transmitted, or None at once; answers host commands on the way."""
        self._flush()
        if not self._rx:
            self._read()
        return self._rx.popleft() if self._rx else None

    def fileno(self) -> int:
        return self._fd

    def discard(self) -> int:
        """Drop what the host sent and was not yet taken: queued frames (returned, and counted in
        ``rx_over_budget``), the bytes in the OS buffer and an unfinished line (``rx_garbage_bytes``)."""
        frames = len(self._rx)
        self._rx.clear()
        try:
            waiting = struct.unpack("i", fcntl.ioctl(self._fd, termios.FIONREAD, b"\0\0\0\0"))[0]
            termios.tcflush(self._fd, termios.TCIFLUSH)
        except OSError:
            waiting = 0
        self.counters.rx_garbage_bytes += waiting + len(self._partial)
        self._partial = b""
        self._skipping = True
        self.counters.rx_over_budget += frames
        return frames

    def close(self) -> None:
        for fd in (self._fd, self._slave_fd):
            if fd is not None and fd >= 0:
                os.close(fd)
        self._fd, self._slave_fd = -1, None
        self.channel_open = False

    def _frame_line(self, frame: Frame) -> bytes:
        """The slcan line reporting ``frame`` to the host."""
        if frame.is_fd:
            kind, code = ("b" if self.bitrate_switch else "d"), f"{_FD_CODE[len(frame.data)]:X}"
        else:
            kind, code = "t", str(len(frame.data))
        ident = f"{frame.arbitration_id:08X}" if frame.is_extended_id else f"{frame.arbitration_id:03X}"
        stamp = f"{int(time.monotonic() * 1000) % 60000:04X}" if self.timestamps else ""
        kind = kind.upper() if frame.is_extended_id else kind
        return f"{kind}{ident}{code}{frame.data.hex().upper()}{stamp}\r".encode()

    def _write(self, data: bytes) -> bool:
        """Queue ``data`` for the host and try to flush; False if the buffer is full."""
        if len(self._tx) + len(data) > _TX_LIMIT:
            self._flush()
            if len(self._tx) + len(data) > _TX_LIMIT:
                return False
        self._tx += data
        self._flush()
        return True

    def _flush(self) -> None:
        """Write as much of the waiting output as the tty takes now."""
        if not self._tx:
            return
        try:
            written = os.write(self._fd, self._tx)
        except OSError:             # EAGAIN: the tty is full; retried on the next call
            return
        del self._tx[:written]

    def _read(self) -> None:
        """Read what the host sent so far and execute the complete lines."""
        try:
            chunk = os.read(self._fd, _READ_SIZE)
        except OSError:             # EAGAIN: nothing yet; EIO: no process has the pty slave open
            return
        received = time.monotonic()
        lines = (self._partial + chunk).split(b"\r")
        self._partial = lines.pop()
        for line in lines:
            if self._skipping:
                self.counters.rx_garbage_bytes += len(line) + 1
                self._skipping = False
            else:
                self._execute(line, received)
        if self._skipping or len(self._partial) > _MAX_LINE:
            self._drop_overlong()

    def _drop_overlong(self) -> None:
        """Discard an unterminated line longer than any valid one; skip to its end."""
        if not self._skipping:
            self._reject(0)
            self._skipping = True
        self.counters.rx_garbage_bytes += len(self._partial)
        self._partial = b""

    def _execute(self, line: bytes, received: float) -> None:
        """Run one complete line (without its CR) and queue the reply."""
        if not line:
            return
        kind = _KINDS.get(line[0])
        reply = self._host_frame(line, *kind, received) if kind else self._command(line)
        if reply is None:
            self._reject(len(line) + 1)
        else:
            self._write(reply)

    def _reject(self, garbage: int) -> None:
        self.counters.rx_framing_errors += 1
        self.counters.rx_garbage_bytes += garbage
        self._write(_BELL)

    def _host_frame(self, line: bytes, extended: bool, fd: bool, remote: bool, received: float) -> bytes | None:
        """Accept a frame the host transmits; its acknowledgement, or None if invalid or refused."""
        head = 10 if extended else 5
        if len(line) < head or not _HEX.fullmatch(line, 1):
            return None
        can_id, code = int(line[1:head - 1], 16), int(line[head - 1:head], 16)
        length = CAN_FD_DLC[code] if fd else code
        if (can_id > (0x1FFFFFFF if extended else 0x7FF) or length > 8 and not fd
                or len(line) != head + (0 if remote else 2 * length)
                or not self.channel_open or self.listen_only):
            return None
        if remote:
            self.counters.rx_framing_errors += 1
        else:
            self.counters.rx_frames += 1
            self._rx.append(Frame(can_id, bytes.fromhex(line[head:].decode()), fd, extended, received))
        return b"Z\r" if extended else b"z\r"

    def _command(self, line: bytes) -> bytes | None:
        """Execute a non-frame command; the reply, or None for BELL."""
        if line in (b"O", b"L", b"C"):
            self.channel_open, self.listen_only = line != b"C", line == b"L"
            return _OK
        if line in (b"Z0", b"Z1"):
            self.timestamps = line == b"Z1"
            return _OK
        if line == b"V":
            return b"V1013\r"
        if line == b"N":
            return b"N" + self.serial_number.encode() + _OK
        if line == b"F":
            return b"F00\r"
        if not self.channel_open and _SETUP.fullmatch(line):
            self.bitrate_switch = self.bitrate_switch or line[:1] == b"Y"
            return _OK
        return None
