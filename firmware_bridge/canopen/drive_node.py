"""One emulated CANopen node: object dictionary, SDO server, PDOs, the CiA 402 drive and its EMCY producer.

A node of a CANopen bus map is a CiA 402 drive when an RPDO of the map carries a joint's torque
(``tau_<joint>``), else a generic device (the IMU of ``canopen_cst``). Its dictionary:

communication area (CiA 301): 0x1000 device type (drive 0x00020192: CiA 402 servo drive; generic
0), 0x1001 error register, 0x1003 pre-defined error field (newest first; write 0 to clear),
0x1005 COB-ID SYNC, 0x1008/0x1009/0x100A device name and versions, 0x1014 COB-ID EMCY, 0x1017
producer heartbeat time [ms], 0x1018 identity, RPDO1..4 and TPDO1..4 (firmware_bridge.canopen.pdo);
manufacturer area (generic nodes): 0x2000 acceleration (imu_ax..az) and 0x2001 angular rate
(imu_gx..gz), raw INTEGER16 as on the bus map;
device area (CiA 402 drives): 0x603F error code, 0x6040 controlword, 0x6041 statusword, 0x605A
quick stop option code, 0x6060/0x6061 modes of operation (display): cyclic synchronous torque (10)
only, 0x6064 position actual value [motor counts], 0x606C velocity actual value [counts/s], 0x6071
target torque and 0x6072 max torque [per mille of the rated torque], 0x6076 motor rated torque
[mN m, at the joint: the map's torque scale x 1000], 0x6077 torque actual value [per mille],
0x6502 supported drive modes.

Process values (0x6064, 0x606C, 0x2000, 0x2001) are those the node last sent in the map's layout
(sampled at each SYNC). The drive applies ``clip(0x6071, -0x6072, 0x6072) x rated / 1000`` to its
joint in Operation enabled only (firmware_bridge.canopen.cia402); the torque actual value is the torque the
emulator applied. A fault (``fault(code)``) sends an EMCY (COB-ID 0x80 + node id: error code,
error register, 5 zero bytes), sets 0x603F, 0x1001 and the fault bit; a fault reset, once the cause
is gone, clears them and sends the EMCY "error reset" (code 0).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Callable

from . import cia402
from .od import (ABORT_VALUE, ARRAY, INTEGER8, INTEGER16, INTEGER32, MAP_TYPES, UNSIGNED8, UNSIGNED16,
                         UNSIGNED32, VISIBLE_STRING, DATA_TYPES, Entry, ObjectDictionary, SdoAbort)
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.codec import Codec
from .pdo import RPDO, TPDO, Pdo
from .sdo_server import SdoServer
from config_schema import UserError

EMCY_BASE = 0x080
DEVICE_TYPE_DRIVE = 0x00020192          # CiA 402 (0x192), servo drive (additional information 0x0002)
CYCLIC_SYNCHRONOUS_TORQUE = 10
SUPPORTED_MODES = 1 << 9                # 0x6502 bit 9: cyclic synchronous torque
EMCY_ERROR_RESET = 0x0000
# error register (0x1001) bits by the error code's class
ERROR_GENERIC, ERROR_CURRENT, ERROR_VOLTAGE, ERROR_TEMPERATURE, ERROR_COMMUNICATION = 0x01, 0x02, 0x04, 0x08, 0x10
# bus-map signals and the objects that carry their raw values: (index, sub-index, name, data type)
IMU_OBJECTS = {"imu_ax": (0x2000, 1), "imu_ay": (0x2000, 2), "imu_az": (0x2000, 3),
               "imu_gx": (0x2001, 1), "imu_gy": (0x2001, 2), "imu_gz": (0x2001, 3)}
JOINT_OBJECTS = {"tau_": 0x6071, "enc_": 0x6064, "vel_": 0x606C}
# the faults of the emulator's fault engine (kind, target) that a drive's own monitoring detects, and the
# CiA 402 error code it reports: a lost encoder signal, a motor fault; the others it cannot see
INCREMENTAL_SENSOR_FAULT = 0x7305
MOTOR_FAULT = 0x7122
ENCODER_CHANNELS = ("enc_", "vel_", "index_", "abs_")


def detected_fault(kind: str, target: str, joint: str) -> int:
    """The error code the drive of `joint` reports for a fault `kind` on `target`; 0 if it does not see it."""
    if kind == "encoder_disconnect" and target in (joint, f"enc_{joint}"):
        return INCREMENTAL_SENSOR_FAULT
    if kind == "dropout" and target in [p + joint for p in ENCODER_CHANNELS]:
        return INCREMENTAL_SENSOR_FAULT
    if kind == "kt_loss" and target == joint:
        return MOTOR_FAULT
    return 0


def error_register(code: int) -> int:
    """0x1001 for an error code (CiA 301: the generic bit always, plus the bit of its class)."""
    cls = code >> 12
    extra = {2: ERROR_CURRENT, 3: ERROR_VOLTAGE, 4: ERROR_TEMPERATURE}.get(cls, 0)
    if code >> 8 == 0x81:
        extra = ERROR_COMMUNICATION
    return ERROR_GENERIC | extra


def emcy_frame(node_id: int, code: int, register: int) -> Frame:
    return Frame(EMCY_BASE + node_id, struct.pack("<HB5x", code, register))


@dataclass
class NodeSpec:
    """What the bus map says about one node."""

    node_id: int
    label: str                                   # the joint it drives, or the name of its heartbeat message
    joint: int | None = None                     # index of the joint (CiA 402 drives)
    torque_scale: float = 0.0                    # N m per per mille of the rated torque (the map's tau scale)
    pdos: list[tuple[str, int, Codec]] = field(default_factory=list)   # (RPDO/TPDO, number 1..4, map codec)
    heartbeat_ms: int = 0


class DriveNode:
    """The dictionary and behaviour of one node. `tau`: the joints' applied torque set-points [N m], written
    by the drive; `latest`: the frames last sent per COB-ID in the map's layout (its process values);
    `emit(frame)`: send a frame (EMCY); `changed(node, what)`: "pdo", "drive" or "heartbeat" changed."""

    def __init__(self, spec: NodeSpec, tau, latest: dict[int, Frame], emit: Callable[[Frame], None],
                 changed: Callable[["DriveNode", str], None], source: str = "<map>"):
        self.spec, self.id, self.label = spec, spec.node_id, spec.label
        self.tau, self.latest, self.emit, self.changed = tau, latest, emit, changed
        self.source = source
        self.drive = cia402.PowerStateMachine() if spec.joint is not None else None
        self.torque_actual: Callable[[], float] | None = None     # the torque the emulator applied [N m]
        self.error_code = 0
        self.history: list[int] = []
        self.emcys = 0
        self.od = ObjectDictionary()
        self._communication_area()
        if self.drive is not None:
            self._drive_area()
        else:
            self._sensor_area()
        self.pdos = self._pdos()
        self.sdo = SdoServer(self.od)

    # ------------------------------------------------------------------ dictionary
    def _communication_area(self) -> None:
        od, s = self.od, self.spec
        drive = self.drive is not None
        od.var(0x1000, "Device type", UNSIGNED32, "const", DEVICE_TYPE_DRIVE if drive else 0)
        od.var(0x1001, "Error register", UNSIGNED8, "ro", pdo=True, read=self._error_register)
        history = [Entry(0x1003, k, f"Standard error field {k}", UNSIGNED32, "ro", read=self._history_at(k))
                   for k in range(1, 9)]
        count = od.record(0x1003, "Pre-defined error field", history, kind=ARRAY).entries[0]
        count.access, count.default, count.value = "rw", 0, 0
        count.read, count.write = (lambda: len(self.history)), self._clear_history
        od.var(0x1005, "COB-ID SYNC", UNSIGNED32, "const", 0x80)
        kind = f"joint drive, {s.label}" if drive else f"{s.label} node"
        od.var(0x1008, "Manufacturer device name", VISIBLE_STRING, "const", f"ELLA HIL emulated {kind}")
        od.var(0x1009, "Manufacturer hardware version", VISIBLE_STRING, "const", "emulated")
        od.var(0x100A, "Manufacturer software version", VISIBLE_STRING, "const", "ella-hil 0.1.0")
        od.var(0x1014, "COB-ID EMCY", UNSIGNED32, "const", EMCY_BASE + self.id, relative=True)
        self.heartbeat = od.var(0x1017, "Producer heartbeat time", UNSIGNED16, "rw", s.heartbeat_ms,
                                write=self._write_heartbeat, description="ms; 0: off")
        od.record(0x1018, "Identity object", [
            Entry(0x1018, 1, "Vendor-ID", UNSIGNED32, "ro", 0, description="0: no CiA vendor ID (emulator)"),
            Entry(0x1018, 2, "Product code", UNSIGNED32, "ro", 0x402 if drive else 0x1),
            Entry(0x1018, 3, "Revision number", UNSIGNED32, "ro", 0x00010000),
            Entry(0x1018, 4, "Serial number", UNSIGNED32, "ro", self.id)])

    def _drive_area(self) -> None:
        od, s = self.od, self.spec
        target = self._map_signal(f"tau_{s.label}")
        lo, hi = self._raw_limits(target)
        od.var(0x603F, "Error code", UNSIGNED16, "ro", pdo=True, read=lambda: self.error_code)
        od.var(0x6040, "Controlword", UNSIGNED16, "rw", pdo=True, read=lambda: self.drive.controlword,
               write=self._write_controlword)
        od.var(0x6041, "Statusword", UNSIGNED16, "ro", pdo=True, read=self.drive.statusword)
        od.var(0x605A, "Quick stop option code", INTEGER16, "rw", 2, write=self._write_quick_stop,
               description="2: Switch on disabled after the stop; 6: stay in Quick stop active")
        self.mode = od.var(0x6060, "Modes of operation", INTEGER8, "rw", CYCLIC_SYNCHRONOUS_TORQUE, pdo=True,
                           write=self._write_mode, description="10: cyclic synchronous torque (the only mode)")
        od.var(0x6061, "Modes of operation display", INTEGER8, "ro", pdo=True, read=lambda: self.mode.value)
        self._process_var(0x6064, "Position actual value", INTEGER32, f"enc_{s.label}", "motor encoder counts")
        self._process_var(0x606C, "Velocity actual value", INTEGER32, f"vel_{s.label}", "motor counts/s")
        self.target = od.var(0x6071, "Target torque", INTEGER16, "rw", 0, pdo=True, low=lo, high=hi,
                             write=self._write_target, description="per mille of the rated torque 0x6076")
        self.max_torque = od.var(0x6072, "Max torque", UNSIGNED16, "rw", max(-lo, hi), pdo=True,
                                 write=self._write_max_torque, description="per mille of the rated torque 0x6076")
        od.var(0x6076, "Motor rated torque", UNSIGNED32, "const", round(s.torque_scale * 1e6),
               description="mN m, stated at the joint (after the gear)")
        od.var(0x6077, "Torque actual value", INTEGER16, "ro", pdo=True, read=self._torque_actual,
               description="per mille of the rated torque 0x6076")
        od.var(0x6502, "Supported drive modes", UNSIGNED32, "const", SUPPORTED_MODES)

    def _sensor_area(self) -> None:
        names = {0x2000: ("Acceleration", ("imu_ax", "imu_ay", "imu_az")),
                 0x2001: ("Angular rate", ("imu_gx", "imu_gy", "imu_gz"))}
        carried = {n for _, _, c in self.spec.pdos for n in c.signal_names}
        for index, (name, signals) in names.items():
            if carried & set(signals):
                entries = [self._process_entry(index, k + 1, f"{name} {sig[-1]}", INTEGER16, sig)
                           for k, sig in enumerate(signals)]
                self.od.record(index, name, entries, kind=ARRAY)

    def _process_var(self, index: int, name: str, data_type: int, signal: str, unit: str) -> None:
        read, description = self._process_value(index, data_type, signal, unit)
        self.od.var(index, name, data_type, "ro", pdo=True, read=read, description=description)

    def _process_entry(self, index: int, sub: int, name: str, data_type: int, signal: str) -> Entry:
        read, description = self._process_value(index, data_type, signal, "")
        return Entry(index, sub, name, data_type, "ro", pdo=True, read=read, description=description)

    def _process_value(self, index: int, data_type: int, signal: str, unit: str) -> tuple[Callable[[], int], str]:
        """The reader of `signal` as the node last sent it (0 if the map does not carry it), and its unit."""
        found = self._map_signal(signal, required=False)
        if found is None:
            return (lambda: 0), f"{unit}; not carried by the bus map: reads 0"
        codec, sig = found
        kind = DATA_TYPES[data_type]
        if MAP_TYPES.get(sig.type) != data_type or sig.start_bit % 8 or sig.byte_order != "little":
            raise UserError(f"{self.source}: {signal} in {codec.name} must be a byte-aligned little-endian "
                             f"{kind.name} to be object 0x{index:04X}")
        cob, offset, fmt = codec.arbitration_id, sig.start_bit // 8, struct.Struct(kind.fmt)

        def read() -> int:
            frame = self.latest.get(cob)
            return 0 if frame is None else fmt.unpack_from(frame.data, offset)[0]
        what = unit if sig.scale == 1 else f"{sig.scale:g} {sig.unit} per count"
        return read, f"{what} ({signal} in {codec.name})"

    def _map_signal(self, name: str, required: bool = True):
        for _, _, codec in self.spec.pdos:
            if name in codec.signal_names:
                return codec, codec.spec.signals[codec.signal_names.index(name)]
        if required:
            raise UserError(f"{self.source}: node {self.id}: no PDO carries {name}")
        return None

    def _raw_limits(self, found) -> tuple[int, int]:
        codec, sig = found
        if MAP_TYPES.get(sig.type) != INTEGER16 or sig.start_bit % 8 or sig.byte_order != "little":
            raise UserError(f"{self.source}: {sig.name} in {codec.name} must be a byte-aligned little-endian "
                             f"int16 (target torque 0x6071, per mille)")
        return round(sig.minimum / sig.scale), round(sig.maximum / sig.scale)

    def _pdos(self) -> list[Pdo]:
        """RPDO1..4 and TPDO1..4 with the map's layouts as defaults."""
        defaults = {(kind, number): codec for kind, number, codec in self.spec.pdos}
        out = []
        for kind in (RPDO, TPDO):
            for number in range(1, 5):
                codec = defaults.get((kind, number))
                mapping = () if codec is None else self._mapping_of(codec)
                every = 1 if codec is None or codec.rate_divider == 0 else codec.rate_divider
                out.append(Pdo(self.od, kind, number, self.id, mapping, every if kind == TPDO else 1,
                               0 if codec is None else codec.rate_offset, lambda: self.changed(self, "pdo")))
        return out

    def _mapping_of(self, codec: Codec) -> tuple[tuple[int, int, int], ...]:
        """The map message's signals as a PDO mapping (contiguous from bit 0)."""
        out, bit = [], 0
        for sig in codec.spec.signals:
            index, sub = self._object_of(sig.name, codec)
            if sig.start_bit != bit or sig.byte_order != "little":
                raise UserError(f"{self.source}: {codec.name}: {sig.name} starts at bit {sig.start_bit}; a PDO "
                                 f"packs its objects little-endian from bit 0 without gaps (expected bit {bit})")
            entry = self.od.entry(index, sub)
            if MAP_TYPES.get(sig.type) != entry.type.code:
                raise UserError(f"{self.source}: {codec.name}: {sig.name} is {sig.type}; object 0x{index:04X} "
                                 f"({entry.name}) is {entry.type.name}")
            out.append((index, sub, entry.type.bits))
            bit += entry.type.bits
        if bit != 8 * codec.length:
            raise UserError(f"{self.source}: {codec.name}: {codec.length} bytes, its signals fill {bit // 8}")
        return tuple(out)

    def _object_of(self, signal: str, codec: Codec) -> tuple[int, int]:
        if signal in IMU_OBJECTS and self.drive is None:
            return IMU_OBJECTS[signal]
        for prefix, index in JOINT_OBJECTS.items():
            if self.drive is not None and signal == prefix + self.label:
                return index, 0
        raise UserError(f"{self.source}: {codec.name}: signal {signal} has no object in node {self.id} "
                         f"(CiA 402 drives carry tau_/enc_/vel_<joint>, other nodes imu_ax..imu_gz)")

    # ------------------------------------------------------------------ drive behaviour
    @property
    def enabled(self) -> bool:
        """The drive applies its target torque (CiA 402 Operation enabled)."""
        return self.drive is not None and self.drive.enabled

    def _write_controlword(self, value: int) -> None:
        was = self.drive.state
        if self.drive.write(value):
            if was == cia402.FAULT:
                self._error_reset()
            self._drive_changed()

    def _write_quick_stop(self, value: int) -> None:
        if value not in cia402.QUICK_STOP_OPTIONS:
            raise SdoAbort(ABORT_VALUE, f"quick stop option code {value}: supported "
                                        + ", ".join(map(str, cia402.QUICK_STOP_OPTIONS)))
        self.drive.quick_stop_option = value

    def _write_mode(self, value: int) -> None:
        if value != CYCLIC_SYNCHRONOUS_TORQUE:
            raise SdoAbort(ABORT_VALUE, f"mode {value}: this drive has cyclic synchronous torque (10) only")
        self.mode.value = value

    def _write_target(self, value: int) -> None:
        self.target.value = value
        if self.drive.enabled:
            self._apply()

    def _write_max_torque(self, value: int) -> None:
        self.max_torque.value = value
        if self.drive.enabled:
            self._apply()

    def _apply(self) -> None:
        """The joint's torque set-point from the target torque, clipped to the max torque."""
        target, limit = self.target.value, self.max_torque.value
        raw = min(max(target, -limit), limit)
        self.drive.limited = raw != target
        self.tau[self.spec.joint] = raw * self.spec.torque_scale

    def _drive_changed(self) -> None:
        if self.drive.enabled:
            self._apply()
        else:
            self.drive.limited = False
        self.changed(self, "drive")

    def _torque_actual(self) -> int:
        k = self.spec.joint
        if self.torque_actual is not None:
            tau = self.torque_actual()
        else:
            tau = self.tau[k] if self.drive.enabled else 0.0
        return max(-32768, min(32767, round(tau / self.spec.torque_scale)))

    # ------------------------------------------------------------------ faults and EMCY
    def fault(self, code: int) -> None:
        """A fault the drive detects (its cause persists until cause_cleared()): EMCY, error code and
        register, transition to Fault reaction active. A cause already reported sends nothing again."""
        if self.drive is None or (self.drive.cause and self.error_code == code):
            return
        self.drive.fault()
        self.error_code = code
        self.history.insert(0, code)
        del self.history[8:]
        self._emcy(code, error_register(code))
        self._drive_changed()

    def cause_cleared(self) -> None:
        """The fault's cause is gone: a fault reset (controlword bit 7 rising) now clears the fault."""
        if self.drive is not None:
            self.drive.cleared()

    def _error_reset(self) -> None:
        self.error_code = 0
        self._emcy(EMCY_ERROR_RESET, 0)

    def _emcy(self, code: int, register: int) -> None:
        self.emcys += 1
        self.emit(emcy_frame(self.id, code, register))

    def _error_register(self) -> int:
        return error_register(self.error_code) if self.error_code else 0

    def _history_at(self, k: int) -> Callable[[], int]:
        return lambda: self.history[k - 1] if k <= len(self.history) else 0

    def _clear_history(self, value: int) -> None:
        if value != 0:
            raise SdoAbort(ABORT_VALUE, "write 0 to clear the error history")
        self.history.clear()

    def tick(self) -> None:
        """Once per cycle while the drive is in a transient state (fault reaction, quick stop)."""
        if self.drive is not None and self.drive.tick():
            self._drive_changed()

    # ------------------------------------------------------------------ NMT resets
    def _write_heartbeat(self, value: int) -> None:
        self.heartbeat.value = value
        self.changed(self, "heartbeat")

    def reset_communication(self) -> None:
        """NMT reset communication: the communication parameters (0x1000..0x1FFF) back to their defaults."""
        self.od.restore(0x1000, 0x1FFF)
        for pdo in self.pdos:
            pdo.restore()
        self.changed(self, "heartbeat")

    def reset_node(self) -> None:
        """NMT reset node: every parameter back to its default, the drive powered on again (Switch on
        disabled, or Fault while a fault's cause persists)."""
        self.od.restore(0x2000, 0xFFFF)
        if self.drive is not None:
            self.drive.quick_stop_option = 2
            self.drive.power_on()
            if not self.drive.cause:
                self.error_code = 0
            self._drive_changed()
        self.reset_communication()

    def counters(self) -> dict:
        out = {"sdo": self.sdo.counters(), "emcys": self.emcys}
        if self.drive is not None:
            out.update(state=self.drive.name, error_code=f"0x{self.error_code:04X}",
                       refused_fault_resets=self.drive.refused_resets)
        return out

