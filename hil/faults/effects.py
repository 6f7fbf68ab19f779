"""What a bound fault does: the :class:`Effect` interface the engine drives, and the effects of the
bus and timing faults.

An effect is made when a fault is bound (``FaultEngine.inject``, which does all the work that
allocates); ``start`` runs when the fault strikes and ``stop`` when it clears, both at a cycle start
on the loop's thread; a signal effect's ``apply`` runs on the measured array every cycle while it
is active (:mod:`hil.faults.signal_effects`). Plant and drive effects: :mod:`hil.faults.plant_effects`.

Bus faults (target ``"to_plant"`` / ``"to_firmware"``, optionally ``":<message name or id>"``) act
on frames through :class:`firmware_bridge.links.faults.FaultyLink`, the loop's link: ``drop``,
``duplicate``, ``reorder``, ``frame_delay``, ``corrupt``, ``bad_crc``, ``wrong_counter``,
``wrong_dlc``, ``silent``, ``period``, ``babble`` (see that module). Timing faults: ``stall``
busy-waits ``stall_s`` in the compute phase of every active cycle (``FaultEngine.stall``) and
``output_delay`` holds every sensor frame ``cycles`` cycles or ``delay_s`` (a to_firmware
frame delay of the link).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from firmware_bridge.links.faults import FaultyLink

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
