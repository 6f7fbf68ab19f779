"""CANopen on a bus map: CiA 301 NMT, SYNC, heartbeat, SDO, EMCY and PDOs, CiA 402 cyclic synchronous torque.

COB-IDs follow the CiA 301 predefined connection set: function code (``id & 0x780``) plus node id
(``id & 0x7F``): NMT 0x000, SYNC 0x080, EMCY 0x080 + node, TPDO1..4 0x180/0x280/0x380/0x480 + node
(drive -> master), RPDO1..4 0x200/0x300/0x400/0x500 + node (master -> drive), SDO 0x580 + node
(response) and 0x600 + node (request), heartbeat 0x700 + node. A bus map is CANopen
(:func:`is_canopen`) when it carries NMT and SYNC to the plant (``configs/bus/canopen_cst.toml``).

Plant side, :class:`DriveNodes`: the nodes of the map (every node id with a PDO or a heartbeat in
it), each a :class:`firmware_bridge.canopen.drive_node.DriveNode` with its object dictionary, SDO server,
PDOs and, for the nodes whose RPDO carries a joint's torque, the CiA 402 drive. It is used by
``hil.runtime.loop.Emulator`` through a narrow hook:

* ``receive(frame)``: True if the frame is protocol traffic and must not reach the command
  decoder: NMT (state changes), SYNC (marks a cycle: ``step_due``), SDO requests (answered), and
  RPDOs addressed to a node that is not operational (ignored and counted, CiA 301: PDOs only in
  operational);
* ``commands``: the emulator's command decoder for this map (:class:`PdoCommandInput`): each RPDO
  is decoded through its node's current PDO mapping into the node's objects (target torque,
  controlword, ...); the drive turns them into the joint's torque set-point;
* ``step_due``: a SYNC has been taken and not answered yet (lockstep steps the plant on it);
* ``transmit(encode)``: the frames to send now: boot-up messages, SDO responses, EMCY messages,
  heartbeats that are due, and, if a SYNC is pending, the TPDOs of the operational nodes
  (``encode(k)`` gives the sensor frames of the k-th answered SYNC in the map's layout, computed
  from the state after the step; a TPDO whose mapping was changed is packed from the objects);
* ``safe`` (one flag per joint): the joint's torque goes to the emulator's safe state: its drive
  is not in CiA 402 Operation enabled (from power-on until the master enables it, and after a
  disable, quick stop or fault), or its node left NMT operational (stopped, pre-operational after
  operational, reset; CiA 402 abort connection) until NMT start.

``attach(faults, applied_torque)`` binds the emulator's fault engine (the faults a drive detects on
its joint raise EMCY and the CiA 402 fault: firmware_bridge.canopen.drive_node.detected_fault) and the
torque the plant applied (object 0x6077).

NMT state machine per node (CiA 301): power-on -> boot-up message (heartbeat 0x00) ->
pre-operational (0x7F); start (0x01) -> operational (0x05); stop (0x02) -> stopped (0x04: no SDO,
no EMCY, no PDO); enter pre-operational (0x80); reset node (0x81: every object back to its default,
the drive powered on again) / reset communication (0x82: the communication objects 0x1000..0x1FFF)
-> boot-up message -> pre-operational, heartbeat schedule restarted. Node id 0 addresses all nodes.
Heartbeats are produced on the clock (wall time, ``time.monotonic``) every ``heartbeat_s``
(default: the map's heartbeat ``rate_divider * cycle_s``, 100 ms; object 0x1017 of each node
changes its own), each node staggered by its ``rate_offset`` (``rate_offset / rate_divider`` of
the period); 0 disables them (the boot-up message still goes out).

The firmware side (NMT master, SYNC producer, drive enabling) is firmware_bridge.canopen.master.
"""
from __future__ import annotations

import math
import struct
import time
from typing import Any, Callable, Iterable

import numpy as np

from .drive_node import DriveNode, NodeSpec, detected_fault
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import (NMT_ID, NMT_PRE_OPERATIONAL, NMT_RESET_COMMUNICATION,
                                           NMT_RESET_NODE, NMT_START, NMT_STOP, STATE_BOOTUP, STATE_OPERATIONAL,
                                           STATE_PRE_OPERATIONAL, STATE_STOPPED, SYNC_ID, BusMap, Codec,
                                           heartbeat_frame)
from .cob_ids import (HEARTBEAT_FUNCTION, RPDO_FUNCTIONS, STATE_NAMES, TPDO_FUNCTIONS, function_of,  # noqa: F401
                      is_canopen, joint_nodes, map_joint_names, node_of)
