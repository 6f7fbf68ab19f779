"""What goes wrong, when and for how long: :class:`Fault`, :class:`Trigger`, :class:`Duration`.

A :class:`Fault` is a target, an effect (its ``kind``, one of hil.faults.spec.KINDS) and parameters whose keys
carry their unit (:mod:`hil.faults.params`); :meth:`hil.faults.engine.FaultEngine.inject` arms it
with a :class:`Trigger` (when it starts) and a :class:`Duration` (when it ends). Scenario files
(:mod:`hil.faults.scenario`) declare the same things. The kinds are those of
:mod:`hil.faults.registry`; each is declared with its effect: signal faults in
:mod:`hil.faults.signal_effects`, plant faults in :mod:`hil.faults.plant_effects`, bus and timing
faults in :mod:`hil.faults.effects`.

Triggers (``None``: at the next cycle start)
    ``Trigger.at(t_s)``                        at the first cycle with t >= t_s
    ``Trigger.crossing(signal, threshold, direction="rising", repeat=False)``
        when the signal crosses the threshold between two cycles: ``rising`` (previous < threshold
        <= current), ``falling`` (previous > threshold >= current) or ``either``. Signals: ``t``
        [s], ``q_<joint>`` [rad] (the plant's joint angle at the cycle start), ``<channel>`` (the
        measured value as sampled, before any fault acts on it) and ``truth:<channel>``, both from
        the previous cycle's sample. With ``repeat`` it re-arms after each clearance.
    ``Trigger.probability(p)``                 in each cycle in which the fault is not active with
                                               probability p (one geometric draw per arming)
    ``Trigger.mttf(mttf_s)``                   after an exponential time with mean mttf_s
    Random triggers re-arm after each clearance (a failure/repair renewal process) unless
    ``repeat=False``; each fault draws from its own stream of the engine's seed, so a run is
    reproducible.

Durations (``None``: permanent)
    ``Duration.once()``       one cycle: active in the cycle it fires, cleared at the next cycle start
    ``Duration.lasting(T_s)`` cleared at the first cycle start at least T_s after it fired
    ``Duration.permanent()``  until ``engine.clear(handle)``
    ``Duration.mttr(mttr_s)`` repaired after an exponential time with mean mttr_s

Trigger and duration times are on the emulator's clock (the plant time at the cycle start).
Values in a channel's unit are written in keys as the sensor presets do (CHANNEL_UNITS).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

from config_schema import ConfigError, UserError

# channel name prefix, or suffix for the IMU axes (imu_ax, <name>_gz) -> (unit in keys, unit)
CHANNEL_UNITS: tuple[tuple[str, str, str], ...] = (
    ("enc_", "counts", "counts"), ("index_", "counts", "counts"), ("vel_", "counts_s", "counts/s"),
    ("abs_", "counts", "counts"), ("strain_", "strain", "strain"), ("cur_", "A", "A"),
    ("torque_", "N_m", "N m"))
IMU_AXIS_UNITS: tuple[tuple[str, str, str], ...] = (
    ("_ax", "m_s2", "m/s^2"), ("_ay", "m_s2", "m/s^2"), ("_az", "m_s2", "m/s^2"),
    ("_gx", "rad_s", "rad/s"), ("_gy", "rad_s", "rad/s"), ("_gz", "rad_s", "rad/s"))
DIRECTIONS = ("rising", "falling", "either")


class FaultError(ConfigError):
    """A fault, trigger or duration refused at binding: ``key`` names the parameter (or
    ``kind``/``target``), ``expected`` says what was expected, with the unit."""

    def __init__(self, fault: str, key: str, value: Any, expected: str):
        super().__init__(f"fault {fault!r}", key, value, expected)


class FaultEvent(NamedTuple):
    cycle: int
    t_s: float
    action: str          # "inject" | "clear"
    fault: str
    description: str


@dataclass(frozen=True)
class Fault:
    """What goes wrong: ``kind`` (see hil.faults.spec.KINDS) acting on ``target`` with ``params``, whose keys carry
    their unit as in scenario files (``offset_m_s2``, ``stall_s``, ``mass_kg``)."""

    name: str
    kind: str
    target: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        where = f" on {self.target}" if self.target else ""
        args = ", ".join(f"{k} = {v:#x}" if k == "fill_byte" else f"{k} = {v}" for k, v in self.params.items())
        return f"{self.kind}{where}" + (f" ({args})" if args else "")


@dataclass(frozen=True)
class Trigger:
    """When a fault strikes; build with at(), crossing(), probability() or mttf()."""

    kind: str
    t_s: float = 0.0
    signal: str = ""
    threshold: float = 0.0
    direction: str = "rising"
    probability_per_cycle: float = 0.0
    mttf_s: float = 0.0
    repeat: bool = False

    @classmethod
    def at(cls, t_s: float) -> Trigger:
        _check(math.isfinite(t_s) and t_s >= 0, f"trigger time {t_s!r}: expected a number >= 0 in s")
        return cls("at", t_s=float(t_s))

    @classmethod
    def crossing(cls, signal: str, threshold: float, direction: str = "rising", repeat: bool = False) -> Trigger:
        _check(direction in DIRECTIONS, f"direction {direction!r}: expected one of {', '.join(DIRECTIONS)}")
        _check(math.isfinite(threshold), f"threshold {threshold!r}: expected a finite number")
        return cls("crossing", signal=signal, threshold=float(threshold), direction=direction, repeat=repeat)

    @classmethod
    def probability(cls, p_per_cycle: float, repeat: bool = True) -> Trigger:
        _check(0 < p_per_cycle <= 1, f"probability {p_per_cycle!r}: expected a probability in (0, 1] per cycle")
        return cls("probability", probability_per_cycle=float(p_per_cycle), repeat=repeat)

    @classmethod
    def mttf(cls, mttf_s: float, repeat: bool = True) -> Trigger:
        _check(math.isfinite(mttf_s) and mttf_s > 0, f"MTTF {mttf_s!r}: expected a positive number in s")
        return cls("mttf", mttf_s=float(mttf_s), repeat=repeat)

    def describe(self) -> str:
        if self.kind == "at":
            return f"at t = {self.t_s:g} s"
        if self.kind == "crossing":
            verb = {"rising": "rises through", "falling": "falls through", "either": "crosses"}[self.direction]
            unit = signal_unit(self.signal)
            return f"when {self.signal} {verb} {self.threshold:g}" + (f" {unit[1]}" if unit else "")
        if self.kind == "probability":
            return f"with probability {self.probability_per_cycle:g} per cycle"
        return f"after MTTF {self.mttf_s:g} s"


@dataclass(frozen=True)
class Duration:
    """How long a fault stays; build with once(), lasting(), permanent() or mttr()."""

    kind: str
    t_s: float = 0.0
    mttr_s: float = 0.0

    @classmethod
    def once(cls) -> Duration:
        return cls("once")

    @classmethod
    def lasting(cls, t_s: float) -> Duration:
        _check(math.isfinite(t_s) and t_s > 0, f"duration {t_s!r}: expected a positive number in s")
        return cls("for", t_s=float(t_s))

    @classmethod
    def permanent(cls) -> Duration:
        return cls("permanent")

    @classmethod
    def mttr(cls, mttr_s: float) -> Duration:
        _check(math.isfinite(mttr_s) and mttr_s > 0, f"MTTR {mttr_s!r}: expected a positive number in s")
        return cls("mttr", mttr_s=float(mttr_s))

    def describe(self) -> str:
        return {"once": "for one cycle", "for": f"for {self.t_s:g} s", "permanent": "permanent",
                "mttr": f"repaired after MTTR {self.mttr_s:g} s"}[self.kind]


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise UserError(message)


def channel_unit(name: str) -> tuple[str, str] | None:
    """(unit as written in keys, unit) of a channel by its name (see CHANNEL_UNITS), or None."""
    for prefix, key, unit in CHANNEL_UNITS:
        if name.startswith(prefix):
            return key, unit
    for suffix, key, unit in IMU_AXIS_UNITS:
        if name.endswith(suffix):
            return key, unit
    return None


def signal_unit(signal: str) -> tuple[str, str] | None:
    """(unit as written in keys, unit) of a trigger signal: t, q_<joint>, <channel>, truth:<channel>."""
    if signal == "t":
        return "s", "s"
    if signal.startswith("q_"):
        return "rad", "rad"
    return channel_unit(signal.removeprefix("truth:"))
