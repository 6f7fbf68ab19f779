"""The cycle's sensor frames from a compiled encoder (hil.kernels.frame_codec) run on the bus map's
codec table (firmware_bridge.wire.codec_table): the bytes, counters, saturation and refusal counts of
firmware_bridge.wire.signals.SensorOutput.frames, which stays the reference the tests hold it to.
Python only wraps the due payloads into Frames."""
from __future__ import annotations

import numpy as np

from firmware_bridge.links.base import Frame
from firmware_bridge.wire.codec_table import encoder_table
from firmware_bridge.wire.signals import SensorOutput
from hil.kernels.frame_codec import READY, REFUSED, Encoder, encode_frames
from hil.kernels.jit import bound_call

MAX_PAYLOAD = 64


class CompiledSensorFrames:
    """``frames(cycle, measured, status)`` as SensorOutput's, for its bound channels; the writer's
    ``saturated`` and ``refused`` counters and rolling counters are kept in the SensorOutput."""

    def __init__(self, out: SensorOutput, channel_names: list[str]):
        self.writer = out.writer
        table = encoder_table(self.writer.codecs, {n: i for i, n in enumerate(channel_names)})
        self.msg = np.array(table.message_rows, np.int64).reshape(-1, 8)
        self.sig = np.array(table.signal_rows, np.int64).reshape(-1, 6)
        self.sigf = np.array(table.signal_values, float).reshape(-1, 4)
        self._crc8 = np.array(table.crc8, np.int64)
        self._crc16 = np.array(table.crc16, np.int64)
        self._ids = table.frame_ids
        self._lengths = [row[0] for row in table.message_rows]
        self.counters = np.array([self.writer.counter[id(c)] for c in self.writer.codecs], np.int64)
        self._f32 = np.zeros(1, np.float32)
        self._u32 = self._f32.view(np.uint32)
        self.payload = np.zeros((len(self._ids), MAX_PAYLOAD), np.uint8)
        self.result = np.zeros(len(self._ids), np.int64)
        self._rows = [self.payload[m, :n] for m, n in enumerate(self._lengths)]     # each message's bytes
        self.encoder = Encoder(self.msg, self.sig, self.sigf, self.counters, self._crc8, self._crc16, self._f32,
                               self._u32, self.payload, self.result)
        self._n_channels = len(channel_names)
        # compiled or loaded now, before real time; called with a float64 vector of the channels always
        self._encode = bound_call(encode_frames, (self.encoder, np.zeros(max(1, self._n_channels)), 0, 0))

    def frames(self, cycle: int, measured: np.ndarray, status: int) -> list[Frame]:
        """The frames due in `cycle` carrying `measured` (one float64 value per bound channel)."""
        measured = np.ascontiguousarray(measured, float)
        if measured.ndim != 1 or measured.size < self._n_channels:
            raise ValueError(f"measured values of shape {measured.shape} for {self._n_channels} channels")
        return self.wrap(self._encode(self.encoder, measured, int(status), int(cycle)))

    def wrap(self, saturated: int) -> list[Frame]:
        """The frames of the last encode (those READY in the result), `saturated` and the refused
        messages counted in the writer."""
        self.writer.saturated += saturated
        out = []
        for m, r in enumerate(self.result.tolist()):
            if r == READY:
                arbitration_id, is_fd, is_extended_id = self._ids[m]
                out.append(Frame(arbitration_id, self._rows[m].tobytes(), is_fd, is_extended_id))
            elif r == REFUSED:
                self.writer.refused += 1
        return out
