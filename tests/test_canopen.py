"""CANopen (configs/bus/canopen_cst.toml): the emulated CiA 402 drives and the firmware's NMT master.

In-process: the emulator (hil.runtime.loop.Emulator with firmware_bridge.canopen.network.DriveNodes) on one end
of an in-memory link, the test playing the master on the other, cycle by cycle through
Emulator.step_once(); the nodes' heartbeat clock is a fake the test advances. The drives apply
torque in CiA 402 Operation enabled only: `Rig.enable` walks them there over SDO (the drive node's
own behaviour is tested in test_canopen_node.py, with the canopen package as master in
test_canopen_master.py). Then one closed loop
through the CLI (`hil run ... --spawn-firmware --mode lockstep` over udp_loopback, SYNC-driven),
run twice to show that it is deterministic.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.canopen.master import CanopenMaster
from firmware_bridge.canopen.network import DriveNodes, is_canopen
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import (NMT_PRE_OPERATIONAL, NMT_RESET_COMMUNICATION, NMT_RESET_NODE, NMT_START,
                                           NMT_STOP, STATE_BOOTUP, STATE_OPERATIONAL, STATE_PRE_OPERATIONAL,
                                           STATE_STOPPED, BusMap, heartbeat_frame, nmt_frame, sync_frame)
from firmware_bridge.canopen.sdo_server import expedited_download
from firmware_bridge.wire.signals import SensorOutput
from hil.devices.drives import DriveBank
from hil.dynamics.plant import Plant
from hil.logs.runlog import read_run
from hil.runtime.lockstep import wait_for_command
from hil.runtime.loop import Emulator, RuntimeOptions
from links import memory_pair

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "configs" / "ella.toml"
MAP = ROOT / "configs" / "bus" / "canopen_cst.toml"
JOINTS = ("base_yaw", "shoulder_pitch", "elbow")
SCALE = np.array([0.08, 0.12, 0.03])         # N m per mille of rated torque (the map's signal scales)
TPDO1 = [0x181, 0x182, 0x183]
IMU = {0: 0x184, 1: 0x284}                    # accel on even, gyro on odd SYNCs
HEARTBEATS = [0x701, 0x702, 0x703, 0x704]
COUNTS_PER_RAD = 16384 / (2 * np.pi)


@pytest.fixture(scope="module")
def bus():
    return BusMap.load(MAP)


class Clock:
    """The nodes' heartbeat clock, advanced by the test."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


