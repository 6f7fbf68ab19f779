"""CANopen COB-IDs of the CiA 301 predefined connection set on a bus map, in plain Python: function
codes and node ids, whether a map is CANopen, and which node carries each joint's PDOs. Both ends
use them: the emulated drive nodes (firmware_bridge.canopen.network) and the firmware's master
(firmware_bridge.canopen.master)."""
from __future__ import annotations

from config_schema import UserError
from firmware_bridge.wire.messages import (HEARTBEAT_BASE_ID, NMT_ID, STATE_BOOTUP, STATE_OPERATIONAL,
                                           STATE_PRE_OPERATIONAL, STATE_STOPPED, SYNC_ID, BusMap)

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


def is_canopen(bus: BusMap) -> bool:
    """Whether ``bus`` is a CANopen map: NMT (0x000) and SYNC (0x080) messages to the plant."""
    ids = {c.arbitration_id for c in bus.messages("to_plant") if not c.is_extended_id}
    return bus.kind in ("can", "canfd") and NMT_ID in ids and SYNC_ID in ids


def joint_nodes(bus: BusMap, direction: str, signal: str, names: list[str], functions) -> list[int]:
    """Node id of the PDO carrying ``signal.format(joint)`` for each joint."""
    out = []
    for name in names:
        sig = signal.format(name)
        hits = [c for c, _ in bus.find(sig) if c.direction == direction]
        if not hits or function_of(hits[0].arbitration_id) not in functions or hits[0].is_extended_id:
            raise UserError(f"{bus.source}: {sig} is not carried by a {direction} PDO of the predefined "
                             f"connection set")
        out.append(node_of(hits[0].arbitration_id))
    return out


def map_joint_names(bus: BusMap) -> list[str]:
    """The joints of a CANopen map: each ``tau_<joint>`` its RPDOs carry, in map order."""
    return [n[4:] for c in bus.messages("to_plant") if function_of(c.arbitration_id) in RPDO_FUNCTIONS
            for n in c.signal_names if n.startswith("tau_")]
