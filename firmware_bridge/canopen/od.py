"""A CANopen object dictionary (CiA 301): typed entries with access rights, limits and defaults.

Objects are addressed by index (16 bit) and sub-index (8 bit). An object is a VAR (one entry,
sub-index 0), an ARRAY (sub-index 0 the number of entries, then entries of one type) or a RECORD
(sub-index 0 the highest sub-index, then entries of any type). Each entry has a data type (CiA 301
basic types: INTEGER8/16/32, UNSIGNED8/16/32, VISIBLE_STRING), an access type (``ro``, ``wo``,
``rw``, ``const``), whether it may be mapped into a PDO, an optional value range and a default.

Values are Python ints (strings for VISIBLE_STRING). An entry may compute its value (``read``: a
process value such as the statusword) or own its write (``write``: a hook that checks the value,
raising :class:`SdoAbort` to refuse it, and stores it with its side effects). The SDO server
(:mod:`firmware_bridge.canopen.sdo_server`) moves values as bytes through :meth:`ObjectDictionary.upload`
and :meth:`ObjectDictionary.download`, which raise :class:`SdoAbort` with the CiA 301 abort code
of whatever is wrong; the EDS writer (:mod:`firmware_bridge.formats.eds`) lists the objects.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Callable, Iterator

from config_schema import UserError

# ----------------------------------------------------------------------------- data and object types
INTEGER8, INTEGER16, INTEGER32 = 0x0002, 0x0003, 0x0004
UNSIGNED8, UNSIGNED16, UNSIGNED32 = 0x0005, 0x0006, 0x0007
VISIBLE_STRING = 0x0009
VAR, ARRAY, RECORD = 0x7, 0x8, 0x9
ACCESS_TYPES = ("ro", "wo", "rw", "const")


@dataclass(frozen=True)
class DataType:
    code: int
    name: str
    bits: int              # 0: variable length (strings)
    signed: bool
    fmt: str               # struct format (little-endian), "" for strings

    @property
    def low(self) -> int:
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def high(self) -> int:
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1


DATA_TYPES = {t.code: t for t in (
    DataType(INTEGER8, "INTEGER8", 8, True, "<b"), DataType(INTEGER16, "INTEGER16", 16, True, "<h"),
    DataType(INTEGER32, "INTEGER32", 32, True, "<i"), DataType(UNSIGNED8, "UNSIGNED8", 8, False, "<B"),
    DataType(UNSIGNED16, "UNSIGNED16", 16, False, "<H"), DataType(UNSIGNED32, "UNSIGNED32", 32, False, "<I"),
    DataType(VISIBLE_STRING, "VISIBLE_STRING", 0, False, ""))}
# bus-map signal type -> data type
MAP_TYPES = {"int8": INTEGER8, "int16": INTEGER16, "int32": INTEGER32,
             "uint8": UNSIGNED8, "uint16": UNSIGNED16, "uint32": UNSIGNED32}

# ----------------------------------------------------------------------------- SDO abort codes (CiA 301)
ABORT_TOGGLE = 0x05030000               # toggle bit not alternated
ABORT_COMMAND = 0x05040001              # client/server command specifier not valid or unknown
ABORT_UNSUPPORTED_ACCESS = 0x06010000   # unsupported access to an object
ABORT_WRITE_ONLY = 0x06010001           # attempt to read a write only object
ABORT_READ_ONLY = 0x06010002            # attempt to write a read only object
ABORT_NO_OBJECT = 0x06020000            # object does not exist in the object dictionary
ABORT_CANNOT_MAP = 0x06040041           # object cannot be mapped to the PDO
ABORT_PDO_LENGTH = 0x06040042           # number and length of the mapped objects would exceed the PDO length
ABORT_LENGTH = 0x06070010               # data type does not match, length of service parameter does not match
ABORT_NO_SUBINDEX = 0x06090011          # sub-index does not exist
ABORT_VALUE = 0x06090030                # invalid value for parameter (download only)
ABORT_VALUE_HIGH = 0x06090031           # value of parameter written too high
ABORT_VALUE_LOW = 0x06090032            # value of parameter written too low
ABORT_DEVICE_STATE = 0x08000022         # data cannot be transferred or stored because of the present device state
ABORT_TEXT = {ABORT_TOGGLE: "toggle bit not alternated", ABORT_COMMAND: "command specifier not valid",
              ABORT_UNSUPPORTED_ACCESS: "unsupported access to an object",
              ABORT_WRITE_ONLY: "attempt to read a write only object",
              ABORT_READ_ONLY: "attempt to write a read only object",
              ABORT_NO_OBJECT: "object does not exist in the object dictionary",
              ABORT_CANNOT_MAP: "object cannot be mapped to the PDO",
              ABORT_PDO_LENGTH: "mapped objects would exceed the PDO length",
              ABORT_LENGTH: "length of service parameter does not match", ABORT_NO_SUBINDEX: "sub-index does not exist",
              ABORT_VALUE: "invalid value for parameter", ABORT_VALUE_HIGH: "value of parameter written too high",
              ABORT_VALUE_LOW: "value of parameter written too low",
              ABORT_DEVICE_STATE: "not possible in the present device state"}


class SdoAbort(Exception):
    """An SDO access refused with CiA 301 abort ``code``."""

    def __init__(self, code: int, what: str = ""):
        self.code = code
        super().__init__(f"SDO abort 0x{code:08X} ({ABORT_TEXT.get(code, 'abort')})" + (f": {what}" if what else ""))


# ----------------------------------------------------------------------------- entries and objects
class Entry:
    """One sub-index: its type, access, range, default and current value (or the hooks that own them).
    `relative`: the default is a COB-ID of this node, written ``$NODEID+(default - node id)`` in an EDS."""

    __slots__ = ("index", "sub", "name", "type", "access", "pdo", "low", "high", "default", "value", "read",
                 "write", "relative", "description")

    def __init__(self, index: int, sub: int, name: str, data_type: int, access: str, default: int | str = 0, *,
                 pdo: bool = False, low: int | None = None, high: int | None = None,
                 read: Callable[[], int] | None = None, write: Callable[[int], None] | None = None,
                 relative: bool = False, description: str = ""):
        if access not in ACCESS_TYPES:
            raise UserError(f"0x{index:04X}sub{sub}: access {access!r}: expected one of {', '.join(ACCESS_TYPES)}")
        self.index, self.sub, self.name, self.type, self.access = index, sub, name, DATA_TYPES[data_type], access
        self.pdo, self.low, self.high, self.relative, self.description = pdo, low, high, relative, description
        self.default = default
        self.value = default
        self.read = read
        self.write = write

    @property
    def readable(self) -> bool:
        return self.access != "wo"

    @property
    def writable(self) -> bool:
        return self.access in ("rw", "wo")

    def get(self) -> int | str:
        return self.read() if self.read is not None else self.value

    def set(self, value: int | str) -> None:
        """Store a value from the bus (SDO or RPDO): range checked, then through the write hook."""
        if self.low is not None and value < self.low:
            raise SdoAbort(ABORT_VALUE_LOW, f"{self.name} = {value} < {self.low}")
        if self.high is not None and value > self.high:
            raise SdoAbort(ABORT_VALUE_HIGH, f"{self.name} = {value} > {self.high}")
        if self.write is not None:
            self.write(value)
        else:
            self.value = value

    def encode(self, value: int | str) -> bytes:
        if not self.type.bits:
            return str(value).encode("ascii")
        return struct.pack(self.type.fmt, value)

    def decode(self, data: bytes) -> int | str:
        if not self.type.bits:
            try:
                return data.decode("ascii")
            except UnicodeDecodeError:
                raise SdoAbort(ABORT_VALUE, f"{self.name}: not an ASCII string") from None
        if len(data) != self.type.bits // 8:
            raise SdoAbort(ABORT_LENGTH, f"{self.name} is {self.type.name} ({self.type.bits // 8} bytes), "
                                         f"got {len(data)}")
        return struct.unpack(self.type.fmt, data)[0]


@dataclass
class DictObject:
    """An object: a VAR (one entry at sub-index 0), or an ARRAY or RECORD of entries."""

    index: int
    name: str
    kind: int
    entries: dict[int, Entry]


class ObjectDictionary:
    """The objects of one node, by index."""

    def __init__(self) -> None:
        self.objects: dict[int, DictObject] = {}

    def __iter__(self) -> Iterator[DictObject]:
        return iter(sorted(self.objects.values(), key=lambda o: o.index))

    def __contains__(self, index: int) -> bool:
        return index in self.objects

    def var(self, index: int, name: str, data_type: int, access: str, default: int | str = 0, **kw) -> Entry:
        """Add a VAR object; returns its entry."""
        entry = Entry(index, 0, name, data_type, access, default, **kw)
        self._add(DictObject(index, name, VAR, {0: entry}))
        return entry

    def record(self, index: int, name: str, entries: list[Entry], kind: int = RECORD,
               count_access: str = "const") -> DictObject:
        """Add an ARRAY or RECORD of `entries` (sub-index 1 on); sub-index 0 is the number (ARRAY) or the
        highest sub-index (RECORD) of the entries, UNSIGNED8, with `count_access`."""
        count = Entry(index, 0, "Number of entries" if kind == ARRAY else "Highest sub-index supported",
                      UNSIGNED8, count_access, max((e.sub for e in entries), default=0))
        obj = DictObject(index, name, kind, {0: count, **{e.sub: e for e in entries}})
        self._add(obj)
        return obj

    def _add(self, obj: DictObject) -> None:
        if obj.index in self.objects:
            raise ValueError(f"object 0x{obj.index:04X} defined twice")
        self.objects[obj.index] = obj

    def entry(self, index: int, sub: int) -> Entry:
        """The entry at index/sub-index; SdoAbort 0x06020000 or 0x06090011 if there is none."""
        obj = self.objects.get(index)
        if obj is None:
            raise SdoAbort(ABORT_NO_OBJECT, f"0x{index:04X}")
        entry = obj.entries.get(sub)
        if entry is None:
            raise SdoAbort(ABORT_NO_SUBINDEX, f"0x{index:04X}sub{sub}")
        return entry

    def upload(self, index: int, sub: int) -> bytes:
        """The entry's value as bytes (SDO upload)."""
        entry = self.entry(index, sub)
        if not entry.readable:
            raise SdoAbort(ABORT_WRITE_ONLY, entry.name)
        return entry.encode(entry.get())

    def writable_entry(self, index: int, sub: int) -> Entry:
        """The entry at index/sub-index, if it may be written (SDO download)."""
        entry = self.entry(index, sub)
        if not entry.writable:
            raise SdoAbort(ABORT_READ_ONLY, entry.name)
        return entry

    def download(self, index: int, sub: int, data: bytes) -> None:
        """Write bytes to an entry (SDO download): access, length, range and the entry's own checks."""
        entry = self.writable_entry(index, sub)
        entry.set(entry.decode(data))

    def restore(self, low: int, high: int) -> None:
        """Stored values of the objects low..high back to their defaults (an NMT reset)."""
        for obj in self.objects.values():
            if low <= obj.index <= high:
                for entry in obj.entries.values():
                    entry.value = entry.default
