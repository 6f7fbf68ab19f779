"""The msgpack run log's format (hil.logs.runlog describes it): its name and version, the record
kinds, each row's fixed record layout and the CRC that protects every record."""
from __future__ import annotations

import struct

import numpy as np

from config_schema import UserError

FORMAT = "hil-run"
VERSION = 2
READABLE_VERSIONS = (1, 2)
SUFFIXES = (".csv", ".msgpack")
EXT_EVENT, EXT_GAP = 1, 2
CRC = struct.Struct(">I")


class RunLogError(UserError):
    """Unreadable or unsupported run log; the message names the file."""


def _array_prefix(n: int) -> bytes:
    """msgpack array header for n elements."""
    if n < 16:
        return bytes([0x90 | n])
    if n < 1 << 16:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def row_dtype(n: int, checked: bool) -> tuple[bytes, np.dtype]:
    """(array header, record dtype) of a row of n values; `checked`: with its CRC item (version 2)."""
    prefix = _array_prefix(n + 1 if checked else n)
    fields = [("prefix", "u1", (len(prefix),)), ("cells", [("tag", "u1"), ("value", ">f8")], (n,))]
    if checked:
        fields += [("crc_tag", "u1"), ("crc", ">u4")]
    return prefix, np.dtype(fields)
