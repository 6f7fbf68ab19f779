"""CANopen on a bus map: CiA 301 NMT, SYNC and heartbeat, CiA 402 cyclic synchronous torque (CST).

COB-IDs follow the CiA 301 predefined connection set: function code (``id & 0x780``) plus node id
(``id & 0x7F``): NMT 0x000, SYNC 0x080, TPDO1..4 0x180/0x280/0x380/0x480 + node (drive -> master),
RPDO1..4 0x200/0x300/0x400/0x500 + node (master -> drive), heartbeat 0x700 + node. A bus map is
CANopen (:func:`is_canopen`) when it carries NMT and SYNC to the plant (``configs/bus/canopen_cst.toml``).

Plant side, :class:`DriveNodes`: the nodes of the map (every node id with a PDO or a heartbeat in
it) as NMT slaves, used by ``hil.runtime.loop.Emulator`` through a narrow hook:

* ``receive(frame)``: True if the frame is protocol traffic and must not reach the command
  decoder: NMT (state changes), SYNC (marks a cycle: ``step_due``), and RPDOs addressed to a node
  that is not operational (ignored and counted, CiA 301: PDOs only in operational);
* ``step_due``: a SYNC has been taken and not answered yet (lockstep steps the plant on it);
* ``transmit(encode)``: the frames to send now: boot-up messages, heartbeats that are due, and,
  if a SYNC is pending, the TPDOs of the operational nodes (``encode(k)`` gives the sensor frames
  of the k-th answered SYNC, computed from the state after the step);
* ``safe`` (one flag per joint): the joint's drive was stopped (NMT stop) or left operational
  (pre-operational, reset); its torque goes to the emulator's safe state (CiA 402 abort
  connection option, object 0x6007) until NMT start.

NMT state machine per node (CiA 301): power-on -> boot-up message (heartbeat 0x00) ->
pre-operational (0x7F); start (0x01) -> operational (0x05); stop (0x02) -> stopped (0x04); enter
pre-operational (0x80); reset node (0x81) / reset communication (0x82) -> boot-up message ->
pre-operational, heartbeat schedule restarted. Node id 0 addresses all nodes. Heartbeats are
produced on the clock (wall time, ``time.monotonic``) every ``heartbeat_s`` (default: the map's
heartbeat ``rate_divider * cycle_s``, 100 ms), each node staggered by its ``rate_offset``
(``rate_offset / rate_divider`` of the period); 0 disables them (the boot-up message still goes out).

Firmware side, :class:`CanopenMaster`: the NMT master and SYNC producer of the reference firmware.
It starts all nodes (NMT start, node 0) once every drive it reads has sent a heartbeat (boot-up or
any state), starts a node whose boot-up comes after that (late, or reset) on its own, sends one
SYNC per cycle and NMT stop at the end.
The cycle on the wire: SYNC(k) -> drives step and answer TPDO(k) -> master computes and sends the
RPDOs, which the drives apply at SYNC(k+1) (CiA 402 synchronous RPDOs) -> SYNC(k+1).
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

import numpy as np

from .link import Frame
from .messages import (HEARTBEAT_BASE_ID, NMT_ID, NMT_PRE_OPERATIONAL, NMT_RESET_COMMUNICATION,
                       NMT_RESET_NODE, NMT_START, NMT_STOP, STATE_BOOTUP, STATE_OPERATIONAL,
                       STATE_PRE_OPERATIONAL, STATE_STOPPED, SYNC_ID, BusMap, Codec, heartbeat_frame,
                       nmt_frame, sync_frame)

TPDO_FUNCTIONS = (0x180, 0x280, 0x380, 0x480)
RPDO_FUNCTIONS = (0x200, 0x300, 0x400, 0x500)
HEARTBEAT_FUNCTION = HEARTBEAT_BASE_ID
STATE_NAMES = {STATE_BOOTUP: "boot-up", STATE_STOPPED: "stopped", STATE_OPERATIONAL: "operational",
               STATE_PRE_OPERATIONAL: "pre-operational"}


def node_of(cob_id: int) -> int:
    """Node id of a predefined-connection-set COB-ID."""
    return cob_id & 0x7F


def function_of(cob_id: int) -> int:
    """Function code of a predefined-connection-set COB-ID."""
    return cob_id & 0x780


def _standard(codecs: Iterable[Codec], functions: tuple[int, ...]) -> dict[int, int]:
    """COB-ID -> node id of the 11-bit messages whose function code is in ``functions``."""
    return {c.arbitration_id: node_of(c.arbitration_id) for c in codecs
            if not c.is_extended_id and function_of(c.arbitration_id) in functions and node_of(c.arbitration_id)}


def is_canopen(bus: BusMap) -> bool:
    """Whether ``bus`` is a CANopen map: NMT (0x000) and SYNC (0x080) messages to the plant."""
    ids = {c.arbitration_id for c in bus.messages("to_plant") if not c.is_extended_id}
    return bus.kind in ("can", "canfd") and NMT_ID in ids and SYNC_ID in ids


def _joint_nodes(bus: BusMap, direction: str, signal: str, names: list[str], functions) -> list[int]:
    """Node id of the PDO carrying ``signal.format(joint)`` for each joint."""
    out = []
    for name in names:
        sig = signal.format(name)
        hits = [c for c, _ in bus.find(sig) if c.direction == direction]
        if not hits or function_of(hits[0].arbitration_id) not in functions or hits[0].is_extended_id:
            raise ValueError(f"{bus.source}: {sig} is not carried by a {direction} PDO of the predefined "
                             f"connection set")
        out.append(node_of(hits[0].arbitration_id))
    return out


class DriveNodes:
    """The CANopen nodes the emulator plays (NMT slaves, SYNC consumers, heartbeat producers)."""

    def __init__(self, bus: BusMap, joint_names: list[str], heartbeat_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        if not is_canopen(bus):
            raise ValueError(f"{bus.source}: not a CANopen map (needs NMT 0x000 and SYNC 0x080 to_plant)")
        self.clock = clock
        self.tpdo_node = _standard(bus.messages("to_firmware"), TPDO_FUNCTIONS)
        self.rpdo_node = _standard(bus.messages("to_plant"), RPDO_FUNCTIONS)
        hb_codecs = [c for c in bus.messages("to_firmware") if not c.is_extended_id
                     and function_of(c.arbitration_id) == HEARTBEAT_FUNCTION and node_of(c.arbitration_id)]
        self.node_ids = tuple(sorted(set(self.tpdo_node.values()) | set(self.rpdo_node.values())
                                     | {node_of(c.arbitration_id) for c in hb_codecs}))
        # heartbeats are produced here, not by the map's writer
        self.own_ids = frozenset(c.arbitration_id for c in hb_codecs)
        self.sync_length = bus.by_id(SYNC_ID).length
        # heartbeat producer time and each node's stagger, from the map unless given
        if heartbeat_s is None:
            heartbeat_s = hb_codecs[0].rate_divider * bus.cycle_s if hb_codecs and hb_codecs[0].rate_divider else 0.0
        if not heartbeat_s >= 0:
            raise ValueError(f"heartbeat_s = {heartbeat_s}: expected a producer time >= 0 s (0: off)")
        self.heartbeat_s = float(heartbeat_s)
        self.phase_s = {node_of(c.arbitration_id): (c.rate_offset / c.rate_divider if c.rate_divider else 0.0)
                        * self.heartbeat_s for c in hb_codecs}
        self.joint_node = _joint_nodes(bus, "to_plant", "tau_{}", joint_names, RPDO_FUNCTIONS)
        self._joint_index = {n: [k for k, m in enumerate(self.joint_node) if m == n] for n in self.node_ids}
        self.state = {n: STATE_BOOTUP for n in self.node_ids}
        self.next_heartbeat = {n: 0.0 for n in self.phase_s}
        self.safe = np.zeros(len(joint_names), bool)      # joint torque in the safe state (drive stopped / aborted)
        self.any_safe = False
        self.booted = False
        self.step_due = False
        self._outbox: list[Frame] = []                    # boot-up messages waiting for transmit()
        self.c = {"nmt_commands": 0, "nmt_other_node": 0, "nmt_invalid": 0, "syncs": 0, "syncs_invalid": 0,
                  "syncs_answered": 0, "syncs_merged": 0, "tpdos_sent": 0, "rpdos_ignored": 0,
                  "heartbeats_sent": 0, "bootups_sent": 0}

    # ------------------------------------------------------------------ state machine
    def boot(self) -> None:
        """Power-on of every node: boot-up messages queued, nodes pre-operational."""
        self.booted = True
        for n in self.node_ids:
            self._reset(n, self.clock())

    def _reset(self, node: int, now: float) -> None:
        self._leave_operational(node)
        self.state[node] = STATE_PRE_OPERATIONAL
        if node in self.phase_s:
            self._outbox.append(heartbeat_frame(node, STATE_BOOTUP))
            self.next_heartbeat[node] = now + self.phase_s[node] + self.heartbeat_s

    def _leave_operational(self, node: int) -> None:
        if self.state[node] == STATE_OPERATIONAL:
            self._set_safe(node, True)

    def _set_safe(self, node: int, safe: bool) -> None:
        for k in self._joint_index[node]:
            self.safe[k] = safe
        self.any_safe = bool(self.safe.any())

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
        now = self.clock()
        for n in (self.node_ids if target == 0 else (target,)):
            if command == NMT_START:
                self.state[n] = STATE_OPERATIONAL
                self._set_safe(n, False)
            elif command == NMT_STOP:
                self.state[n] = STATE_STOPPED
                self._set_safe(n, True)
            elif command == NMT_PRE_OPERATIONAL:
                self._leave_operational(n)
                self.state[n] = STATE_PRE_OPERATIONAL
            else:
                self._reset(n, now)

    # ------------------------------------------------------------------ the emulator's hook
    def receive(self, frame: Frame) -> bool:
        """True if ``frame`` is protocol traffic (NMT, SYNC) or an RPDO the nodes do not take in their
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
        node = self.rpdo_node.get(cob)
        if node is not None and self.state[node] != STATE_OPERATIONAL:
            self.c["rpdos_ignored"] += 1
            return True
        return False

    def _before_boot(self, frame: Frame) -> bool:
        """A node in initialisation takes nothing (CiA 301): protocol frames and RPDOs are ignored."""
        cob = frame.arbitration_id
        if cob == SYNC_ID:
            self.c["syncs_invalid"] += 1
            return True
        if cob == NMT_ID:
            self.c["nmt_invalid"] += 1
            return True
        if cob in self.rpdo_node:
            self.c["rpdos_ignored"] += 1
            return True
        return False

    def heartbeats(self) -> list[Frame]:
        """Boot-up messages and the heartbeats due now (boots the nodes on the first call)."""
        if not self.booted:
            self.boot()
        out, self._outbox = self._outbox, []
        self.c["bootups_sent"] += len(out)
        if self.heartbeat_s > 0:
            now = self.clock()
            for n, due in self.next_heartbeat.items():
                if now >= due:
                    out.append(heartbeat_frame(n, self.state[n]))
                    self.c["heartbeats_sent"] += 1
                    # the next beat on the node's grid, never a burst after a pause
                    self.next_heartbeat[n] = due + self.heartbeat_s * (1 + int((now - due) // self.heartbeat_s))
        return out

    def answer(self, encode: Callable[[int], list[Frame]]) -> list[Frame]:
        """The TPDOs of the operational nodes for a pending SYNC (none if no SYNC is pending)."""
        if not self.step_due:
            return []
        self.step_due = False
        k = self.c["syncs_answered"]
        self.c["syncs_answered"] += 1
        out = [f for f in encode(k) if self.state.get(self.tpdo_node.get(f.arbitration_id, -1)) == STATE_OPERATIONAL]
        self.c["tpdos_sent"] += len(out)
        return out

    def transmit(self, encode: Callable[[int], list[Frame]]) -> list[Frame]:
        """Everything to send after a cycle: boot-up messages, due heartbeats, the answer to a SYNC."""
        out = self.heartbeats()
        out += self.answer(encode)
        return out

    def counters(self) -> dict:
        return {"nodes": {str(n): STATE_NAMES[s] for n, s in self.state.items()},
                "heartbeat_ms": self.heartbeat_s * 1e3, **self.c}


class CanopenMaster:
    """The firmware's NMT master and SYNC producer."""

    def __init__(self, bus: BusMap, joint_names: list[str]):
        if not is_canopen(bus):
            raise ValueError(f"{bus.source}: not a CANopen map (needs NMT 0x000 and SYNC 0x080 to_plant)")
        # the drives whose position TPDOs the controller needs must be up before the network starts
        self.required = tuple(sorted(set(_joint_nodes(bus, "to_firmware", "enc_{}", joint_names, TPDO_FUNCTIONS))))
        self.own_ids = frozenset((NMT_ID, SYNC_ID))      # produced here, not by the map's writer
        self.states: dict[int, int] = {}
        self.started = False
        self.syncs = 0
        self.c = {"heartbeats": 0, "heartbeats_invalid": 0, "nmt_sent": 0, "single_starts": 0}

    @staticmethod
    def is_protocol(frame: Frame) -> bool:
        """Whether ``frame`` is a heartbeat (boot-up message included)."""
        cob = frame.arbitration_id
        return not frame.is_extended_id and function_of(cob) == HEARTBEAT_FUNCTION and node_of(cob) != 0

    def on_heartbeat(self, frame: Frame) -> list[Frame]:
        """Take a heartbeat; the frames to send: NMT start (all nodes) and the first SYNC once every
        required drive has reported, NMT start of a node that booted again after that."""
        if len(frame.data) != 1:
            self.c["heartbeats_invalid"] += 1
            return []
        node, state = node_of(frame.arbitration_id), frame.data[0]
        self.states[node] = state
        self.c["heartbeats"] += 1
        if not self.started:
            if all(n in self.states for n in self.required):
                self.started = True
                return [self._nmt(NMT_START, 0), self.sync()]
            return []
        if state == STATE_BOOTUP:
            self.c["single_starts"] += 1
            return [self._nmt(NMT_START, node)]
        return []

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
                **self.c}
