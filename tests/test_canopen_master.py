"""The emulated CANopen drives with a third-party master: the `canopen` package (python-can `virtual` bus).

The emulator (ELLA, configs/bus/canopen_cst.toml, lockstep: one step per SYNC) runs in a thread behind
python-can's in-process virtual bus; the test is the master, with the package's network, SDO client,
PDO maps and EMCY consumer, its nodes' dictionaries loaded from the EDS files `hil bus export` writes.
It reads and writes objects over SDO (expedited and segmented), gets aborts for what the drive must
refuse, remaps a TPDO and an RPDO, walks the CiA 402 state machine to Operation enabled, closes the
cyclic synchronous torque loop to the set-points with the reference controller's law, then injects
an encoder fault, sees the EMCY and the statusword's fault bit and resets the fault.
"""
from __future__ import annotations

import queue
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

canopen = pytest.importorskip("canopen")

from firmware_bridge.reference.controller import ELLA_SETPOINTS   # noqa: E402
from firmware_bridge.reference.firmware import Firmware            # noqa: E402
from firmware_bridge.wire.messages import BusMap                       # noqa: E402
from hil.cli.main import main as hil                                # noqa: E402
from hil.faults.spec import Fault                                   # noqa: E402
from hil.runtime.launch import REFERENCE_PARAMS, build_emulator     # noqa: E402
from hil.runtime.loop import RuntimeOptions                          # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "configs" / "ella.toml"
MAP = ROOT / "configs" / "bus" / "canopen_cst.toml"
JOINTS = ("base_yaw", "shoulder_pitch", "elbow")
SCALE = (0.08, 0.12, 0.03)                    # N m per mille (the map's rated torques / 1000)
WAIT_S = 10.0                                 # a frame that does not come within this is a failure, not a timing
FAULT, OPERATION_ENABLED, SWITCH_ON_DISABLED = 0x0008, 0x0027, 0x0040


class Master:
    """The canopen network on a virtual bus, the emulator in a thread on the same channel."""

    def __init__(self, eds_dir: Path, channel: str):
        self.eds_dir = eds_dir
        self.network = canopen.Network()
        self.network.connect(interface="virtual", channel=channel)
        self.bootups: queue.Queue = queue.Queue()
        self.emcys: queue.Queue = queue.Queue()
        self.tpdos: queue.Queue = queue.Queue()
        self.nodes = {}
        for n, joint in enumerate(JOINTS + ("imu",), 1):
            node = self.network.add_node(n, str(eds_dir / f"canopen_cst_node{n}_{joint}.eds"))
            node.sdo.RESPONSE_TIMEOUT = WAIT_S
            node.emcy.add_callback(lambda e, n=n: self.emcys.put((n, e.code, e.register)))
            self.network.subscribe(0x700 + n, lambda cob, data, t: data[0] == 0 and self.bootups.put(cob - 0x700))
            self.nodes[n] = node
        opts = RuntimeOptions(mode="lockstep", realtime=False, lockstep_timeout_s=60.0, watchdog_s=0.05)
        self.emu = build_emulator(ARM, MAP, f"can:virtual:{channel}", opts).emulator
        self.summary = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert sorted(self.bootups.get(timeout=WAIT_S) for _ in range(4)) == [1, 2, 3, 4]

    def _run(self) -> None:
        self.summary = self.emu.run()

    def close(self) -> None:
        self.emu.stop_requested = True
        self.thread.join(timeout=WAIT_S)
        self.network.disconnect()
        self.emu.link.close()

    def statusword(self, n: int) -> int:
        return self.nodes[n].sdo[0x6041].raw

    def sync(self) -> dict[int, tuple[int, int]]:
        """One SYNC: the (statusword, position) TPDO1 of each drive, as remapped."""
        self.network.sync.transmit()
        got = {}
        while len(got) < 3:
            n, status, position = self.tpdos.get(timeout=WAIT_S)
            got[n] = (status, position)
        return got

    def command(self, controlword: int, tau: np.ndarray) -> None:
        """The remapped RPDO1 of each drive: controlword and target torque [per mille]."""
        for k, n in enumerate((1, 2, 3)):
            rpdo = self.nodes[n].rpdo[1]
            rpdo["Controlword"].raw = controlword
            rpdo["Target torque"].raw = int(np.clip(round(tau[k] / SCALE[k]), -3000, 3000))
            rpdo.transmit()


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    eds_dir = tmp_path_factory.mktemp("eds")
    assert hil(["bus", "export", "canopen_cst", "--eds", str(eds_dir)]) == 0
    m = Master(eds_dir, f"ella-canopen-{id(eds_dir)}")
    yield m
    m.close()


