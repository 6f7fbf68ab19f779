"""The emulated CANopen nodes of configs/bus/canopen_cst.toml on their own (firmware_bridge.canopen.network.DriveNodes):
SDO server, object dictionary, CiA 402 state machine, PDO mapping over SDO, EMCY.

The test is the master, with SDO frames built here by hand from CiA 301 (command specifier, index,
sub-index, data), so that the server is checked against the standard's byte layout rather than its
own frame functions. Every check is paired with a request the node must refuse, or a state it must not reach.
"""
from __future__ import annotations

import configparser
import struct
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.canopen import cia402
from firmware_bridge.canopen.network import DriveNodes
from firmware_bridge.formats.eds import export_eds
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import NMT_START, NMT_STOP, BusMap, nmt_frame, sync_frame
from hil.cli.main import main as hil

ROOT = Path(__file__).resolve().parent.parent
BUS = BusMap.load(ROOT / "configs" / "bus" / "canopen_cst.toml")
JOINTS = ["base_yaw", "shoulder_pitch", "elbow"]
SCALE = [0.08, 0.12, 0.03]
ABORT_NO_OBJECT, ABORT_NO_SUB, ABORT_LENGTH, ABORT_READ_ONLY = 0x06020000, 0x06090011, 0x06070010, 0x06010002
ABORT_VALUE, ABORT_HIGH, ABORT_LOW, ABORT_COMMAND, ABORT_TOGGLE = 0x06090030, 0x06090031, 0x06090032, 0x05040001, 0x05030000
ABORT_ACCESS, ABORT_CANNOT_MAP, ABORT_PDO_LENGTH = 0x06010000, 0x06040041, 0x06040042


class Abort(Exception):
    def __init__(self, code: int):
        self.code = code
        super().__init__(f"0x{code:08X}")


class Faults:
    """What the nodes read of a fault engine: its events and active faults (kind, target)."""

    class Fault:
        def __init__(self, kind: str, target: str):
            self.kind, self.target = kind, target

    def __init__(self):
        self.events: list = []
        self._active: list = []

    def inject(self, kind: str, target: str) -> None:
        self._active.append((len(self.events), self.Fault(kind, target)))
        self.events.append("inject")

    def clear(self) -> None:
        self._active.clear()
        self.events.append("clear")

    def active(self):
        return list(self._active)


class Net:
    """The nodes, booted, with a hand-written SDO client; frames the nodes send are kept in `sent`."""

    def __init__(self):
        self.t = 0.0
        self.nodes = DriveNodes(BUS, JOINTS, 0.1, clock=lambda: self.t)
        self.faults = Faults()
        self.nodes.attach(self.faults)
        self.sent: list[Frame] = self.nodes.heartbeats()
        self.k = 0

    def send(self, *frames: Frame) -> list[Frame]:
        for f in frames:
            self.nodes.receive(f)
        out = self.nodes.heartbeats()
        self.sent += out
        return out

    def cycle(self, *frames: Frame) -> list[Frame]:
        """Frames in (RPDOs through the command decoder), then one cycle's transmit with the map's sensor frames."""
        for f in frames:
            if not self.nodes.receive(f):
                self.nodes.commands.feed(f)
        counts = np.array([1000.0, -2000.0, 3000.0])
        out = self.nodes.transmit(lambda k: [BUS.codec(f"tpdo1_{j}").encode([counts[i] + k, 10.0 * i])
                                             for i, j in enumerate(JOINTS)])
        self.sent += out
        return out

    def request(self, node: int, data: bytes) -> bytes:
        out = [f for f in self.send(Frame(0x600 + node, data)) if f.arbitration_id == 0x580 + node]
        assert len(out) == 1 and len(out[0].data) == 8, out
        if out[0].data[0] == 0x80:
            raise Abort(struct.unpack_from("<I", out[0].data, 4)[0])
        return out[0].data

    def read(self, node: int, index: int, sub: int = 0) -> bytes:
        r = self.request(node, struct.pack("<BHB4x", 0x40, index, sub))
        assert r[1:4] == struct.pack("<HB", index, sub)
        if r[0] & 0x02:                                   # expedited, size indicated
            assert r[0] & 0xF3 == 0x43
            return r[4:8 - (r[0] >> 2 & 3)]
        assert r[0] == 0x41
        size, data, toggle = struct.unpack_from("<I", r, 4)[0], b"", 0
        while True:
            seg = self.request(node, bytes((0x60 | toggle,)) + bytes(7))
            assert seg[0] & 0xE0 == 0x00 and seg[0] & 0x10 == toggle
            data += seg[1:8 - (seg[0] >> 1 & 7)]
            toggle ^= 0x10
            if seg[0] & 0x01:
                assert len(data) == size
                return data

    def write(self, node: int, index: int, sub: int, data: bytes) -> None:
        n = 4 - len(data)
        r = self.request(node, struct.pack("<BHB", 0x23 | n << 2, index, sub) + data.ljust(4, b"\0"))
        assert r == struct.pack("<BHB4x", 0x60, index, sub)

    def write_segmented(self, node: int, index: int, sub: int, data: bytes, size: int | None = None,
                        toggles=None) -> None:
        r = self.request(node, struct.pack("<BHBI", 0x21, index, sub, len(data) if size is None else size))
        assert r == struct.pack("<BHB4x", 0x60, index, sub)
        chunks = [data[i:i + 7] for i in range(0, len(data), 7)] or [b""]
        for k, chunk in enumerate(chunks):
            toggle = (k % 2) * 0x10 if toggles is None else toggles[k]
            last = 0x01 if k == len(chunks) - 1 else 0
            r = self.request(node, bytes((toggle | (7 - len(chunk)) << 1 | last,)) + chunk.ljust(7, b"\0"))
            assert r == bytes((0x20 | toggle,)) + bytes(7)

    def u(self, node: int, index: int, sub: int = 0, fmt: str = "<H") -> int:
        return struct.unpack(fmt, self.read(node, index, sub))[0]

    def controlword(self, node: int, value: int) -> int:
        self.write(node, 0x6040, 0, struct.pack("<H", value))
        return self.u(node, 0x6041)


