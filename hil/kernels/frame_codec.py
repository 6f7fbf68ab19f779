"""The sensor frames of one cycle, encoded in one call from a codec table (firmware_bridge.wire.codec_table).

The same bytes as firmware_bridge.wire.signals.SensorOutput.frames with Codec.encode: per due message,
each signal's value taken from its source (a measured channel, the status word, the cycle, the
message's rolling counter), saturated at the signal's range (a message with any value beyond it
counts once as saturated), a NaN in an integer signal withholds the message (refused; its counter
does not advance), integers rounded half to even as Python's round(), float32 by their bit pattern;
the bits placed little- or big-endian, then the CRC over the other payload bytes.
"""
from collections import namedtuple

import numpy as np

from firmware_bridge.wire.codec_table import (CRC_8, CRC_16, DEC_COUNT, DEC_CRC, DEC_CRC_BYTE, DEC_DATA_ID, DEC_FIRST,
                                              DEC_LENGTH, DSIG_BIG, DSIG_BITS, DSIG_FLOAT, DSIG_OFFSET, DSIG_RAW_MAX,
                                              DSIG_RAW_MIN, DSIG_SCALE, DSIG_SHIFT, DSIG_SIGN, MSG_COUNTER_BITS,
                                              MSG_COUNTER_ROW, MSG_CRC, MSG_CRC_BYTE, MSG_DATA_ID, MSG_DIVIDER,
                                              MSG_LENGTH, MSG_OFFSET, SIG_BIG, SIG_BITS, SIG_FLOAT, SIG_MAX,
                                              SIG_MESSAGE, SIG_MIN, SIG_OFFSET, SIG_SCALE, SIG_SHIFT, SIG_SOURCE,
                                              SOURCE_COUNTER, SOURCE_CYCLE, SOURCE_STATUS)

from .jit import kernel

NOT_DUE, READY, REFUSED = 0, 1, -1       # per message result

# The sensor frames' encoder: the codec table's message rows, signal rows and their float columns
# (firmware_bridge.wire.codec_table.encoder_table), each message's rolling counter, the CRC tables, a
# one-element float32 scratch and its uint32 view (a float's bits), and the output: each message's
# payload bytes and its result (NOT_DUE, READY, REFUSED).
Encoder = namedtuple("Encoder", "msg sig sigf counters crc8 crc16 f32 u32 payload result")


@kernel
def _crc(payload, length, crc_kind, crc_byte, data_id, crc8, crc16):
    """The CRC of the payload without its CRC bytes (firmware_bridge.wire.codec.Codec._crc)."""
    if crc_kind == CRC_8:
        c = 0xFF
        for j in range(length):
            if j != crc_byte:
                c = crc8[c ^ payload[j]]
        return c ^ 0xFF
    c = 0xFFFF
    for j in range(length):
        if j != crc_byte and j != crc_byte + 1:
            c = ((c << 8) & 0xFF00) ^ crc16[(c >> 8) ^ payload[j]]
    c = ((c << 8) & 0xFF00) ^ crc16[(c >> 8) ^ (data_id & 0xFF)]
    return ((c << 8) & 0xFF00) ^ crc16[(c >> 8) ^ ((data_id >> 8) & 0xFF)]


@kernel
def _place(payload, length, big, shift, bits, raw):
    """Write the low `bits` bits of raw at bit `shift` of the payload integer (little-endian, or
    the big-endian one for a big-endian signal)."""
    for b in range(bits):
        if (raw >> b) & 1:
            pos = shift + b
            byte = length - 1 - (pos >> 3) if big else pos >> 3
            payload[byte] |= np.uint8(1 << (pos & 7))


