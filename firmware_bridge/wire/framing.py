"""Serial packet framing: COBS byte stuffing plus a CRC-16 trailer.

A packet on the wire is ``COBS(id + payload + crc16_be(id + payload)) + b"\\x00"``:

* COBS is Consistent Overhead Byte Stuffing, S. Cheshire and M. Baker, "Consistent Overhead
  Byte Stuffing", IEEE/ACM Trans. Networking 7(2), 1999. It removes every 0x00 from the packet,
  so 0x00 can delimit packets and a receiver resynchronises at the next 0x00.
* The CRC is CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, not reflected, xorout 0;
  check value 0x29B1), appended big-endian.
"""
from __future__ import annotations

import binascii

from firmware_bridge.links.base import Frame, LinkCounters

DELIMITER = 0
MAX_PAYLOAD = 255
_BLOCK = 254            # longest run of non-zero bytes one COBS code byte can describe
_OVERHEAD = 3           # id byte + 2 CRC bytes
_CODE = tuple(bytes((code,)) for code in range(256))


class CobsDecodeError(ValueError):
    """The input is not a valid COBS encoding."""


def cobs_encode(data: bytes) -> bytes:
    """COBS-encode ``data`` (Cheshire & Baker 1999); the result holds no 0x00 and no delimiter.

    Each zero-free run becomes a code byte (run length + 1) and the run; a code 0xFF marks a
    full 254-byte block with no implied zero. A trailing empty block after a full block at the
    very end is omitted, as in the paper and the Wikipedia examples.
    """
    runs = bytes(data).split(b"\x00")
    if len(data) < _BLOCK:      # fast path: no run can fill a block
        return b"".join([_CODE[len(run) + 1] + run for run in runs])
    out = bytearray()
    last = len(runs) - 1
    for index, run in enumerate(runs):
        start = 0
        while len(run) - start >= _BLOCK:
            out.append(0xFF)
            out += run[start:start + _BLOCK]
            start += _BLOCK
        if index < last or start < len(run) or not run:
            out.append(len(run) - start + 1)
            out += run[start:]
    return bytes(out)


def cobs_decode(data: bytes) -> bytes:
    """Invert :func:`cobs_encode` (without delimiter); raise CobsDecodeError on invalid input."""
    if not data:
        raise CobsDecodeError("empty input")
    if DELIMITER in data:
        raise CobsDecodeError("0x00 inside an encoded packet")
    out = bytearray()
    pos, size = 0, len(data)
    while pos < size:
        code = data[pos]
        end = pos + code
        if end > size:
            raise CobsDecodeError("block runs past the end of the packet")
        out += data[pos + 1:end]
        pos = end
        if code != 0xFF and pos < size:
            out.append(0)
    return bytes(out)


def _crc16_table() -> tuple[int, ...]:
    """The 256-entry lookup table for polynomial 0x1021, MSB first (the compiled frame codec's)."""
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


CRC16_TABLE = _crc16_table()