def aborted(call) -> int:
    with pytest.raises(Abort) as exc:
        call()
    return exc.value.code


# ----------------------------------------------------------------------------- SDO server
def test_expedited_upload_reads_typed_objects_and_unknown_ones_abort():
    net = Net()
    assert net.u(1, 0x1000, fmt="<I") == 0x00020192 and net.u(4, 0x1000, fmt="<I") == 0
    assert net.u(2, 0x1018, 0, "<B") == 4 and net.u(2, 0x1018, 4, "<I") == 2       # serial number: node id
    assert net.u(3, 0x1014, fmt="<I") == 0x83 and net.u(1, 0x1017) == 100
    assert net.u(1, 0x6041) == 0x0240                               # Switch on disabled, remote
    assert net.u(1, 0x6060, fmt="<b") == 10 and net.u(1, 0x6072) == 3000 and net.u(1, 0x6076, fmt="<I") == 80000
    assert aborted(lambda: net.read(1, 0x2FFF)) == ABORT_NO_OBJECT
    assert aborted(lambda: net.read(4, 0x6041)) == ABORT_NO_OBJECT                 # the IMU is no drive
    assert aborted(lambda: net.read(1, 0x1018, 9)) == ABORT_NO_SUB
    assert aborted(lambda: net.request(1, bytes((0xE0,)) + bytes(7))) == ABORT_COMMAND    # ccs 7
    assert aborted(lambda: net.request(1, struct.pack("<BHBBB2x", 0xA0, 0x1008, 0, 127, 0))) == ABORT_COMMAND
    c = net.nodes.counters()
    assert c["sdo_requests"] == 15 and c["sdo_aborts"] == 5


def test_segmented_upload_of_the_device_name_with_the_toggle_bit_checked():
    net = Net()
    assert net.read(2, 0x1008).decode() == "ELLA HIL emulated joint drive, shoulder_pitch"
    assert net.read(4, 0x1008).decode() == "ELLA HIL emulated imu node"
    r = net.request(1, struct.pack("<BHB4x", 0x40, 0x1008, 0))
    assert r[0] == 0x41 and struct.unpack_from("<I", r, 4)[0] == len("ELLA HIL emulated joint drive, base_yaw")
    net.request(1, bytes((0x60,)) + bytes(7))                        # toggle 0: fine
    assert aborted(lambda: net.request(1, bytes((0x60,)) + bytes(7))) == ABORT_TOGGLE    # toggle not alternated
    assert aborted(lambda: net.request(1, bytes((0x70,)) + bytes(7))) == ABORT_COMMAND   # no transfer any more


