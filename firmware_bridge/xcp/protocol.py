"""XCP 1.x packet identifiers, error codes and the transport's framing (ASAM MCD-1 XCP, Part 2 and
the Ethernet transport layer): the numbers a master and the emulator's slave agree on.

Byte order: Intel (little-endian) throughout, as the slave declares in its CONNECT answer.
"""
from __future__ import annotations

import struct
from enum import IntEnum


class Cmd(IntEnum):
    """Command packet identifiers (master -> slave), those the slave answers."""
    CONNECT = 0xFF
    DISCONNECT = 0xFE
    GET_STATUS = 0xFD
    SYNCH = 0xFC
    GET_COMM_MODE_INFO = 0xFB
    GET_ID = 0xFA
    SET_MTA = 0xF6
    UPLOAD = 0xF5
    SHORT_UPLOAD = 0xF4
    DOWNLOAD = 0xF0
    SHORT_DOWNLOAD = 0xED
    SET_DAQ_PTR = 0xE2
    WRITE_DAQ = 0xE1
    SET_DAQ_LIST_MODE = 0xE0
    GET_DAQ_LIST_MODE = 0xDF
    START_STOP_DAQ_LIST = 0xDE
    START_STOP_SYNCH = 0xDD
    GET_DAQ_CLOCK = 0xDC
    GET_DAQ_PROCESSOR_INFO = 0xDA
    GET_DAQ_RESOLUTION_INFO = 0xD9
    GET_DAQ_EVENT_INFO = 0xD7
    FREE_DAQ = 0xD6
    ALLOC_DAQ = 0xD5
    ALLOC_ODT = 0xD4
    ALLOC_ODT_ENTRY = 0xD3
    WRITE_DAQ_MULTIPLE = 0xC7


class Err(IntEnum):
    """Error codes of an ERR packet (0xFE, code)."""
    CMD_SYNCH = 0x00
    CMD_BUSY = 0x10
    DAQ_ACTIVE = 0x11
    CMD_UNKNOWN = 0x20
    CMD_SYNTAX = 0x21
    OUT_OF_RANGE = 0x22
    WRITE_PROTECTED = 0x23
    ACCESS_DENIED = 0x24
    SEQUENCE = 0x29
    DAQ_CONFIG = 0x2A
    MEMORY_OVERFLOW = 0x30
    GENERIC = 0x31


PID_RES = 0xFF          # positive response
PID_ERR = 0xFE          # error packet
MAX_CTO = 255           # command and response packets, bytes (Ethernet: up to 255)
MAX_DTO = 1400          # DAQ packets, bytes: one Ethernet frame's payload with room for the headers
PROTOCOL_VERSION = 1    # XCP protocol layer, major version
TRANSPORT_VERSION = 1   # XCP on Ethernet, major version

# CONNECT's RESOURCE byte and COMM_MODE_BASIC
RESOURCE_CAL_PAG = 0x01
RESOURCE_DAQ = 0x04
COMM_MODE_OPTIONAL = 0x80      # GET_COMM_MODE_INFO answers (byte order Intel, byte granularity: 0 bits)
SESSION_DAQ_RUNNING = 0x40     # GET_STATUS's session status

# DAQ: dynamic configuration, absolute ODT numbers as identification field, 4-byte timestamps in us
DAQ_PROPERTIES = 0x01 | 0x02 | 0x10        # dynamic, prescaler, timestamps supported
DAQ_KEY_BYTE = 0x00                        # no optimisation, address extension free, absolute ODT number
TIMESTAMP_MODE = 0x04 | (3 << 4)           # size DWORD, not fixed, unit 1 us
TIMESTAMP_TICKS = 1
DAQ_MODE_TIMESTAMP = 0x10                  # SET_DAQ_LIST_MODE: this list's first ODT carries a timestamp
DAQ_MODE_STIM = 0x02
MAX_ODT_ENTRY_SIZE = 248                   # bytes (one entry: up to what fits in a CTO-sized ODT)
EVENT_DAQ = 0x04                           # GET_DAQ_EVENT_INFO's properties: a DAQ event, ODT consistency

_ETH_HEADER = struct.Struct("<HH")
ETH_HEADER_SIZE = _ETH_HEADER.size


def eth_frame(packet: bytes, counter: int) -> bytes:
    """An XCP on Ethernet message: LEN and CTR (little-endian u16 each) before the packet."""
    return _ETH_HEADER.pack(len(packet), counter & 0xFFFF) + packet


def eth_packets(datagram: bytes) -> list[bytes] | None:
    """The packets of one datagram (several messages may share it); None if its framing is broken."""
    out, i = [], 0
    while i < len(datagram):
        if len(datagram) - i < ETH_HEADER_SIZE:
            return None
        length, _ = _ETH_HEADER.unpack_from(datagram, i)
        i += ETH_HEADER_SIZE
        if length == 0 or i + length > len(datagram):
            return None
        out.append(datagram[i:i + length])
        i += length
    return out or None


def error(code: int) -> bytes:
    """An ERR packet."""
    return bytes((PID_ERR, code))


def event_cycle(dt_s: float) -> tuple[int, int]:
    """An event channel's (time cycle, time unit) for a period: the finest unit whose cycle fits a
    byte (units 0 = 1 ns .. 9 = 1 s, powers of ten)."""
    for unit in range(10):
        cycle = dt_s / 10.0 ** (unit - 9)
        if cycle <= 255 and abs(cycle - round(cycle)) < 1e-6 * cycle:
            return int(round(cycle)), unit
    return 0, 0             # sporadic: no period a byte can state
