"""CanLink, the udp_loopback python-can interface and the emulated slcan adapter.

All traffic stays on 127.0.0.1 or on ptys created here.
"""
from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time
import tty
from typing import Callable, TypeVar

import can
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.links.can import CanLink, SlcanAdapterLink
from firmware_bridge.links.udp_loopback import NODES, UdpLoopbackBus, base_port, pack_message

T = TypeVar("T")

CHILD_ECHO = """
import sys, can
bus = can.Bus(interface="udp_loopback", channel=sys.argv[1])
print(bus.node, flush=True)
echoed = 0
while echoed < int(sys.argv[2]):
    msg = bus.recv(timeout=5)
    if msg is None:
        sys.exit("child: timed out waiting for frames")
    if msg.arbitration_id == 0x100:
        bus.send(can.Message(arbitration_id=0x200, data=msg.data, is_extended_id=False))
        echoed += 1
bus.shutdown()
"""


def _channel(tag: str) -> str:
    return f"test-{os.getpid()}-{tag}"


def _wait_for(poll: Callable[[], T | None], timeout: float = 2.0) -> T | None:
    """Call ``poll`` until it returns something other than None, or the timeout passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = poll()
        if value is not None:
            return value
    return None


def _same(a: Frame, b: Frame) -> bool:
    return (a.arbitration_id, bytes(a.data), a.is_fd, a.is_extended_id) == \
           (b.arbitration_id, bytes(b.data), b.is_fd, b.is_extended_id)


MIXED = [
    Frame(0x123, b"\x01\x02"),
    Frame(0x1ABCDEF0, bytes(range(8)), is_extended_id=True),
    Frame(0x7FF, bytes(range(64)), is_fd=True),
    Frame(0x18FF00FF, bytes(12), is_fd=True, is_extended_id=True),
    Frame(0x000, b""),
]


def test_can_link_virtual_round_trip_classical_and_fd():
    a = CanLink("virtual", _channel("virtual"), fd=True)
    b = CanLink("virtual", _channel("virtual"), fd=True)
    try:
        for frame in MIXED:
            before = time.monotonic()
            assert a.send(frame)
            got = b.recv()
            assert got is not None and _same(got, frame)
            assert before <= got.timestamp <= time.monotonic()
        assert b.recv() is None and a.recv() is None
        assert (a.counters.tx_frames, b.counters.rx_frames) == (len(MIXED), len(MIXED))
        with pytest.raises(NotImplementedError):
            a.fileno()
    finally:
        a.close()
        b.close()


def test_can_link_counts_bad_frames_without_raising():
    classic = CanLink("virtual", _channel("bad"))
    fd = CanLink("virtual", _channel("bad"), fd=True)
    raw = can.Bus(interface="virtual", channel=_channel("bad"))
    try:
        bad_for_classic = [Frame(0x800, b""), Frame(0x20000000, b"", is_extended_id=True),
                           Frame(1, bytes(9)), Frame(1, bytes(8), is_fd=True)]
        assert not any(classic.send(frame) for frame in bad_for_classic)
        assert not fd.send(Frame(1, bytes(13), is_fd=True))
        assert (classic.counters.tx_dropped, fd.counters.tx_dropped) == (4, 1)
        raw.send(can.Message(arbitration_id=0x10, is_remote_frame=True, dlc=4, is_extended_id=False))
        raw.send(can.Message(arbitration_id=0x20, is_error_frame=True, is_extended_id=False))
        raw.send(can.Message(arbitration_id=0x30, data=b"ok", is_extended_id=False))
        got = classic.recv()
        assert got is not None and (got.arbitration_id, got.data) == (0x30, b"ok")
        assert classic.counters.rx_framing_errors == 2
    finally:
        for link in (classic, fd):
            link.close()
        raw.shutdown()


def test_can_link_over_udp_loopback_with_fileno():
    a = CanLink("udp_loopback", _channel("link"), fd=True, bitrate=1_000_000, data_bitrate=2_000_000)
    b = CanLink("udp_loopback", _channel("link"), fd=True)
    try:
        assert a.bitrate_switch and not b.bitrate_switch
        assert select.select([b.fileno()], [], [], 0)[0] == []
        for frame in MIXED:
            assert a.send(frame)
            assert select.select([b.fileno()], [], [], 1.0)[0] == [b.fileno()]
            got = b.recv()
            assert got is not None and _same(got, frame)
        assert b.recv() is None and a.recv() is None
    finally:
        a.close()
        b.close()


def test_udp_loopback_fd_frames_and_flags():
    a = UdpLoopbackBus(_channel("fd"))
    b = UdpLoopbackBus(_channel("fd"), receive_own_messages=True)
    try:
        assert (a.node, b.node) == (0, 1) and b.port == a.port + 1 == base_port(_channel("fd")) + 1
        assert a.protocol is can.CanProtocol.CAN_FD
        sent = [
            can.Message(arbitration_id=0x1FFFFFFF, data=bytes(range(64)), is_fd=True,
                        bitrate_switch=True, error_state_indicator=True),
            can.Message(arbitration_id=0x7FF, is_extended_id=False, is_remote_frame=True, dlc=6),
            can.Message(arbitration_id=0x42, is_extended_id=False, data=bytes(48), is_fd=True),
        ]
        for msg in sent:
            b.send(msg)
            for bus in (a, b):             # b receives its own frames, a those of b
                got = bus.recv(timeout=1.0)
                assert got is not None and got.equals(msg, timestamp_delta=None, check_channel=False)
        a.send(sent[0])
        assert b.recv(timeout=1.0).equals(sent[0], timestamp_delta=None, check_channel=False)
        assert a.recv(timeout=0) is None
        with pytest.raises(ValueError):
            a.send(can.Message(arbitration_id=1, data=bytes(13), is_fd=True))
    finally:
        a.shutdown()
        b.shutdown()


def test_udp_loopback_three_nodes_two_processes_no_loss():
    count, window = 1000, 64
    channel = _channel("shared")
    a, b = UdpLoopbackBus(channel), UdpLoopbackBus(channel)
    child = subprocess.Popen([sys.executable, "-c", CHILD_ECHO, channel, str(count)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "2"
        echoes: list[int] = []
        seen_by_b: list[tuple[int, int]] = []
        sent = 0
        deadline = time.monotonic() + 15
        while len(echoes) < count and time.monotonic() < deadline:
            if sent < count and sent - len(echoes) < window:
                a.send(can.Message(arbitration_id=0x100, data=sent.to_bytes(4, "big"), is_extended_id=False))
                sent += 1
            while (msg := a.recv(timeout=0)) is not None:
                assert msg.arbitration_id == 0x200
                echoes.append(int.from_bytes(msg.data, "big"))
            while (msg := b.recv(timeout=0)) is not None:
                seen_by_b.append((msg.arbitration_id, int.from_bytes(msg.data, "big")))
        while len(seen_by_b) < 2 * count and (msg := b.recv(timeout=1.0)) is not None:
            seen_by_b.append((msg.arbitration_id, int.from_bytes(msg.data, "big")))
        assert child.wait(timeout=5) == 0
        assert echoes == list(range(count))
        assert [n for i, n in seen_by_b if i == 0x100] == list(range(count))
        assert [n for i, n in seen_by_b if i == 0x200] == list(range(count))
        assert a.rx_malformed == b.rx_malformed == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        a.shutdown()
        b.shutdown()


def test_udp_loopback_drops_and_counts_malformed_datagrams():
    bus = UdpLoopbackBus(_channel("malformed"))
    good = pack_message(can.Message(arbitration_id=0x55, data=b"fine", is_extended_id=False), 1.0)
    extended = good[:3] + b"\x01" + good[4:]               # flags byte: extended id
    bad = [b"", b"garbage", b"XX" + good[2:], good[:-1], good + b"\x00",
           good[:2] + b"\x02" + good[3:],                  # version 2
           good[:3] + b"\x40" + good[4:],                  # unknown flag
           good[:3] + b"\x12" + good[4:]]                  # bitrate switch without FD
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for datagram in bad + [extended, good]:
            sender.sendto(datagram, ("127.0.0.1", bus.port))
        first = bus.recv(timeout=1.0)
        assert first is not None and first.is_extended_id and first.arbitration_id == 0x55
        last = bus.recv(timeout=1.0)
        assert last is not None and not last.is_extended_id and bytes(last.data) == b"fine"
        assert last.timestamp == 1.0
        assert bus.rx_malformed == len(bad)
        assert bus.recv(timeout=0) is None
    finally:
        sender.close()
        bus.shutdown()


@pytest.mark.parametrize("options", [
    {"host": "192.168.1.10"}, {"host": "0.0.0.0"}, {"host": "localhost"},
    {"channel": "10.1.2.3"}, {"channel": "239.74.163.2"}, {"channel": "127.0.0.1:20000"},
])
def test_udp_loopback_refuses_anything_but_127_0_0_1(options):
    kwargs = {"channel": _channel("refuse"), **options}
    with pytest.raises(can.CanInitializationError, match=r"127\.0\.0\.1"):
        can.Bus(interface="udp_loopback", **kwargs)


def test_udp_loopback_entry_point_and_node_limits():
    assert "udp_loopback" in can.interfaces.VALID_INTERFACES
    assert {"interface": "udp_loopback", "channel": "ella"} in \
        can.detect_available_configs(interfaces=["udp_loopback"])
    port = base_port(_channel("limits"))
    buses = [can.Bus(interface="udp_loopback", channel=port) for _ in range(NODES)]
    try:
        assert all(isinstance(bus, UdpLoopbackBus) for bus in buses)
        assert [bus.node for bus in buses] == list(range(NODES))
        with pytest.raises(can.CanInitializationError, match="no free port"):
            can.Bus(interface="udp_loopback", channel=str(port))
        with pytest.raises(can.CanInitializationError, match="outside"):
            UdpLoopbackBus(port, node=NODES)
    finally:
        for bus in buses:
            bus.shutdown()


def test_udp_loopback_two_node_channel():
    a, b = (UdpLoopbackBus(_channel("pair"), nodes=2) for _ in range(2))
    try:
        with pytest.raises(can.CanInitializationError, match="no free port"):
            UdpLoopbackBus(_channel("pair"), nodes=2)
        with pytest.raises(can.CanInitializationError, match="outside"):
            UdpLoopbackBus(_channel("pair"), nodes=2, node=2)
        a.send(can.Message(arbitration_id=7, data=b"x", is_extended_id=False))
        got = b.recv(timeout=1.0)
        assert got is not None and (got.arbitration_id, bytes(got.data)) == (7, b"x")
    finally:
        a.shutdown()
        b.shutdown()


def _opened(adapter: SlcanAdapterLink) -> bool | None:
    adapter.recv()
    return True if adapter.channel_open else None


def _pump(adapter: SlcanAdapterLink, stop: threading.Event) -> None:
    while not stop.is_set():
        if adapter.recv() is None:
            time.sleep(1e-4)


@pytest.fixture
def slcan_pair():
    """An emulated adapter and a python-can slcan bus on the other end of its pty."""
    adapter = SlcanAdapterLink.on_new_pty()
    bus = can.Bus(interface="slcan", channel=adapter.slave_path, bitrate=1_000_000, sleep_after_open=0)
    try:
        assert _wait_for(lambda: _opened(adapter)) is True
        yield adapter, bus
    finally:
        bus.shutdown()
        adapter.close()


def test_slcan_python_can_host_and_adapter_exchange_frames(slcan_pair):
    adapter, bus = slcan_pair
    frames = [Frame(i & 0x7FF, i.to_bytes(4, "big")) if i % 2 else
              Frame(0x1F000000 | i, bytes([i & 0xFF] * (i % 9)), is_extended_id=True) for i in range(400)]
    frames += [Frame(0x321, bytes(range(64)), is_fd=True), Frame(0x1234567, bytes(20), is_fd=True, is_extended_id=True)]
    for frame in frames:
        bus.send(can.Message(arbitration_id=frame.arbitration_id, data=frame.data,
                             is_extended_id=frame.is_extended_id, is_fd=frame.is_fd))
    received = [f for f in (_wait_for(adapter.recv) for _ in frames) if f is not None]
    assert len(received) == len(frames) and all(map(_same, received, frames))

    assert all(adapter.send(frame) for frame in frames)
    got = []
    deadline = time.monotonic() + 10
    while len(got) < len(frames) and time.monotonic() < deadline:
        adapter.recv()                     # flushes whatever the pty could not take yet
        msg = bus.recv(timeout=0.01)
        if msg is not None:
            got.append(Frame(msg.arbitration_id, bytes(msg.data), msg.is_fd, msg.is_extended_id))
    assert len(got) == len(frames) and all(map(_same, got, frames))
    assert adapter.counters.rx_frames == adapter.counters.tx_frames == len(frames)
    assert adapter.counters.rx_framing_errors == adapter.counters.tx_dropped == 0


def test_slcan_version_and_serial_queries(slcan_pair):
    adapter, bus = slcan_pair
    stop = threading.Event()
    pump = threading.Thread(target=_pump, args=(adapter, stop))
    pump.start()
    try:
        assert bus.get_version(2.0) == (10, 13)
        assert bus.get_serial_number(2.0) == "ELLA"
    finally:
        stop.set()
        pump.join()


def _exchange(adapter: SlcanAdapterLink, host: int, request: bytes, reply_size: int,
              frames: list[Frame] | None = None) -> bytes:
    """Write ``request`` on the host side, run the adapter (keeping its frames in ``frames``),
    and read ``reply_size`` bytes back."""
    os.write(host, request)
    reply = b""
    deadline = time.monotonic() + 2
    while len(reply) < reply_size and time.monotonic() < deadline:
        frame = adapter.recv()
        if frame is not None and frames is not None:
            frames.append(frame)
        if select.select([host], [], [], 0.001)[0]:
            reply += os.read(host, 4096)
    return reply


def test_slcan_adapter_rejects_garbage_and_counts_it():
    master, host = os.openpty()
    tty.setraw(host)
    adapter = SlcanAdapterLink(master)
    try:
        assert _exchange(adapter, host, b"t1230\r", 1) == b"\a"       # channel still closed
        assert _exchange(adapter, host, b"S8\rZ1\rO\rV\rN\rF\r", 19) == b"\r\r\rV1013\rNELLA\rF00\r"
        assert _exchange(adapter, host, b"S6\r", 1) == b"\a"          # no setup while open
        garbage = b"\x01\xffjunk\rt12\rt1234\rt8000\rT200000001\rt12390000000000000000\rX\r"
        assert _exchange(adapter, host, garbage, 7) == b"\a" * 7
        assert adapter.recv() is None
        overlong = b"t" + b"0" * 300
        frames: list[Frame] = []
        assert _exchange(adapter, host, overlong + b"\rt7FF2ABCD\r", 3, frames) == b"\az\r"
        frames += iter(adapter.recv, None)   # the ack came after the frame was queued
        assert [(f.arbitration_id, f.data, f.is_extended_id) for f in frames] == [(0x7FF, b"\xab\xcd", False)]
        counters = adapter.counters
        assert counters.rx_framing_errors == 10 and counters.rx_frames == 1
        assert counters.rx_garbage_bytes == 6 + 3 + len(garbage) + len(overlong) + 1
        assert adapter.send(Frame(0x1A, b"\x01", is_extended_id=True))
        line = _exchange(adapter, host, b"", 17)
        assert line.startswith(b"T0000001A101") and len(line) == 17 and line.endswith(b"\r")  # 4-digit timestamp
        assert not adapter.send(Frame(0x800, b""))
        assert _exchange(adapter, host, b"C\r", 1) == b"\r"
        assert not adapter.send(Frame(0x1, b"")) and adapter.counters.tx_dropped == 2
    finally:
        adapter.close()
        os.close(host)