class Rig:
    """Emulator + DriveNodes behind an in-memory link; the test is the CANopen master."""

    def __init__(self, model, bus: BusMap, heartbeat_s: float | None = 0.1, preset_drives: bool = False, **options):
        """Ideal drives (the applied torque is exactly the command) unless `preset_drives`."""
        self.bus = bus
        self.plant = Plant(model)
        self.hold = self.plant.equilibrium_eta()[:3].copy()
        names = self.plant.layout.joint_names
        assert tuple(names) == JOINTS
        self.clock = Clock()
        self.nodes = DriveNodes(bus, names, heartbeat_s, clock=self.clock)
        self.emu_link, self.link = memory_pair()
        opts = RuntimeOptions(**{"mode": "afap", "realtime": False, "watchdog_s": 10.0, "start": "immediately",
                                 **options})
        self.emu = Emulator(self.plant, self.emu_link, self.nodes.commands,
                            SensorOutput(bus, names, self.nodes.own_ids), opts, protocol=self.nodes,
                            drives=None if preset_drives else DriveBank(self.plant, [None] * len(names)))
        self.nodes.attach(self.emu.faults, lambda: self.plant.tau)
        self.gear = np.array([b.joint.gear_ratio for b in model.bodies])

    def cycle(self, *frames: Frame) -> list[Frame]:
        """Send frames, run one emulator cycle, return what the emulator sent."""
        for f in frames:
            self.link.send(f)
        n = self.emu.cycle
        self.emu.step_once()
        assert self.emu.cycle == n + 1 and not self.emu_link.inbox
        return self.take()

    def take(self) -> list[Frame]:
        out = []
        while (f := self.link.recv()) is not None:
            out.append(f)
        return out

    def rpdos(self, tau) -> list[Frame]:
        return [self.bus.codec(f"rpdo1_{j}").encode([t]) for j, t in zip(JOINTS, tau)]

    def applied(self) -> np.ndarray:
        """The torque the last cycle applied (Plant.step keeps it in Plant.tau)."""
        return self.plant.tau[:3].copy()

    def quantized(self, tau) -> np.ndarray:
        return np.round(np.asarray(tau, float) / SCALE) * SCALE

    def enable(self, *nodes: int) -> None:
        """CiA 402 drives to Operation enabled over SDO (controlword 0x06, 0x07, 0x0F), in one cycle."""
        requests = [Frame(0x600 + n, expedited_download(0x6040, 0, cw.to_bytes(2, "little")))
                    for n in nodes for cw in (0x06, 0x07, 0x0F)]
        assert [(f.arbitration_id, f.data[:4]) for f in self.cycle(*requests)] == \
            [(0x580 + n, bytes((0x60, 0x40, 0x60, 0))) for n in nodes for _ in range(3)]
        assert all(self.nodes.nodes[n].enabled for n in nodes)

    def started(self) -> None:
        """Boot-up, the drives enabled, then NMT start of all nodes."""
        assert ids(self.cycle()) == HEARTBEATS
        self.enable(1, 2, 3)
        assert self.cycle(nmt_frame(NMT_START)) == []
        assert set(self.nodes.state.values()) == {STATE_OPERATIONAL}


def ids(frames: list[Frame]) -> list[int]:
    return [f.arbitration_id for f in frames]


def beats(frames: list[Frame]) -> dict[int, int]:
    return {f.arbitration_id - 0x700: f.data[0] for f in frames if 0x701 <= f.arbitration_id <= 0x77F}


# ----------------------------------------------------------------------------- map and helpers
def test_the_canopen_map_is_recognised_and_its_nodes_found(bus):
    assert is_canopen(bus)
    assert not is_canopen(BusMap.load(ROOT / "configs" / "bus" / "compact_classic.toml"))
    nodes = DriveNodes(bus, list(JOINTS), clock=Clock())
    assert nodes.node_ids == (1, 2, 3, 4) and nodes.joint_node == [1, 2, 3]
    assert nodes.heartbeat_s == pytest.approx(0.1)                        # 100 x 1 ms in the map
    assert nodes.phase_s == pytest.approx({1: 0.0, 2: 0.025, 3: 0.05, 4: 0.075})
    assert nodes.own_ids == frozenset(HEARTBEATS)
    master = CanopenMaster(bus, list(JOINTS))
    assert master.required == master.drives == (1, 2, 3) and master.own_ids == frozenset((0x000, 0x080))


# ----------------------------------------------------------------------------- NMT state machine
def test_boot_up_then_pre_operational_nodes_send_nothing_but_heartbeats(model, bus):
    rig = Rig(model, bus)
    sent = rig.cycle()
    assert [(f.arbitration_id, f.data) for f in sent] == [(i, bytes((STATE_BOOTUP,))) for i in HEARTBEATS]
    assert set(rig.nodes.state.values()) == {STATE_PRE_OPERATIONAL}
    assert rig.nodes.counters()["drives"] == {str(n): "switch on disabled" for n in (1, 2, 3)}
    tau = rig.quantized(rig.hold + [3.0, -4.0, 1.0])
    for _ in range(5):                         # SYNCs and RPDOs get no answer, the RPDOs are dropped
        assert rig.cycle(sync_frame(), *rig.rpdos(tau)) == []
        assert np.array_equal(rig.applied(), np.zeros(3))     # disabled drives: the safe state (zero torque)
        assert rig.nodes.safe.all()
    rig.clock.t += 0.2
    assert beats(rig.cycle(sync_frame())) == {n: STATE_PRE_OPERATIONAL for n in (1, 2, 3, 4)}
    c = rig.nodes.counters()
    assert c["rpdos_ignored"] == 15 and c["syncs"] == 6 and c["tpdos_sent"] == 0 and c["bootups_sent"] == 4
    assert rig.emu.commands.counters()["accepted"] == 0


