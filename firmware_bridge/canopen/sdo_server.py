"""The SDO server of an emulated node (CiA 301 SDO protocol), and the few client frames a master needs.

Every request and response is one 8-byte CAN frame: byte 0 the command specifier, bytes 1-2 the
index (little-endian), byte 3 the sub-index, bytes 4-7 data (an initiate) or bytes 1-7 data (a
segment). Supported: expedited and segmented download (master -> node) and upload (node ->
master), with the size indicated or not, the toggle bit checked on every segment, and abort
transfer from either side. Block transfer (command specifiers 5 and 6) is not supported: it is
answered with abort 0x05040001 (command specifier not valid), after which CiA 301 clients fall
back to segmented transfer. A new initiate replaces a transfer in progress.

Abort codes (firmware_bridge.canopen.od): 0x05030000 toggle bit not alternated, 0x05040001
command specifier not valid or a segment without a transfer, 0x06010001/0x06010002 read of a
write-only / write of a read-only object, 0x06020000 object does not exist, 0x06090011 sub-index
does not exist, 0x06070010 length does not match the data type (or the indicated size), and
whatever the object itself refuses (0x06090030/31/32 value, 0x06040041/42 PDO mapping, ...).
"""
from __future__ import annotations

import struct

from .od import ABORT_COMMAND, ABORT_LENGTH, ABORT_TOGGLE, ObjectDictionary, SdoAbort

SDO_REQUEST_BASE = 0x600        # master -> node (COB-ID + node id)
SDO_RESPONSE_BASE = 0x580       # node -> master
_HEAD = struct.Struct("<BHB")
_ABORT = struct.Struct("<BHBI")
_SIZE = struct.Struct("<I")
# client command specifiers (bits 7-5 of byte 0)
CCS_SEGMENT_DOWNLOAD, CCS_DOWNLOAD, CCS_UPLOAD, CCS_SEGMENT_UPLOAD, CCS_ABORT = 0, 1, 2, 3, 4
TOGGLE, LAST, EXPEDITED, SIZE_INDICATED = 0x10, 0x01, 0x02, 0x01


def abort_frame(index: int, sub: int, code: int) -> bytes:
    """An abort transfer frame (either direction)."""
    return _ABORT.pack(0x80, index, sub, code)


def expedited_download(index: int, sub: int, data: bytes) -> bytes:
    """Client request: write 1..4 bytes in one frame."""
    if not 1 <= len(data) <= 4:
        raise ValueError(f"expedited download of {len(data)} bytes: expected 1..4")
    return _HEAD.pack(0x23 | (4 - len(data)) << 2, index, sub) + data.ljust(4, b"\0")


def upload_request(index: int, sub: int) -> bytes:
    """Client request: read an entry (the server chooses expedited or segmented)."""
    return _HEAD.pack(0x40, index, sub) + bytes(4)


def download_confirmed(response: bytes, index: int, sub: int) -> int:
    """0 if `response` confirms a download of index/sub, else the abort code (0x05040001 for a response
    that is neither a confirmation nor an abort of it)."""
    if len(response) == 8:
        command, r_index, r_sub = _HEAD.unpack_from(response)
        if (r_index, r_sub) == (index, sub):
            if command == 0x60:
                return 0
            if command == 0x80:
                return _SIZE.unpack_from(response, 4)[0]
    return ABORT_COMMAND


class _Transfer:
    """A segmented transfer in progress."""

    __slots__ = ("upload", "index", "sub", "toggle", "data", "size", "entry")

    def __init__(self, upload: bool, index: int, sub: int, data: bytearray, size: int | None, entry=None):
        self.upload, self.index, self.sub, self.data, self.size, self.entry = upload, index, sub, data, size, entry
        self.toggle = 0


