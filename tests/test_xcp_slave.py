"""The XCP slave packet by packet (firmware_bridge.xcp): the answers a master parses, the DAQ packets'
layout, and every refusal with its XCP error code, counted. pyxcp as the master: tests/test_xcp_server.py."""
from __future__ import annotations

import socket
import struct
import time

import numpy as np
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.xcp.can import MAX_WAITING, CanXcpTransport, frame_length
from firmware_bridge.xcp.memory import CALIBRATION_BASE, MEASUREMENT_BASE, TEXT_BASE, Calibration, MemoryMap, XcpError
from firmware_bridge.xcp.protocol import Err, eth_frame, eth_packets, event_cycle
from firmware_bridge.xcp.slave import XcpSlave
from firmware_bridge.xcp.udp import UdpXcpServer

COLUMNS = ["cycle", "t", "q_elbow", "tau_elbow"]


def make_slave(written: list | None = None) -> XcpSlave:
    memory = MemoryMap(COLUMNS, [Calibration("mass_kg_payload", 1.0, 0.0, 50.0, "kg"),
                                 Calibration("fault_loss", 1.0, 0.0, 1.0, kind="u1")])
    if written is not None:
        memory.on_write = lambda c, v: written.append((c.name, v))
    slave = XcpSlave(memory, "arm.a2l", ("cycle", event_cycle(1e-3)), lambda: 1234, header=bytes(4))
    assert slave.handle(b"\xff\x00")[:3] == b"\xff\x05\x80"
    return slave


def code(reply: bytes) -> int:
    assert reply[0] == 0xFE, f"expected an error packet, got {reply.hex()}"
    return reply[1]


def test_connect_answers_what_a_master_needs_and_nothing_is_answered_before():
    slave = XcpSlave(MemoryMap(COLUMNS, []), "arm.a2l", ("cycle", (10, 5)), lambda: 0)
    assert slave.handle(b"\xfd") is None and slave.counts["ignored_unconnected"] == 1
    reply = slave.handle(b"\xff\x00")
    assert reply[:4] == b"\xff\x05\x80\xff"                    # CAL/PAG and DAQ, Intel, byte granularity, MAX_CTO
    assert struct.unpack_from("<H", reply, 4)[0] == 1400       # MAX_DTO
    status = slave.handle(b"\xfd")
    assert status[0] == 0xFF and status[1] & 0x40 == 0         # DAQ not running
    ident = slave.handle(b"\xfa\x01")
    n = struct.unpack_from("<I", ident, 4)[0]
    assert slave.handle(bytes((0xF5, n)))[1:] == b"arm.a2l"   # uploaded from where GET_ID set the MTA


def test_event_cycle_states_the_period_in_a_byte():
    assert event_cycle(1e-3) == (100, 4)            # 100 x 10 us: the finest unit that fits
    assert event_cycle(1e-4) == (100, 3)            # 100 x 1 us
    assert event_cycle(2.5e-3) == (250, 4)
    assert event_cycle(7e-3) == (70, 5)


def daq_setup(slave: XcpSlave, entries: list[tuple[int, int]], timestamps: bool = True) -> None:
    packets = [b"\xd6", b"\xd5\x00\x01\x00", b"\xd4\x00\x00\x00\x01", b"\xd3\x00\x00\x00\x00" + bytes((len(entries),)),
               b"\xe2\x00\x00\x00\x00\x00"]
    packets += [b"\xe1\xff" + bytes((size, 0)) + struct.pack("<I", address) for address, size in entries]
    packets += [b"\xe0" + bytes((0x10 if timestamps else 0,)) + b"\x00\x00\x00\x00\x01\x00", b"\xde\x02\x00\x00",
                b"\xdd\x01"]
    for p in packets:
        assert slave.handle(p)[0] == 0xFF, (p.hex(), slave.last_error)


def test_a_daq_packet_carries_the_entries_of_one_row_in_write_order_after_pid_and_timestamp():
    slave = make_slave()
    # t and q_elbow merged into one 16-byte entry, then cycle: the order the master wrote them in
    daq_setup(slave, [(MEASUREMENT_BASE + 8, 16), (MEASUREMENT_BASE, 8)])
    assert slave.handle(b"\xfd")[1] & 0x40                    # DAQ running
    slave.memory.row[:] = [7.0, 0.007, 0.25, -3.5]
    sent = []
    assert slave.plan.sample(slave.memory.row_bytes, 0, 7000, iter(range(5, 9)), lambda b: sent.append(bytes(b)) or True) == 0
    length, ctr = struct.unpack_from("<HH", sent[0])
    assert (length, ctr) == (len(sent[0]) - 4, 5)
    assert sent[0][4] == 0 and struct.unpack_from("<I", sent[0], 5)[0] == 7000         # PID 0, the timestamp
    assert struct.unpack_from("<3d", sent[0], 9) == (0.007, 0.25, 7.0)
    assert slave.handle(b"\xdd\x00")[0] == 0xFF and slave.plan is None                  # stopped: nothing to send