@kernel
def encode_frames(enc, measured, status, cycle):
    """Encode every message due in `cycle` into enc.payload[m, :length] (the Encoder above);
    result[m] NOT_DUE, READY or REFUSED; counters[m] advance for each READY message with a counter.
    Returns the number of messages saturated."""
    msg, sig, sigf, counters, payload, result = enc.msg, enc.sig, enc.sigf, enc.counters, enc.payload, enc.result
    f32, u32 = enc.f32, enc.u32
    saturated = 0
    n_msg = msg.shape[0]
    for m in range(n_msg):
        divider = msg[m, MSG_DIVIDER]
        result[m] = READY if divider > 0 and cycle % divider == msg[m, MSG_OFFSET] else NOT_DUE
        if result[m] == READY:
            length = msg[m, MSG_LENGTH]
            for j in range(length):
                payload[m, j] = 0
    clipped = -1
    for i in range(sig.shape[0]):
        m = sig[i, SIG_MESSAGE]
        if result[m] == NOT_DUE:
            continue
        source = sig[i, SIG_SOURCE]
        if source >= 0:
            v = measured[source]
        elif source == SOURCE_STATUS:
            v = float(status)
        elif source == SOURCE_CYCLE:
            v = float(cycle)
        else:
            v = float(counters[m])
        if source != SOURCE_COUNTER:
            if v < sigf[i, SIG_MIN]:
                v = sigf[i, SIG_MIN]
                if clipped != m:
                    clipped = m
                    saturated += 1
            elif v > sigf[i, SIG_MAX]:
                v = sigf[i, SIG_MAX]
                if clipped != m:
                    clipped = m
                    saturated += 1
        if not sig[i, SIG_FLOAT] and v != v:
            result[m] = REFUSED         # the rest of the message is still checked for saturation
        if result[m] != READY:
            continue
        x = (v - sigf[i, SIG_OFFSET]) / sigf[i, SIG_SCALE]
        if sig[i, SIG_FLOAT]:
            f32[0] = x
            raw = np.int64(u32[0])
        else:
            raw = np.int64(np.rint(x))
        _place(payload[m], msg[m, MSG_LENGTH], sig[i, SIG_BIG], sig[i, SIG_SHIFT], sig[i, SIG_BITS], raw)
    for m in range(n_msg):
        if result[m] != READY:
            continue
        if msg[m, MSG_CRC] != 0:
            k = msg[m, MSG_CRC_BYTE]
            c = _crc(payload[m], msg[m, MSG_LENGTH], msg[m, MSG_CRC], k, msg[m, MSG_DATA_ID], enc.crc8, enc.crc16)
            payload[m, k] = c & 0xFF
            if msg[m, MSG_CRC] == CRC_16:
                payload[m, k + 1] = (c >> 8) & 0xFF
        if msg[m, MSG_COUNTER_ROW] >= 0:
            counters[m] = (counters[m] + 1) & ((1 << msg[m, MSG_COUNTER_BITS]) - 1)
    return saturated


OK, BAD_LENGTH, BAD_CRC, BAD_NAN, BAD_RANGE = range(5)     # decode_frame's verdicts


@kernel
def _bits(data, length, big, shift, bits):
    """The `bits` bits at bit `shift` of the payload integer (little-endian, or big-endian)."""
    raw = np.int64(0)
    for b in range(bits):
        pos = shift + b
        byte = length - 1 - (pos >> 3) if big else pos >> 3
        if (data[byte] >> (pos & 7)) & 1:
            raw |= np.int64(1) << b
    return raw


# The command frames' decoder: the codec table's message rows, signal rows and their float columns
# (firmware_bridge.wire.codec_table.decoder_table), the CRC tables, a one-element float32 scratch and its
# uint32 view, one frame's decoded values (scratch), per message the rolling-counter rule (CTR_*) and
# state (ST_*), the lost and resynchronised counts (CNT_*), every message's stored values in signal-row
# order, the torque slots (SLOT_*) and the torques they fill.
Decoder = namedtuple("Decoder", "msg sig sigf crc8 crc16 f32 u32 decoded ctr state counts stored slots tau")