def test_downloads_check_access_length_and_range():
    net = Net()
    net.write(1, 0x1017, 0, struct.pack("<H", 50))
    assert net.u(1, 0x1017) == 50
    assert aborted(lambda: net.write(1, 0x6041, 0, b"\x00\x00")) == ABORT_READ_ONLY
    assert aborted(lambda: net.write(1, 0x1000, 0, b"\x00\x00\x00\x00")) == ABORT_READ_ONLY      # const
    assert aborted(lambda: net.write(1, 0x6040, 0, b"\x06")) == ABORT_LENGTH                     # 1 byte, U16
    assert aborted(lambda: net.write(1, 0x6040, 0, b"\x06\x00\x00")) == ABORT_LENGTH
    assert aborted(lambda: net.write(1, 0x6071, 0, struct.pack("<h", 3001))) == ABORT_HIGH       # > 240 N m
    assert aborted(lambda: net.write(1, 0x6071, 0, struct.pack("<h", -3001))) == ABORT_LOW
    net.write(1, 0x6071, 0, struct.pack("<h", -3000))
    assert net.u(1, 0x6071, fmt="<h") == -3000
    assert aborted(lambda: net.write(1, 0x6060, 0, b"\x03")) == ABORT_VALUE      # profile torque: not supported
    assert aborted(lambda: net.write(1, 0x605A, 0, struct.pack("<h", 1))) == ABORT_VALUE
    assert aborted(lambda: net.write(1, 0x1003, 0, b"\x01")) == ABORT_VALUE      # only 0 clears the history


def test_segmented_download_checks_size_and_toggle():
    net = Net()
    net.write_segmented(2, 0x1017, 0, struct.pack("<H", 250))
    assert net.u(2, 0x1017) == 250
    # a size that is not the type's is refused at the initiate
    assert aborted(lambda: net.write_segmented(2, 0x1017, 0, b"\x01\x02\x03")) == ABORT_LENGTH
    # more data than announced: refused with the last segment, the value unchanged
    assert aborted(lambda: net.write_segmented(2, 0x1017, 0, b"\x10\x00\x00", size=2)) == ABORT_LENGTH
    assert aborted(lambda: net.write_segmented(2, 0x1017, 0, b"\x10\x00" * 5, size=2,
                                               toggles=[0x00, 0x00])) == ABORT_TOGGLE
    assert net.u(2, 0x1017) == 250
    assert aborted(lambda: net.request(2, bytes((0x01,)) + bytes(7))) == ABORT_COMMAND        # no download on
    assert aborted(lambda: net.write_segmented(2, 0x1008, 0, b"renamed drive")) == ABORT_READ_ONLY


def test_no_sdo_while_stopped_and_none_for_other_nodes():
    net = Net()
    net.send(nmt_frame(NMT_STOP, 2))
    assert net.send(Frame(0x602, struct.pack("<BHB4x", 0x40, 0x1000, 0))) == []
    assert not net.nodes.receive(Frame(0x609, struct.pack("<BHB4x", 0x40, 0x1000, 0)))    # node 9: not ours
    assert net.send(Frame(0x601, b"\x40\x00\x10")) == []                                 # not 8 bytes: ignored
    assert net.nodes.counters()["sdo_ignored"] == 1 and net.nodes.nodes[1].sdo.c["invalid"] == 1


# ----------------------------------------------------------------------------- CiA 402 power state machine
def test_the_state_machine_walks_to_operation_enabled_and_back():
    net = Net()
    walk = [(0x0F, 0x0240), (0x06, 0x0231), (0x07, 0x0233), (0x0F, 0x0237), (0x07, 0x0233), (0x0F, 0x0237),
            (0x06, 0x0231), (0x0F, 0x0237), (0x00, 0x0240)]           # 0x0F from Switch on disabled: nothing
    for cw, status in walk:
        assert net.controlword(1, cw) == status, hex(cw)
    # quick stop: option 2 leaves Quick stop active for Switch on disabled at the next cycle
    for cw in (0x06, 0x0F):
        net.controlword(1, cw)
    assert net.controlword(1, 0x0B) == 0x0217
    net.cycle()
    assert net.u(1, 0x6041) == 0x0240
    # option 6 stays in Quick stop active; enable operation returns to Operation enabled
    net.write(1, 0x605A, 0, struct.pack("<h", 6))
    for cw in (0x06, 0x0F, 0x0B):
        net.controlword(1, cw)
    net.cycle()
    assert net.u(1, 0x6041) == 0x0217 and net.controlword(1, 0x0F) == 0x0237
    assert net.controlword(1, 0x0D) == 0x0240                        # disable voltage (bit 1 clear)
    assert net.nodes.nodes[2].drive.state == cia402.SWITCH_ON_DISABLED      # the other drives untouched