def test_a_prescaler_sends_every_nth_event():
    slave = make_slave()
    daq_setup(slave, [(MEASUREMENT_BASE, 8)])
    assert slave.handle(b"\xdd\x00")[0] == 0xFF
    assert slave.handle(b"\xe0\x00\x00\x00\x00\x00\x03\x00")[0] == 0xFF          # prescaler 3, no timestamp
    assert slave.handle(b"\xde\x01\x00\x00")[0] == 0xFF
    sent = []
    for n in range(9):
        slave.plan.sample(slave.memory.row_bytes, n, 0, iter(range(100)), lambda b: sent.append(bytes(b)) or True)
    assert len(sent) == 3 and len(sent[0]) == 4 + 1 + 8


def test_calibration_writes_whole_parameters_within_their_limits():
    written = []
    slave = make_slave(written)
    address = struct.pack("<I", CALIBRATION_BASE)
    assert slave.handle(b"\xed\x08\x00\x00" + address + struct.pack("<d", 2.5))[0] == 0xFF
    assert written == [("mass_kg_payload", 2.5)] and slave.memory.value(0) == 2.5
    assert slave.handle(b"\xf4\x08\x00\x00" + address)[1:] == struct.pack("<d", 2.5)
    switch = struct.pack("<I", CALIBRATION_BASE + 8)
    assert slave.handle(b"\xed\x01\x00\x00" + switch + b"\x00")[0] == 0xFF and written[-1] == ("fault_loss", 0.0)
    refused = {
        Err.OUT_OF_RANGE: [b"\xed\x08\x00\x00" + address + struct.pack("<d", 51.0),         # above 50 kg
                           b"\xed\x08\x00\x00" + address + struct.pack("<d", float("nan")),
                           b"\xed\x01\x00\x00" + switch + b"\x02"],                          # a switch is 0 or 1
        Err.ACCESS_DENIED: [b"\xed\x04\x00\x00" + address + b"\x00\x00\x00\x00",            # half a float64
                            b"\xed\x08\x00\x00" + struct.pack("<I", CALIBRATION_BASE + 4) + bytes(8),
                            b"\xf4\x08\x00\x00" + struct.pack("<I", 0x1234),                 # no memory there
                            b"\xf4\x08\x00\x01" + address],                                  # address extension 1
        Err.WRITE_PROTECTED: [b"\xed\x08\x00\x00" + struct.pack("<I", MEASUREMENT_BASE) + bytes(8),
                              b"\xed\x01\x00\x00" + struct.pack("<I", TEXT_BASE) + b"x"],
        Err.CMD_UNKNOWN: [b"\x42", b"\xd0\x00"],
        Err.CMD_SYNTAX: [b"\xed\x08\x00", b"\xf6\x00\x00"],
    }
    for err, packets in refused.items():
        for p in packets:
            assert code(slave.handle(p)) == err, p.hex()
    assert slave.memory.value(0) == 2.5 and written[-1] == ("fault_loss", 0.0)       # nothing refused was written
    assert slave.errors == {f"ERR_{e.name}": len(p) for e, p in refused.items()}


def test_a_write_the_owner_refuses_is_not_stored():
    memory = MemoryMap(COLUMNS, [Calibration("friction_scale_elbow", 1.0, 0.05, 20.0)])

    def refuse(c, v):
        raise XcpError(Err.OUT_OF_RANGE, "the plant refuses")
    memory.on_write = refuse
    slave = XcpSlave(memory, "arm.a2l", ("cycle", (10, 5)), lambda: 0)
    slave.handle(b"\xff\x00")
    assert code(slave.handle(b"\xed\x08\x00\x00" + struct.pack("<I", CALIBRATION_BASE) + struct.pack("<d", 2.0))) == 0x22
    assert memory.value(0) == 1.0 and "the plant refuses" in slave.last_error