def test_nmt_start_makes_each_sync_answered_with_the_tpdos_of_the_stepped_state(model, bus):
    rig = Rig(model, bus)
    rig.started()
    assert all(rig.plant.layout.motor_of_joint[k] < 0 for k in range(3))     # ELLA: stiff joints
    tau = rig.quantized(rig.hold + [20.0, -30.0, 6.0])
    assert rig.cycle(*rig.rpdos(tau)) == []        # no SYNC, no TPDOs (the RPDOs are taken)
    assert np.array_equal(rig.applied(), tau)
    for k in range(4):
        sent = rig.cycle(sync_frame())
        assert ids(sent) == TPDO1 + [IMU[k % 2]]
        counts = rig.emu.sensors.counts
        qd_counts = rig.gear * rig.plant.vel[:3] * COUNTS_PER_RAD     # after this cycle's step
        for j, f in enumerate(sent[:3]):
            codec = bus.by_id(f.arbitration_id)
            enc, vel = codec.decode(f)
            assert enc == counts[j]
            assert abs(vel - qd_counts[j]) <= 0.5
            assert vel != 0.0                       # the arm moves under the torque step
    assert rig.cycle() == []                        # a cycle without SYNC: nothing
    c = rig.nodes.counters()
    assert c["syncs"] == c["syncs_answered"] == 4 and c["tpdos_sent"] == 16 and c["rpdos_ignored"] == 0


def test_rpdos_are_ignored_and_counted_unless_their_node_is_operational(model, bus):
    rig = Rig(model, bus)
    rig.cycle()
    rig.enable(1, 2, 3)                        # enabled in pre-operational: target torque 0 applies
    tau_a = rig.quantized(rig.hold + [5.0, 5.0, 5.0])
    rig.cycle(*rig.rpdos(tau_a))
    assert np.array_equal(rig.applied(), np.zeros(3))
    assert rig.nodes.counters()["rpdos_ignored"] == 3 and rig.emu.commands.counters()["accepted"] == 0
    # NMT start of node 2 only, ahead of the RPDOs: only shoulder_pitch takes its torque
    sent = rig.cycle(nmt_frame(NMT_START, 2), *rig.rpdos(tau_a), sync_frame())
    assert np.array_equal(rig.applied(), [0.0, tau_a[1], 0.0])
    assert ids(sent) == [0x182]                     # only node 2 answers the SYNC
    assert rig.nodes.counters()["rpdos_ignored"] == 5 and rig.emu.commands.counters()["accepted"] == 1


def test_a_stopped_node_closes_its_holding_brake_and_opens_it_when_started(model, bus):
    rig = Rig(model, bus, preset_drives=True, safe_state="brake")
    rig.started()
    hold = rig.quantized(rig.hold)
    rig.cycle(*rig.rpdos(hold), sync_frame())
    assert not rig.emu.drives.brake_engaged.any()
    rig.cycle(nmt_frame(NMT_STOP, 3), *rig.rpdos(hold), sync_frame())
    assert rig.emu.drives.brake_engaged.tolist() == [False, False, True]      # node 3: the elbow
    for _ in range(20):
        rig.cycle(*rig.rpdos(hold), sync_frame())
    assert rig.plant.vel[2] == 0.0 and rig.emu.drives.brake_engaged[2]
    rig.cycle(nmt_frame(NMT_START, 3), *rig.rpdos(hold), sync_frame())
    assert not rig.emu.drives.brake_engaged.any() and rig.emu.watchdog.trips == 0


