"""CANopen on a bus map: COB-IDs and the emulated nodes (``network``), each node's object
dictionary (``od``), SDO server, PDOs and CiA 402 drive (``drive_node``, ``cia402``), and the
firmware's NMT master and SDO client (``master``).

The names of ``network`` were importable from ``firmware_bridge.canopen`` itself before it became
this package; they still are, with a DeprecationWarning, for one release."""
import importlib
import warnings

_MOVED_TO_NETWORK = frozenset({
    "TPDO_FUNCTIONS", "RPDO_FUNCTIONS", "HEARTBEAT_FUNCTION", "STATE_NAMES", "node_of", "function_of",
    "is_canopen", "joint_nodes", "map_joint_names", "node_specs", "PdoCommandInput", "DriveNodes"})


def __getattr__(name: str):
    if name in _MOVED_TO_NETWORK:
        warnings.warn(f"firmware_bridge.canopen.{name} moved to firmware_bridge.canopen.network.{name}",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module("firmware_bridge.canopen.network"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
