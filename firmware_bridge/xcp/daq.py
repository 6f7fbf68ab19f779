"""Synchronous data acquisition: the dynamic DAQ lists a master configures (FREE_DAQ, ALLOC_DAQ,
ALLOC_ODT, ALLOC_ODT_ENTRY, SET_DAQ_PTR, WRITE_DAQ, SET_DAQ_LIST_MODE, START_STOP_DAQ_LIST,
START_STOP_SYNCH) and the plan that samples the running lists once per event.

One event channel (0): the emulator's cycle. Identification field: the absolute ODT number (PID),
numbered over the lists in order; a list with timestamps carries the slave's clock (u32, 1 us
ticks) after the PID of its first ODT. Entries read the measurement region (hil's cycle row), so a
sample is the row of one cycle, consistent across all its ODTs.

Limits (refused with the XCP error, before anything changes): MAX_DAQ lists, MAX_PID ODTs in all,
MAX_ENTRIES entries in all; an ODT larger than a DTO is refused at START (ERR_DAQ_CONFIG). An ODT
may have no entry (classic CAN: the first ODT then carries the PID and the timestamp alone).
"""
from __future__ import annotations

import itertools
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from firmware_bridge.xcp.memory import MemoryMap, XcpError
from firmware_bridge.xcp.protocol import DAQ_MODE_STIM, DAQ_MODE_TIMESTAMP, MAX_DTO, MAX_ODT_ENTRY_SIZE, Err

MAX_DAQ = 16
MAX_PID = 0xFC            # ODTs in all (PIDs 0 .. 0xFB; 0xFC .. 0xFF are the slave's other packets)
MAX_ENTRIES = 4096
_U32 = struct.Struct("<I")
_U16 = struct.Struct("<H")


@dataclass
class DaqList:
    odts: list[list[tuple[int, int]]]          # per ODT its entries (offset in the row, size)
    mode: int = 0
    event: int = 0
    prescaler: int = 1
    priority: int = 0
    selected: bool = False
    running: bool = False
    first_pid: int = 0


@dataclass
class _Packet:
    buffer: np.ndarray          # transport header, PID, [timestamp], data
    gather: np.ndarray          # byte offsets in the row, in the data's order
    data: np.ndarray            # the buffer's data part (a view)
    timestamp_at: int           # byte offset of the timestamp in the buffer, -1 without
    prescaler: int


@dataclass
class DaqPlan:
    """The running lists as packets to fill and send per event (immutable once made)."""
    packets: list[_Packet] = field(default_factory=list)
    header: int = 0             # the transport's header bytes before the PID (their u16 counter at 2)

    def sample(self, row_bytes: np.ndarray, n_event: int, timestamp_us: int, counter: itertools.count,
               send: Callable[[np.ndarray], bool]) -> int:
        """Fill and send the packets due at event ``n_event``; returns how many could not be sent."""
        failed = 0
        for p in self.packets:
            if p.prescaler > 1 and n_event % p.prescaler:
                continue
            np.take(row_bytes, p.gather, out=p.data)
            if p.timestamp_at >= 0:
                _U32.pack_into(p.buffer, p.timestamp_at, timestamp_us & 0xFFFFFFFF)
            if self.header:
                _U16.pack_into(p.buffer, 2, next(counter) & 0xFFFF)
            failed += not send(p.buffer)
        return failed


