"""The fault kinds: each declared once, as a :class:`hil.faults.kind.FaultKind`, and collected
here; the engine binds through it, the scenario reader and :func:`hil.faults.params.check_fault`
read the kinds and their parameters from it.

A kind is its name, its family (``signal``: a sensor channel; ``plant``: a joint, body or
attachment; ``bus``: frames on the link; ``timing``: the whole cycle), its parameters with their
units, the rules on its target and parameters that a schema cannot say, and its binder (see
:mod:`hil.faults.kind`). The built-in kinds are declared next to their effects, in the
``FAULT_KINDS`` of :mod:`hil.faults.signal_effects`, :mod:`hil.faults.plant_effects` and
:mod:`hil.faults.effects` (bus and timing kinds); other code adds a kind with :func:`register`
and takes it back with :func:`unregister`.
"""
from __future__ import annotations

from hil.faults import effects, plant_effects, signal_effects
from hil.faults.kind import FAMILIES, FaultKind

_KINDS: dict[str, FaultKind] = {}


def register(k: FaultKind) -> FaultKind:
    """Add a kind; a name already taken is refused (ValueError naming it)."""
    if k.name in _KINDS:
        raise ValueError(f"fault kind {k.name!r} is already registered")
    _KINDS[k.name] = k
    return k


def unregister(name: str) -> None:
    """Take back a kind added with register()."""
    if _KINDS.pop(name, None) is None:
        raise KeyError(f"no fault kind {name!r} is registered")


def kind(name: str) -> FaultKind:
    """The kind named ``name`` (KeyError naming it if there is none)."""
    try:
        return _KINDS[name]
    except KeyError:
        raise KeyError(f"no fault kind {name!r}; kinds: {', '.join(names())}") from None


def kinds(family: str | None = None) -> tuple[FaultKind, ...]:
    """The kinds of ``family`` (all: None), family by family in FAMILIES' order, each family's in
    the order they were registered."""
    return tuple(k for f in FAMILIES if family in (None, f) for k in _KINDS.values() if k.family == f)


def names(family: str | None = None) -> tuple[str, ...]:
    """The names of kinds(family)."""
    return tuple(k.name for k in kinds(family))


for _module in (signal_effects, plant_effects, effects):
    for _k in _module.FAULT_KINDS:
        register(_k)