@pytest.mark.parametrize("state, command, expected", [
    (cia402.SWITCH_ON_DISABLED, 0x06, cia402.READY_TO_SWITCH_ON),
    (cia402.SWITCH_ON_DISABLED, 0x07, cia402.SWITCH_ON_DISABLED),
    (cia402.READY_TO_SWITCH_ON, 0x0F, cia402.OPERATION_ENABLED),
    (cia402.READY_TO_SWITCH_ON, 0x02, cia402.SWITCH_ON_DISABLED),
    (cia402.SWITCHED_ON, 0x02, cia402.SWITCH_ON_DISABLED),
    (cia402.OPERATION_ENABLED, 0x02, cia402.QUICK_STOP_ACTIVE),
    (cia402.OPERATION_ENABLED, 0x06, cia402.READY_TO_SWITCH_ON),
    (cia402.QUICK_STOP_ACTIVE, 0x0F, cia402.QUICK_STOP_ACTIVE),      # option 2: no return
    (cia402.FAULT, 0x0F, cia402.FAULT),
])
def test_state_transitions_follow_cia402(state, command, expected):
    sm = cia402.PowerStateMachine()
    sm.state = state
    sm.write(command)
    assert sm.state == expected


def test_only_operation_enabled_applies_the_target_torque_clipped_to_the_max_torque():
    net = Net()
    net.send(nmt_frame(NMT_START))
    rpdo = BUS.codec("rpdo1_elbow").encode([30.0])                # 1000 per mille
    for cw, applies in ((0x06, False), (0x07, False), (0x0F, True), (0x07, False), (0x0F, True), (0x00, False)):
        net.controlword(3, cw)
        net.cycle(rpdo)
        assert net.nodes.safe[2] != applies and net.nodes.safe[:2].all()
        if applies:
            assert net.nodes.commands.tau[2] == pytest.approx(30.0)
    net.controlword(3, 0x06)
    net.controlword(3, 0x0F)
    net.write(3, 0x6072, 0, struct.pack("<H", 500))               # 500 per mille: 15 N m
    assert net.nodes.commands.tau[2] == pytest.approx(15.0) and net.u(3, 0x6041) & 0x0800   # internal limit
    net.cycle(BUS.codec("rpdo1_elbow").encode([-3.0]))
    assert net.nodes.commands.tau[2] == pytest.approx(-3.0) and not net.u(3, 0x6041) & 0x0800
    assert net.u(3, 0x6071, fmt="<h") == -100 and net.u(3, 0x6077, fmt="<h") == -100
    net.cycle(Frame(0x203, struct.pack("<h", 3500)))              # beyond the map's range: rejected
    assert net.nodes.commands.counters()["rejected"]["range"] == 1 and net.u(3, 0x6071, fmt="<h") == -100


# ----------------------------------------------------------------------------- PDO mapping
def _remap(net: Net, node: int, comm: int, entries: list[int], cob: int) -> None:
    """The CiA 301 sequence: invalidate, clear the count, entries, count, validate."""
    net.write(node, comm, 1, struct.pack("<I", cob | 0x80000000))
    net.write(node, comm + 0x200, 0, b"\x00")
    for s, e in enumerate(entries, 1):
        net.write(node, comm + 0x200, s, struct.pack("<I", e))
    net.write(node, comm + 0x200, 0, bytes((len(entries),)))
    net.write(node, comm, 1, struct.pack("<I", cob))