@pytest.mark.parametrize("safe_state", ["zero_torque", "brake"])
def test_nmt_stop_silences_the_pdos_and_puts_the_joints_in_the_safe_state(model, bus, safe_state):
    rig = Rig(model, bus, safe_state=safe_state)
    rig.started()
    c_brake = rig.emu.opt.brake_damping_N_m_s_rad

    def safe(qd: np.ndarray) -> np.ndarray:
        return np.zeros_like(qd) if safe_state == "zero_torque" else -c_brake * qd

    tau_a = rig.quantized(rig.hold + [30.0, -40.0, 8.0])
    assert ids(rig.cycle(*rig.rpdos(tau_a), sync_frame())) == TPDO1 + [IMU[0]]
    assert np.array_equal(rig.applied(), tau_a)
    # node 3 stopped: elbow in the safe state, the others follow their RPDOs; no TPDO from node 3
    tau_b = rig.quantized(rig.hold + [-10.0, 12.0, -3.0])
    qd = rig.plant.vel[:3].copy()
    sent = rig.cycle(nmt_frame(NMT_STOP, 3), *rig.rpdos(tau_b), sync_frame())
    assert ids(sent) == [0x181, 0x182, IMU[1]]
    assert np.array_equal(rig.applied(), [tau_b[0], tau_b[1], safe(qd)[2]])
    # all stopped: no PDO at all, every joint in the safe state, heartbeats say "stopped"
    qd = rig.plant.vel[:3].copy()
    assert rig.cycle(nmt_frame(NMT_STOP), *rig.rpdos(tau_a), sync_frame()) == []
    assert np.array_equal(rig.applied(), safe(qd))
    rig.clock.t += 0.2
    assert beats(rig.cycle(sync_frame())) == {n: STATE_STOPPED for n in (1, 2, 3, 4)}
    c = rig.nodes.counters()
    assert c["rpdos_ignored"] == 1 + 3 and c["syncs"] == 4 and c["tpdos_sent"] == 4 + 3
    assert rig.emu.watchdog.trips == 0              # the safe state came from NMT, not the watchdog
    # started again: the new RPDOs apply and the TPDOs return
    tau_c = rig.quantized(rig.hold + [1.0, 2.0, 3.0])
    assert ids(rig.cycle(nmt_frame(NMT_START), *rig.rpdos(tau_c), sync_frame())) == TPDO1 + [IMU[0]]
    assert np.array_equal(rig.applied(), tau_c)


def test_pre_operational_and_resets_follow_cia301(model, bus):
    rig = Rig(model, bus)
    rig.started()
    tau = rig.quantized(rig.hold + [2.0, 2.0, 2.0])
    rig.cycle(*rig.rpdos(tau))
    # reset node 2: boot-up message, pre-operational, its joint in the safe state (it left operational)
    sent = rig.cycle(nmt_frame(NMT_RESET_NODE, 2), sync_frame())
    assert [(f.arbitration_id, f.data) for f in sent] == [(0x702, b"\x00"), (0x181, sent[1].data),
                                                          (0x183, sent[2].data), (IMU[0], sent[3].data)]
    assert rig.nodes.state[2] == STATE_PRE_OPERATIONAL
    assert np.array_equal(rig.applied(), [tau[0], 0.0, tau[2]])
    # enter pre-operational (all): PDOs stop, every joint safe
    assert rig.cycle(nmt_frame(NMT_PRE_OPERATIONAL), sync_frame()) == []
    assert np.array_equal(rig.applied(), np.zeros(3))
    # reset communication (all): boot-up messages of every node, then pre-operational heartbeats
    assert [(f.arbitration_id, f.data) for f in rig.cycle(nmt_frame(NMT_RESET_COMMUNICATION))] == \
        [(i, b"\x00") for i in HEARTBEATS]
    # not ours, malformed, or a SYNC with a counter byte the map does not have: ignored, counted
    assert rig.cycle(nmt_frame(NMT_START, 9), Frame(0x000, b"\x01"), Frame(0x000, b"\x03\x00"),
                     sync_frame(5)) == []
    assert set(rig.nodes.state.values()) == {STATE_PRE_OPERATIONAL}
    c = rig.nodes.counters()
    assert (c["nmt_other_node"], c["nmt_invalid"], c["syncs_invalid"]) == (1, 2, 1)
    assert rig.emu.commands.counters()["rejected"] == {k: 0 for k in rig.emu.commands.counters()["rejected"]}
    # reset node put node 2's drive back to Switch on disabled; reset communication left the others enabled
    assert c["drives"] == {"1": "operation enabled", "2": "switch on disabled", "3": "operation enabled"}
    rig.enable(2)
    sent = rig.cycle(nmt_frame(NMT_START), *rig.rpdos(tau), sync_frame())
    assert ids(sent) == TPDO1 + [IMU[0]] and np.array_equal(rig.applied(), tau)


