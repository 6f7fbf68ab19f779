"""PDOs of an emulated node (CiA 301): communication and mapping parameters, and the codec they define.

Each node has RPDO1..4 (master -> node; communication parameter 0x1400 + n - 1, mapping 0x1600 +
n - 1) and TPDO1..4 (node -> master; 0x1800 / 0x1A00 + n - 1). Communication parameter:
sub-index 1 the COB-ID (bit 31 set: PDO not valid; 11-bit identifiers only), sub-index 2 the
transmission type (TPDO: 1..240, sent on every n-th SYNC; RPDO: 0..240 synchronous or 254/255
asynchronous, taken at the next cycle either way). Mapping parameter: sub-index 0 the number of
mapped objects, sub-indices 1..8 the objects as ``index << 16 | sub-index << 8 | length in bits``,
packed little-endian from bit 0 in that order, whole bytes only (granularity 8), at most 64 bits.

A mapping is changed with the usual sequence, which this node enforces: (1) invalidate the PDO
(set bit 31 of the COB-ID), (2) write 0 to the mapping's sub-index 0, (3) write the entries,
(4) write the number of entries, (5) validate the PDO (clear bit 31). Refused with an abort:
an entry or the number of entries written while the PDO is valid, or an entry while sub-index 0
is not 0 (0x06010000); an object that does not exist (0x06020000 / 0x06090011), is not
PDO-mappable, has another length or the wrong access for the direction (0x06040041); more than 8
entries or 64 bits (0x06040042); a COB-ID changed while valid, in the restricted ranges of CiA
301, or 29-bit, and an unsupported transmission type (0x06090030).

The defaults are the bus map's layout (firmware_bridge.canopen.drive_node builds them); ``is_default``
says whether a PDO still has them, so that the emulator can send the map's frames unchanged.
"""
from __future__ import annotations

import struct
from typing import Callable

from .od import (ABORT_CANNOT_MAP, ABORT_PDO_LENGTH, ABORT_UNSUPPORTED_ACCESS, ABORT_VALUE, UNSIGNED8,
                         UNSIGNED32, Entry, ObjectDictionary, SdoAbort)

RPDO, TPDO = "rpdo", "tpdo"
COMM_BASE = {RPDO: 0x1400, TPDO: 0x1800}
MAP_BASE = {RPDO: 0x1600, TPDO: 0x1A00}
FUNCTIONS = {RPDO: (0x200, 0x300, 0x400, 0x500), TPDO: (0x180, 0x280, 0x380, 0x480)}
INVALID, NO_RTR, EXTENDED = 1 << 31, 1 << 30, 1 << 29
MAX_ENTRIES = 8
# CiA 301 restricted CAN identifiers: NMT, SYNC/EMCY, TIME, SDO, heartbeat, LSS and others
RESTRICTED = ((0x000, 0x07F), (0x101, 0x180), (0x581, 0x5FF), (0x601, 0x67F), (0x6E0, 0x6FF), (0x701, 0x77F),
              (0x780, 0x7FF))
Mapping = tuple[tuple[int, int, int], ...]      # (index, sub-index, bits) of each mapped object


def mapping_value(index: int, sub: int, bits: int) -> int:
    return index << 16 | sub << 8 | bits


def restricted(can_id: int) -> bool:
    return any(lo <= can_id <= hi for lo, hi in RESTRICTED)


