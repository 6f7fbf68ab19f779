"""The XCP slave's command processor: one command packet in, one response or error packet out.

Commands: CONNECT, DISCONNECT, GET_STATUS, SYNCH, GET_COMM_MODE_INFO, GET_ID (the identification
uploaded from the text region), SET_MTA, UPLOAD, SHORT_UPLOAD, DOWNLOAD, SHORT_DOWNLOAD, the DAQ
configuration (firmware_bridge.xcp.daq) and its information (GET_DAQ_PROCESSOR_INFO,
GET_DAQ_RESOLUTION_INFO, GET_DAQ_EVENT_INFO, GET_DAQ_CLOCK, GET_DAQ_LIST_MODE). Anything else is
ERR_CMD_UNKNOWN; a packet too short for its command ERR_CMD_SYNTAX; a command before CONNECT is
not answered (XCP: a slave not connected ignores all but CONNECT). Every error answered is counted
by its name, with the last reason kept.

Threads: ``handle`` runs on the transport's thread; ``plan`` (the running DAQ lists' packets, None
when none runs) is replaced whole when DAQ starts or stops, so the thread that samples reads it
without a lock.
"""
from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable

from firmware_bridge.xcp.daq import MAX_DAQ, DaqConfig, DaqPlan
from firmware_bridge.xcp.memory import TEXT_BASE, MemoryMap, XcpError
from firmware_bridge.xcp.protocol import (COMM_MODE_OPTIONAL, DAQ_KEY_BYTE, DAQ_PROPERTIES, EVENT_DAQ, MAX_CTO,
                                          MAX_DTO, MAX_ODT_ENTRY_SIZE, PID_RES, PROTOCOL_VERSION, RESOURCE_CAL_PAG,
                                          RESOURCE_DAQ, SESSION_DAQ_RUNNING, TIMESTAMP_MODE, TIMESTAMP_TICKS,
                                          TRANSPORT_VERSION, Cmd, Err, error)

_RES = bytes((PID_RES,))
# the bytes after the command byte each command needs, at least
_LENGTH = {Cmd.CONNECT: 1, Cmd.GET_ID: 1, Cmd.SET_MTA: 7, Cmd.UPLOAD: 1, Cmd.SHORT_UPLOAD: 7, Cmd.DOWNLOAD: 1,
           Cmd.SHORT_DOWNLOAD: 7, Cmd.SET_DAQ_PTR: 5, Cmd.WRITE_DAQ: 7, Cmd.SET_DAQ_LIST_MODE: 7,
           Cmd.GET_DAQ_LIST_MODE: 3, Cmd.START_STOP_DAQ_LIST: 3, Cmd.START_STOP_SYNCH: 1, Cmd.GET_DAQ_EVENT_INFO: 3,
           Cmd.ALLOC_DAQ: 3, Cmd.ALLOC_ODT: 4, Cmd.ALLOC_ODT_ENTRY: 5, Cmd.WRITE_DAQ_MULTIPLE: 1}