def test_tpdo_remapped_over_sdo_carries_the_statusword_and_position():
    net = Net()
    net.send(nmt_frame(NMT_START))
    assert [f.arbitration_id for f in net.cycle(sync_frame())] == [0x181, 0x182, 0x183]
    # the usual sequence's steps out of order are refused
    assert aborted(lambda: net.write(1, 0x1A00, 1, struct.pack("<I", 0x60410010))) == ABORT_ACCESS   # PDO valid
    assert aborted(lambda: net.write(1, 0x1A00, 0, b"\x00")) == ABORT_ACCESS
    net.write(1, 0x1800, 1, struct.pack("<I", 0x80000181))
    assert aborted(lambda: net.write(1, 0x1A00, 1, struct.pack("<I", 0x60410010))) == ABORT_ACCESS   # count != 0
    _remap(net, 1, 0x1800, [0x60410010, 0x60640020], 0x181)
    net.controlword(1, 0x06)
    sent = net.cycle(sync_frame())
    assert [f.arbitration_id for f in sent] == [0x182, 0x183, 0x181]
    status, position = struct.unpack("<Hi", sent[2].data)
    assert (status, position) == (0x0231, 1001)                   # counts 1000 + SYNC index 1
    assert net.u(1, 0x1A00, 0, "<B") == 2 and net.u(1, 0x1A00, 2, "<I") == 0x60640020
    # TPDO2 enabled with the torque actual and the error code, every second SYNC
    _remap(net, 2, 0x1801, [0x60770010, 0x603F0010], 0x80000282)
    net.write(2, 0x1801, 2, b"\x02")
    net.write(2, 0x1801, 1, struct.pack("<I", 0x282))
    ids = [[f.arbitration_id for f in net.cycle(sync_frame())] for _ in range(4)]
    assert [0x282 in i for i in ids] == [True, False, True, False]       # SYNCs 2..5: the even ones
    # a TPDO invalidated sends nothing
    net.write(3, 0x1800, 1, struct.pack("<I", 0x80000183))
    assert 0x183 not in [f.arbitration_id for f in net.cycle(sync_frame())]


def test_rpdo_remapped_with_the_controlword_drives_the_state_machine():
    net = Net()
    net.send(nmt_frame(NMT_START))
    _remap(net, 2, 0x1400, [0x60400010, 0x60710010], 0x202)
    for cw, status in ((0x06, 0x0231), (0x07, 0x0233), (0x0F, 0x0237)):
        net.cycle(Frame(0x202, struct.pack("<Hh", cw, 250)))
        assert net.u(2, 0x6041) == status
    assert net.nodes.commands.tau[1] == pytest.approx(250 * 0.12) and not net.nodes.safe[1]
    # the map's 2-byte layout is now the wrong length for this RPDO: rejected, counted
    net.cycle(BUS.codec("rpdo1_shoulder_pitch").encode([12.0]))
    assert net.nodes.commands.counters()["rejected"]["length"] == 1
    assert net.nodes.commands.tau[1] == pytest.approx(30.0)


@pytest.mark.parametrize("index, sub, value, code", [
    (0x1A00, 1, 0x20000010, ABORT_NO_OBJECT),          # no such object
    (0x1A00, 1, 0x10080008, ABORT_CANNOT_MAP),         # a string is not mappable
    (0x1A00, 1, 0x60410008, ABORT_CANNOT_MAP),         # wrong length for the statusword
    (0x1600, 1, 0x60410010, ABORT_CANNOT_MAP),         # read-only object in an RPDO
    (0x1600, 1, 0x60760020, ABORT_CANNOT_MAP),         # not PDO-mappable
    (0x1A00, 0, 9, ABORT_PDO_LENGTH),                  # more than 8 entries
    (0x1800, 1, 0x00000701, ABORT_VALUE),              # a heartbeat's COB-ID (restricted): when valid
    (0x1800, 1, 0x20000181, ABORT_VALUE),              # 29-bit
    (0x1800, 2, 0, ABORT_VALUE),                       # acyclic TPDO: not supported
    (0x1800, 2, 255, ABORT_VALUE),                     # event-driven TPDO: not supported
])
def test_pdo_parameters_refuse_what_cia301_forbids(index, sub, value, code):
    net = Net()
    comm = 0x1800 if index in (0x1800, 0x1A00) else 0x1400
    if index in (0x1A00, 0x1600):
        net.write(1, comm, 1, struct.pack("<I", 0x80000000 | (0x181 if comm == 0x1800 else 0x201)))
        net.write(1, index, 0, b"\x00")
    if index == 0x1800 and sub == 1:
        net.write(1, 0x1800, 1, struct.pack("<I", 0x80000181))
    size = 1 if sub == 0 or (index == 0x1800 and sub == 2) else 4
    assert aborted(lambda: net.write(1, index, sub, value.to_bytes(size, "little"))) == code


