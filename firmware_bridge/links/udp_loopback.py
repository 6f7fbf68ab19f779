"""A python-can interface that shares one CAN (FD) bus between processes over UDP on 127.0.0.1.

It needs no kernel module (no vcan) and no multicast, and nothing it sends can leave the machine:
every socket binds to 127.0.0.1 and every datagram goes to 127.0.0.1; any other host is refused.

A *channel* is a group of ``nodes`` (at most ``NODES`` = 8) consecutive UDP ports. An integer
channel (or a decimal string) is the base port itself; any other name hashes to a base port in
20000..31999, below the Linux ephemeral port range. Node ``k`` binds ``base + k``; with
``node=None`` a bus takes the first free port. ``send`` writes one datagram to every other port of
the group, so all nodes see every frame, as on a real bus (and the sender too, if
``receive_own_messages=True``). A datagram to a port nobody has bound costs the kernel an ICMP
reply (about 5 us of CPU against 3 us for a delivered one), so a plant/controller pair should use
``nodes=2``; every node of a channel must use the same ``nodes``.

Datagram: an 18-byte header ``!2sBBBxId`` (magic ``b"CL"``, version 1, flags, dlc, pad,
arbitration id, timestamp) followed by the data. dlc is the data length in bytes (for a remote
frame, the requested length, with no data). Flags: 1 extended id, 2 remote, 4 error, 8 FD,
16 bitrate switch, 32 error state indicator. The timestamp is the sender's ``time.time()`` at
send, so every receiver stamps a frame alike, as a hardware timestamp would. Datagrams that do not
decode exactly are dropped and counted in ``rx_malformed``. The bus is always CAN FD capable.

Any python-can program can use it once this package is installed, through the entry point
``[project.entry-points."can.interface"] udp_loopback = "firmware_bridge.links.udp_loopback:UdpLoopbackBus"``::

    bus = can.Bus(interface="udp_loopback", channel="ella")   # node picked automatically
"""
from __future__ import annotations

import select
import socket
import struct
import time
import zlib
from ipaddress import ip_address
from typing import Any, Sequence

import can
from can.typechecking import AutoDetectedConfig
from can.util import CAN_FD_DLC

LOOPBACK = "127.0.0.1"
NODES = 8
DEFAULT_CHANNEL = "ella"
_NAMED_BASE, _NAMED_GROUPS = 20000, 1500      # named channels: ports 20000..31999
_HEADER = struct.Struct("!2sBBBxId")
_MAGIC, _VERSION = b"CL", 1
_EXTENDED, _REMOTE, _ERROR, _FD, _BRS, _ESI = 1, 2, 4, 8, 16, 32
_ALL_FLAGS = 63
_FD_LENGTHS = frozenset(CAN_FD_DLC)
_RECV_SIZE = 256                              # > longest valid datagram, so truncation shows
_MALFORMED_PER_CALL = 16                      # malformed datagrams one non-blocking receive drops at most


def base_port(channel: str | int) -> int:
    """The first UDP port of ``channel``'s group; CanInitializationError for an address or bad port."""
    if isinstance(channel, str) and not channel.isdecimal():
        if ":" in channel or _is_ip_address(channel):
            raise can.CanInitializationError(
                f"udp_loopback channel {channel!r} looks like a network address; a channel is a "
                f"name or a base port, and traffic only ever goes to {LOOPBACK}")
        return _NAMED_BASE + NODES * (zlib.crc32(channel.encode()) % _NAMED_GROUPS)
    port = int(channel)
    if not 1024 <= port <= 65536 - NODES:
        raise can.CanInitializationError(f"udp_loopback base port {port} outside 1024..{65536 - NODES}")
    return port


def _is_ip_address(text: str) -> bool:
    try:
        ip_address(text)
    except ValueError:
        return False
    return True


def pack_message(msg: can.Message, timestamp: float) -> bytes:
    """The datagram for ``msg``; ValueError if it is not a valid CAN / CAN FD frame."""
    flags = (_EXTENDED * msg.is_extended_id | _REMOTE * msg.is_remote_frame | _ERROR * msg.is_error_frame
             | _FD * msg.is_fd | _BRS * msg.bitrate_switch | _ESI * msg.error_state_indicator)
    data = b"" if msg.is_remote_frame else bytes(msg.data)
    dlc = msg.dlc if msg.is_remote_frame else len(data)
    if not _valid(flags, dlc, msg.arbitration_id):
        raise ValueError(f"not a valid CAN frame for udp_loopback: {msg}")
    return _HEADER.pack(_MAGIC, _VERSION, flags, dlc, msg.arbitration_id, timestamp) + data


def unpack_datagram(datagram: bytes, channel: Any = None) -> can.Message | None:
    """The Message in ``datagram``, or None if it is malformed in any way."""
    if len(datagram) < _HEADER.size:
        return None
    magic, version, flags, dlc, can_id, timestamp = _HEADER.unpack_from(datagram)
    remote = bool(flags & _REMOTE)
    expected_size = _HEADER.size + (0 if remote else dlc)
    if magic != _MAGIC or version != _VERSION or len(datagram) != expected_size or not _valid(flags, dlc, can_id):
        return None
    return can.Message(
        timestamp=timestamp, arbitration_id=can_id, is_extended_id=bool(flags & _EXTENDED),
        is_remote_frame=remote, is_error_frame=bool(flags & _ERROR), is_fd=bool(flags & _FD),
        bitrate_switch=bool(flags & _BRS), error_state_indicator=bool(flags & _ESI),
        dlc=dlc, data=datagram[_HEADER.size:], channel=channel, check=False)


