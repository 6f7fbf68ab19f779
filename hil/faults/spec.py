"""The fault specs (:mod:`hil.faults.fault`: :class:`Fault`, :class:`Trigger`, :class:`Duration`,
the channel units) and the names of the fault kinds: KINDS, and by family SIGNAL_KINDS,
PLANT_KINDS, BUS_KINDS and TIMING_KINDS, those of :mod:`hil.faults.registry` at the time they are
read.
"""
from __future__ import annotations

from hil.faults import registry
from hil.faults.fault import (CHANNEL_UNITS, DIRECTIONS, IMU_AXIS_UNITS, Duration, Fault, FaultError, FaultEvent,
                              Trigger, channel_unit, signal_unit)

__all__ = ["CHANNEL_UNITS", "DIRECTIONS", "IMU_AXIS_UNITS", "Duration", "Fault", "FaultError", "FaultEvent",
           "Trigger", "channel_unit", "signal_unit"]        # and the kind names (__getattr__)

_FAMILY = {"KINDS": None, "SIGNAL_KINDS": "signal", "PLANT_KINDS": "plant", "BUS_KINDS": "bus",
           "TIMING_KINDS": "timing"}


def __getattr__(name: str) -> tuple[str, ...]:
    """KINDS and the kinds by family: the names registered now."""
    if name in _FAMILY:
        return registry.names(_FAMILY[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