def test_daq_configuration_refusals():
    slave = make_slave()
    assert code(slave.handle(b"\xd4\x00\x00\x00\x01")) == Err.SEQUENCE          # ALLOC_ODT before ALLOC_DAQ
    assert code(slave.handle(b"\xd5\x00\x11\x00")) == Err.MEMORY_OVERFLOW       # 17 lists
    assert slave.handle(b"\xd5\x00\x01\x00")[0] == 0xFF
    assert code(slave.handle(b"\xd5\x00\x01\x00")) == Err.SEQUENCE              # twice without FREE_DAQ
    assert code(slave.handle(b"\xd4\x00\x01\x00\x01")) == Err.OUT_OF_RANGE      # list 1 of 1
    assert slave.handle(b"\xd4\x00\x00\x00\x01")[0] == 0xFF
    assert slave.handle(b"\xd3\x00\x00\x00\x00\x02")[0] == 0xFF
    assert code(slave.handle(b"\xe1\xff\x08\x00" + struct.pack("<I", MEASUREMENT_BASE))) == Err.SEQUENCE   # no pointer
    assert slave.handle(b"\xe2\x00\x00\x00\x00\x00")[0] == 0xFF
    assert code(slave.handle(b"\xe1\xff\x08\x00" + struct.pack("<I", MEASUREMENT_BASE + 32))) == Err.OUT_OF_RANGE
    assert code(slave.handle(b"\xe1\x03\x08\x00" + struct.pack("<I", MEASUREMENT_BASE))) == Err.OUT_OF_RANGE  # bits
    assert slave.handle(b"\xe1\xff\x08\x00" + struct.pack("<I", MEASUREMENT_BASE))[0] == 0xFF
    assert code(slave.handle(b"\xe0\x00\x00\x00\x01\x00\x01\x00")) == Err.OUT_OF_RANGE   # event 1
    assert code(slave.handle(b"\xe0\x02\x00\x00\x00\x00\x01\x00")) == Err.OUT_OF_RANGE   # STIM
    assert code(slave.handle(b"\xde\x01\x00\x00")) == Err.DAQ_CONFIG             # entry 1 never written
    assert slave.plan is None


def test_framing_of_xcp_on_ethernet():
    assert eth_packets(eth_frame(b"\xff\x00", 3) + eth_frame(b"\xfd", 4)) == [b"\xff\x00", b"\xfd"]
    for broken in (b"\x01", b"\x05\x00\x00\x00\xff", b"\x00\x00\x00\x00", b""):
        assert eth_packets(broken) is None


def test_the_udp_server_answers_counts_broken_datagrams_and_refuses_a_second_master():
    slave = make_slave()
    slave.handle(b"\xfe")                               # the first master disconnected
    server = UdpXcpServer(slave, "127.0.0.1", 0)
    server.start()
    first, second = (socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2))
    try:
        for s in (first, second):
            s.settimeout(5.0)
        first.sendto(eth_frame(b"\xff\x00", 0), server.address)
        assert first.recv(512)[4:6] == b"\xff\x05"
        first.sendto(b"\x09\x00", server.address)           # framing broken: no answer, counted
        second.sendto(eth_frame(b"\xff\x00", 0), server.address)
        assert second.recv(512)[4:] == bytes((0xFE, Err.ACCESS_DENIED))
        first.sendto(eth_frame(b"\x42", 1), server.address)
        assert first.recv(512)[4:] == bytes((0xFE, Err.CMD_UNKNOWN))
        assert server.malformed == 1
        assert slave.errors == {"ERR_ACCESS_DENIED": 1, "ERR_CMD_UNKNOWN": 1}
        plan_buffer = np.zeros(8, np.uint8)
        assert server.send_dto(plan_buffer) and server.dto_sent == 1
    finally:
        first.close()
        second.close()
        server.close()


def test_the_server_binds_loopback_by_default_and_names_a_port_it_cannot_bind():
    slave = make_slave()
    server = UdpXcpServer(slave, port=0)
    try:
        assert server.address[0] == "127.0.0.1"
        with pytest.raises(OSError, match=f"cannot bind 127.0.0.1:{server.address[1]}"):
            UdpXcpServer(slave, port=server.address[1])
    finally:
        server.close()


