"""How a fault kind is declared: its :class:`FaultKind` (name, family, parameters, binder), the
parameters with their units (:class:`Param` and the readers that check their values), and the
:class:`BindContext` a binder gets from the engine. The kinds themselves are declared next to
their effects and collected in :mod:`hil.faults.registry`.

A parameter's key carries its unit: a fixed one in the name (``stall_s``, ``mass_kg``,
``rate_hz``), or for the signal faults the unit of the target channel as the sensor presets write
it (CHANNEL_UNITS: counts for enc_/index_/abs_, counts_s for vel_, m_s2 and rad_s for the IMU axes
*_ax..*_az and *_gx..*_gz, strain, N_m for torque_, A for cur_): ``offset_m_s2`` on ``imu_ax``,
``rate_<unit>_per_s`` for a drift. :func:`hil.faults.params.check_fault` reads them.

A kind's binder, ``bind(ctx)``, returns the :class:`hil.faults.effects.Effect` of the fault
``ctx.fault`` with the checked parameters ``ctx.p``, or raises FaultError for a fault that cannot
act on this engine (``ctx.channel()``, ``ctx.joint()`` and ``ctx.need()`` raise it naming the key).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from config_schema import MISSING, Table, in_unit, is_integer, is_number, suggest
from hil.faults.fault import Fault, FaultError

if TYPE_CHECKING:
    import numpy as np

FAMILIES = ("signal", "plant", "bus", "timing")

Read = Callable[[Table, str, str], Any]          # (the parameters, key, unit) -> the value


def number(**bounds: Any) -> Read:
    """A finite number within Table.number's ``bounds`` (``what`` names them)."""
    return lambda t, key, unit: t.number(key, unit=unit, **bounds)


def integer(**bounds: Any) -> Read:
    """An integer within Table.integer's ``bounds``."""
    return lambda t, key, unit: t.integer(key, unit=unit, **bounds)


def choice(*choices: str) -> Read:
    return lambda t, key, unit: t.choice(key, MISSING, choices)


def nonzero_integer(t: Table, key: str, unit: str) -> int:
    v = t.raw(key)
    if not is_integer(v) or v == 0:
        raise t.error(key, v, f"{'required; ' if v is MISSING else ''}expected a non-zero integer{in_unit(unit)}")
    return int(v)


def principal_moments(t: Table, key: str, unit: str) -> tuple[float, float, float]:
    v = t.raw(key)
    if not (isinstance(v, (list, tuple)) and len(v) == 3
            and all(is_number(x) and math.isfinite(x) and x >= 0 for x in v)):
        raise t.error(key, v, f"expected 3 principal moments >= 0{in_unit(unit)}")
    return tuple(float(x) for x in v)


FINITE = number()
POSITIVE = number(positive=True)
NONNEG = number(nonneg=True, what="a number >= 0")
PROBABILITY = number(positive=True, upper=1.0, what="a probability in (0, 1]")
FRACTION = number(positive=True, upper=1.0, what="a factor in (0, 1]")
COUNT = integer(minimum=1)
MAX_DELAY_SAMPLES = 100_000     # a delay line of 100 s at 1 kHz: 0.8 MB per channel
MAX_STALL_S = 10.0              # one cycle stalled this long: far beyond any watchdog
INDEX = integer(minimum=0)


@dataclass(frozen=True)
class Param:
    """One parameter of a kind: its key is ``stem`` for a fixed unit (the stem ends in it: ``stall_s``),
    ``<stem>_<channel unit>`` for ``unit = "@"`` and ``<stem>_<channel unit>_per_s`` for "@/s".
    ``default`` is the value when the key is left out (MISSING: required)."""

    stem: str
    unit: str = ""
    read: Read = FINITE
    default: Any = MISSING

    def key(self, suffix: str) -> str:
        if self.unit == "@":
            return f"{self.stem}_{suffix}"
        if self.unit == "@/s":
            return f"{self.stem}_{suffix}_per_s"
        return self.stem

    def unit_text(self, unit: str) -> str:
        return {"@": unit, "@/s": f"{unit}/s"}.get(self.unit, self.unit)


@dataclass(frozen=True)
class FaultKind:
    """One kind of fault. ``params``: the parameters it takes (keys with units, defaults, bounds).
    ``bind(ctx)``: its effect for the fault ``ctx.fault`` with the checked parameters ``ctx.p``;
    raises FaultError for a fault that cannot act here. ``check_target(fault)`` and
    ``check(fault, values, keys)`` (the checked values by stem, the keys as written) raise
    FaultError for a target or a combination of parameters the kind refuses."""

    name: str
    family: str
    params: tuple[Param, ...]
    bind: Callable[[BindContext], Any]        # -> hil.faults.effects.Effect
    check_target: Callable[[Fault], None] | None = None
    check: Callable[[Fault, dict[str, Any], list[str]], None] | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"fault kind {self.name!r}: family {self.family!r}, expected one of {', '.join(FAMILIES)}")


class BindContext:
    """What a binder gets: the fault (``fault``), its checked parameters by stem (``p``), its own
    random stream (``rng``), the cycle period (``dt``) and the engine's handles, with look-ups that
    raise FaultError naming the key."""

    def __init__(self, engine: Any, fault: Fault, params: dict[str, Any], rng: np.random.Generator):
        self.engine, self.fault, self.p, self.rng = engine, fault, params, rng
        self.dt: float = engine.dt
        self.encoding = engine.encoding

    def error(self, key: str, value: Any, expected: str) -> FaultError:
        return FaultError(self.fault.name, key, value, expected)

    def channel(self, name: str | None = None, key: str = "target") -> int:
        """Index of channel ``name`` (the fault's target) in the measured/truth arrays."""
        name = self.fault.target if name is None else name
        try:
            return self.engine.channel(name)
        except KeyError:
            names = self.engine.channel_names
            raise self.error(key, name, f"expected a sensor channel{suggest(name, names)}: " + ", ".join(names)) from None

    def optional_channel(self, name: str) -> int | None:
        """Index of channel ``name``, None if the engine has no such channel."""
        return self.channel(name) if name in self.engine.channel_names else None

    def joint(self) -> int:
        """Index of the joint the fault's target names (the plant's joints, else the drive bank's)."""
        plant = self.engine.plant
        names = plant.layout.joint_names if plant is not None else list(getattr(self.engine.drives, "names", ()))
        if self.fault.target not in names:
            raise self.error("target", self.fault.target,
                             f"expected a joint{suggest(self.fault.target, names)}: " + ", ".join(names))
        return names.index(self.fault.target)

    def need(self, what: str, why: str | None = None) -> Any:
        """The engine's ``what`` (plant, drives, link); FaultError if the engine was made without it.
        Kept with them: ``engine.drive_faults`` (the drive faults' state, with drives) and
        ``engine.plant_arrays`` (the plant's kernel arrays under faults, with a Plant)."""
        obj = getattr(self.engine, what)
        if obj is None:
            why = why or f"a {self.fault.kind} fault"
            raise self.error("kind", self.fault.kind, f"{why} needs the engine's {what} (FaultEngine(..., {what}=...))")
        return obj
