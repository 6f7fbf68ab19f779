"""XCP on Ethernet (UDP): the slave's socket and the thread that answers a master's commands.

One master at a time: the address that connected; commands from another address while it is
connected are answered ERR_ACCESS_DENIED and counted (not ERR_CMD_BUSY, which masters repeat
without end). DAQ packets go out from the thread that samples
(the emulator's loop), on the same socket, non-blocking: a packet the socket cannot take now is
counted as lost, never waited for. The socket binds to loopback unless told otherwise.
"""
from __future__ import annotations

import itertools
import select
import socket
import threading

import numpy as np

from firmware_bridge.xcp.protocol import Cmd, Err, error, eth_frame, eth_packets
from firmware_bridge.xcp.slave import XcpSlave

MAX_DATAGRAM = 65535
POLL_S = 0.1                # how often the server thread looks at its stop flag


class UdpXcpServer:
    """Serves ``slave`` on ``host:port`` (port 0: a free one, read ``address`` after)."""

    outbound = ()               # answers go out from the server's thread: nothing for the loop to send

    def __init__(self, slave: XcpSlave, host: str = "127.0.0.1", port: int = 5555):
        if not 0 <= port <= 65535:
            raise ValueError(f"XCP port {port}: expected 0 .. 65535")
        self.slave = slave
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            self.sock.bind((host, port))
        except OSError as exc:
            self.sock.close()
            raise OSError(f"XCP on UDP: cannot bind {host}:{port}: {exc.strerror}") from None
        self.sock.setblocking(False)
        self.address = self.sock.getsockname()
        self.counter = itertools.count()        # CTR of every packet the slave sends (responses and DAQ)
        self.master: tuple[str, int] | None = None
        self.dto_sent = 0
        self.dto_lost = 0
        self.malformed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="xcp-udp", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        self.sock.close()

    def send_dto(self, buffer: np.ndarray) -> bool:
        """One DAQ packet (with its header) to the master, now or never."""
        master = self.master
        if master is None:
            return False
        try:
            self.sock.sendto(buffer, master)
        except OSError:
            self.dto_lost += 1
            return False
        self.dto_sent += 1
        return True

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.sock], [], [], POLL_S)
            if not ready:
                continue
            try:
                datagram, sender = self.sock.recvfrom(MAX_DATAGRAM)
            except OSError:
                continue
            self._take(datagram, sender)

    def _take(self, datagram: bytes, sender: tuple[str, int]) -> None:
        packets = eth_packets(datagram)
        if packets is None:
            self.malformed += 1
            return
        for packet in packets:
            if self.master is not None and sender != self.master and self.slave.connected:
                reply = error(Err.ACCESS_DENIED)
                self.slave.counts["ERR_ACCESS_DENIED"] += 1
                self.slave.last_error = f"ACCESS_DENIED: a second master at {sender[0]}:{sender[1]}"
            else:
                reply = self.slave.handle(packet)
                if packet[0] == Cmd.CONNECT and self.slave.connected:
                    self.master = sender
            if reply is not None:
                self._send(reply, sender)

    def _send(self, packet: bytes, to: tuple[str, int]) -> None:
        try:
            self.sock.sendto(eth_frame(packet, next(self.counter)), to)
        except OSError:
            self.slave.counts["responses_lost"] += 1