class DaqConfig:
    """The dynamic DAQ configuration (module docstring); the master's thread changes it."""

    def __init__(self, memory: MemoryMap, max_dto: int = MAX_DTO):
        self.memory, self.max_dto = memory, max_dto
        self.lists: list[DaqList] = []
        self.pointer: tuple[int, int, int] | None = None
        self.stage = "free"          # free -> daq -> odt -> entry: the allocation order XCP requires

    def free(self) -> None:
        self.lists, self.pointer, self.stage = [], None, "free"

    def alloc_daq(self, count: int) -> None:
        self._stage(("free",), "ALLOC_DAQ")
        if not 0 < count <= MAX_DAQ:
            raise XcpError(Err.MEMORY_OVERFLOW, f"ALLOC_DAQ {count}: at most {MAX_DAQ} lists")
        self.lists, self.stage = [DaqList([]) for _ in range(count)], "daq"

    def alloc_odt(self, daq: int, count: int) -> None:
        self._stage(("daq", "odt"), "ALLOC_ODT")
        target = self.list_at(daq)
        if target.odts or sum(len(d.odts) for d in self.lists) + count > MAX_PID or count == 0:
            raise XcpError(Err.MEMORY_OVERFLOW, f"ALLOC_ODT {daq}, {count}: at most {MAX_PID} ODTs in all, once a list")
        target.odts, self.stage = [[] for _ in range(count)], "odt"

    def alloc_odt_entry(self, daq: int, odt: int, count: int) -> None:
        self._stage(("odt", "entry"), "ALLOC_ODT_ENTRY")
        entries = self._odt(daq, odt)
        if entries or self._entries() + count > MAX_ENTRIES:
            raise XcpError(Err.MEMORY_OVERFLOW, f"ALLOC_ODT_ENTRY {daq}, {odt}, {count}: at most {MAX_ENTRIES} in all")
        entries.extend([(-1, 0)] * count)
        self.stage = "entry"

    def set_pointer(self, daq: int, odt: int, entry: int) -> None:
        entries = self._odt(daq, odt)
        if not 0 <= entry < len(entries):
            raise XcpError(Err.OUT_OF_RANGE, f"SET_DAQ_PTR {daq}, {odt}, {entry}: ODT has {len(entries)} entries")
        if self.lists[daq].running:
            raise XcpError(Err.DAQ_ACTIVE, f"SET_DAQ_PTR {daq}: the list is running")
        self.pointer = (daq, odt, entry)

    def write_entry(self, bit_offset: int, size: int, ext: int, address: int) -> None:
        """WRITE_DAQ at the pointer, which then moves to the next entry."""
        if self.pointer is None:
            raise XcpError(Err.SEQUENCE, "WRITE_DAQ without SET_DAQ_PTR")
        largest = min(MAX_ODT_ENTRY_SIZE, self.max_dto - 1)
        if bit_offset != 0xFF or not 0 < size <= largest:
            raise XcpError(Err.OUT_OF_RANGE, f"WRITE_DAQ bit offset {bit_offset}, size {size}: expected 0xFF and "
                                             f"1 .. {largest} bytes")
        offset = self.memory.measurement_offset(address, ext, size)
        daq, odt, entry = self.pointer
        entries = self.lists[daq].odts[odt]
        if entry >= len(entries):
            raise XcpError(Err.OUT_OF_RANGE, f"WRITE_DAQ past the last entry of ODT {odt} of list {daq}")
        entries[entry] = (offset, size)
        self.pointer = (daq, odt, entry + 1)

    def set_mode(self, mode: int, daq: int, event: int, prescaler: int, priority: int) -> None:
        target = self.list_at(daq)
        if mode & DAQ_MODE_STIM or event != 0 or prescaler == 0:
            raise XcpError(Err.OUT_OF_RANGE, f"SET_DAQ_LIST_MODE {daq}: mode {mode:#x}, event {event}, prescaler "
                                             f"{prescaler}: DAQ only (no STIM), event 0, prescaler >= 1")
        if target.running:
            raise XcpError(Err.DAQ_ACTIVE, f"SET_DAQ_LIST_MODE {daq}: the list is running")
        target.mode, target.event, target.prescaler, target.priority = mode, event, prescaler, priority

    def start_stop_list(self, mode: int, daq: int) -> int:
        """START_STOP_DAQ_LIST: 0 stop, 1 start, 2 select; returns the list's first PID."""
        target = self.list_at(daq)
        if mode not in (0, 1, 2):
            raise XcpError(Err.OUT_OF_RANGE, f"START_STOP_DAQ_LIST mode {mode}: expected 0, 1 or 2")
        if mode:
            self._check_list(daq, target)
        target.running = target.running and mode != 0 or mode == 1
        target.selected = mode == 2
        return self._first_pids()[daq]

    def start_stop_synch(self, mode: int) -> None:
        """START_STOP_SYNCH: 0 stop all, 1 start the selected, 2 stop the selected."""
        if mode not in (0, 1, 2):
            raise XcpError(Err.OUT_OF_RANGE, f"START_STOP_SYNCH mode {mode}: expected 0, 1 or 2")
        for d in self.lists:
            d.running = False if mode == 0 else (mode == 1) if d.selected else d.running
            d.selected = False

    @property
    def running(self) -> bool:
        return any(d.running for d in self.lists)

    def plan(self, header: bytes) -> DaqPlan | None:
        """The packets of the running lists (None if none runs), after ``header`` (the transport's)."""
        packets = []
        for d in self.lists:
            if not d.running:
                continue
            for k, entries in enumerate(d.odts):
                stamp = k == 0 and bool(d.mode & DAQ_MODE_TIMESTAMP)
                prefix = len(header) + 1 + 4 * stamp
                gather = np.concatenate([np.arange(o, o + n) for o, n in entries] or [np.zeros(0)]).astype(np.intp)
                buffer = np.zeros(prefix + gather.size, np.uint8)
                buffer[:len(header)] = np.frombuffer(header, np.uint8)
                if header:          # XCP on Ethernet: LEN, the packet after the header
                    _U16.pack_into(buffer, 0, buffer.size - len(header))
                buffer[len(header)] = d.first_pid + k
                packets.append(_Packet(buffer, gather, buffer[prefix:], prefix - 4 if stamp else -1, d.prescaler))
        return DaqPlan(packets, len(header)) if packets else None

    def _check_list(self, daq: int, d: DaqList) -> None:
        for k, entries in enumerate(d.odts):
            size = 1 + 4 * (k == 0 and bool(d.mode & DAQ_MODE_TIMESTAMP)) + sum(n for _, n in entries)
            if any(o < 0 for o, _ in entries) or size > self.max_dto:
                raise XcpError(Err.DAQ_CONFIG, f"DAQ list {daq}, ODT {k}: {len(entries)} entries, {size} bytes: "
                                               f"every entry written, at most {self.max_dto} bytes")
        if not d.odts:
            raise XcpError(Err.DAQ_CONFIG, f"DAQ list {daq} has no ODT")

    def _first_pids(self) -> list[int]:
        pids = list(itertools.accumulate((len(d.odts) for d in self.lists), initial=0))[:-1]
        for d, pid in zip(self.lists, pids):
            d.first_pid = pid
        return pids

    def _stage(self, allowed: tuple[str, ...], command: str) -> None:
        if self.stage not in allowed:
            raise XcpError(Err.SEQUENCE, f"{command} after {self.stage.upper()}: XCP allocates lists, then ODTs, "
                                         "then entries, after FREE_DAQ")
        if any(d.running for d in self.lists):
            raise XcpError(Err.DAQ_ACTIVE, f"{command} while DAQ runs")

    def list_at(self, daq: int) -> DaqList:
        if not 0 <= daq < len(self.lists):
            raise XcpError(Err.OUT_OF_RANGE, f"DAQ list {daq}: {len(self.lists)} allocated")
        return self.lists[daq]

    def _odt(self, daq: int, odt: int) -> list[tuple[int, int]]:
        target = self.list_at(daq)
        if not 0 <= odt < len(target.odts):
            raise XcpError(Err.OUT_OF_RANGE, f"ODT {odt} of DAQ list {daq}: {len(target.odts)} allocated")
        return target.odts[odt]

    def _entries(self) -> int:
        return sum(len(o) for d in self.lists for o in d.odts)