@kernel
def decode_frame(dec, m, data, n):
    """Message m's physical values from the `n` payload bytes data[:n] into dec.decoded[:count]
    (Codec.decode's checks and order); returns OK or the first failed check (BAD_LENGTH, BAD_CRC,
    BAD_NAN, BAD_RANGE)."""
    msg, sig, sigf, f32, u32, out = dec.msg, dec.sig, dec.sigf, dec.f32, dec.u32, dec.decoded
    length = msg[m, DEC_LENGTH]
    if n != length:
        return BAD_LENGTH
    if msg[m, DEC_CRC] != 0:
        k = msg[m, DEC_CRC_BYTE]
        stored = np.int64(data[k])
        if msg[m, DEC_CRC] == CRC_16:
            stored |= np.int64(data[k + 1]) << 8
        if stored != _crc(data, length, msg[m, DEC_CRC], k, msg[m, DEC_DATA_ID], dec.crc8, dec.crc16):
            return BAD_CRC
    first = msg[m, DEC_FIRST]
    for j in range(msg[m, DEC_COUNT]):
        i = first + j
        raw = _bits(data, length, sig[i, DSIG_BIG], sig[i, DSIG_SHIFT], sig[i, DSIG_BITS])
        if sig[i, DSIG_FLOAT]:
            u32[0] = raw
            r = np.float64(f32[0])
            if r != r:
                return BAD_NAN
        else:
            sign = sig[i, DSIG_SIGN]
            if raw & sign:
                raw -= sign << 1
            r = np.float64(raw)
        if not sigf[i, DSIG_RAW_MIN] <= r <= sigf[i, DSIG_RAW_MAX]:
            return BAD_RANGE
        out[j] = r * sigf[i, DSIG_SCALE] + sigf[i, DSIG_OFFSET]
    return OK


BAD_COUNTER, OK_LOST, OK_RESYNC = 5, 6, 7       # take_command's verdicts beyond decode_frame's
CTR_INDEX, CTR_BITS, CTR_MAX_DELTA, CTR_SYNC = range(4)  # per message: counter signal (-1: none), bits, window, re-anchor run
ST_LAST, ST_REJECTED, ST_RUN = range(3)         # per message: last taken counter, last rejected one (-1: none), run
CNT_LOST, CNT_RESYNCS = range(2)
SLOT_MESSAGE, SLOT_TAU, SLOT_VALUE = range(3)    # per torque slot: its message, joint, signal row


@kernel
def take_command(dec, m, data, n):
    """A frame of message m (payload data[:n]) through decode_frame and the rolling-counter check of
    firmware_bridge.wire.signals.CounterCheck (AUTOSAR E2E Profile 1, re-anchoring after ctr[m, CTR_SYNC]
    in-order rejected frames); a taken frame's values go to stored[first:first + count] (the message's
    signal rows) and its torque slots (per slot row of message m: tau[SLOT_TAU] = stored[SLOT_VALUE],
    a signal row). Returns OK, a decode_frame verdict, BAD_COUNTER, or OK_LOST / OK_RESYNC (taken;
    counts[CNT_LOST] / counts[CNT_RESYNCS] grew). state[m, ST_LAST] is -1 before the first taken frame.
    The arrays are the Decoder's (above)."""
    msg, decoded, ctr, state, counts, stored, slots, tau = (dec.msg, dec.decoded, dec.ctr, dec.state, dec.counts,
                                                            dec.stored, dec.slots, dec.tau)
    verdict = decode_frame(dec, m, data, n)
    if verdict != OK:
        return verdict
    index = ctr[m, CTR_INDEX]
    if index >= 0:
        value = np.int64(decoded[index])
        wrap = (np.int64(1) << ctr[m, CTR_BITS]) - 1
        last = state[m, ST_LAST]
        if last >= 0:
            delta = (value - last) & wrap
            if 1 <= delta <= ctr[m, CTR_MAX_DELTA]:
                if delta > 1:
                    counts[CNT_LOST] += delta - 1
                    verdict = OK_LOST
            else:
                rejected = state[m, ST_REJECTED]
                in_order = rejected >= 0 and ((value - rejected) & wrap) == 1
                run = state[m, ST_RUN] + 1 if in_order else 1
                if run < ctr[m, CTR_SYNC]:
                    state[m, ST_REJECTED], state[m, ST_RUN] = value, run
                    return BAD_COUNTER
                counts[CNT_RESYNCS] += 1
                verdict = OK_RESYNC
        state[m, ST_LAST], state[m, ST_REJECTED], state[m, ST_RUN] = value, -1, 0
    first = msg[m, DEC_FIRST]
    for j in range(msg[m, DEC_COUNT]):
        stored[first + j] = decoded[j]
    for j in range(slots.shape[0]):
        if slots[j, SLOT_MESSAGE] == m:
            tau[slots[j, SLOT_TAU]] = stored[slots[j, SLOT_VALUE]]
    return verdict
