"""Electronic data sheets (CiA 306 EDS, version 4.0) of the emulated CANopen nodes, from their dictionaries.

One INI-style file per node: [FileInfo], [DeviceInfo] (the map's bit rate, 4 RPDOs and 4 TPDOs,
granularity 8: PDOs map whole bytes), [DummyUsage] (none), [Comments] (what the node plays and the
bus map's scaling of its process values), [MandatoryObjects] (0x1000, 0x1001, 0x1018),
[OptionalObjects] (the rest of 0x1000..0x1FFF and the device profile area 0x6000..),
[ManufacturerObjects] (0x2000..0x5FFF), then one section per object (``[6041]``) and sub-index
(``[1018sub2]``) with ParameterName, ObjectType (0x7 VAR, 0x8 ARRAY, 0x9 RECORD), SubNumber,
DataType, AccessType, DefaultValue (``$NODEID+0x180`` for the node's own COB-IDs), PDOMapping and
LowLimit/HighLimit where the object has a range. DefaultValue of a process value is its value at
power-on (statusword 0x0240: Switch on disabled, remote).

``export_eds(bus, out_dir)`` writes ``<map>_node<id>_<label>.eds`` for every node of a CANopen map.
"""
from __future__ import annotations

import time
from pathlib import Path

from firmware_bridge.canopen.drive_node import DriveNode
from firmware_bridge.canopen.network import DriveNodes, map_joint_names
from firmware_bridge.canopen.od import VAR, DictObject, Entry
from firmware_bridge.wire.messages import BusMap

MANDATORY = (0x1000, 0x1001, 0x1018)
BAUD_RATES_KBIT = (10, 20, 50, 125, 250, 500, 800, 1000)


def _value(entry: Entry, node_id: int, value) -> str:
    if not entry.type.bits:
        return str(value)
    if entry.relative:
        return f"$NODEID+0x{value - node_id:X}"
    return f"0x{value:08X}" if entry.type.bits == 32 and not entry.type.signed else str(value)


def _entry_section(name: str, entry: Entry, node_id: int) -> list[str]:
    value = entry.get() if entry.read is not None and entry.readable else entry.default
    lines = [f"[{name}]", f"ParameterName={entry.name}", f"ObjectType=0x{VAR:X}", f"DataType=0x{entry.type.code:04X}",
             f"AccessType={entry.access}", f"DefaultValue={_value(entry, node_id, value)}",
             f"PDOMapping={int(entry.pdo)}"]
    if entry.low is not None:
        lines.append(f"LowLimit={_value(entry, node_id, entry.low)}")
    if entry.high is not None:
        lines.append(f"HighLimit={_value(entry, node_id, entry.high)}")
    return lines + [""]


def _object_sections(obj: DictObject, node_id: int) -> list[str]:
    if obj.kind == VAR:
        return _entry_section(f"{obj.index:04X}", obj.entries[0], node_id)
    lines = [f"[{obj.index:04X}]", f"ParameterName={obj.name}", f"ObjectType=0x{obj.kind:X}",
             f"SubNumber={len(obj.entries)}", ""]
    for sub, entry in sorted(obj.entries.items()):
        lines += _entry_section(f"{obj.index:04X}sub{sub:X}", entry, node_id)
    return lines


def _list(title: str, indices: list[int]) -> list[str]:
    return [f"[{title}]", f"SupportedObjects={len(indices)}"] + [f"{k}=0x{i:04X}" for k, i in enumerate(indices, 1)] + [""]


def _comments(node: DriveNode, bus: BusMap) -> list[str]:
    what = (f"CiA 402 drive of joint {node.label} (cyclic synchronous torque)" if node.drive is not None
            else f"generic device {node.label}")
    lines = [f"Emulated CANopen node {node.id} of bus map {Path(bus.source).name}: {what}.",
             "PDO defaults are the bus map's layout; process values are raw integers as on the bus:"]
    for obj in node.od:
        for sub, entry in sorted(obj.entries.items()):
            if entry.description:
                lines.append(f"0x{obj.index:04X}sub{sub} {entry.name}: {entry.description}")
    return [f"Lines={len(lines)}"] + [f"Line{k}={text}" for k, text in enumerate(lines, 1)]


def eds_text(node: DriveNode, bus: BusMap, file_name: str, now: time.struct_time | None = None) -> str:
    """The EDS of one node."""
    now = now or time.localtime()
    stamp = [f"CreationTime={time.strftime('%I:%M%p', now)}", f"CreationDate={time.strftime('%m-%d-%Y', now)}",
             "CreatedBy=hil bus export", f"ModificationTime={time.strftime('%I:%M%p', now)}",
             f"ModificationDate={time.strftime('%m-%d-%Y', now)}", "ModifiedBy=hil bus export"]
    identity = node.od.objects[0x1018].entries
    kbit = round(bus.bitrate_bps / 1000)
    lines = ["[FileInfo]", f"FileName={file_name}", "FileVersion=1", "FileRevision=0", "EDSVersion=4.0",
             f"Description={node.od.objects[0x1008].entries[0].default}", *stamp, "",
             "[DeviceInfo]", "VendorName=ELLA HIL emulator", f"VendorNumber=0x{identity[1].default:08X}",
             f"ProductName={node.od.objects[0x1008].entries[0].default}",
             f"ProductNumber=0x{identity[2].default:08X}", f"RevisionNumber=0x{identity[3].default:08X}",
             f"OrderCode={file_name.removesuffix('.eds')}",
             *[f"BaudRate_{r}={int(r == kbit)}" for r in BAUD_RATES_KBIT],
             "SimpleBootUpMaster=0", "SimpleBootUpSlave=1", "Granularity=8", "DynamicChannelsSupported=0",
             "GroupMessaging=0", f"NrOfRXPDO={sum(p.kind == 'rpdo' for p in node.pdos)}",
             f"NrOfTXPDO={sum(p.kind == 'tpdo' for p in node.pdos)}", "LSS_Supported=0", "",
             "[DummyUsage]", *[f"Dummy{k:04d}=0" for k in range(1, 8)], "",
             "[Comments]", *_comments(node, bus), ""]
    indices = [o.index for o in node.od]
    lines += _list("MandatoryObjects", [i for i in indices if i in MANDATORY])
    lines += _list("OptionalObjects", [i for i in indices if i not in MANDATORY and not 0x2000 <= i < 0x6000])
    lines += _list("ManufacturerObjects", [i for i in indices if 0x2000 <= i < 0x6000])
    for obj in node.od:
        lines += _object_sections(obj, node.id)
    return "\n".join(lines)


def eds_file_name(bus: BusMap, node: DriveNode) -> str:
    return f"{Path(bus.source).stem}_node{node.id}_{node.label}.eds"


def export_eds(bus: BusMap, out_dir: str | Path) -> list[Path]:
    """One EDS per node of the CANopen map `bus` in `out_dir` (created); the paths written."""
    nodes = DriveNodes(bus, map_joint_names(bus), clock=lambda: 0.0)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    now = time.localtime()
    paths = []
    for node in nodes.nodes.values():
        path = out / eds_file_name(bus, node)
        path.write_text(eds_text(node, bus, path.name, now), encoding="ascii")
        paths.append(path)
    return paths