def test_the_exported_eds_describes_the_node_that_answers(master):
    od = master.nodes[3].object_dictionary
    sdo = master.nodes[3].sdo
    for index in (0x1000, 0x1008, 0x1017, 0x6060, 0x6072, 0x6076, 0x6502):
        assert sdo[index].raw == od[index].default, hex(index)       # the EDS defaults are the node's values
    assert sdo[0x1018][4].raw == 3 and od[0x1400][1].default == 0x203 and od[0x1A00][1].default == 0x60640020
    assert (od[0x6071].min, od[0x6071].max) == (-3000, 3000)
    assert od[0x6041].pdo_mappable and not od[0x6076].pdo_mappable
    assert od[0x6041].access_type == "ro" and od[0x6040].access_type == "rw" and od[0x1000].access_type == "const"
    # the node's own COB-IDs are node-id relative: the same file describes a drive at node 9
    od9 = canopen.import_od(str(master.eds_dir / "canopen_cst_node3_elbow.eds"), 9)
    assert (od9[0x1400][1].default, od9[0x1800][1].default, od9[0x1014].default) == (0x209, 0x189, 0x89)
    assert od9[0x1401][1].default == 0x80000309                       # RPDO2: not valid by default


def test_sdo_expedited_segmented_and_aborts(master):
    node = master.nodes[2]
    assert node.sdo[0x1000].raw == 0x00020192                           # expedited upload
    assert node.sdo[0x1008].raw == "ELLA HIL emulated joint drive, shoulder_pitch"   # segmented upload
    node.sdo[0x1017].raw = 80                                           # expedited download
    assert node.sdo[0x1017].raw == 80
    node.sdo.download(0x1017, 0, struct.pack("<H", 100), force_segment=True)   # segmented download
    assert node.sdo[0x1017].raw == 100
    for call, code in ((lambda: node.sdo.upload(0x2FFF, 0), 0x06020000),        # object does not exist
                       (lambda: node.sdo.upload(0x1018, 7), 0x06090011),        # sub-index does not exist
                       (lambda: node.sdo.download(0x6040, 0, b"\x06"), 0x06070010),       # length mismatch
                       (lambda: node.sdo.download(0x6041, 0, b"\x00\x00"), 0x06010002),   # read only
                       (lambda: node.sdo.download(0x6071, 0, struct.pack("<h", 3001)), 0x06090031),
                       (lambda: node.sdo.download(0x6060, 0, b"\x04"), 0x06090030)):      # mode not supported
        with pytest.raises(canopen.SdoAbortedError) as exc:
            call()
        assert exc.value.code == code
    with pytest.raises(canopen.SdoAbortedError) as exc:                 # block transfer: not supported
        with node.sdo.open(0x1008, 0, "rb", block_transfer=True) as f:
            f.read()
    assert exc.value.code == 0x05040001
    assert node.sdo[0x1008].raw.startswith("ELLA")                      # the server is fine afterwards


