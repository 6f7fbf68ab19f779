"""The slave's address space, as a master sees it through SET_MTA, UPLOAD, DOWNLOAD and WRITE_DAQ.

Regions (address extension 0, byte granularity, Intel byte order):

- ``MEASUREMENT_BASE``: the measured row, one IEEE float64 per measurement (column ``k`` at
  ``MEASUREMENT_BASE + 8 k``), rewritten by the owner every cycle; read-only.
- ``CALIBRATION_BASE``: the calibratable parameters, each at its own 8-byte slot (a FLOAT64 or a
  UBYTE switch); a write must cover whole parameters, every value within its limits, or nothing
  is written (ERR_ACCESS_DENIED, ERR_OUT_OF_RANGE).
- ``TEXT_BASE``: read-only texts a master uploads after GET_ID and GET_DAQ_EVENT_INFO.
"""
from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from firmware_bridge.xcp.protocol import Err

MEASUREMENT_BASE = 0x0001_0000
CALIBRATION_BASE = 0x0008_0000
TEXT_BASE = 0x000F_0000
SLOT = 8                        # bytes per measurement and per parameter
MAX_MEASUREMENTS = 4096
MAX_CALIBRATIONS = 1024
MAX_TEXT = 4096


class XcpError(Exception):
    """A request the slave refuses: its ERR code and why (for the counters and the log)."""

    def __init__(self, code: Err, reason: str):
        super().__init__(reason)
        self.code = code


@dataclass(frozen=True)
class Calibration:
    """A calibratable parameter: ``kind`` "f8" (FLOAT64) or "u1" (a 0/1 switch), its limits and unit."""
    name: str
    value: float
    minimum: float
    maximum: float
    unit: str = ""
    description: str = ""
    kind: str = "f8"

    def decode(self, raw: bytes) -> float:
        return struct.unpack("<d", raw)[0] if self.kind == "f8" else float(raw[0])

    def encode(self, value: float) -> bytes:
        return struct.pack("<d", value) if self.kind == "f8" else bytes((int(value),))

    @property
    def size(self) -> int:
        return 8 if self.kind == "f8" else 1


class MemoryMap:
    """The regions (module docstring) over ``row`` (the measurements) and the parameters' values.
    ``write`` hands each changed parameter to ``on_write(calibration, value)`` before storing it;
    that callback may refuse with XcpError."""

    def __init__(self, measurements: Sequence[str], calibrations: Sequence[Calibration]):
        if not 0 < len(measurements) <= MAX_MEASUREMENTS or len(calibrations) > MAX_CALIBRATIONS:
            raise ValueError(f"{len(measurements)} measurements and {len(calibrations)} parameters: expected 1 .. "
                             f"{MAX_MEASUREMENTS} and at most {MAX_CALIBRATIONS}")
        self.measurements = list(measurements)
        self.calibrations = list(calibrations)
        self.row = np.zeros(len(measurements))
        self.row_bytes = self.row.view(np.uint8)
        self.parameters = np.zeros(SLOT * len(calibrations), np.uint8)
        for k, c in enumerate(calibrations):
            self.parameters[SLOT * k:SLOT * k + c.size] = np.frombuffer(c.encode(c.value), np.uint8)
        self.text = np.zeros(0, np.uint8)
        self.on_write: Callable[[Calibration, float], None] = lambda c, v: None

    def set_text(self, data: bytes) -> None:
        """The text region's contents (identification, event names)."""
        if len(data) > MAX_TEXT:
            raise ValueError(f"texts of {len(data)} bytes: at most {MAX_TEXT}")
        self.text = np.frombuffer(data, np.uint8)

    def measurement_address(self, k: int) -> int:
        return MEASUREMENT_BASE + SLOT * k

    def calibration_address(self, k: int) -> int:
        return CALIBRATION_BASE + SLOT * k

    def value(self, k: int) -> float:
        """Parameter ``k``'s value now."""
        c = self.calibrations[k]
        return c.decode(self.parameters[SLOT * k:SLOT * k + c.size].tobytes())

    def measurement_offset(self, address: int, ext: int, size: int) -> int:
        """The byte offset in the row of ``size`` bytes at ``address`` (WRITE_DAQ's check)."""
        if ext != 0 or not MEASUREMENT_BASE <= address <= address + size <= MEASUREMENT_BASE + self.row_bytes.size:
            raise XcpError(Err.OUT_OF_RANGE, f"DAQ entry of {size} bytes at {address:#x}:{ext} outside the measurements")
        return address - MEASUREMENT_BASE

    def read(self, address: int, ext: int, size: int) -> bytes:
        """``size`` bytes at ``address`` of one region."""
        region, offset = self._locate(address, ext, size)
        return region[offset:offset + size].tobytes()

    def write(self, address: int, ext: int, data: bytes) -> None:
        """Store whole parameters (module docstring): all checked before any is handed on."""
        region, offset = self._locate(address, ext, len(data))
        if region is not self.parameters:
            raise XcpError(Err.WRITE_PROTECTED, f"write of {len(data)} bytes at {address:#x}: not a parameter")
        changes, pos, base = [], 0, offset
        while pos < len(data):
            k, within = divmod(base + pos, SLOT)
            c = self.calibrations[k] if k < len(self.calibrations) else None
            if c is None or within != 0 or pos + c.size > len(data):
                raise XcpError(Err.ACCESS_DENIED, f"write at {address:#x}, {len(data)} bytes: not whole parameters")
            value = c.decode(bytes(data[pos:pos + c.size]))
            if not (math.isfinite(value) and c.minimum <= value <= c.maximum) or (c.kind == "u1" and value not in (0, 1)):
                raise XcpError(Err.OUT_OF_RANGE, f"{c.name} = {value}: expected {c.minimum:g} .. {c.maximum:g} {c.unit}")
            changes.append((k, c, value))
            pos += SLOT if pos + SLOT <= len(data) else c.size
        for k, c, value in changes:
            if value != self.value(k):
                self.on_write(c, value)
                self.parameters[SLOT * k:SLOT * k + c.size] = np.frombuffer(c.encode(value), np.uint8)

    def _locate(self, address: int, ext: int, size: int) -> tuple[np.ndarray, int]:
        for base, region in ((MEASUREMENT_BASE, self.row_bytes), (CALIBRATION_BASE, self.parameters),
                             (TEXT_BASE, self.text)):
            if ext == 0 and base <= address and address + size <= base + region.size:
                return region, address - base
        raise XcpError(Err.ACCESS_DENIED, f"{size} bytes at {address:#x}:{ext}: no such memory")