def test_heartbeats_every_producer_time_staggered_per_node(bus):
    def schedule(heartbeat_s, span_s=0.5, start_at=None):
        clock = Clock(0.0)
        nodes = DriveNodes(bus, list(JOINTS), heartbeat_s, clock=clock)
        boot = nodes.heartbeats()
        assert [(f.arbitration_id, f.data[0]) for f in boot] == [(i, STATE_BOOTUP) for i in HEARTBEATS]
        got = []
        for ms in range(1, int(span_s * 1000) + 1):
            clock.t = ms * 1e-3
            if start_at is not None and ms == round(start_at * 1000):
                assert nodes.receive(nmt_frame(NMT_START))
            got += [(ms, f.arbitration_id - 0x700, f.data[0]) for f in nodes.heartbeats()]
        return nodes, clock, got

    def on_grid(got, node, first_ms, period_ms, span_ms):
        """The node's heartbeats came on its grid, each within the 1 ms the clock advances by."""
        times = [ms for ms, n, _ in got if n == node]
        want = np.arange(first_ms, span_ms, period_ms)       # no beat due within 5 ms of the span's end
        return len(times) == len(want) and all(0 <= t - w < 1 + 1e-9 for t, w in zip(times, want))

    _, _, got = schedule(None, span_s=0.49)     # the map's: 100 ms, staggered by 25 ms
    for n in (1, 2, 3, 4):
        assert on_grid(got, n, 100 + 25 * (n - 1), 100, 490), (n, got)
    assert {s for *_, s in got} == {STATE_PRE_OPERATIONAL}

    nodes, clock, got = schedule(0.05, span_s=0.295, start_at=0.155)   # configurable: 50 ms, 12.5 ms stagger
    for n in (1, 2, 3, 4):
        assert on_grid(got, n, 50 + 12.5 * (n - 1), 50, 295), (n, got)
    assert all(s == (STATE_OPERATIONAL if ms >= 155 else STATE_PRE_OPERATIONAL) for ms, _, s in got)
    clock.t += 1.0                              # a long pause: one heartbeat per node, no burst
    assert sorted(f.arbitration_id for f in nodes.heartbeats()) == HEARTBEATS
    assert nodes.heartbeats() == []

    _, _, got = schedule(0.0)                   # 0: off (the boot-up message still goes out)
    assert got == []


def test_lockstep_waits_for_a_sync_and_keeps_beating_meanwhile(model, bus):
    rig = Rig(model, bus, mode="lockstep", lockstep_timeout_s=0.05)
    tau = rig.quantized(rig.hold + [4.0, 4.0, 4.0])
    for n in (1, 2, 3):
        for cw in (0x06, 0x07, 0x0F):
            rig.link.send(Frame(0x600 + n, expedited_download(0x6040, 0, cw.to_bytes(2, "little"))))
    rig.link.send(nmt_frame(NMT_START))
    for f in rig.rpdos(tau):
        rig.link.send(f)
    assert wait_for_command(rig.emu) is False          # commands, but no SYNC: no step
    # the boot-up and the SDO answers went out while waiting
    assert ids(rig.take()) == HEARTBEATS + [0x580 + n for n in (1, 2, 3) for _ in range(3)]
    assert rig.emu.cycle == 0 and rig.emu.commands.counters()["accepted"] == 3
    rig.clock.t += 0.2
    rig.link.send(sync_frame())
    assert wait_for_command(rig.emu) is True
    assert beats(rig.take()) == {n: STATE_OPERATIONAL for n in (1, 2, 3, 4)}
    rig.emu.step_once()
    assert rig.emu.cycle == 1 and np.array_equal(rig.applied(), tau)
    assert ids(rig.take()) == TPDO1 + [IMU[0]]
    assert rig.emu.watchdog.events == []                 # the RPDOs taken while waiting were fresh


