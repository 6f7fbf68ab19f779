"""The command frames taken in through one compiled call per frame (hil.kernels.frame_codec.take_command)
on the bus map's decoder table (firmware_bridge.wire.codec_table): decoding, the rolling-counter check and
the store of the values (one array; the reader's per-message value arrays are views of it) and of the
torques, with the rejection counts and counter verdicts of firmware_bridge.wire.signals.CommandInput.feed,
which stays the reference the tests hold it to. Python keeps the id lookup (one dict get) and the
counts of the reader (FrameReader), the rolling-counter state lives in the compiled call's table."""
from __future__ import annotations

import numpy as np

from firmware_bridge.links.base import Frame
from firmware_bridge.wire.codec_table import decoder_table
from firmware_bridge.wire.signals import CommandInput
from firmware_bridge.wire.frame_io import CounterCheck
from hil.kernels.frame_codec import (BAD_COUNTER, BAD_CRC, BAD_LENGTH, BAD_NAN, BAD_RANGE, CNT_LOST, CNT_RESYNCS,
                                     DEC_COUNT, DEC_FIRST, DEC_LENGTH, OK, OK_LOST, ST_LAST, ST_REJECTED, ST_RUN, Decoder,
                                     take_command)
from hil.kernels.jit import bound_call

REJECTIONS = {BAD_LENGTH: "length", BAD_CRC: "crc", BAD_NAN: "nan", BAD_RANGE: "range", BAD_COUNTER: "counter"}
OTHER_DIRECTION = -1        # the id lookup's mark of a frame this reader ignores


class CompiledCommandInput:
    """``feed(frame)`` as CommandInput.feed, updating the same CommandInput (its tau, arrival_s and
    its reader's values and counters; the reader's CounterCheck is not consulted after start-up)."""

    def __init__(self, commands: CommandInput):
        self.commands = commands
        reader = commands.reader
        codecs = reader.bus.messages(reader.direction)
        table = decoder_table(codecs)
        self.msg = np.array(table.message_rows, np.int64).reshape(-1, 6)
        self.sig = np.array(table.signal_rows, np.int64).reshape(-1, 5)
        self.sigf = np.array(table.signal_values, float).reshape(-1, 4)
        self._crc8 = np.array(table.crc8, np.int64)
        self._crc16 = np.array(table.crc16, np.int64)
        self._f32 = np.zeros(1, np.float32)
        self._u32 = self._f32.view(np.uint32)
        index = {id(c): m for m, c in enumerate(codecs)}
        self.lookup = {(c.arbitration_id, c.is_extended_id): index.get(id(c), OTHER_DIRECTION)
                        for c in reader.bus.codecs}
        self._ctr = np.array([(-1 if c.counter_index is None else c.counter_index, c.counter_bits,
                               c.counter_max_delta, CounterCheck.SYNC_FRAMES) for c in codecs], np.int64).reshape(-1, 4)
        self._state = np.zeros((len(codecs), 3), np.int64)
        for m, c in enumerate(codecs):          # the reader's counter state so far (none on a fresh reader)
            last = reader.counters.last.get(id(c))
            rejected, run = reader.counters.rejected_runs.get(id(c), (None, 0))
            self._state[m, ST_LAST] = -1 if last is None else last
            self._state[m, ST_REJECTED], self._state[m, ST_RUN] = -1 if rejected is None else rejected, run
        self.counts = np.array([reader.counters.lost, reader.counters.resyncs], np.int64)
        self._decoded = np.zeros(max([1] + [len(c.signal_names) for c in codecs]))   # one frame's values (scratch)
        # every message's values in one array, in signal-row order; the reader's value arrays become views of it
        self._stored = np.zeros(len(self.sig))
        for m, c in enumerate(codecs):
            first, count = self.msg[m, DEC_FIRST], self.msg[m, DEC_COUNT]
            self._stored[first:first + count] = reader.values[id(c)]
            reader.values[id(c)] = self._stored[first:first + count]
        self._slots = np.array([(m, k, self.msg[m, DEC_FIRST] + i) for m, c in enumerate(codecs)
                                for k, (owner, i) in enumerate(commands.slots) if owner is c], np.int64).reshape(-1, 3)
        # the compiled cycle (hil.runtime.one_call) takes the frames in on the same decoder and counter state
        self.decoder = Decoder(self.msg, self.sig, self.sigf, self._crc8, self._crc16, self._f32, self._u32,
                               self._decoded, self._ctr, self._state, self.counts, self._stored, self._slots,
                               commands.tau)
        self.width = max(1, int(self.msg[:, DEC_LENGTH].max(initial=0)))     # the longest command payload
        self._payload = np.zeros(self.width, np.uint8)
        self._payload_bytes = memoryview(self._payload)
        self._take_call = bound_call(take_command, (self.decoder, 0, self._payload, 0))     # before real time

    def _take(self, m: int, data: bytes) -> int:
        """Message m's frame with payload `data` through the decoder (a payload longer than every
        command's is rejected by its length unread)."""
        size = len(data)
        if size <= self.width:
            self._payload_bytes[:size] = data
        return self._take_call(self.decoder, m, self._payload, size)

    def feed(self, frame: Frame) -> bool:
        """Take one frame; True if it was a valid command."""
        reader = self.commands.reader
        m = self.lookup.get((frame.arbitration_id, frame.is_extended_id))
        if m is None:
            reader.reject("unknown_id")
            return False
        if m == OTHER_DIRECTION:
            reader.ignored += 1
            return False
        verdict = self._take(m, frame.data)
        if verdict != OK:
            if verdict < OK_LOST:
                reader.reject(REJECTIONS[verdict])
                return False
            reader.counters.lost, reader.counters.resyncs = int(self.counts[CNT_LOST]), int(self.counts[CNT_RESYNCS])
        reader.accepted += 1
        self.commands.arrival_s = frame.timestamp
        return True