def test_remapped_pdos_state_machine_cst_loop_fault_and_reset(master):
    net = master.network
    for n in (1, 2, 3):
        node = master.nodes[n]
        # a mapping entry written while the PDO is valid is refused (CiA 301 sequence)
        with pytest.raises(canopen.SdoAbortedError) as exc:
            node.sdo[0x1A00][1].raw = 0x60410010
        assert exc.value.code == 0x06010000
        node.tpdo.read()
        tpdo = node.tpdo[1]
        tpdo.clear()
        tpdo.add_variable(0x6041)
        tpdo.add_variable(0x6064)
        tpdo.trans_type = 1
        tpdo.enabled = True
        tpdo.save()
        tpdo.add_callback(lambda m, n=n: master.tpdos.put((n, m["Statusword"].raw, m["Position actual value"].raw)))
        node.rpdo.read()
        rpdo = node.rpdo[1]
        rpdo.clear()
        rpdo.add_variable(0x6040)
        rpdo.add_variable(0x6071)
        rpdo.enabled = True
        rpdo.save()
        assert node.sdo[0x1A00][0].raw == 2 and node.sdo[0x1600][2].raw == 0x60710010
    # CiA 402 walk over SDO, before the network starts
    for cw, state in ((0x0F, SWITCH_ON_DISABLED), (0x06, 0x0021), (0x07, 0x0023), (0x0F, OPERATION_ENABLED)):
        for n in (1, 2, 3):
            master.nodes[n].sdo[0x6040].raw = cw
            assert master.statusword(n) & 0x6F == state, (n, hex(cw))
    net.nmt.state = "OPERATIONAL"
    # the cyclic synchronous torque loop: SYNC -> TPDOs -> reference controller -> RPDOs
    fw = Firmware(BusMap.load(MAP), str(REFERENCE_PARAMS), move_time_s=1.0)
    ctl, gravity = fw.ctl, fw.gravity
    cycles = 3000      # the integral action removes the error of the firmware's nominal gravity model: 1 mrad at 2.6 s
    for k in range(1, cycles + 1):
        got = master.sync()
        assert all(status & 0x6F == OPERATION_ENABLED for status, _ in got.values())
        counts = np.array([got[n][1] for n in (1, 2, 3)], np.int64)
        master.command(0x0F, ctl.update(k * 1e-3, counts, gravity))
    q_err = np.array([ELLA_SETPOINTS[j] for j in JOINTS]) - master.emu.plant.q()
    assert np.max(np.abs(q_err)) < 1e-3, q_err
    assert np.max(np.abs(np.array([ELLA_SETPOINTS[j] for j in JOINTS]) - ctl.q)) < 1e-3
    assert master.emu.watchdog.trips == 0 and master.emu.cycle == cycles
    # an encoder fault on the elbow: EMCY 0x7305, the statusword's fault bit, the elbow's torque off
    handle = master.emu.faults.inject(Fault("elbow_encoder_lost", "encoder_disconnect", "enc_elbow"))
    tau_hold = ctl.update((cycles + 1) * 1e-3, counts, gravity)
    for _ in range(3):
        got = master.sync()
        master.command(0x0F, tau_hold)
    assert master.emcys.get(timeout=WAIT_S) == (3, 0x7305, 0x01)
    assert got[3][0] & 0x4F == FAULT and got[1][0] & 0x6F == got[2][0] & 0x6F == OPERATION_ENABLED
    assert master.nodes[3].sdo[0x603F].raw == 0x7305 and master.nodes[3].sdo[0x1001].raw == 0x01
    assert master.nodes[3].sdo[0x1003][1].raw == 0x7305
    assert master.emu.protocol.safe.tolist() == [False, False, True]
    # a fault reset while the encoder is still lost is refused; once it is back, it clears the fault
    for cw in (0x00, 0x80):
        master.command(cw, tau_hold)
        assert master.sync()[3][0] & 0x4F == FAULT
    master.emu.faults.clear(handle)
    for cw, state in ((0x00, FAULT), (0x80, SWITCH_ON_DISABLED), (0x06, 0x0021), (0x0F, OPERATION_ENABLED)):
        master.command(cw, tau_hold)
        assert master.sync()[3][0] & 0x6F == state, hex(cw)
    assert master.emcys.get(timeout=WAIT_S) == (3, 0x0000, 0x00)     # error reset
    assert master.nodes[3].emcy.active == [] and master.nodes[3].sdo[0x603F].raw == 0
    assert master.emu.protocol.safe.tolist() == [False, False, False]
    assert master.emcys.empty()