class SdoServer:
    """Answers the SDO requests of one node from its object dictionary."""

    def __init__(self, od: ObjectDictionary):
        self.od = od
        self._transfer: _Transfer | None = None
        self.c = {"requests": 0, "aborts_sent": 0, "aborts_received": 0, "invalid": 0}
        self.last_abort: tuple[int, int, int] | None = None     # (index, sub, code) of the last abort sent

    def handle(self, request: bytes) -> bytes | None:
        """The response to one request frame (None for an abort from the client, or a malformed frame)."""
        if len(request) != 8:
            self.c["invalid"] += 1
            return None
        self.c["requests"] += 1
        ccs = request[0] >> 5
        if ccs == CCS_ABORT:
            self.c["aborts_received"] += 1
            self._transfer = None
            return None
        index, sub = _HEAD.unpack_from(request)[1:]
        try:
            if ccs == CCS_DOWNLOAD:
                return self._initiate_download(request, index, sub)
            if ccs == CCS_UPLOAD:
                return self._initiate_upload(index, sub)
            if ccs == CCS_SEGMENT_DOWNLOAD:
                return self._download_segment(request)
            if ccs == CCS_SEGMENT_UPLOAD:
                return self._upload_segment(request)
            raise SdoAbort(ABORT_COMMAND, f"command specifier {ccs} (block transfer is not supported)")
        except SdoAbort as exc:
            t = self._transfer
            if ccs in (CCS_SEGMENT_DOWNLOAD, CCS_SEGMENT_UPLOAD) and t is not None:
                index, sub = t.index, t.sub
            elif ccs in (CCS_SEGMENT_DOWNLOAD, CCS_SEGMENT_UPLOAD):
                index = sub = 0
            self._transfer = None
            self.c["aborts_sent"] += 1
            self.last_abort = (index, sub, exc.code)
            return abort_frame(index, sub, exc.code)

    # ------------------------------------------------------------------ download (master writes)
    def _initiate_download(self, request: bytes, index: int, sub: int) -> bytes:
        self._transfer = None
        command = request[0]
        if command & EXPEDITED:
            entry = self.od.writable_entry(index, sub)
            if command & SIZE_INDICATED:
                data = request[4:8 - (command >> 2 & 3)]
            else:           # size not indicated: as many bytes as the entry's type has
                data = request[4:4 + (entry.type.bits // 8 or 4)]
            entry.set(entry.decode(data))
        else:
            entry = self.od.writable_entry(index, sub)
            size = _SIZE.unpack_from(request, 4)[0] if command & SIZE_INDICATED else None
            if size is not None and entry.type.bits and size != entry.type.bits // 8:
                raise SdoAbort(ABORT_LENGTH, f"{entry.name} is {entry.type.bits // 8} bytes, {size} announced")
            self._transfer = _Transfer(False, index, sub, bytearray(), size, entry)
        return _HEAD.pack(0x60, index, sub) + bytes(4)

    def _download_segment(self, request: bytes) -> bytes:
        t = self._transfer
        if t is None or t.upload:
            raise SdoAbort(ABORT_COMMAND, "download segment without a download in progress")
        command = request[0]
        if command & TOGGLE != t.toggle:
            raise SdoAbort(ABORT_TOGGLE)
        t.data += request[1:8 - (command >> 1 & 7)]
        response = bytes((0x20 | t.toggle,)) + bytes(7)
        t.toggle ^= TOGGLE
        if command & LAST:
            if t.size is not None and len(t.data) != t.size:
                raise SdoAbort(ABORT_LENGTH, f"{len(t.data)} bytes sent, {t.size} announced")
            self._transfer = None
            t.entry.set(t.entry.decode(bytes(t.data)))
        return response

    # ------------------------------------------------------------------ upload (master reads)
    def _initiate_upload(self, index: int, sub: int) -> bytes:
        self._transfer = None
        data = self.od.upload(index, sub)
        if 1 <= len(data) <= 4:
            return _HEAD.pack(0x43 | (4 - len(data)) << 2, index, sub) + data.ljust(4, b"\0")
        self._transfer = _Transfer(True, index, sub, bytearray(data), len(data))
        return _HEAD.pack(0x41, index, sub) + _SIZE.pack(len(data))

    def _upload_segment(self, request: bytes) -> bytes:
        t = self._transfer
        if t is None or not t.upload:
            raise SdoAbort(ABORT_COMMAND, "upload segment without an upload in progress")
        if request[0] & TOGGLE != t.toggle:
            raise SdoAbort(ABORT_TOGGLE)
        chunk, t.data = t.data[:7], t.data[7:]
        last = not t.data
        response = bytes((t.toggle | (7 - len(chunk)) << 1 | (LAST if last else 0),)) + bytes(chunk).ljust(7, b"\0")
        t.toggle ^= TOGGLE
        if last:
            self._transfer = None
        return response

    def counters(self) -> dict:
        return dict(self.c)