from .pdo import RPDO, TPDO, Pdo
from .sdo_server import SDO_REQUEST_BASE, SDO_RESPONSE_BASE
from firmware_bridge.wire.signals import CommandInput
from config_schema import UserError

# the COB-ID names (cob_ids) are still importable from here, as they were before that module


def _standard(codecs: Iterable[Codec], functions: tuple[int, ...]) -> dict[int, int]:
    """COB-ID -> node id of the 11-bit messages whose function code is in ``functions``."""
    return {c.arbitration_id: node_of(c.arbitration_id) for c in codecs
            if not c.is_extended_id and function_of(c.arbitration_id) in functions and node_of(c.arbitration_id)}


def node_specs(bus: BusMap, joint_names: list[str], heartbeat_ms: float) -> list[NodeSpec]:
    """What the map says about each node: its PDOs, its joint (if a drive), its heartbeat."""
    joint_node = joint_nodes(bus, "to_plant", "tau_{}", joint_names, RPDO_FUNCTIONS)
    specs: dict[int, NodeSpec] = {}

    def spec(n: int) -> NodeSpec:
        return specs.setdefault(n, NodeSpec(n, f"node{n}"))
    for codec in bus.codecs:
        cob, n = codec.arbitration_id, node_of(codec.arbitration_id)
        if codec.is_extended_id or not n:
            continue
        f = function_of(cob)
        if f in RPDO_FUNCTIONS and codec.direction == "to_plant":
            spec(n).pdos.append((RPDO, RPDO_FUNCTIONS.index(f) + 1, codec))
        elif f in TPDO_FUNCTIONS and codec.direction == "to_firmware":
            spec(n).pdos.append((TPDO, TPDO_FUNCTIONS.index(f) + 1, codec))
        elif f == HEARTBEAT_FUNCTION and codec.direction == "to_firmware":
            spec(n).heartbeat_ms = round(heartbeat_ms)
            spec(n).label = codec.name.removeprefix("heartbeat_")
    for k, (name, n) in enumerate(zip(joint_names, joint_node)):
        s = spec(n)
        if s.joint is not None:
            raise UserError(f"{bus.source}: node {n} carries the torque of two joints; a CiA 402 drive has one")
        codec, i = next((c, i) for c, i in bus.find(f"tau_{name}") if c.direction == "to_plant")
        s.joint, s.label, s.torque_scale = k, name, codec.spec.signals[i].scale
    return [specs[n] for n in sorted(specs)]


class PdoCommandInput(CommandInput):
    """The command decoder of a CANopen map: an RPDO is written into its node's objects through the
    node's current mapping; the drives keep ``tau`` (the joints' torque set-points, N m). A valid RPDO
    refreshes the watchdog whatever the drive's state; a frame on a map RPDO's COB-ID that no valid
    RPDO uses is counted as an unknown id."""

    def __init__(self, bus: BusMap, joint_names: list[str], owners: dict[int, tuple[int, Pdo]]):
        super().__init__(bus, joint_names)
        self.owners = owners
        self._map_rpdos = frozenset(_standard(bus.messages("to_plant"), RPDO_FUNCTIONS))

    def feed(self, frame: Frame) -> bool:
        owner = None if frame.is_extended_id else self.owners.get(frame.arbitration_id)
        if owner is None:
            if not frame.is_extended_id and frame.arbitration_id in self._map_rpdos:
                self.reader.reject("unknown_id")
                return False
            return super().feed(frame)
        kind = owner[1].receive(frame.data)
        if kind is not None:
            self.reader.reject(kind)
            return False
        self.reader.accepted += 1
        self.arrival_s = frame.timestamp
        return True


