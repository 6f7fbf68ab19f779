"""The frames one writer sends, as a plain table: what a compiled encoder needs, no code.

``encoder_table(writer, sources)`` lays out every message of a FrameWriter (firmware_bridge.wire.signals)
and every signal of each, in message order, as rows of numbers that an executor in any language
(the emulator's is numba-compiled, hil.kernels.frame_codec) runs to produce the same bytes as
``Codec.encode`` after the writer's saturation: per message its payload length, rate divider and
offset, CRC kind, byte and Data ID, the row of its counter signal; per signal its message, byte
order, bit position in the payload integer (``SignalSpec.shift``; for big-endian signals in the
big-endian integer), width, whether it is a float32, where its value comes from (a channel index
of the caller's value array, or STATUS, CYCLE, COUNTER), scale, offset and range. The CRC tables
are those of firmware_bridge.wire.codec and firmware_bridge.wire.framing. Plain lists and tuples only.
The column numbers, source and CRC codes below are defined here only: the numba executor imports
them (compile-time constants there).
"""
from __future__ import annotations

from dataclasses import dataclass

from .codec import CRC8_TABLE
from .framing import CRC16_TABLE

SOURCE_STATUS, SOURCE_CYCLE, SOURCE_COUNTER = -1, -2, -3
CRC_NONE, CRC_8, CRC_16 = 0, 1, 2
# columns of the integer rows
(MSG_LENGTH, MSG_DIVIDER, MSG_OFFSET, MSG_CRC, MSG_CRC_BYTE, MSG_DATA_ID, MSG_COUNTER_ROW,
 MSG_COUNTER_BITS) = range(8)
SIG_MESSAGE, SIG_BIG, SIG_SHIFT, SIG_BITS, SIG_FLOAT, SIG_SOURCE = range(6)
SIG_SCALE, SIG_OFFSET, SIG_MIN, SIG_MAX = range(4)     # columns of the float rows


@dataclass(frozen=True)
class EncoderTable:
    """Rows of an encoder (module docstring); ``messages`` and ``frame_ids`` follow the writer's codecs."""

    message_rows: tuple[tuple[int, ...], ...]
    signal_rows: tuple[tuple[int, ...], ...]
    signal_values: tuple[tuple[float, ...], ...]
    frame_ids: tuple[tuple[int, bool, bool], ...]     # (arbitration id, is_fd, is_extended_id)
    crc8: tuple[int, ...] = CRC8_TABLE
    crc16: tuple[int, ...] = tuple(CRC16_TABLE)


def encoder_table(codecs, sources: dict[str, int]) -> EncoderTable:
    """The table of `codecs` (a FrameWriter's); `sources` maps a signal name to its channel index
    (status, cycle and each message's counter are known by name). KeyError for any other signal."""
    messages, rows, values, ids = [], [], [], []
    for m, c in enumerate(codecs):
        counter_row = -1
        for i, s in enumerate(c.spec.signals):
            if i == c.counter_index:
                source, counter_row = SOURCE_COUNTER, len(rows)
            elif s.name == "status":
                source = SOURCE_STATUS
            elif s.name == "cycle":
                source = SOURCE_CYCLE
            else:
                source = sources[s.name]
            rows.append((m, int(s.byte_order == "big"), s.shift, s.length_bits, int(s.is_float), source))
            values.append((s.scale, s.offset, s.minimum, s.maximum))
        crc = CRC_NONE if c.crc_byte is None else (CRC_8 if c.crc == "crc8" else CRC_16)
        messages.append((c.length, c.rate_divider, c.rate_offset, crc, -1 if c.crc_byte is None else c.crc_byte,
                         c.data_id, counter_row, c.counter_bits))
        ids.append((c.arbitration_id, c.is_fd, c.is_extended_id))
    return EncoderTable(tuple(messages), tuple(rows), tuple(values), tuple(ids))


@dataclass(frozen=True)
class DecoderTable:
    """Rows of a decoder: per message its payload length, CRC kind, byte and Data ID, and its first
    signal row and signal count; per signal its byte order, bit position, width, sign bit (0 for
    unsigned and float32), whether it is a float32, and scale, offset and the raw range accepted
    (Codec.decode's checks, in its order: length, CRC, then each signal's NaN and range)."""

    message_rows: tuple[tuple[int, ...], ...]
    signal_rows: tuple[tuple[int, ...], ...]
    signal_values: tuple[tuple[float, ...], ...]
    crc8: tuple[int, ...] = CRC8_TABLE
    crc16: tuple[int, ...] = tuple(CRC16_TABLE)


DEC_LENGTH, DEC_CRC, DEC_CRC_BYTE, DEC_DATA_ID, DEC_FIRST, DEC_COUNT = range(6)
DSIG_BIG, DSIG_SHIFT, DSIG_BITS, DSIG_SIGN, DSIG_FLOAT = range(5)
DSIG_SCALE, DSIG_OFFSET, DSIG_RAW_MIN, DSIG_RAW_MAX = range(4)


def decoder_table(codecs) -> DecoderTable:
    """The decoder table of `codecs` (one row per codec, in order)."""
    messages, rows, values = [], [], []
    for c in codecs:
        crc = CRC_NONE if c.crc_byte is None else (CRC_8 if c.crc == "crc8" else CRC_16)
        messages.append((c.length, crc, -1 if c.crc_byte is None else c.crc_byte, c.data_id, len(rows),
                         len(c.spec.signals)))
        for big, shift, mask, sign, is_float, scale, offset, lo, hi in c.decode_rows:
            rows.append((int(big), shift, mask.bit_length(), sign, int(is_float)))
            values.append((scale, offset, lo, hi))
    return DecoderTable(tuple(messages), tuple(rows), tuple(values))