class Pdo:
    """One PDO: its objects in the dictionary and the codec they define."""

    def __init__(self, od: ObjectDictionary, kind: str, number: int, node_id: int, mapping: Mapping = (),
                 transmission: int = 1, phase: int = 0, on_change: Callable[[], None] | None = None):
        """`mapping`, `transmission`: the defaults (a PDO without mapped objects starts invalid);
        `phase`: a TPDO with transmission type n goes out at the SYNCs k with (k - phase) % n == 0."""
        self.od, self.kind, self.number, self.phase = od, kind, number, phase
        self.on_change = on_change
        comm, mp = COMM_BASE[kind] + number - 1, MAP_BASE[kind] + number - 1
        cob = FUNCTIONS[kind][number - 1] + node_id
        label = f"{kind.upper()}{number}"
        self.cob = Entry(comm, 1, f"COB-ID used by {label}", UNSIGNED32, "rw", cob + (0 if mapping else INVALID),
                         write=self._write_cob, relative=True)
        self.transmission = Entry(comm, 2, "Transmission type", UNSIGNED8, "rw", transmission,
                                  write=self._write_transmission)
        od.record(comm, f"{label} communication parameter", [self.cob, self.transmission])
        values = [mapping_value(*m) for m in mapping] + [0] * (MAX_ENTRIES - len(mapping))
        self.entries = [Entry(mp, s, f"{label} mapped object {s}", UNSIGNED32, "rw", values[s - 1],
                              write=self._entry_writer(s)) for s in range(1, MAX_ENTRIES + 1)]
        self.count = od.record(mp, f"{label} mapping parameter", self.entries).entries[0]
        self.count.access = "rw"
        self.count.value = self.count.default = len(mapping)
        self.count.write = self._write_count
        self._default = self._config()
        self.compile()

    # ------------------------------------------------------------------ the codec
    def compile(self) -> None:
        """Codec and state from the dictionary's current values."""
        cob = self.cob.value
        self.valid = not cob & INVALID
        self.cob_id = cob & 0x7FF
        self.mapping: Mapping = tuple(self._split(self.entries[s].value) for s in range(self.count.value))
        self.targets = [self.od.entry(i, s) for i, s, _ in self.mapping]
        self.struct = struct.Struct("<" + "".join(t.type.fmt[1] for t in self.targets))
        self.length = self.struct.size
        self.limits = [(k, t.low, t.high) for k, t in enumerate(self.targets) if t.low is not None or t.high is not None]
        self.is_default = self._config() == self._default

    def _config(self) -> tuple:
        return self.cob.value, self.transmission.value, self.count.value, tuple(e.value for e in self.entries)

    def due(self, sync_index: int) -> bool:
        """A TPDO is sent at this SYNC (counted from 0)."""
        return (sync_index - self.phase) % self.transmission.value == 0

    def pack(self) -> bytes:
        """TPDO data from the mapped objects' current values."""
        return self.struct.pack(*[t.get() for t in self.targets])

    def receive(self, data: bytes) -> str | None:
        """Write an RPDO's data into the mapped objects; None if taken, else why not (a rejection kind of
        firmware_bridge.wire.codec.REJECTION_KINDS: "length", "range")."""
        if len(data) != self.length:
            return "length"
        values = self.struct.unpack(data)
        for k, lo, hi in self.limits:
            v = values[k]
            if (lo is not None and v < lo) or (hi is not None and v > hi):
                return "range"
        try:
            for target, v in zip(self.targets, values):
                if target.write is None:
                    target.value = v
                else:
                    target.write(v)
        except SdoAbort:
            return "range"
        return None

    # ------------------------------------------------------------------ the parameters' write checks
    @staticmethod
    def _split(value: int) -> tuple[int, int, int]:
        return value >> 16, value >> 8 & 0xFF, value & 0xFF

    def _changed(self) -> None:
        self.compile()
        if self.on_change is not None:
            self.on_change()

    def _write_cob(self, value: int) -> None:
        can_id, valid = value & 0x7FF, not value & INVALID
        if value & (EXTENDED | 0x1FFFF800):
            raise SdoAbort(ABORT_VALUE, f"COB-ID 0x{value:08X}: 11-bit identifiers only")
        if valid and self.valid and can_id != self.cob_id:
            raise SdoAbort(ABORT_VALUE, "the COB-ID of a valid PDO cannot change (invalidate it first)")
        if valid and restricted(can_id):
            raise SdoAbort(ABORT_VALUE, f"COB-ID 0x{can_id:03X} is restricted (CiA 301)")
        self.cob.value = value
        self._changed()

    def _write_transmission(self, value: int) -> None:
        ok = 1 <= value <= 240 if self.kind == TPDO else value <= 240 or value in (254, 255)
        if not ok:
            raise SdoAbort(ABORT_VALUE, f"transmission type {value}: supported "
                                        + ("1..240 (synchronous, cyclic)" if self.kind == TPDO else "0..240, 254, 255"))
        self.transmission.value = value
        self._changed()

    def _entry_writer(self, sub: int) -> Callable[[int], None]:
        def write(value: int) -> None:
            if self.valid or self.count.value:
                raise SdoAbort(ABORT_UNSUPPORTED_ACCESS, "invalidate the PDO and write 0 to sub-index 0 first")
            if value:
                self._check_mappable(value)
            self.entries[sub - 1].value = value
        return write

    def _check_mappable(self, value: int) -> int:
        index, sub, bits = self._split(value)
        target = self.od.entry(index, sub)
        access_ok = target.writable if self.kind == RPDO else target.readable
        if not (target.pdo and access_ok and bits == target.type.bits):
            raise SdoAbort(ABORT_CANNOT_MAP, f"0x{index:04X}sub{sub} ({bits} bits) in {self.kind.upper()}{self.number}")
        return bits

    def _write_count(self, value: int) -> None:
        if self.valid:
            raise SdoAbort(ABORT_UNSUPPORTED_ACCESS, "invalidate the PDO (COB-ID bit 31) first")
        if value > MAX_ENTRIES:
            raise SdoAbort(ABORT_PDO_LENGTH, f"{value} entries, at most {MAX_ENTRIES}")
        bits = 0
        for e in self.entries[:value]:
            if not e.value:
                raise SdoAbort(ABORT_CANNOT_MAP, f"entry {e.sub} is empty")
            bits += self._check_mappable(e.value)
        if bits > 64:
            raise SdoAbort(ABORT_PDO_LENGTH, f"{bits} bits, at most 64")
        self.count.value = value
        self._changed()

    def restore(self) -> None:
        """Back to the defaults (the dictionary's restore() already reset the values)."""
        self._changed()
