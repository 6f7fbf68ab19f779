"""The command frames taken in through a compiled decoder (hil.kernels.frame_codec.decode_frame) run
on the bus map's decoder table (firmware_bridge.codec_table): the torques, rejection counts and
rolling-counter verdicts of firmware_bridge.signals.CommandInput.feed, which stays the reference the
tests hold it to. Python keeps the id lookup and the counter check (CounterCheck, a few dict
operations per frame)."""
from __future__ import annotations

import numpy as np

from firmware_bridge.codec_table import decoder_table
from firmware_bridge.link import Frame
from firmware_bridge.signals import CommandInput
from hil.kernels.frame_codec import BAD_CRC, BAD_LENGTH, BAD_NAN, BAD_RANGE, OK, decode_frame

_KINDS = {BAD_LENGTH: "length", BAD_CRC: "crc", BAD_NAN: "nan", BAD_RANGE: "range"}


class CompiledCommandInput:
    """``feed(frame)`` as CommandInput.feed, updating the same CommandInput (its tau, arrival_s and
    its reader's values and counters)."""

    def __init__(self, commands: CommandInput):
        self.commands = commands
        reader = commands.reader
        codecs = reader.bus.messages(reader.direction)
        table = decoder_table(codecs)
        self._msg = np.array(table.message_rows, np.int64).reshape(-1, 6)
        self._sig = np.array(table.signal_rows, np.int64).reshape(-1, 5)
        self._sigf = np.array(table.signal_values, float).reshape(-1, 4)
        self._crc8 = np.array(table.crc8, np.int64)
        self._crc16 = np.array(table.crc16, np.int64)
        self._f32 = np.zeros(1, np.float32)
        self._u32 = self._f32.view(np.uint32)
        self._index = {id(c): m for m, c in enumerate(codecs)}
        self._values = [np.zeros(len(c.signal_names)) for c in codecs]
        self._slots = [[(k, i) for k, (owner, i) in enumerate(commands.slots) if owner is c] for c in codecs]
        for m, c in enumerate(codecs):      # compile or load before real time
            decode_frame(self._msg, self._sig, self._sigf, m, bytes(c.length), self._crc8, self._crc16,
                         self._f32, self._u32, self._values[m])

    def feed(self, frame: Frame) -> bool:
        """Take one frame; True if it was a valid command."""
        reader = self.commands.reader
        codec = reader.codec_for(frame)
        if codec is None:
            return False
        m = self._index[id(codec)]
        values = self._values[m]
        verdict = decode_frame(self._msg, self._sig, self._sigf, m, frame.data, self._crc8, self._crc16,
                               self._f32, self._u32, values)
        if verdict != OK:
            reader._reject(_KINDS[verdict])
            return False
        if not reader.take(codec, values):
            return False
        self.commands.arrival_s = frame.timestamp
        tau = self.commands.tau
        for k, i in self._slots[m]:
            tau[k] = values[i]
        return True