def test_pdo_longer_than_64_bits_and_cob_change_while_valid_are_refused():
    net = Net()
    net.write(1, 0x1800, 1, struct.pack("<I", 0x80000181))
    net.write(1, 0x1A00, 0, b"\x00")
    for s, e in enumerate([0x60640020, 0x606C0020, 0x60410010], 1):
        net.write(1, 0x1A00, s, struct.pack("<I", e))
    assert aborted(lambda: net.write(1, 0x1A00, 0, b"\x03")) == ABORT_PDO_LENGTH
    net.write(1, 0x1A00, 0, b"\x02")
    net.write(1, 0x1800, 1, struct.pack("<I", 0x181))
    assert aborted(lambda: net.write(1, 0x1800, 1, struct.pack("<I", 0x191))) == ABORT_VALUE


def test_nmt_reset_communication_restores_the_map_layout():
    net = Net()
    net.send(nmt_frame(NMT_START))
    _remap(net, 1, 0x1800, [0x60410010], 0x181)
    assert len(net.cycle(sync_frame())[-1].data) == 2
    net.send(nmt_frame(0x82, 1), nmt_frame(NMT_START))
    assert net.u(1, 0x1A00, 0, "<B") == 2
    assert [len(f.data) for f in net.cycle(sync_frame())] == [8, 8, 8]


# ----------------------------------------------------------------------------- EMCY and faults
def test_a_detected_fault_sends_emcy_and_faults_the_drive_until_reset():
    net = Net()
    net.send(nmt_frame(NMT_START))
    for cw in (0x06, 0x0F):
        net.controlword(3, cw)
    net.faults.inject("dropout", "imu_ax")                         # not the drive's: nothing
    assert net.cycle() == [] and net.nodes.nodes[3].enabled
    net.faults.inject("encoder_disconnect", "enc_elbow")
    out = net.cycle()
    assert [(f.arbitration_id, f.data) for f in out] == [(0x83, bytes((0x05, 0x73, 0x01, 0, 0, 0, 0, 0)))]
    assert net.u(3, 0x6041) & 0x4F == 0x0F and net.nodes.safe[2]   # fault reaction active, torque off
    net.cycle()
    assert net.u(3, 0x6041) == 0x0208                              # fault
    assert net.u(3, 0x603F) == 0x7305 and net.u(3, 0x1001, fmt="<B") == 0x01
    assert net.u(3, 0x1003, 0, "<B") == 1 and net.u(3, 0x1003, 1, "<I") == 0x7305
    assert net.cycle() == []                                       # one EMCY per fault
    # a fault reset while the cause persists is refused
    assert net.controlword(3, 0x80) == 0x0208 and net.nodes.nodes[3].drive.refused_resets == 1
    net.faults.clear()
    net.cycle()
    assert net.controlword(3, 0x80) == 0x0208                      # bit 7 still set: no rising edge
    net.controlword(3, 0x00)
    assert net.controlword(3, 0x80) == 0x0240                      # rising edge: Switch on disabled
    assert [(f.arbitration_id, f.data) for f in net.sent[-3:] if f.arbitration_id == 0x83] == [(0x83, bytes(8))]
    assert net.u(3, 0x603F) == 0 and net.u(3, 0x1001, fmt="<B") == 0
    for cw in (0x06, 0x0F):
        net.controlword(3, cw)
    assert not net.nodes.safe[2]
    net.write(3, 0x1003, 0, b"\x00")
    assert net.u(3, 0x1003, 0, "<B") == 0


def test_motor_fault_code_and_no_emcy_while_stopped():
    net = Net()
    net.send(nmt_frame(NMT_STOP, 1))
    net.faults.inject("kt_loss", "base_yaw")
    assert net.cycle() == [] and net.nodes.counters()["emcys_suppressed"] == 1
    assert net.nodes.nodes[1].drive.state == cia402.FAULT_REACTION_ACTIVE
    assert net.nodes.nodes[1].error_code == 0x7122


