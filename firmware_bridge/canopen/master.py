"""The firmware's side of a CANopen map: the NMT master, SYNC producer and SDO client of the reference firmware.

Once every drive it reads has sent a heartbeat (boot-up or any state), it enables each CiA 402
drive over SDO (0x6060 = 10, then controlword 0x06, 0x07, 0x0F: Switch on disabled -> Ready to
switch on -> Switched on -> Operation enabled, one expedited download after the other's
confirmation, the drives in parallel), then starts all nodes (NMT start, node 0) and sends the
first SYNC; a drive that boots again later is enabled and started on its own. One SYNC per cycle,
NMT stop at the end. The cycle on the wire: SYNC(k) -> drives step and answer TPDO(k) -> master
computes and sends the RPDOs, which the drives apply at SYNC(k+1) (CiA 402 synchronous RPDOs) ->
SYNC(k+1).
"""
from __future__ import annotations

from .cob_ids import (HEARTBEAT_FUNCTION, RPDO_FUNCTIONS, STATE_NAMES, TPDO_FUNCTIONS, function_of, is_canopen,
                      joint_nodes, node_of)
from .drive_node import EMCY_BASE
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import (NMT_ID, NMT_START, NMT_STOP, STATE_BOOTUP, SYNC_ID, BusMap, nmt_frame,
                                           sync_frame)
from .sdo_server import SDO_REQUEST_BASE, SDO_RESPONSE_BASE, download_confirmed, expedited_download
from config_schema import UserError


# the CiA 402 drive's enabling: cyclic synchronous torque, then shutdown, switch on, enable operation
ENABLE_SEQUENCE = ((0x6060, 0, bytes((10,))), (0x6040, 0, (0x06).to_bytes(2, "little")),
                   (0x6040, 0, (0x07).to_bytes(2, "little")), (0x6040, 0, (0x0F).to_bytes(2, "little")))


class CanopenMaster:
    """The firmware's NMT master, SYNC producer and SDO client enabling the drives."""

    def __init__(self, bus: BusMap, joint_names: list[str]):
        if not is_canopen(bus):
            raise UserError(f"{bus.source}: not a CANopen map (needs NMT 0x000 and SYNC 0x080 to_plant)")
        # the drives whose position TPDOs the controller needs must be up before the network starts
        self.required = tuple(sorted(set(joint_nodes(bus, "to_firmware", "enc_{}", joint_names, TPDO_FUNCTIONS))))
        self.drives = tuple(sorted(set(joint_nodes(bus, "to_plant", "tau_{}", joint_names, RPDO_FUNCTIONS))))
        self.own_ids = frozenset((NMT_ID, SYNC_ID))      # produced here, not by the map's writer
        self.states: dict[int, int] = {}
        self.started = False
        self.syncs = 0
        self._pending: dict[int, list[tuple[int, int, bytes]]] = {}   # node -> SDO downloads still to confirm
        self.errors: list[str] = []
        self.emcys: list[tuple[int, int]] = []                        # (node, error code) received
        self.c = {"heartbeats": 0, "heartbeats_invalid": 0, "nmt_sent": 0, "single_starts": 0, "sdo_sent": 0,
                  "sdo_confirmed": 0, "sdo_unexpected": 0}

    @staticmethod
    def is_protocol(frame: Frame) -> bool:
        """Whether ``frame`` is a heartbeat (boot-up message included), an SDO response or an EMCY."""
        cob = frame.arbitration_id
        if frame.is_extended_id or node_of(cob) == 0:
            return False
        return function_of(cob) in (HEARTBEAT_FUNCTION, SDO_RESPONSE_BASE, EMCY_BASE)

    def on_frame(self, frame: Frame) -> list[Frame]:
        """Take a protocol frame (see is_protocol); the frames to send in answer."""
        function = function_of(frame.arbitration_id)
        if function == HEARTBEAT_FUNCTION:
            return self.on_heartbeat(frame)
        if function == SDO_RESPONSE_BASE:
            return self._on_sdo(node_of(frame.arbitration_id), frame.data)
        if len(frame.data) == 8:
            self.emcys.append((node_of(frame.arbitration_id), int.from_bytes(frame.data[:2], "little")))
        return []

    def on_heartbeat(self, frame: Frame) -> list[Frame]:
        """Take a heartbeat; the frames to send: the drives' enabling once every required drive has
        reported (then NMT start of all nodes and the first SYNC), the enabling and NMT start of a
        drive that booted again after that."""
        if len(frame.data) != 1:
            self.c["heartbeats_invalid"] += 1
            return []
        node, state = node_of(frame.arbitration_id), frame.data[0]
        self.states[node] = state
        self.c["heartbeats"] += 1
        if not self.started:
            if not self._pending and all(n in self.states for n in self.required):
                return self._enable(self.drives) or self._start(0)
            return []
        if state == STATE_BOOTUP:
            self.c["single_starts"] += 1
            return self._enable((node,) if node in self.drives else ()) or [self._nmt(NMT_START, node)]
        return []

    def _enable(self, nodes: tuple[int, ...]) -> list[Frame]:
        """The first SDO download of each drive's enabling sequence."""
        out = []
        for n in nodes:
            self._pending[n] = list(ENABLE_SEQUENCE)
            out.append(self._download(n))
        return out

    def _download(self, node: int) -> Frame:
        index, sub, data = self._pending[node][0]
        self.c["sdo_sent"] += 1
        return Frame(SDO_REQUEST_BASE + node, expedited_download(index, sub, data))

    def _on_sdo(self, node: int, data: bytes) -> list[Frame]:
        if not self._pending.get(node):
            self.c["sdo_unexpected"] += 1
            return []
        index, sub, _ = self._pending[node][0]
        code = download_confirmed(data, index, sub)
        if code:
            self.errors.append(f"node {node}: SDO abort 0x{code:08X} writing 0x{index:04X}sub{sub}")
            self._pending[node].clear()
        else:
            self.c["sdo_confirmed"] += 1
            self._pending[node].pop(0)
            if self._pending[node]:
                return [self._download(node)]
        del self._pending[node]
        if self.started:
            return [self._nmt(NMT_START, node)]
        return [] if self._pending else self._start(0)

    def _start(self, node: int) -> list[Frame]:
        """NMT start of all nodes and the first SYNC."""
        self.started = True
        return [self._nmt(NMT_START, node), self.sync()]

    def _nmt(self, command: int, node: int) -> Frame:
        self.c["nmt_sent"] += 1
        return nmt_frame(command, node)

    def sync(self) -> Frame:
        """The next cycle's SYNC."""
        self.syncs += 1
        return sync_frame()

    def stop(self) -> Frame:
        """NMT stop to all nodes (end of the run)."""
        return self._nmt(NMT_STOP, 0)

    def stats(self) -> dict:
        return {"started": self.started, "syncs": self.syncs,
                "nodes": {str(n): STATE_NAMES.get(s, f"0x{s:02X}") for n, s in sorted(self.states.items())},
                **self.c, "emcys": [f"node {n}: 0x{code:04X}" for n, code in self.emcys], "errors": self.errors}