class DriveNodes:
    """The CANopen nodes the emulator plays (NMT slaves, SYNC consumers, heartbeat and EMCY producers,
    SDO servers, CiA 402 drives)."""

    def __init__(self, bus: BusMap, joint_names: list[str], heartbeat_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if not is_canopen(bus):
            raise UserError(f"{bus.source}: not a CANopen map (needs NMT 0x000 and SYNC 0x080 to_plant)")
        self.clock = clock
        hb_codecs = [c for c in bus.messages("to_firmware") if not c.is_extended_id
                     and function_of(c.arbitration_id) == HEARTBEAT_FUNCTION and node_of(c.arbitration_id)]
        # heartbeats are produced here, not by the map's writer
        self.own_ids = frozenset(c.arbitration_id for c in hb_codecs)
        self.sync_length = bus.by_id(SYNC_ID).length
        # heartbeat producer time and each node's stagger, from the map unless given
        if heartbeat_s is None:
            heartbeat_s = hb_codecs[0].rate_divider * bus.cycle_s if hb_codecs and hb_codecs[0].rate_divider else 0.0
        if not heartbeat_s >= 0:
            raise UserError(f"heartbeat_s = {heartbeat_s}: expected a producer time >= 0 s (0: off)")
        self.heartbeat_s = float(heartbeat_s)
        self.phase_s = {node_of(c.arbitration_id): (c.rate_offset / c.rate_divider if c.rate_divider else 0.0)
                        * self.heartbeat_s for c in hb_codecs}
        self.joint_node = joint_nodes(bus, "to_plant", "tau_{}", joint_names, RPDO_FUNCTIONS)
        self.rpdo_owner: dict[int, tuple[int, Pdo]] = {}      # COB-ID -> (node id, RPDO) of the valid RPDOs
        self.commands = PdoCommandInput(bus, joint_names, self.rpdo_owner)
        self._latest: dict[int, Frame] = {}                    # the last frame sent per COB-ID, map layout
        self.nodes = {s.node_id: DriveNode(s, self.commands.tau, self._latest, self._emitter(s.node_id),
                                           self._changed, bus.source)
                      for s in node_specs(bus, joint_names, self.heartbeat_s * 1e3)}
        self.node_ids = tuple(self.nodes)
        self._drives = [n for n in self.nodes.values() if n.drive is not None]
        self._sdo_nodes = {SDO_REQUEST_BASE + n: node for n, node in self.nodes.items()}
        self.state = {n: STATE_BOOTUP for n in self.node_ids}
        self.period_s = {n: self.heartbeat_s for n in self.phase_s}
        self.next_heartbeat = {n: math.inf for n in self.phase_s}
        self._beating = False
        nj = len(joint_names)
        self._nmt_safe = np.zeros(nj, bool)       # the node left operational: safe until NMT start
        self._enabled = np.zeros(nj, bool)        # the drive is in Operation enabled
        self.safe = np.ones(nj, bool)             # joint torque in the safe state
        self.any_safe = True
        self.booted = False
        self.step_due = False
        self._outbox: list[Frame] = []            # boot-ups, SDO responses, EMCYs waiting for transmit()
        self._transient: set[DriveNode] = set()   # drives whose state moves on by itself at the next cycle
        self._faults: Any = None
        self._fault_events = 0
        self.c = {"nmt_commands": 0, "nmt_other_node": 0, "nmt_invalid": 0, "syncs": 0, "syncs_invalid": 0,
                  "syncs_answered": 0, "syncs_merged": 0, "tpdos_sent": 0, "tpdos_refused": 0, "rpdos_ignored": 0,
                  "heartbeats_sent": 0, "bootups_sent": 0, "sdo_ignored": 0, "emcys_sent": 0, "emcys_suppressed": 0}
        self._pdo_changed()

    def attach(self, faults: Any = None, applied_torque: Callable[[], np.ndarray] | None = None) -> None:
        """Bind the emulator: `faults` (hil.faults.engine.FaultEngine: its ``events`` and ``active()``
        (handle, fault) with the fault's ``kind`` and ``target``), whose faults on a drive's joint that the
        drive detects raise its EMCY and CiA 402 fault; `applied_torque()`: the torque per joint the
        plant applied [N m] (object 0x6077)."""
        self._faults = faults
        self._fault_events = 0
        if applied_torque is not None:
            for node in self._drives:
                node.torque_actual = (lambda k=node.spec.joint: float(applied_torque()[k]))

    # ------------------------------------------------------------------ node callbacks
    def _emitter(self, node_id: int) -> Callable[[Frame], None]:
        def emit(frame: Frame) -> None:
            if self.state[node_id] in (STATE_PRE_OPERATIONAL, STATE_OPERATIONAL):
                self._outbox.append(frame)
                self.c["emcys_sent"] += 1
            else:                                   # CiA 301: no EMCY while stopped or initialising
                self.c["emcys_suppressed"] += 1
        return emit

    def _changed(self, node: DriveNode, what: str) -> None:
        if what == "pdo":
            self._pdo_changed()
        elif what == "drive":
            self._enabled[node.spec.joint] = node.enabled
            if node.drive.transient:
                self._transient.add(node)
            else:
                self._transient.discard(node)
            self._update_safe()
        else:       # 0x1017; its default is the configured producer time, which may be a fraction of a ms
            entry = node.heartbeat
            default = self.heartbeat_s if node.id in self.phase_s else 0.0
            self._schedule(node.id, default if entry.value == entry.default else entry.value * 1e-3, 0.0)

    def _pdo_changed(self) -> None:
        """Routing of the PDOs after a change of their parameters (or at start)."""
        self.rpdo_owner.clear()
        self._tpdo_default: dict[int, int] = {}           # COB-ID -> node id: valid TPDOs in the map's layout
        self._tpdo_custom: list[tuple[int, Pdo]] = []     # valid TPDOs of a changed layout or schedule
        for n, node in self.nodes.items():
            for pdo in node.pdos:
                if not pdo.valid:
                    continue
                if pdo.kind == RPDO:
                    self.rpdo_owner[pdo.cob_id] = (n, pdo)
                elif pdo.is_default:
                    self._tpdo_default[pdo.cob_id] = n
                else:
                    self._tpdo_custom.append((n, pdo))

    def _schedule(self, node: int, period_s: float, phase_s: float) -> None:
        """The node's heartbeats every `period_s` (0: off) from `phase_s` after now."""
        self.period_s[node] = period_s
        self.next_heartbeat[node] = self.clock() + phase_s + period_s if period_s > 0 else math.inf
        self._beating = any(p > 0 for p in self.period_s.values())

    def _update_safe(self) -> None:
        np.logical_or(self._nmt_safe, ~self._enabled, out=self.safe)
        self.any_safe = bool(self.safe.any())

    def _set_nmt_safe(self, node: int, safe: bool) -> None:
        joint = self.nodes[node].spec.joint
        if joint is not None:
            self._nmt_safe[joint] = safe
            self._update_safe()

    # ------------------------------------------------------------------ NMT state machine
    def boot(self) -> None:
        """Power-on of every node: boot-up messages queued, nodes pre-operational."""
        self.booted = True
        for n in self.node_ids:
            self._reset(n)

    def _reset(self, node: int) -> None:
        self._leave_operational(node)
        self.state[node] = STATE_PRE_OPERATIONAL
        if node in self.phase_s:
            self._outbox.append(heartbeat_frame(node, STATE_BOOTUP))
            self.c["bootups_sent"] += 1
            self._schedule(node, self.period_s[node], self.phase_s[node])

    def _leave_operational(self, node: int) -> None:
        if self.state[node] == STATE_OPERATIONAL:
            self._set_nmt_safe(node, True)

    def _nmt(self, frame: Frame) -> None:
        data = frame.data
        if len(data) != 2 or data[0] not in (NMT_START, NMT_STOP, NMT_PRE_OPERATIONAL, NMT_RESET_NODE,
                                             NMT_RESET_COMMUNICATION):
            self.c["nmt_invalid"] += 1
            return
        command, target = data
        if target != 0 and target not in self.state:
            self.c["nmt_other_node"] += 1
            return
        self.c["nmt_commands"] += 1
        for n in (self.node_ids if target == 0 else (target,)):
            if command == NMT_START:
                self.state[n] = STATE_OPERATIONAL
                self._set_nmt_safe(n, False)
            elif command == NMT_STOP:
                self.state[n] = STATE_STOPPED
                self._set_nmt_safe(n, True)
            elif command == NMT_PRE_OPERATIONAL:
                self._leave_operational(n)
                self.state[n] = STATE_PRE_OPERATIONAL
            else:
                if command == NMT_RESET_NODE:
                    self.nodes[n].reset_node()
                else:
                    self.nodes[n].reset_communication()
                self._reset(n)

    # ------------------------------------------------------------------ the emulator's hook
    def receive(self, frame: Frame) -> bool:
        """True if ``frame`` is protocol traffic (NMT, SYNC, SDO) or an RPDO the nodes do not take in their
        state; False if it is for the command decoder."""
        if frame.is_extended_id:
            return False
        if not self.booted:
            return self._before_boot(frame)
        cob = frame.arbitration_id
        if cob == SYNC_ID:
            if len(frame.data) != self.sync_length:
                self.c["syncs_invalid"] += 1
            else:
                self.c["syncs"] += 1
                self.c["syncs_merged"] += self.step_due
                self.step_due = True
            return True
        if cob == NMT_ID:
            self._nmt(frame)
            return True
        owner = self.rpdo_owner.get(cob)
        if owner is not None:
            if self.state[owner[0]] != STATE_OPERATIONAL:
                self.c["rpdos_ignored"] += 1
                return True
            return False
        node = self._sdo_nodes.get(cob)
        if node is None:
            return False
        if self.state[node.id] == STATE_STOPPED:     # CiA 301: no SDO while stopped
            self.c["sdo_ignored"] += 1
            return True
        response = node.sdo.handle(frame.data)
        if response is not None:
            self._outbox.append(Frame(SDO_RESPONSE_BASE + node.id, response))
        return True

    def _before_boot(self, frame: Frame) -> bool:
        """A node in initialisation takes nothing (CiA 301): protocol frames, SDOs and RPDOs are ignored."""
        cob = frame.arbitration_id
        if cob == SYNC_ID:
            self.c["syncs_invalid"] += 1
            return True
        if cob == NMT_ID:
            self.c["nmt_invalid"] += 1
            return True
        if cob in self.rpdo_owner:
            self.c["rpdos_ignored"] += 1
            return True
        if cob in self._sdo_nodes:
            self.c["sdo_ignored"] += 1
            return True
        return False

    def heartbeats(self) -> list[Frame]:
        """Boot-up messages, SDO responses, EMCYs, and the heartbeats due now (boots the nodes on the first call)."""
        if not self.booted:
            self.boot()
        out, self._outbox = self._outbox, []
        if self._beating:
            now = self.clock()
            for n, due in self.next_heartbeat.items():
                if now >= due:              # a node with heartbeats off is due at +inf
                    out.append(heartbeat_frame(n, self.state[n]))
                    self.c["heartbeats_sent"] += 1
                    # the next beat on the node's grid, never a burst after a pause
                    period = self.period_s[n]
                    self.next_heartbeat[n] = due + period * (1 + int((now - due) // period))
        return out

    def answer(self, encode: Callable[[int], list[Frame]]) -> list[Frame]:
        """The TPDOs of the operational nodes for a pending SYNC (none if no SYNC is pending)."""
        if not self.step_due:
            return []
        self.step_due = False
        k = self.c["syncs_answered"]
        self.c["syncs_answered"] += 1
        frames = encode(k)
        latest, default, state = self._latest, self._tpdo_default, self.state
        for f in frames:
            latest[f.arbitration_id] = f
        out = [f for f in frames if state.get(default.get(f.arbitration_id, -1)) == STATE_OPERATIONAL]
        for n, pdo in self._tpdo_custom:
            if state[n] == STATE_OPERATIONAL and pdo.due(k):
                try:
                    out.append(Frame(pdo.cob_id, pdo.pack()))
                except struct.error:          # a process value its mapped type cannot hold
                    self.c["tpdos_refused"] += 1
        self.c["tpdos_sent"] += len(out)
        return out

    def transmit(self, encode: Callable[[int], list[Frame]]) -> list[Frame]:
        """Everything to send after a cycle: the drives' state changes of this cycle (a finished fault
        reaction, a fault the drive detected), then boot-ups, SDO responses, EMCYs, due heartbeats and
        the answer to a SYNC."""
        if self._transient:
            for node in list(self._transient):
                node.tick()
        if self._faults is not None and len(self._faults.events) != self._fault_events:
            self._check_faults()
        out = self.heartbeats()
        out += self.answer(encode)
        return out

    def _check_faults(self) -> None:
        """The drives' view of the active faults: a detected one faults its drive, none clears the cause."""
        self._fault_events = len(self._faults.events)
        codes: dict[DriveNode, int] = {}
        for _, fault in self._faults.active():
            for node in self._drives:
                code = detected_fault(fault.kind, fault.target, node.label)
                if code:
                    codes.setdefault(node, code)
        for node in self._drives:
            if node in codes:
                node.fault(codes[node])
            else:
                node.cause_cleared()

    def counters(self) -> dict:
        nodes = {str(n): node.counters() for n, node in self.nodes.items()}
        return {"nodes": {str(n): STATE_NAMES[s] for n, s in self.state.items()},
                "heartbeat_ms": self.heartbeat_s * 1e3, **self.c,
                "sdo_requests": sum(c["sdo"]["requests"] for c in nodes.values()),
                "sdo_aborts": sum(c["sdo"]["aborts_sent"] for c in nodes.values()),
                "drives": {n: c["state"] for n, c in nodes.items() if "state" in c}}