class XcpSlave:
    """Answers a master's commands over ``memory`` (firmware_bridge.xcp.memory). ``event``: the event
    channel's name and (time cycle, unit) (protocol.event_cycle); ``clock_us()``: the slave's clock
    for GET_DAQ_CLOCK and the DAQ timestamps; ``header``: the transport's bytes before a DAQ packet's
    PID (XCP on Ethernet: LEN and CTR, the counter filled per packet; on CAN none); ``max_cto`` and
    ``max_dto``: the transport's packet sizes (Ethernet 255 and 1400, CAN 8 and 8, CAN FD 64 and 64)."""

    def __init__(self, memory: MemoryMap, identification: str, event: tuple[str, tuple[int, int]],
                 clock_us: Callable[[], int], header: bytes = b"", max_cto: int = MAX_CTO, max_dto: int = MAX_DTO):
        self.memory, self.clock_us, self.header = memory, clock_us, header
        self.max_cto, self.max_dto = max_cto, max_dto
        self.event_name, (self.event_cycle, self.event_unit) = event
        ident, name = identification.encode(), self.event_name.encode()
        self.ident_address, self.event_name_address = TEXT_BASE, TEXT_BASE + len(ident)
        memory.set_text(ident + name)
        self.ident_length, self.event_name_length = len(ident), len(name)
        self.daq = DaqConfig(memory, max_dto)
        self.plan: DaqPlan | None = None
        self.connected = False
        self.mta = (0, 0)
        self.counts: Counter[str] = Counter()
        self.last_error = ""
        self._commands: dict[int, Callable[[bytes], bytes]] = {
            Cmd.CONNECT: self._connect, Cmd.DISCONNECT: self._disconnect, Cmd.GET_STATUS: self._status,
            Cmd.SYNCH: lambda p: error(Err.CMD_SYNCH), Cmd.GET_COMM_MODE_INFO: self._comm_mode_info,
            Cmd.GET_ID: self._get_id, Cmd.SET_MTA: self._set_mta, Cmd.UPLOAD: self._upload,
            Cmd.SHORT_UPLOAD: self._short_upload, Cmd.DOWNLOAD: self._download,
            Cmd.SHORT_DOWNLOAD: self._short_download, Cmd.GET_DAQ_PROCESSOR_INFO: self._processor_info,
            Cmd.GET_DAQ_RESOLUTION_INFO: self._resolution_info, Cmd.GET_DAQ_EVENT_INFO: self._event_info,
            Cmd.GET_DAQ_CLOCK: self._clock, Cmd.FREE_DAQ: self._daq_call(lambda p: self.daq.free()),
            Cmd.ALLOC_DAQ: self._daq_call(lambda p: self.daq.alloc_daq(_u16(p, 2))),
            Cmd.ALLOC_ODT: self._daq_call(lambda p: self.daq.alloc_odt(_u16(p, 2), p[4])),
            Cmd.ALLOC_ODT_ENTRY: self._daq_call(lambda p: self.daq.alloc_odt_entry(_u16(p, 2), p[4], p[5])),
            Cmd.SET_DAQ_PTR: self._daq_call(lambda p: self.daq.set_pointer(_u16(p, 2), p[4], p[5])),
            Cmd.WRITE_DAQ: self._daq_call(lambda p: self.daq.write_entry(p[1], p[2], p[3], _u32(p, 4))),
            Cmd.WRITE_DAQ_MULTIPLE: self._write_daq_multiple,
            Cmd.SET_DAQ_LIST_MODE: self._daq_call(
                lambda p: self.daq.set_mode(p[1], _u16(p, 2), _u16(p, 4), p[6], p[7])),
            Cmd.GET_DAQ_LIST_MODE: self._daq_list_mode, Cmd.START_STOP_DAQ_LIST: self._start_stop_list,
            Cmd.START_STOP_SYNCH: self._daq_call(lambda p: self.daq.start_stop_synch(p[1])),
        }

    def handle(self, packet: bytes) -> bytes | None:
        """The response to one command packet (None: not answered, as before CONNECT)."""
        if not packet:
            return None
        cmd = packet[0]
        if not self.connected and cmd != Cmd.CONNECT:
            self.counts["ignored_unconnected"] += 1
            return None
        self.counts["commands"] += 1
        handler = self._commands.get(cmd)
        try:
            if handler is None:
                raise XcpError(Err.CMD_UNKNOWN, f"command {cmd:#04x}")
            if len(packet) - 1 < _LENGTH.get(cmd, 0):
                raise XcpError(Err.CMD_SYNTAX, f"{Cmd(cmd).name}: {len(packet)} bytes")
            return handler(packet)
        except XcpError as exc:
            self.counts[f"ERR_{Err(exc.code).name}"] += 1
            self.last_error = f"{Err(exc.code).name}: {exc}"
            return error(exc.code)

    @property
    def errors(self) -> dict[str, int]:
        return {k: v for k, v in self.counts.items() if k.startswith("ERR_")}

    # ------------------------------------------------------------------ session
    def _connect(self, p: bytes) -> bytes:
        if p[1] != 0:
            raise XcpError(Err.OUT_OF_RANGE, f"CONNECT mode {p[1]}: normal mode (0) only")
        self.daq.free()             # a new session: no DAQ packet before this master has set its lists up
        self.plan = None
        self.connected = True
        self.counts["connects"] += 1
        return _RES + bytes((RESOURCE_CAL_PAG | RESOURCE_DAQ, COMM_MODE_OPTIONAL, self.max_cto)) + struct.pack(
            "<HBB", self.max_dto, PROTOCOL_VERSION, TRANSPORT_VERSION)

    def _disconnect(self, p: bytes) -> bytes:
        self.daq.start_stop_synch(0)
        self.plan = None
        self.connected = False
        return _RES

    def _status(self, p: bytes) -> bytes:
        session = SESSION_DAQ_RUNNING if self.daq.running else 0
        return _RES + bytes((session, 0, 0)) + struct.pack("<H", 0)

    def _comm_mode_info(self, p: bytes) -> bytes:
        return _RES + bytes((0, 0, 0, 0, 0, 0, 0x10))     # no block or interleaved mode; driver 1.0

    def _get_id(self, p: bytes) -> bytes:
        if p[1] != 1:
            raise XcpError(Err.OUT_OF_RANGE, f"GET_ID type {p[1]}: the ASAM-MC2 file name (1) only")
        self.mta = (self.ident_address, 0)
        return _RES + bytes((0, 0, 0)) + struct.pack("<I", self.ident_length)

    # ------------------------------------------------------------------ memory
    def _set_mta(self, p: bytes) -> bytes:
        self.mta = (_u32(p, 4), p[3])
        return _RES

    def _upload(self, p: bytes) -> bytes:
        return _RES + self._read_mta(p[1])

    def _short_upload(self, p: bytes) -> bytes:
        self.mta = (_u32(p, 4), p[3])
        return _RES + self._read_mta(p[1])

    def _read_mta(self, n: int) -> bytes:
        if not 0 < n < self.max_cto:
            raise XcpError(Err.OUT_OF_RANGE, f"upload of {n} bytes: 1 .. {self.max_cto - 1}")
        address, ext = self.mta
        data = self.memory.read(address, ext, n)
        self.mta = (address + n, ext)
        return data

    def _download(self, p: bytes) -> bytes:
        return self._write_mta(p[1], p[2:])

    def _short_download(self, p: bytes) -> bytes:
        self.mta = (_u32(p, 4), p[3])
        return self._write_mta(p[1], p[8:])

    def _write_mta(self, n: int, data: bytes) -> bytes:
        if n == 0 or len(data) < n:
            raise XcpError(Err.CMD_SYNTAX, f"download of {n} bytes with {len(data)} in the packet")
        address, ext = self.mta
        self.memory.write(address, ext, data[:n])
        self.counts["downloads"] += 1
        self.mta = (address + n, ext)
        return _RES

    # ------------------------------------------------------------------ DAQ
    def _processor_info(self, p: bytes) -> bytes:
        return _RES + bytes((DAQ_PROPERTIES,)) + struct.pack("<HHBB", MAX_DAQ, 1, 0, DAQ_KEY_BYTE)

    def _resolution_info(self, p: bytes) -> bytes:
        entry = min(MAX_ODT_ENTRY_SIZE, self.max_dto - 1)
        return _RES + bytes((1, entry, 1, 0, TIMESTAMP_MODE)) + struct.pack("<H", TIMESTAMP_TICKS)

    def _event_info(self, p: bytes) -> bytes:
        if _u16(p, 2) != 0:
            raise XcpError(Err.OUT_OF_RANGE, f"event channel {_u16(p, 2)}: one channel (0)")
        self.mta = (self.event_name_address, 0)
        return _RES + bytes((EVENT_DAQ, 0xFF, self.event_name_length, self.event_cycle, self.event_unit, 0))

    def _clock(self, p: bytes) -> bytes:
        return _RES + bytes((0, 0, 0)) + struct.pack("<I", self.clock_us() & 0xFFFFFFFF)

    def _daq_list_mode(self, p: bytes) -> bytes:
        d = self.daq.list_at(_u16(p, 2))
        mode = d.mode | (0x40 if d.running else 0) | (0x01 if d.selected else 0)
        return _RES + bytes((mode, 0, 0)) + struct.pack("<HBB", d.event, d.prescaler, d.priority)

    def _start_stop_list(self, p: bytes) -> bytes:
        first_pid = self.daq.start_stop_list(p[1], _u16(p, 2))
        self._replan()
        return _RES + bytes((first_pid,))

    def _write_daq_multiple(self, p: bytes) -> bytes:
        n = p[1]
        if len(p) < 2 + 8 * n or n == 0:
            raise XcpError(Err.CMD_SYNTAX, f"WRITE_DAQ_MULTIPLE of {n} entries in {len(p)} bytes")
        for k in range(n):
            e = p[2 + 8 * k:10 + 8 * k]
            self.daq.write_entry(e[0], e[1], e[6], _u32(e, 2))
        return _RES

    def _daq_call(self, action: Callable[[bytes], None]) -> Callable[[bytes], bytes]:
        def run(p: bytes) -> bytes:
            action(p)
            self._replan()
            return _RES
        return run

    def _replan(self) -> None:
        self.plan = self.daq.plan(self.header) if self.daq.running else None


def _u16(p: bytes, i: int) -> int:
    return struct.unpack_from("<H", p, i)[0]


def _u32(p: bytes, i: int) -> int:
    return struct.unpack_from("<I", p, i)[0]
