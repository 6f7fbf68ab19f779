"""What a bound fault does: the :class:`Effect` interface the engine drives, and the effects of the
bus and timing faults.

An effect is made when a fault is bound (``FaultEngine.inject``, which does all the work that
allocates); ``start`` runs when the fault strikes and ``stop`` when it clears, both at a cycle start
on the loop's thread; a signal effect's ``apply`` runs on the measured array every cycle while it
is active (:mod:`hil.faults.signal_effects`). Plant and drive effects: :mod:`hil.faults.plant_effects`.

Bus faults (target ``"to_plant"`` / ``"to_firmware"``, optionally ``":<message name or id>"``) act
on frames through :class:`firmware_bridge.link_faults.FaultyLink`, the loop's link: ``drop``,
``duplicate``, ``reorder``, ``frame_delay``, ``corrupt``, ``bad_crc``, ``wrong_counter``,
``wrong_dlc``, ``silent``, ``period``, ``babble`` (see that module). Timing faults: ``stall``
busy-waits ``stall_s`` in the compute phase of every active cycle (``FaultEngine.stall``) and
``output_delay`` holds every sensor frame ``cycles`` cycles or ``delay_s`` (a to_firmware
frame delay of the link). The bus and timing kinds are declared at the end (FAULT_KINDS, for
:mod:`hil.faults.registry`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from config_schema import MISSING
from firmware_bridge.links.faults import FaultyLink, parse_bus_target
from hil.faults.fault import Fault, FaultError
from hil.faults.kind import (MAX_DELAY_SAMPLES, MAX_STALL_S, PROBABILITY, BindContext, FaultKind, Param, integer,
                             nonzero_integer, number)

if TYPE_CHECKING:
    import numpy as np


class EffectHost(Protocol):
    """The engine state effects change (on the loop's thread)."""

    stall_ns: int          # busy-wait of the compute phase while stall faults are active [ns]

    def add_count_offset(self, i: int, offset: float) -> None:
        """Add a persistent count offset to channel i (kept after the fault clears)."""

    def change_dropouts(self, i: int, change: int) -> None:
        """One more (+1) or one fewer (-1) dropout on channel i; it is invalid while any is active."""


class Effect:
    """A bound fault: start() when it strikes, stop() when it clears; ``apply`` (signal faults)
    runs on the measured array every cycle while active."""

    apply: Callable[[np.ndarray, np.ndarray], None] | None = None

    def start(self, engine: EffectHost) -> None:
        pass

    def stop(self, engine: EffectHost) -> None:
        pass


class Stall(Effect):
    """A busy-wait of ``ns`` in the compute phase of every cycle while active (stall faults add up)."""

    def __init__(self, ns: int):
        self.ns = ns

    def start(self, engine: EffectHost) -> None:
        engine.stall_ns += self.ns

    def stop(self, engine: EffectHost) -> None:
        engine.stall_ns -= self.ns


class LinkFault(Effect):
    """A bus fault (or the output delay): ``effect`` bound by the FaultyLink, active on it while the
    fault is."""

    def __init__(self, link: FaultyLink, effect: Any):
        self.link, self.effect = link, effect

    def start(self, engine: EffectHost) -> None:
        self.link.activate(self.effect)

    def stop(self, engine: EffectHost) -> None:
        self.link.deactivate(self.effect)


# ----------------------------------------------------------------------------- the bus and timing kinds
def _on_link(link_kind: str | None = None, target: str | None = None) -> Callable[[BindContext], LinkFault]:
    """The binder of a fault the link applies: its ``link_kind`` (default: the fault's kind) on
    ``target`` (default: the fault's)."""
    def bind(c: BindContext) -> LinkFault:
        fault = c.fault
        link = c.need("link")
        try:
            effect = link.bind(fault.name, link_kind or fault.kind, target or fault.target, c.p, c.rng, c.dt)
        except (KeyError, ValueError) as exc:
            raise c.error("target", fault.target, str(exc.args[0])) from None
        return LinkFault(link, effect)
    return bind


def _one_delay(fault: Fault, values: dict[str, Any], keys: list[str]) -> None:
    if (values["cycles"] is None) == (values["delay_s"] is None):
        raise FaultError(fault.name, "cycles", fault.params.get("cycles", MISSING),
                         "expected exactly one of cycles, delay_s")


def _one_message(fault: Fault) -> None:
    if parse_bus_target(fault.target)[1] is None:
        raise FaultError(fault.name, "target", fault.target, "expected \"<direction>:<message name or id>\": "
                                                             "the id babbled")


_LINK = _on_link()
_PROB_FRAME = Param("probability_per_frame", default=1.0, read=PROBABILITY)
MAX_FRAME_BYTES = 255          # the longest frame of any link (a serial packet's payload; CAN FD: 64)
MAX_COPIES = 100               # copies of one frame a duplicate fault sends
MAX_BABBLE_HZ = 1e6            # a babbling node's frames per second (beyond any CAN FD bus's capacity)
_DELAY = (Param("cycles", default=None, read=integer(minimum=1, maximum=MAX_DELAY_SAMPLES)),
          Param("delay_s", "s", default=None, read=number(positive=True, upper=MAX_DELAY_SAMPLES * 1e-3)))
_BYTES = integer(minimum=1, maximum=MAX_FRAME_BYTES, what="bytes of a frame")

# the bus kinds in the order of firmware_bridge.link_faults.BUS_KINDS, whose effects they bind
FAULT_KINDS = (
    FaultKind("drop", "bus", (_PROB_FRAME,), _LINK),
    FaultKind("duplicate", "bus", (Param("copies", default=1, read=integer(minimum=1, maximum=MAX_COPIES)), _PROB_FRAME),
              _LINK),
    FaultKind("reorder", "bus", (), _LINK),
    FaultKind("frame_delay", "bus", _DELAY, _LINK, check=_one_delay),
    FaultKind("corrupt", "bus", (Param("bytes", default=1, read=_BYTES), _PROB_FRAME), _LINK),
    FaultKind("bad_crc", "bus", (_PROB_FRAME,), _LINK),
    FaultKind("wrong_counter", "bus", (Param("counter_offset", default=-1, read=nonzero_integer), _PROB_FRAME), _LINK),
    FaultKind("wrong_dlc", "bus", (Param("length_bytes", read=integer(minimum=0, maximum=MAX_FRAME_BYTES)),), _LINK),
    FaultKind("silent", "bus", (), _LINK),
    FaultKind("period", "bus", (Param("divider", read=integer(minimum=2, maximum=MAX_DELAY_SAMPLES)),), _LINK),
    FaultKind("babble", "bus", (Param("rate_hz", "Hz", read=number(positive=True, upper=MAX_BABBLE_HZ)),
                                Param("length_bytes", default=8, read=integer(minimum=0, maximum=MAX_FRAME_BYTES)),
                                Param("fill_byte", default=0xAA, read=integer(minimum=0, maximum=255, what="a byte"))),
              _LINK, check_target=_one_message),
    FaultKind("stall", "timing", (Param("stall_s", "s", read=number(positive=True, upper=MAX_STALL_S)),),
              lambda c: Stall(round(c.p["stall_s"] * 1e9))),
    FaultKind("output_delay", "timing", _DELAY, _on_link("frame_delay", "to_firmware"), check=_one_delay),
)
