"""A flood cannot push a cycle past its deadline: every receive does bounded work, a cycle takes at
most its budget of frames and drops the rest (counted), and every link-level rejection, UDP
datagrams included, shows in the link's counters. Counted in frames, never in wall time."""
from __future__ import annotations

import os
import socket
from pathlib import Path

import can
import numpy as np
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.links.can import CanLink
from firmware_bridge.links.serial import READ_SIZE, SerialLink, open_pty_pair
from firmware_bridge.links.udp_loopback import UdpLoopbackBus
from firmware_bridge.wire.framing import encode_frame
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.devices.drives import DriveBank
from hil.dynamics.plant import Plant
from hil.model.config import load_model
from hil.runtime.loop import Emulator, RuntimeOptions
from hil.runtime.receive import ReceiveBudget

from links import MemoryLink

ROOT = Path(__file__).resolve().parent.parent
BUS = ROOT / "configs" / "bus"
NAMES = ["base_yaw", "shoulder_pitch", "elbow"]


class FloodingLink(MemoryLink):
    """Each sensor frame is answered by `flood` malformed frames followed by the good command;
    counts the frames recv() hands out per cycle."""

    def __init__(self, bus: BusMap, flood: int, hold: np.ndarray):
        super().__init__("flood")
        self.cmd = bus.codec("cmd_torque")
        self.flood, self.hold, self.cues = flood, hold, 0
        self.taken_per_cycle: list[int] = []
        self.discarded = 0

    def send(self, frame: Frame) -> bool:
        self.taken_per_cycle.append(0)
        good = self.cmd.encode([*self.hold, 0], counter=self.cues)
        self.inbox.extend([Frame(good.arbitration_id, good.data[:3], good.is_fd)] * self.flood + [good])
        self.cues += 1
        return True

    def recv(self) -> Frame | None:
        frame = super().recv()
        if frame is not None:
            self.taken_per_cycle[-1] += 1
        return frame

    def discard(self) -> int:
        n = len(self.inbox)
        self.inbox.clear()
        self.discarded += n
        self.counters.rx_over_budget += n
        return n


def flood_run(flood: int, **options) -> tuple[dict, FloodingLink]:
    bus = BusMap.load(BUS / "compact_fd.toml")
    plant = Plant(load_model(ROOT / "configs" / "ella.toml"))
    hold = np.round(plant.equilibrium_eta() / 0.02) * 0.02
    link = FloodingLink(bus, flood, hold)
    opts = RuntimeOptions(mode="afap", realtime=False, duration_s=0.1, start="immediately", **options)
    emu = Emulator(plant, link, CommandInput(bus, NAMES), SensorOutput(bus, NAMES), opts,
                   drives=DriveBank(plant, [None] * 3))
    return emu.run(), link


def test_a_flood_is_cut_at_the_cycles_frame_budget_and_the_rest_dropped_counted():
    summary, link = flood_run(1000, receive_frames=64)
    assert max(link.taken_per_cycle) == 64                   # never more than the budget in one cycle
    n = summary["cycles"]
    assert summary["receive"]["cycles_over_budget"] == n
    assert summary["receive"]["frames_dropped"] == link.discarded == n * (1001 - 64)
    assert summary["link"]["rx_over_budget"] == link.discarded
    assert summary["commands"]["rejected"]["length"] == n * 64
    # the good command came last and was dropped with the flood: the watchdog acts, nothing else does
    assert summary["commands"]["accepted"] == 0 and summary["watchdog"]["trips"] == 1


def test_within_the_budget_nothing_is_dropped():
    summary, link = flood_run(10, receive_frames=64)
    assert summary["receive"]["cycles_over_budget"] == 0 and summary["receive"]["frames_dropped"] == 0
    assert summary["commands"]["accepted"] == summary["cycles"] and summary["watchdog"]["trips"] == 0


def test_the_time_budget_ends_a_cycles_receiving():
    budget = ReceiveBudget(frames=10**6, seconds=1e-9)         # spent after the first frame
    link = MemoryLink("x")
    link.inbox.extend([Frame(1, b"")] * 50)
    out: list[Frame] = []
    budget.take(link, out)
    assert len(out) == 1 and budget.cycles_over == 1 and len(link.inbox) == 49   # MemoryLink cannot discard


def test_a_serial_recv_reads_a_bounded_chunk_and_discard_flushes_the_rest():
    master, slave_path = open_pty_pair()
    emu, fw = SerialLink.from_fd(master), SerialLink(slave_path)
    try:
        packet = encode_frame(Frame(0x01, bytes(7)))
        burst = packet * 1000                                    # 12 kB
        os.write(fw.fileno(), burst)
        import select
        select.select([master], [], [], 2.0)
        first = emu.recv()
        assert first is not None
        taken = 1 + len(emu._received)
        assert taken <= READ_SIZE // len(packet) + 1              # one read of at most READ_SIZE bytes
        dropped = emu.discard()
        assert dropped == taken - 1 and emu.counters.rx_over_budget == dropped
        assert emu.recv() is None or emu.counters.rx_garbage_bytes > 0
    finally:
        fw.close()
        emu.close()


# ----------------------------------------------------------------------------- UDP loopback
def test_malformed_udp_datagrams_show_in_the_link_counters_and_are_bounded_per_receive():
    link = CanLink("udp_loopback", "integrity-test", fd=True, nodes=2, node=0)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        port = link.bus.port
        for _ in range(40):
            sender.sendto(b"garbage", ("127.0.0.1", port))
        peer = UdpLoopbackBus("integrity-test", nodes=2, node=1)
        peer.send(can.Message(arbitration_id=0x100, data=bytes(8), is_fd=True, is_extended_id=False))
        peer.shutdown()
        import select
        select.select([link.fileno()], [], [], 2.0)
        assert link.recv() is None                               # 16 malformed datagrams: a bounded receive
        assert link.counters.rx_framing_errors == 16
        frames = []
        while len(frames) < 1:
            f = link.recv()
            if f is not None:
                frames.append(f)
        assert link.counters.rx_framing_errors == 40 and frames[0].arbitration_id == 0x100
    finally:
        sender.close()
        link.close()


def test_udp_discard_drops_waiting_datagrams():
    bus = UdpLoopbackBus("integrity-discard", nodes=2, node=0)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _ in range(30):
            sender.sendto(b"x" * 30, ("127.0.0.1", bus.port))
        import select
        select.select([bus.fileno()], [], [], 2.0)
        assert bus.discard(10) == 10
        assert bus.discard(100) == 20 and bus.discard(100) == 0
    finally:
        sender.close()
        bus.shutdown()


@pytest.mark.parametrize("limit", [1, 5])
def test_can_link_discard_without_a_bus_discard_is_bounded(limit, monkeypatch):
    import firmware_bridge.links.can as cl
    monkeypatch.setattr(cl, "_DISCARD_LIMIT", limit)
    a = CanLink("virtual", "integrity-discard", receive_own_messages=False)
    b = can.Bus(interface="virtual", channel="integrity-discard")
    try:
        for _ in range(10):
            b.send(can.Message(arbitration_id=1, data=b"", is_extended_id=False))
        assert a.discard() == limit and a.counters.rx_over_budget == limit
    finally:
        a.close()
        b.shutdown()


def test_afap_and_lockstep_have_no_time_budget_so_runs_stay_deterministic():
    summary, _ = flood_run(10)
    assert summary["receive"]["seconds_per_cycle"] is None and summary["receive"]["frames_per_cycle"] == 64