def _valid(flags: int, dlc: int, can_id: int) -> bool:
    """Whether flags, length and id describe a frame CAN / CAN FD can carry."""
    if flags & ~_ALL_FLAGS or can_id > (0x1FFFFFFF if flags & _EXTENDED else 0x7FF):
        return False
    if flags & _FD:
        return not flags & _REMOTE and dlc in _FD_LENGTHS
    return not flags & (_BRS | _ESI) and dlc <= 8


class UdpLoopbackBus(can.BusABC):
    """One node on a UDP-on-127.0.0.1 CAN FD bus shared by processes (see the module docstring)."""

    def __init__(self, channel: str | int = DEFAULT_CHANNEL, *, node: int | None = None,
                 nodes: int = NODES, host: str = LOOPBACK, receive_own_messages: bool = False,
                 receive_buffer: int = 1 << 20, **kwargs: Any) -> None:
        """Bind node ``node`` (None: the first free one) of the ``nodes``-node ``channel`` on 127.0.0.1.

        ``host`` exists only to be refused when it is not 127.0.0.1. ``receive_buffer`` sets
        SO_RCVBUF (the kernel caps it at net.core.rmem_max). Other keywords (bitrate, fd, ...)
        are accepted and ignored, as loopback has no bit timing.
        """
        if host != LOOPBACK:
            raise can.CanInitializationError(
                f"udp_loopback refuses host {host!r}: it only binds and sends on {LOOPBACK}, "
                "so that no frame can leave the machine")
        if not 1 <= nodes <= NODES:
            raise can.CanInitializationError(f"udp_loopback nodes={nodes} outside 1..{NODES}")
        self.channel = channel
        self.nodes = nodes
        self.base_port = base_port(channel)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
            self.node = self._bind(node)
        except Exception:
            self._socket.close()
            raise
        self._socket.setblocking(False)
        self.port = self.base_port + self.node
        self._peers = [(LOOPBACK, self.base_port + k) for k in range(nodes)
                       if k != self.node or receive_own_messages]
        self.rx_malformed = 0
        self.channel_info = f"udp_loopback {channel!r} node {self.node} ({LOOPBACK}:{self.port})"
        self._can_protocol = can.CanProtocol.CAN_FD
        super().__init__(channel, **kwargs)

    def _bind(self, node: int | None) -> int:
        """Bind the socket to the port of ``node``, or of the first free node; return the node."""
        for candidate in range(self.nodes) if node is None else (node,):
            if not 0 <= candidate < self.nodes:
                raise can.CanInitializationError(f"udp_loopback node {candidate} outside 0..{self.nodes - 1}")
            try:
                self._socket.bind((LOOPBACK, self.base_port + candidate))
            except OSError:
                continue
            return candidate
        raise can.CanInitializationError(
            f"udp_loopback channel {self.channel!r}: no free port among "
            f"{self.base_port}..{self.base_port + self.nodes - 1} for node {'any' if node is None else node}")

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        """The next well-formed frame within ``timeout`` seconds (None: wait forever)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        malformed = 0
        while True:
            try:
                datagram = self._socket.recv(_RECV_SIZE)
            except BlockingIOError:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None, False
                if not select.select([self._socket], [], [], remaining)[0]:
                    return None, False
                continue
            except OSError as error:
                raise can.CanOperationError(f"udp_loopback receive failed: {error}") from error
            msg = unpack_datagram(datagram, self.channel)
            if msg is not None:
                return msg, False
            self.rx_malformed += 1
            malformed += 1
            if malformed >= _MALFORMED_PER_CALL and deadline is not None and time.monotonic() >= deadline:
                return None, False          # bounded work per call: a flood cannot hold a receiver here

    def discard(self, limit: int) -> int:
        """Drop up to `limit` waiting datagrams unread; how many were dropped."""
        for dropped in range(limit):
            try:
                self._socket.recv(_RECV_SIZE)
            except OSError:
                return dropped
        return limit

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        """Send ``msg`` to every other node; UDP on loopback never blocks, so ``timeout`` is unused.

        ValueError for a frame CAN cannot carry; CanOperationError if the kernel refused a datagram
        (the other nodes still got theirs).
        """
        datagram = pack_message(msg, time.time())
        failures = []
        for peer in self._peers:
            try:
                self._socket.sendto(datagram, peer)
            except OSError as error:
                failures.append(f"{peer[1]}: {error}")
        if failures:
            raise can.CanOperationError(f"udp_loopback send failed for {', '.join(failures)}")

    def fileno(self) -> int:
        return self._socket.fileno()

    def shutdown(self) -> None:
        super().shutdown()
        self._socket.close()

    @staticmethod
    def _detect_available_configs() -> Sequence[AutoDetectedConfig]:
        """Any channel name works; offer the project's default one."""
        return [{"interface": "udp_loopback", "channel": DEFAULT_CHANNEL}]