def crc16_ccitt_false(data: bytes, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE of ``data``: the standard library's CRC-CCITT (binascii.crc_hqx: poly 0x1021,
    MSB first) from the initial value 0xFFFF."""
    return binascii.crc_hqx(data, crc)


def max_encoded_size(max_payload: int = MAX_PAYLOAD) -> int:
    """Longest COBS-encoded packet (without delimiter) for payloads up to ``max_payload`` bytes."""
    raw = max_payload + _OVERHEAD
    return raw + 1 + raw // _BLOCK


def encode_packet(arbitration_id: int, payload: bytes, max_payload: int = MAX_PAYLOAD) -> bytes:
    """The wire bytes of one packet, delimiter included; ValueError if id or length is out of range."""
    if len(payload) > max_payload:
        raise ValueError(f"payload of {len(payload)} bytes exceeds {max_payload}")
    body = bytes((arbitration_id,)) + bytes(payload)
    return cobs_encode(body + crc16_ccitt_false(body).to_bytes(2, "big")) + b"\x00"


def encode_frame(frame: Frame, max_payload: int = MAX_PAYLOAD) -> bytes:
    """The wire bytes of ``frame`` (id byte = ``frame.arbitration_id``)."""
    return encode_packet(frame.arbitration_id, frame.data, max_payload)


class StreamDecoder:
    """Turns a byte stream, split anywhere, into Frames; never raises on bad input.

    Every chunk between two 0x00 delimiters is one packet candidate. Rejected candidates count
    one ``rx_framing_errors`` (bad COBS, too short, too long) or ``rx_crc_errors``, and their
    bytes count as ``rx_garbage_bytes``. Empty candidates (repeated 0x00) are idle fill and are
    ignored. A run without delimiter longer than the longest valid packet is discarded up to the
    next 0x00 (one framing error), so the buffer never exceeds ``max_encoded_size(max_payload)``
    bytes plus one received chunk.
    """

    def __init__(self, counters: LinkCounters | None = None, max_payload: int = MAX_PAYLOAD):
        self.counters = counters if counters is not None else LinkCounters()
        self.max_payload = max_payload
        self._max_encoded = max_encoded_size(max_payload)
        self._partial = bytearray()
        self._skipping = False

    @property
    def buffered_bytes(self) -> int:
        """Bytes held while waiting for the delimiter of an unfinished packet."""
        return len(self._partial)

    def reset(self) -> None:
        """Forget an unfinished packet (its bytes count as garbage); the next byte after a 0x00 starts one."""
        self.counters.rx_garbage_bytes += len(self._partial)
        self._partial.clear()
        self._skipping = True

    def feed(self, data: bytes, timestamp: float = 0.0) -> list[Frame]:
        """Consume ``data`` and return the frames it completed, stamped with ``timestamp``."""
        frames: list[Frame] = []
        pos = self._skip(data) if self._skipping else 0
        if self._partial and pos < len(data):
            pos = self._complete_partial(data, pos, frames, timestamp)
        end = data.find(DELIMITER, pos)
        while end >= 0:
            if end > pos:
                self._packet(data[pos:end], frames, timestamp)
            pos = end + 1
            end = data.find(DELIMITER, pos)
        if pos < len(data):
            self._partial += data[pos:]
            self._bound_partial()
        return frames

    def _skip(self, data: bytes) -> int:
        """Discard the rest of an overlong run; return the position after its delimiter."""
        end = data.find(DELIMITER)
        if end < 0:
            self.counters.rx_garbage_bytes += len(data)
            return len(data)
        self.counters.rx_garbage_bytes += end
        self._skipping = False
        return end + 1

    def _complete_partial(self, data: bytes, pos: int, frames: list[Frame], timestamp: float) -> int:
        """Join the buffered start of a packet with its end in ``data``; return the next position."""
        end = data.find(DELIMITER, pos)
        if end < 0:
            return pos
        self._partial += data[pos:end]
        packet = bytes(self._partial)
        self._partial.clear()
        self._packet(packet, frames, timestamp)
        return end + 1

    def _bound_partial(self) -> None:
        """Drop a partial packet that is already longer than any valid packet."""
        if len(self._partial) > self._max_encoded:
            self.counters.rx_framing_errors += 1
            self.counters.rx_garbage_bytes += len(self._partial)
            self._partial.clear()
            self._skipping = True

    def _packet(self, packet: bytes, frames: list[Frame], timestamp: float) -> None:
        """Validate one delimiter-free candidate and append its Frame, or count why not."""
        counters = self.counters
        body = self._unstuff(packet)
        if body is None:
            counters.rx_framing_errors += 1
            counters.rx_garbage_bytes += len(packet)
        elif crc16_ccitt_false(body):
            counters.rx_crc_errors += 1
            counters.rx_garbage_bytes += len(packet)
        else:
            counters.rx_frames += 1
            frames.append(Frame(body[0], body[1:-2], timestamp=timestamp))

    def _unstuff(self, packet: bytes) -> bytes | None:
        """id + payload + CRC of a candidate, or None if its length or COBS coding is invalid."""
        if len(packet) > self._max_encoded:
            return None
        try:
            body = cobs_decode(packet)
        except CobsDecodeError:
            return None
        return body if _OVERHEAD <= len(body) <= self.max_payload + _OVERHEAD else None