def test_heartbeat_producer_time_is_set_per_node_over_sdo():
    net = Net()
    net.write(2, 0x1017, 0, struct.pack("<H", 20))
    net.write(4, 0x1017, 0, struct.pack("<H", 0))
    beats = []
    for ms in range(1, 311):
        net.t = ms * 1e-3
        beats += [(ms, f.arbitration_id - 0x700) for f in net.nodes.heartbeats() if f.arbitration_id >= 0x700]

    def on_grid(node: int, first: int, period: int) -> bool:
        """The node beat on its grid up to 300 ms, each within the 1 ms the clock advances by."""
        times, want = [ms for ms, m in beats if m == node], range(first, 301, period)
        return len(times) == len(want) and all(0 <= t - w <= 1 for t, w in zip(times, want))
    assert on_grid(2, 20, 20)                          # 0x1017 = 20 ms from the write on
    assert on_grid(1, 100, 100) and on_grid(3, 150, 100)   # the map's 100 ms, staggered
    assert not [ms for ms, m in beats if m == 4]       # 0x1017 = 0: off


# ----------------------------------------------------------------------------- EDS
def test_each_eds_lists_every_object_of_its_node_in_cia306_sections(tmp_path):
    paths = export_eds(BUS, tmp_path)
    assert [p.name for p in paths] == ["canopen_cst_node1_base_yaw.eds", "canopen_cst_node2_shoulder_pitch.eds",
                                       "canopen_cst_node3_elbow.eds", "canopen_cst_node4_imu.eds"]
    nodes = DriveNodes(BUS, JOINTS, clock=lambda: 0.0).nodes
    for path, node in zip(paths, nodes.values()):
        eds = configparser.ConfigParser(interpolation=None)
        eds.optionxform = str
        eds.read_string(path.read_text(encoding="ascii"))
        assert eds["FileInfo"]["FileName"] == path.name and eds["DeviceInfo"]["BaudRate_1000"] == "1"
        listed = []
        for title in ("MandatoryObjects", "OptionalObjects", "ManufacturerObjects"):
            section = eds[title]
            entries = [int(section[str(k)], 16) for k in range(1, int(section["SupportedObjects"]) + 1)]
            assert len(section) == len(entries) + 1
            listed += entries
        assert sorted(listed) == sorted(o.index for o in node.od)       # every object, each listed once
        assert [i for i in listed if i in (0x1000, 0x1001, 0x1018)] == [0x1000, 0x1001, 0x1018]
        for obj in node.od:
            sec = eds[f"{obj.index:04X}"]
            assert sec["ParameterName"] == obj.name and int(sec["ObjectType"], 16) == obj.kind
            subs = [f"{obj.index:04X}sub{s:X}" for s in sorted(obj.entries)] if obj.kind != 0x7 else [f"{obj.index:04X}"]
            if obj.kind != 0x7:
                assert int(sec["SubNumber"]) == len(obj.entries)
            for name, entry in zip(subs, (obj.entries[s] for s in sorted(obj.entries))):
                e = eds[name]
                assert int(e["DataType"], 16) == entry.type.code and e["AccessType"] == entry.access
                assert e["PDOMapping"] == str(int(entry.pdo)) and "DefaultValue" in e
        sections = {s for s in eds.sections() if s[:4].isalnum() and s[:4] not in ("File", "Devi", "Dumm", "Comm")}
        sub_sections = {f"{o.index:04X}sub{s:X}" for o in node.od if o.kind != 0x7 for s in o.entries}
        assert sections - {"MandatoryObjects", "OptionalObjects", "ManufacturerObjects"} == \
            {f"{o.index:04X}" for o in node.od} | sub_sections


def test_bus_export_cli(tmp_path, capsys):
    assert hil(["bus", "export", str(ROOT / "configs" / "bus" / "canopen_cst.toml"), "--eds", str(tmp_path)]) == 0
    assert len(capsys.readouterr().out.split()) == 4 and len(list(tmp_path.glob("*.eds"))) == 4
    assert hil(["bus", "export", "compact_fd", "--eds", str(tmp_path / "x")]) == 2          # not CANopen
    assert "not a CANopen map" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert hil(["bus", "export", "no_such_map", "--eds", str(tmp_path)]) == 2
    assert "not a shipped map (canopen_cst, compact_classic" in capsys.readouterr().err
    assert hil(["bus", "export", "canopen_cst"]) == 2
    assert "nothing to export: give --dbc OUT.dbc and/or --c DIR and/or --eds DIR" in capsys.readouterr().err