def test_the_watchdog_still_applies(model, bus):
    rig = Rig(model, bus, watchdog_s=0.005)
    rig.started()
    tau = rig.quantized(rig.hold + [1.0, 1.0, 1.0])
    rig.cycle(*rig.rpdos(tau), sync_frame())
    for _ in range(8):                                   # SYNCs only: no valid RPDO for 8 ms
        assert ids(rig.cycle(sync_frame()))[:3] == TPDO1
    assert rig.emu.watchdog.tripped and np.array_equal(rig.applied(), np.zeros(3))
    rig.cycle(*rig.rpdos(tau), sync_frame())
    assert not rig.emu.watchdog.tripped and np.array_equal(rig.applied(), tau)


def _confirm(request: Frame) -> Frame:
    """The drive's confirmation of an expedited download."""
    return Frame(request.arbitration_id - 0x80, bytes((0x60,)) + request.data[1:4] + bytes(4))


def test_master_enables_the_drives_then_starts_the_network(bus):
    master = CanopenMaster(bus, list(JOINTS))
    assert master.is_protocol(heartbeat_frame(4, STATE_BOOTUP)) and not master.is_protocol(sync_frame())
    assert master.is_protocol(Frame(0x582, bytes(8))) and master.is_protocol(Frame(0x083, bytes(8)))
    assert not master.is_protocol(Frame(0x183, bytes(8)))
    assert master.on_frame(heartbeat_frame(1, STATE_BOOTUP)) == []
    assert master.on_frame(heartbeat_frame(3, STATE_PRE_OPERATIONAL)) == []
    # every drive reported: each gets its enabling sequence, one download at a time, in parallel
    sent = master.on_frame(heartbeat_frame(2, STATE_BOOTUP))
    assert sent == [Frame(0x600 + n, expedited_download(0x6060, 0, bytes((10,)))) for n in (1, 2, 3)]
    assert not master.started
    steps = {n: [f.data for f in sent if f.arbitration_id == 0x600 + n] for n in (1, 2, 3)}
    pending = list(sent)
    while pending:
        request = pending.pop(0)
        answer = master.on_frame(_confirm(request))
        steps[request.arbitration_id - 0x600] += [f.data for f in answer if f.arbitration_id >= 0x600]
        pending += [f for f in answer if f.arbitration_id >= 0x600]
        if not pending:
            assert answer == [nmt_frame(NMT_START, 0), sync_frame()]      # the last confirmation starts
        else:
            assert not master.started
    controlwords = [expedited_download(0x6040, 0, cw.to_bytes(2, "little")) for cw in (0x06, 0x07, 0x0F)]
    assert all(steps[n] == [expedited_download(0x6060, 0, bytes((10,)))] + controlwords for n in (1, 2, 3))
    assert master.started and master.syncs == 1 and master.c["sdo_confirmed"] == 12 and master.errors == []
    assert master.on_frame(heartbeat_frame(2, STATE_OPERATIONAL)) == []
    # a rebooted drive is enabled again, then started on its own; an abort is reported, the node started
    first = master.on_frame(heartbeat_frame(2, STATE_BOOTUP))
    assert first == [Frame(0x602, expedited_download(0x6060, 0, bytes((10,))))]
    abort = Frame(0x582, bytes((0x80, 0x60, 0x60, 0)) + (0x06090030).to_bytes(4, "little"))
    assert master.on_frame(abort) == [nmt_frame(NMT_START, 2)]
    assert master.errors == ["node 2: SDO abort 0x06090030 writing 0x6060sub0"]
    assert master.on_frame(abort) == [] and master.c["sdo_unexpected"] == 1      # nothing pending for it
    assert master.on_frame(Frame(0x083, bytes((0x05, 0x73, 0x21, 0, 0, 0, 0, 0)))) == []
    assert master.stats()["emcys"] == ["node 3: 0x7305"]
    assert master.sync() == sync_frame() and master.syncs == 2
    assert master.stop() == nmt_frame(NMT_STOP, 0)