def test_xcp_on_can_answers_through_the_loops_hands_padded_to_can_fd_lengths():
    sent: list = []
    memory = MemoryMap(COLUMNS, [])
    slave = XcpSlave(memory, "arm.a2l", ("cycle", (100, 4)), lambda: 0, max_cto=8, max_dto=8)
    transport = CanXcpTransport(slave, 0x7F0, 0x1234_5678, fd=False, send=lambda frames: sent.extend(frames) or True)
    transport.start()
    try:
        assert transport.claims(Frame(0x7F0, b"\xff\x00")) and not transport.claims(Frame(0x7F0, b"", is_extended_id=True))
        transport.take(Frame(0x7F0, b"\xff\x00"))
        deadline = time.monotonic() + 5
        while not transport.outbound and time.monotonic() < deadline:
            time.sleep(0.01)
        transport.flush()
    finally:
        transport.close()
    (reply,) = sent
    assert reply.arbitration_id == 0x1234_5678 and reply.is_extended_id and not reply.is_fd
    assert reply.data[3] == 8 and struct.unpack_from("<H", reply.data, 4)[0] == 8      # MAX_CTO, MAX_DTO: classic CAN
    assert [frame_length(n) for n in (3, 8, 9, 33, 64)] == [3, 8, 12, 48, 64]
    with pytest.raises(ValueError, match="two ids"):
        CanXcpTransport(slave, 0x7F0, 0x7F0, fd=False, send=lambda frames: True)


def test_a_classic_can_odt_may_carry_the_timestamp_alone():
    """pyxcp puts no entry in the first ODT when the timestamp leaves no room for a whole one."""
    memory = MemoryMap(COLUMNS, [])
    slave = XcpSlave(memory, "arm.a2l", ("cycle", (100, 4)), lambda: 0, max_cto=8, max_dto=8)
    slave.handle(b"\xff\x00")
    for p in (b"\xd6", b"\xd5\x00\x01\x00", b"\xd4\x00\x00\x00\x02", b"\xd3\x00\x00\x00\x00\x00",
              b"\xd3\x00\x00\x00\x01\x01", b"\xe2\x00\x00\x00\x01\x00",
              b"\xe1\xff\x04\x00" + struct.pack("<I", MEASUREMENT_BASE + 4), b"\xe0\x10\x00\x00\x00\x00\x01\x00",
              b"\xde\x02\x00\x00", b"\xdd\x01"):
        assert slave.handle(p)[0] == 0xFF, (p.hex(), slave.last_error)
    assert code(slave.handle(b"\xe1\xff\x08\x00" + struct.pack("<I", MEASUREMENT_BASE))) == Err.OUT_OF_RANGE  # > 7 B
    sent = []
    slave.plan.sample(memory.row_bytes, 0, 99, iter(range(9)), lambda b: sent.append(bytes(b)) or True)
    assert [len(p) for p in sent] == [5, 5] and sent[0][0] == 0 and sent[1][0] == 1


def test_xcp_on_can_counts_what_the_link_would_not_take():
    memory = MemoryMap(COLUMNS, [])
    slave = XcpSlave(memory, "arm.a2l", ("cycle", (100, 4)), lambda: 0, max_cto=8, max_dto=8)
    transport = CanXcpTransport(slave, 0x7F0, 0x7F1, fd=False, send=lambda frames: False)     # a bus that refuses
    transport.start()
    try:
        transport.take(Frame(0x7F0, b"\xff\x00"))
        transport.take(Frame(0x7F0, b""))                                                        # no packet at all
        deadline = time.monotonic() + 5
        while not (transport.outbound and transport.malformed) and time.monotonic() < deadline:
            time.sleep(0.01)
        transport.flush()
        assert not transport.send_dto(np.zeros(3, np.uint8))
    finally:
        transport.close()
    assert slave.counts["responses_lost"] == 1 and transport.malformed == 1
    assert (transport.dto_sent, transport.dto_lost) == (0, 1)


def test_a_daq_packet_the_udp_socket_refuses_is_counted_lost():
    slave = make_slave()
    server = UdpXcpServer(slave, "127.0.0.1", 0)
    try:
        assert not server.send_dto(np.zeros(8, np.uint8))               # no master yet: nowhere to send
        server.master = ("127.0.0.1", 9)
        assert not server.send_dto(np.zeros(70_000, np.uint8))          # larger than a datagram: refused
        assert (server.dto_sent, server.dto_lost) == (0, 1)
    finally:
        server.close()


def test_a_flood_of_xcp_commands_on_can_is_bounded_and_counted():
    slave = XcpSlave(MemoryMap(COLUMNS, []), "arm.a2l", ("cycle", (100, 4)), lambda: 0, max_cto=8, max_dto=8)
    transport = CanXcpTransport(slave, 0x7F0, 0x7F1, fd=False, send=lambda frames: True)      # its thread not started
    for _ in range(MAX_WAITING + 10):
        transport.take(Frame(0x7F0, b"\xfd"))
    assert slave.counts["commands_dropped"] == 10