# ----------------------------------------------------------------------------- closed loop (CLI)
DURATION_S = 4.0
CYCLES = round(DURATION_S / 1e-3)


def _run(channel: str, *extra: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "hil", "run", str(ARM), "--bus", str(MAP),
                           "--link", f"can:udp_loopback:{channel},nodes=2", "--spawn-firmware", "--mode", "lockstep",
                           "--no-realtime", "--duration", str(DURATION_S), "--targets", "seed000_setpoints", "--json",
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, f"hil run failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return json.loads([line for line in proc.stdout.splitlines() if line.strip()][-1])


def test_closed_loop_sync_driven_lockstep_reaches_the_set_points(tmp_path):
    runs = []
    for k in range(2):
        log = tmp_path / f"run{k}.msgpack"
        s = _run(f"canopen-{os.getpid()}-{k}", "--log", str(log))
        runs.append((s, log))
        assert s["halted"] is None and s["cycles"] == CYCLES
        for v in s["verdicts"]:
            assert not v["name"].startswith("setpoint_") or v["value"] < 1e-3, v
        assert s["watchdog"]["trips"] == 0
        emu_link, cmds, co = s["link"], s["commands"], s["canopen"]
        assert all(v == 0 for v in cmds["rejected"].values()), cmds
        assert cmds["accepted"] == 3 * (CYCLES - 1)       # the RPDOs of every SYNC but the last
        assert co["nodes"] == {str(n): "operational" for n in (1, 2, 3, 4)}
        assert co["syncs"] == co["syncs_answered"] == CYCLES and co["syncs_merged"] == 0
        assert co["tpdos_sent"] == 4 * CYCLES               # 3 drives + the IMU every SYNC
        assert co["rpdos_ignored"] == co["syncs_invalid"] == co["nmt_invalid"] == 0
        assert co["bootups_sent"] == 4 and co["heartbeats_sent"] > 0
        fw = s["firmware"]
        fw_link, sensors, master = fw["link"], fw["sensors"], fw["canopen"]
        assert fw["cycles"] == CYCLES and np.max(np.abs(fw["q_error"])) < 1e-3
        assert all(v == 0 for v in sensors["rejected"].values()), sensors
        assert master["started"] and master["syncs"] == CYCLES and master["heartbeats_invalid"] == 0
        assert master["sdo_sent"] == master["sdo_confirmed"] == co["sdo_requests"] == 12 and co["sdo_aborts"] == 0
        assert co["drives"] == {str(n): "operation enabled" for n in (1, 2, 3)} and master["errors"] == []
        assert sensors["accepted"] + master["heartbeats"] + master["sdo_confirmed"] == fw_link["rx_frames"]
        for link in (emu_link, fw_link):
            for key in ("rx_crc_errors", "rx_framing_errors", "rx_garbage_bytes", "rx_overruns", "tx_dropped"):
                assert link[key] == 0, (key, link)
        # everything sent was read, but the last SYNC's IMU TPDO and the last RPDOs + NMT stop
        assert emu_link["tx_frames"] - fw_link["rx_frames"] == 1
        assert fw_link["tx_frames"] - emu_link["rx_frames"] == 4
    tables = []
    for _, log in runs:
        header, rows = read_run(log)
        keep = [i for i, c in enumerate(header["columns"]) if not c.endswith("_us")]
        tables.append(rows[:, keep])
    assert tables[0].shape[0] == CYCLES and tables[0].tobytes() == tables[1].tobytes()
