"""Fault injection: one engine for signal, plant, bus and timing faults.

A :class:`Fault` is a target, an effect (its ``kind``) and parameters; :meth:`FaultEngine.inject`
arms it with a :class:`Trigger` (when it starts) and a :class:`Duration` (when it ends). Scenario
files (``configs/scenarios/*.toml``, parsed by :mod:`hil.faults.scenario`) declare the same things.

Hook API (what the real-time loop calls, in this order)
--------------------------------------------------------
Set-up, before the loop::

    link = FaultyLink(raw_link, bus)            # firmware_bridge.link_faults; the loop's link from now on
    engine = FaultEngine(sensors.channel_names, dt_s=plant.dt, seed=seed, encoding=bus_encoding(bus),
                         counter_bits=encoder_counter_bits(sensors), plant=plant, drives=drives, link=link)
    load_scenario(path).inject_into(engine)     # and/or engine.inject(fault, trigger, duration)

Each cycle::

    1. engine.begin_cycle(cycle, plant.t)       first, before link.recv(): inject/clear requests,
                                                durations that ended, triggers that fired; plant and
                                                drive faults are applied or undone here; the link
                                                releases delayed frames and sends babble frames
    2. link.recv() until None                   to_plant bus faults act on the received commands
    3. engine.stall()                           in the compute phase, before the plant step
    4. plant step + sensor sampling             fills sensors.truth and sensors.measured
    5. engine.apply_signals(measured, truth)    signal faults change ``measured`` in place; it must
                                                hold the values as sampled (SensorSuite.step copies
                                                its outputs into it every step, held channels too),
                                                or a fault would act on its own output again
    6. status |= StatusFlag.FAULT_ACTIVE if engine.any_active
    7. frames encoded from measured, link.send  to_firmware bus faults and the output delay act here
    8. engine.events_since(n_logged)            the injections and clearances of this cycle, for the log

``cycle`` is the loop's cycle counter and ``plant.t`` the plant time at the cycle start [s]; all
trigger and duration times are on this emulator clock, so lockstep and afap runs are reproducible
(compared with a tolerance of 1 % of a cycle for the round-off of a clock that sums its steps).
Injections and clearances requested through the API take effect at the next ``begin_cycle``
(``inject``, ``clear``, ``active`` and ``summary`` may be called from another thread; the hooks and
``hold_brake`` only from the loop's: see :class:`FaultEngine`). Binding a fault (``inject``) does
all the work that allocates: channel look-ups, random streams, the kernel arrays of a payload
change (a re-assembly, some 20 ms of Python that a live injection makes the loop share the
interpreter with); the per-cycle hooks only index preallocated state (but for a payload fault
that changes the substeps: the friction and brake floors are recomputed then, a few small
arrays). Nothing a fault does at run time raises into the
loop: a failing effect is skipped and counted in ``engine.error_count`` (the first messages in
``engine.errors``). In lockstep mode the commands are the clock: a to_plant fault that withholds
them (drop, silent, frame_delay, period) holds the loop until its lockstep timeout.

Every activation and clearance is recorded in ``engine.events`` as a :class:`FaultEvent`
``(cycle, t_s, "inject" | "clear", fault_name, description)``; ``engine.any_active`` is true while
any fault is active (a slip's persistent count offset is not an active fault).

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
    ``repeat=False``; each fault draws from its own stream of ``seed``, so a run is reproducible.

Durations (``None``: permanent)
    ``Duration.once()``       one cycle: active in the cycle it fires, cleared at the next cycle start
    ``Duration.lasting(T_s)`` cleared at the first cycle start at least T_s after it fired
    ``Duration.permanent()``  until ``engine.clear(handle)``
    ``Duration.mttr(mttr_s)`` repaired after an exponential time with mean mttr_s

Signal faults (target: a sensor channel; values in the channel's unit, written in the keys as the
sensor presets do: counts for enc_/index_/abs_, counts_s for vel_, m_s2 and rad_s for the IMU axes
*_ax..*_az and *_gx..*_gz, strain, N_m for torque_, A for cur_). Several faults on one channel act
in the order they became active.
    ``stuck``          holds ``value_<unit>``, or without it the value sampled in the cycle it struck
    ``offset``         adds ``offset_<unit>``
    ``gain``           multiplies by ``gain``
    ``noise``          adds white Gaussian noise of standard deviation ``sigma_<unit>``
    ``drift``          adds ``rate_<unit>_per_s`` times the time since it struck (0 in its first cycle)
    ``delay``          the value ``samples`` loop cycles earlier (the parameter counts cycles, not
                       the channel's own samples: a channel sampled every divider-th cycle is
                       delayed by ``samples`` cycles all the same); the value at the strike until then
    ``dropout``        the sensor stops answering: the value reads 0 (``mode = "zero"``, default)
                       or keeps the last sample (``mode = "hold"``); either way ``engine.invalid``
                       flags the channel while active. Nothing in the loop reads it and no bus
                       signal carries it: it is there for tests and monitors, through the API
    ``nan``            NaN, for channels a float32 bus signal carries (refused at binding for a
                       channel the ``encoding`` look-up knows as integer-coded: no integer holds NaN)
    ``saturation``     clipped to [``low_<unit>``, ``high_<unit>``] (either may be omitted)
    ``bitflip``        bit ``bit`` of the raw bus integer inverted (raw = round((v - offset) /
                       scale), two's complement of the signal's width), converted back; needs the
                       ``encoding`` look-up
    ``quantisation``   rounded to a multiple of ``lsb_<unit>``
    ``slip``           an encoder count slip: ``slip_counts`` added to the count from the strike on,
                       for good: clearing the fault does not undo a slip, as on a real encoder that
                       lost or gained edges (the offset is kept as the counter's persistent error).
                       The slipped count wraps in the counter's width like the real counter (with
                       the engine's ``counter_bits``; so does an encoder_disconnect's offset)
Plant faults
    ``payload``        attachment ``target`` gets ``mass_kg`` (and ``inertia_kg_m2``, principal
                       moments about its centre of mass; default: the nominal inertia scaled with
                       the mass); the model is re-assembled at binding and the kernel arrays are
                       swapped in place when it strikes and restored when it clears. Should the
                       lighter arm vibrate faster than the integrator's substeps can follow (ELLA
                       without its payload: link 2 torsion at 726 Hz), the plant's substeps are
                       raised while the fault is active, as the preset's own plan would choose; on
                       every change of substeps the joints' friction smoothing floors and the brake
                       ramps are recomputed for the new substep (DriveBank.restabilize).
                       Payload faults do not compose: the most recently struck one sets the arrays.
    ``payload_drop``   the same with mass 0: the payload falls off
    ``friction``       joint ``target``: the drive's friction scaled by ``friction_scale``
    ``kt_loss``        joint ``target``: the motor torque constant scaled by ``kt_scale``
                       (demagnetisation, a lost phase)
    ``encoder_disconnect``  joint ``target`` (or its ``enc_<joint>`` channel): a quadrature counter
                       whose A/B lines are cut sees no edges, so the count stops where it was (the
                       sample of the cycle it struck) and ``vel_<joint>``, if sampled, reads 0.
                       On reconnection the counter counts on from there: the motion during the
                       disconnection is lost for good, kept as a persistent count offset.
    ``stiffness_loss`` body ``target``: modal stiffness scaled by ``stiffness_scale`` in (0, 1]
                       (a crack or a loosened clamp) and the modal damping by its square root, so
                       the damping ratio stays; frequencies fall by sqrt(stiffness_scale)
    ``brake``          joint ``target``: the holding brake engaged
Bus faults (target ``"to_plant"`` / ``"to_firmware"``, optionally ``":<message name or id>"``) and
the timing faults ``stall`` (busy-wait ``stall_s`` in the compute phase of every active cycle) and
``output_delay`` (every sensor frame held ``cycles`` cycles or ``delay_s``): see
:mod:`firmware_bridge.link_faults`.
"""
from __future__ import annotations

import copy
import difflib
import json
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Sequence

import numpy as np

from firmware_bridge.link_faults import BUS_KINDS, FaultyLink, parse_bus_target
from firmware_bridge.messages import BusMap
from hil.model.assembly import assemble
from hil.model.config import ConfigError
from hil.model.linearize import arm_frequencies_hz, spring_frequencies_hz, substeps_for

if TYPE_CHECKING:
    from hil.dynamics.plant import Plant

Encoding = Callable[[str], tuple[float, float, int, bool]]

SIGNAL_KINDS = ("stuck", "offset", "gain", "noise", "drift", "delay", "dropout", "nan", "saturation",
                "bitflip", "quantisation", "slip")
PLANT_KINDS = ("payload", "payload_drop", "friction", "kt_loss", "encoder_disconnect", "stiffness_loss",
               "brake")
TIMING_KINDS = ("stall", "output_delay")
KINDS = SIGNAL_KINDS + PLANT_KINDS + BUS_KINDS + TIMING_KINDS

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


# ----------------------------------------------------------------------------- fault, trigger, duration
@dataclass(frozen=True)
class Fault:
    """What goes wrong: ``kind`` (see KINDS) acting on ``target`` with ``params``, whose keys carry
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
        raise ValueError(message)


# ----------------------------------------------------------------------------- parameters
class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()        # the value error messages show for a key that is not there
_REQUIRED = object()
_FINITE = ("a finite number", lambda v: True)
_POSITIVE = ("a positive number", lambda v: v > 0)
_NONNEG = ("a number >= 0", lambda v: v >= 0)
_PROBABILITY = ("a probability in (0, 1]", lambda v: 0 < v <= 1)
_FRACTION = ("a factor in (0, 1]", lambda v: 0 < v <= 1)
_COUNT = ("an integer >= 1", lambda v: v >= 1)
_NONZERO = ("a non-zero integer", lambda v: v != 0)


@dataclass(frozen=True)
class _Param:
    """One parameter: its key is ``stem`` for a fixed unit (the stem ends in it: ``stall_s``),
    ``<stem>_<channel unit>`` for ``unit = "@"`` and ``<stem>_<channel unit>_per_s`` for "@/s"."""

    stem: str
    unit: str = ""
    type: str = "float"          # float | int | str (one of choices) | vector3
    default: Any = _REQUIRED
    check: tuple[str, Callable[[Any], bool]] = _FINITE
    choices: tuple[str, ...] = ()

    def key(self, suffix: str) -> str:
        if self.unit == "@":
            return f"{self.stem}_{suffix}"
        if self.unit == "@/s":
            return f"{self.stem}_{suffix}_per_s"
        return self.stem

    def unit_text(self, unit: str) -> str:
        return {"@": unit, "@/s": f"{unit}/s"}.get(self.unit, self.unit)


_PROB_FRAME = _Param("probability_per_frame", default=1.0, check=_PROBABILITY)
_DELAY = (_Param("cycles", type="int", default=None, check=_COUNT),
          _Param("delay_s", "s", default=None, check=_POSITIVE))
_PARAMS: dict[str, tuple[_Param, ...]] = {
    "stuck": (_Param("value", "@", default=None),),
    "offset": (_Param("offset", "@"),),
    "gain": (_Param("gain"),),
    "noise": (_Param("sigma", "@", check=_NONNEG),),
    "drift": (_Param("rate", "@/s"),),
    "delay": (_Param("samples", "cycles", type="int", check=_COUNT),),
    "dropout": (_Param("mode", type="str", default="zero", choices=("zero", "hold")),),
    "nan": (),
    "saturation": (_Param("low", "@", default=None), _Param("high", "@", default=None)),
    "bitflip": (_Param("bit", type="int", check=("an integer >= 0", lambda v: v >= 0)),),
    "quantisation": (_Param("lsb", "@", check=_POSITIVE),),
    "slip": (_Param("slip", "@", type="int", check=_NONZERO),),
    "payload": (_Param("mass_kg", "kg", check=_NONNEG),
                _Param("inertia_kg_m2", "kg m^2", type="vector3", default=None)),
    "payload_drop": (),
    "friction": (_Param("friction_scale", check=_POSITIVE),),
    "kt_loss": (_Param("kt_scale", check=_NONNEG),),
    "encoder_disconnect": (),
    "stiffness_loss": (_Param("stiffness_scale", check=_FRACTION),),
    "brake": (),
    "drop": (_PROB_FRAME,),
    "duplicate": (_Param("copies", type="int", default=1, check=_COUNT), _PROB_FRAME),
    "reorder": (),
    "frame_delay": _DELAY,
    "corrupt": (_Param("bytes", type="int", default=1, check=_COUNT), _PROB_FRAME),
    "bad_crc": (_PROB_FRAME,),
    "wrong_counter": (_Param("counter_offset", type="int", default=-1, check=_NONZERO), _PROB_FRAME),
    "wrong_dlc": (_Param("length_bytes", type="int", check=("an integer >= 0", lambda v: v >= 0)),),
    "silent": (),
    "period": (_Param("divider", type="int", check=("an integer >= 2", lambda v: v >= 2)),),
    "babble": (_Param("rate_hz", "Hz", check=_POSITIVE),
               _Param("length_bytes", type="int", default=8, check=("an integer >= 0", lambda v: v >= 0)),
               _Param("fill_byte", type="int", default=0xAA, check=("a byte 0..255", lambda v: 0 <= v <= 255))),
    "stall": (_Param("stall_s", "s", check=_POSITIVE),),
    "output_delay": _DELAY,
}


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


def _known_prefixes() -> str:
    return ", ".join([f"{p}* ({u})" for p, _, u in CHANNEL_UNITS] + ["*_ax|ay|az (m/s^2)", "*_gx|gy|gz (rad/s)"])


def check_fault(fault: Fault) -> dict[str, Any]:
    """The fault's parameters by stem, validated against its kind and target; raises FaultError
    naming the key and what was expected (with the unit)."""
    name = fault.name

    def error(key: str, value: Any, expected: str) -> FaultError:
        return FaultError(name, key, value, expected)

    if fault.kind not in _PARAMS:
        raise error("kind", fault.kind, "expected one of " + ", ".join(KINDS))
    _check_target(fault, error)
    params = _PARAMS[fault.kind]
    suffix, unit = "", ""
    in_channel_unit = [p for p in params if p.unit.startswith("@")]
    if in_channel_unit:
        found = channel_unit(fault.target)
        # a channel of unknown unit is fine as long as nothing is given in its unit (stuck at last)
        if found is None and (fault.params or any(p.default is _REQUIRED for p in in_channel_unit)):
            raise error("target", fault.target, f"expected a channel whose unit is known: {_known_prefixes()}")
        suffix, unit = found or ("", "")
    keys = {p.key(suffix): p for p in params}
    for key, value in fault.params.items():
        if key not in keys:
            hint = difflib.get_close_matches(key, list(keys), n=1)
            did = f" (did you mean {hint[0]!r}?)" if hint else ""
            allowed = ", ".join(f"{k} [{p.unit_text(unit)}]" if p.unit_text(unit) else k for k, p in keys.items())
            raise error(key, value, f"unknown parameter of {fault.kind} faults{did}; "
                                    f"expected {allowed or 'no parameters'}")
    out = {p.stem: _read(p, key, fault.params, unit, error) for key, p in keys.items()}
    _check_combination(fault, out, keys, error)
    return out


def _check_target(fault: Fault, error: Callable[..., FaultError]) -> None:
    kind, target = fault.kind, fault.target
    if not isinstance(target, str):
        raise error("target", target, "expected a string")
    if kind in TIMING_KINDS:
        if target:
            raise error("target", target, f"expected no target: a {kind} fault acts on the whole cycle")
    elif kind in BUS_KINDS:
        try:
            _, message = parse_bus_target(target)
        except ValueError as exc:
            raise error("target", target, str(exc)) from None
        if kind == "babble" and message is None:
            raise error("target", target, "expected \"<direction>:<message name or id>\": the id babbled")
    elif not target:
        raise error("target", target, "required: expected a " + (
            "channel name" if kind in SIGNAL_KINDS else "joint, body or attachment name"))
    if kind == "slip" and not target.startswith("enc_"):
        raise error("target", target, "expected an encoder channel enc_<joint>")


def _read(p: _Param, key: str, params: Mapping[str, Any], unit: str,
          error: Callable[..., FaultError]) -> Any:
    utext = p.unit_text(unit)
    in_unit = f" in {utext}" if utext else ""
    if key not in params:
        if p.default is _REQUIRED:
            raise error(key, MISSING, f"required; expected {p.check[0]}{in_unit}")
        return p.default
    v = params[key]
    if p.type == "str":
        if v not in p.choices:
            raise error(key, v, "expected one of " + ", ".join(json.dumps(c) for c in p.choices))
        return v
    if p.type == "vector3":
        ok = (isinstance(v, (list, tuple)) and len(v) == 3
              and all(_is_number(x) and math.isfinite(x) and x >= 0 for x in v))
        if not ok:
            raise error(key, v, f"expected 3 principal moments >= 0{in_unit}")
        return tuple(float(x) for x in v)
    if p.type == "int":
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not p.check[1](v):
            raise error(key, v, f"expected {p.check[0]}{in_unit}")
        return int(v)
    if not _is_number(v) or not math.isfinite(v) or not p.check[1](v):
        raise error(key, v, f"expected {p.check[0]}{in_unit}")
    return float(v)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _check_combination(fault: Fault, out: dict, keys: dict[str, _Param], error: Callable[..., FaultError]) -> None:
    if fault.kind in ("frame_delay", "output_delay") and (out["cycles"] is None) == (out["delay_s"] is None):
        raise error("cycles", fault.params.get("cycles", MISSING), "expected exactly one of cycles, delay_s")
    if fault.kind == "saturation":
        low_key, high_key = list(keys)
        if out["low"] is None and out["high"] is None:
            raise error(low_key, MISSING, f"expected {low_key} and/or {high_key}")
        if out["low"] is not None and out["high"] is not None and out["low"] > out["high"]:
            raise error(high_key, out["high"], f"expected {high_key} >= {low_key} = {out['low']:g}")


# ----------------------------------------------------------------------------- effects
class _Effect:
    """A bound fault: start() when it strikes, stop() when it clears; ``apply`` (signal faults)
    runs on the measured array every cycle while active."""

    apply: Callable[[np.ndarray, np.ndarray], None] | None = None

    def start(self, engine: FaultEngine) -> None:
        pass

    def stop(self, engine: FaultEngine) -> None:
        pass


class _Stuck(_Effect):
    def __init__(self, i: int, value: float | None):
        self.i, self.value, self.held = i, value, value

    def start(self, engine: FaultEngine) -> None:
        self.held = self.value

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        if self.held is None:
            self.held = float(m[self.i])
        m[self.i] = self.held


class _Offset(_Effect):
    def __init__(self, i: int, offset: float):
        self.i, self.offset = i, offset

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        m[self.i] += self.offset


class _Gain(_Effect):
    def __init__(self, i: int, gain: float):
        self.i, self.gain = i, gain

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        m[self.i] *= self.gain


class _Noise(_Effect):
    BLOCK = 1024      # normal deviates drawn at a time: one generator call per 1024 cycles

    def __init__(self, i: int, sigma: float, rng: np.random.Generator):
        self.i, self.sigma, self.rng = i, sigma, rng
        self.buf = np.empty(self.BLOCK)
        self.k = self.BLOCK

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        if self.k == self.BLOCK:
            self.rng.standard_normal(out=self.buf)
            self.buf *= self.sigma
            self.k = 0
        m[self.i] += self.buf[self.k]
        self.k += 1


class _Drift(_Effect):
    def __init__(self, i: int, rate: float, dt: float):
        self.i, self.step, self.n = i, rate * dt, 0

    def start(self, engine: FaultEngine) -> None:
        self.n = 0

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        m[self.i] += self.step * self.n
        self.n += 1


class _Delay(_Effect):
    def __init__(self, i: int, samples: int):
        self.i = i
        self.ring = np.empty(samples)
        self.k = 0
        self.primed = False

    def start(self, engine: FaultEngine) -> None:
        self.k, self.primed = 0, False

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        v = m[self.i]
        if not self.primed:
            self.ring[:] = v
            self.primed = True
        m[self.i] = self.ring[self.k]
        self.ring[self.k] = v
        self.k = (self.k + 1) % len(self.ring)


class _Dropout(_Effect):
    def __init__(self, i: int, hold: bool):
        self.i, self.hold, self.held = i, hold, None

    def start(self, engine: FaultEngine) -> None:
        self.held = None
        engine._set_invalid(self.i, +1)

    def stop(self, engine: FaultEngine) -> None:
        engine._set_invalid(self.i, -1)

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        if not self.hold:
            m[self.i] = 0.0
            return
        if self.held is None:
            self.held = float(m[self.i])
        m[self.i] = self.held


class _NaN(_Effect):
    def __init__(self, i: int):
        self.i = i

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        m[self.i] = math.nan


class _Saturation(_Effect):
    def __init__(self, i: int, low: float | None, high: float | None):
        self.i = i
        self.low = -math.inf if low is None else low
        self.high = math.inf if high is None else high

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        v = m[self.i]
        if v > self.high:
            m[self.i] = self.high
        elif v < self.low:
            m[self.i] = self.low


class _BitFlip(_Effect):
    def __init__(self, i: int, bit: int, scale: float, offset: float, bits: int, signed: bool):
        self.i, self.scale, self.offset = i, scale, offset
        self.flip = 1 << bit
        self.mask = (1 << bits) - 1
        self.sign = 1 << (bits - 1) if signed else 0
        self.lo = -self.sign if signed else 0
        self.hi = self.mask - self.sign if signed else self.mask

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        v = m[self.i]
        if not math.isfinite(v):
            return
        raw = min(max(round((v - self.offset) / self.scale), self.lo), self.hi)   # the writer saturates too
        raw = (raw & self.mask) ^ self.flip
        if raw & self.sign:
            raw -= self.sign << 1
        m[self.i] = raw * self.scale + self.offset


class _Quantisation(_Effect):
    def __init__(self, i: int, lsb: float):
        self.i, self.lsb = i, lsb

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        v = m[self.i]
        if math.isfinite(v):
            m[self.i] = math.floor(v / self.lsb + 0.5) * self.lsb


class _Slip(_Effect):
    def __init__(self, i: int, counts: int):
        self.i, self.counts = i, counts

    def start(self, engine: FaultEngine) -> None:
        engine._add_offset(self.i, self.counts)


class _EncoderDisconnect(_Effect):
    def __init__(self, i: int, vel: int | None):
        self.i, self.vel = i, vel
        self.held: float | None = None
        self.last = 0.0

    def start(self, engine: FaultEngine) -> None:
        self.held = None

    def stop(self, engine: FaultEngine) -> None:
        if self.held is not None:
            engine._add_offset(self.i, self.held - self.last)

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        self.last = float(m[self.i])
        if self.held is None:
            self.held = self.last
        m[self.i] = self.held
        if self.vel is not None:
            m[self.vel] = 0.0


class _DriveFault(_Effect):
    def __init__(self, drives: _DriveFaults, what: str, joint: int, factor: float):
        self.drives, self.what, self.joint, self.factor = drives, what, joint, factor

    def start(self, engine: FaultEngine) -> None:
        self.drives.change(self, +1)

    def stop(self, engine: FaultEngine) -> None:
        self.drives.change(self, -1)


class _DriveFaults:
    """Active friction, torque-constant and brake faults per joint, pushed to the drive bank
    (friction and kt scales multiply when several act on one joint). A brake is closed while a
    brake fault or an outside holder (``held``: the watchdog's safe state) wants it closed."""

    def __init__(self, drives: Any):
        self.drives = drives
        self.active: list[_DriveFault] = []
        self.held: set[int] = set()

    def change(self, fault: _DriveFault, sign: int) -> None:
        if sign > 0:
            self.active.append(fault)
        else:
            self.active.remove(fault)
        mine = [f for f in self.active if f.what == fault.what and f.joint == fault.joint]
        k = fault.joint
        if fault.what == "brake":
            self.drives.set_brake(k, bool(mine) or k in self.held)
        elif fault.what == "friction":
            self.drives.set_friction_scale(k, math.prod(f.factor for f in mine))
        else:
            self.drives.kt_scale[k] = math.prod(f.factor for f in mine)

    def hold_brake(self, k: int, engaged: bool) -> None:
        if engaged:
            self.held.add(k)
        else:
            self.held.discard(k)
        faulted = any(f.what == "brake" and f.joint == k for f in self.active)
        self.drives.set_brake(k, engaged or faulted)


class _PlantArrays:
    """The plant's kernel arrays under payload and stiffness faults. The nominal arrays are those
    of the plant's model assembled afresh, not a copy of the live ones, which the drive bank
    rewrites at run time (friction, brakes): a variant touches only the arrays the model change
    alters, and every change rewrites just those in place, from the nominal arrays or the latest
    payload variant, then scales the modal stiffness and damping of weakened bodies.

    What depends on the substep h (each joint's Coulomb smoothing floor, the brakes' ramps) is
    recomputed whenever a change sets other substeps: with ``drives.restabilize()`` (hil.devices.drives
    .DriveBank: its inertias, its current friction scales), else Plant.stabilize_friction at the
    drive bank's ``inertia`` or, without one, the apparent inertias at the plant's pose now.

    Threads: variant() runs on the API thread (inject), start/stop and refresh() on the loop's;
    only the loop thread changes ``payloads``, ``weakened`` and ``touched``."""

    def __init__(self, plant: Plant, drives: Any = None):
        self.plant = plant
        self.live = dict(zip(plant.km._fields, plant.km))
        self.nominal = dict(zip(plant.km._fields, assemble(plant.asm.model).km))
        self.nominal_substeps = plant.plan.substeps
        self.payloads: list[_Payload] = []
        self.weakened: list[_StiffnessLoss] = []
        self.touched: set[str] = set()
        restabilize = getattr(drives, "restabilize", None)
        if restabilize is None:
            from hil.dynamics.plant import apparent_inertias
            inertia = getattr(drives, "inertia", None)
            inertia = apparent_inertias(plant) if inertia is None else np.array(inertia, float)
            restabilize = lambda: plant.stabilize_friction(inertia)   # noqa: E731
        self.restabilize: Callable[[], Any] = restabilize

    def variant(self, model: Any, fault: str) -> tuple[dict[str, np.ndarray], int]:
        """Kernel arrays of ``model`` that differ from the nominal ones, and the substeps it needs."""
        asm = assemble(model)
        changed = {}
        for name, live in self.live.items():
            new = np.asarray(getattr(asm.km, name))
            if new.shape != live.shape or new.dtype != live.dtype:
                raise FaultError(fault, "target", name, f"a change that keeps the kernel arrays' shapes; {name} "
                                                        f"would change from {live.shape} to {new.shape}")
            if not np.array_equal(new, self.nominal[name]):
                changed[name] = new
        return changed, self._substeps(asm)

    def _substeps(self, asm: Any) -> int:
        """Substeps the variant needs with the plant's method, by the rule of the preset's plan."""
        plan = self.plant.plan
        freqs = arm_frequencies_hz(asm)
        f_max = float(max(np.max(np.abs(freqs.free_hz), initial=0.0), np.max(np.abs(freqs.locked_hz), initial=0.0)))
        f_expl = float(spring_frequencies_hz(asm).max(initial=0.0))
        needed = substeps_for(plan.method, f_max, f_expl, plan.dt_s, asm.model.integrator.safety)
        return max(self.nominal_substeps, needed)

    def refresh(self) -> None:
        """Rewrite the touched arrays for the faults active now (loop thread)."""
        top = self.payloads[-1] if self.payloads else None
        arrays = top.arrays if top else {}
        for name in self.touched:
            np.copyto(self.live[name], arrays.get(name, self.nominal[name]))
        for w in self.weakened:
            self.live["Kmod"][w.body] *= w.scale
            self.live["Dmod"][w.body] *= math.sqrt(w.scale)
        self.plant.kernel_arrays_changed()
        plan = self.plant.plan
        substeps = top.substeps if top else self.nominal_substeps
        if substeps != plan.substeps:
            plan.substeps = substeps
            self.restabilize()          # friction smoothing floors and brake ramps for the new substep


class _Payload(_Effect):
    def __init__(self, arrays: _PlantArrays, changed: dict[str, np.ndarray], substeps: int):
        self.plant_arrays, self.arrays, self.substeps = arrays, changed, substeps

    def start(self, engine: FaultEngine) -> None:
        self.plant_arrays.touched.update(self.arrays)      # here, on the loop thread that iterates it
        self.plant_arrays.payloads.append(self)
        self.plant_arrays.refresh()

    def stop(self, engine: FaultEngine) -> None:
        self.plant_arrays.payloads.remove(self)
        self.plant_arrays.refresh()


class _StiffnessLoss(_Effect):
    def __init__(self, arrays: _PlantArrays, body: int, scale: float):
        self.plant_arrays, self.body, self.scale = arrays, body, scale

    def start(self, engine: FaultEngine) -> None:
        self.plant_arrays.touched.update(("Kmod", "Dmod"))  # here, on the loop thread that iterates it
        self.plant_arrays.weakened.append(self)
        self.plant_arrays.refresh()

    def stop(self, engine: FaultEngine) -> None:
        self.plant_arrays.weakened.remove(self)
        self.plant_arrays.refresh()


class _Stall(_Effect):
    def __init__(self, ns: int):
        self.ns = ns

    def start(self, engine: FaultEngine) -> None:
        engine._stall_ns += self.ns

    def stop(self, engine: FaultEngine) -> None:
        engine._stall_ns -= self.ns


class _LinkFault(_Effect):
    def __init__(self, link: FaultyLink, effect: Any):
        self.link, self.effect = link, effect

    def start(self, engine: FaultEngine) -> None:
        self.link.activate(self.effect)

    def stop(self, engine: FaultEngine) -> None:
        self.link.deactivate(self.effect)


# ----------------------------------------------------------------------------- engine
class _Entry:
    """One injected fault and its trigger/duration state."""

    __slots__ = ("handle", "fault", "trigger", "duration", "effect", "rng", "text", "state", "due_t", "end_t",
                 "since_t", "source", "prev", "threshold", "rising", "falling", "stop_requested")

    def __init__(self, handle: int, fault: Fault, trigger: Trigger | None, duration: Duration | None,
                 effect: _Effect, rng: np.random.Generator, text: str, source: tuple[Any, str, int] | None):
        self.handle, self.fault, self.trigger, self.duration = handle, fault, trigger, duration
        self.effect, self.rng, self.text, self.source = effect, rng, text, source
        self.state = "new"
        self.due_t = self.end_t = self.since_t = math.inf
        self.prev = math.nan
        crossing = trigger is not None and trigger.kind == "crossing"
        self.threshold = trigger.threshold if crossing else math.nan
        self.rising = crossing and trigger.direction in ("rising", "either")
        self.falling = crossing and trigger.direction in ("falling", "either")
        self.stop_requested = False


class FaultEngine:
    """Injects faults into the measured channels, the plant, the drives, the link and the cycle's
    timing; see the module docstring for the hook API and every fault's semantics.

    ``channel_names``: the sensor suite's channels, in the order of its ``measured``/``truth``
    arrays. ``encoding(name) -> (scale, offset, bits, signed)``: a channel's bus coding (for bit
    flips; :func:`bus_encoding` builds it from a bus map). ``counter_bits``: channel -> width in
    bits of the signed two's-complement counter an encoder channel reads (hil.model.sensor_specs
    .EncoderSpec.counter_bits; :func:`encoder_counter_bits` builds it from a sensor suite): the
    persistent count offsets of slips and encoder disconnections are added to the wrapped count
    and wrapped again, as the real counter wraps; a channel not in it is not wrapped. ``plant``
    (for q_<joint> triggers and plant faults), ``drives`` (a drive bank: ``kt_scale``,
    ``set_brake``, ``set_friction_scale``; ``restabilize()`` and ``inertia`` if it has them) and
    ``link`` (a FaultyLink, for bus and output-delay faults) are needed only by the faults that
    act on them.

    Threads: ``inject``, ``clear``, ``active`` and ``summary`` (and ``channel``) may be called from
    another thread than the loop's (a test's): inject binds there and queues the arming, clear
    queues the clearance, both taken up at the next begin_cycle; active and summary read copies.
    Everything else is for the loop's thread only: the hooks ``begin_cycle``, ``stall``,
    ``apply_signals`` and ``events_since``, and ``hold_brake``. Only the loop thread changes the
    plant, the drive bank, the link's active effects and the measured arrays.
    """

    MAX_ERRORS = 100

    def __init__(self, channel_names: Sequence[str], *, dt_s: float, seed: int = 0,
                 encoding: Encoding | None = None, plant: Plant | None = None, drives: Any = None,
                 link: FaultyLink | None = None, counter_bits: Mapping[str, int] | None = None):
        if not dt_s > 0:
            raise ValueError(f"dt_s = {dt_s!r}: expected the cycle period, a positive number in s")
        if link is not None and not isinstance(link, FaultyLink):
            raise TypeError(f"link {link!r}: expected a FaultyLink around the loop's link")
        self.channel_names = list(channel_names)
        self._channels = {n: i for i, n in enumerate(self.channel_names)}
        self._counter_half = np.zeros(len(self.channel_names))    # 2^(bits - 1) of a counter channel, else 0
        for name, bits in (counter_bits or {}).items():
            if name not in self._channels:
                raise ValueError(f"counter_bits: no channel {name!r}; channels: {', '.join(self.channel_names)}")
            if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 2 <= bits <= 62:
                raise ValueError(f"counter_bits[{name!r}] = {bits!r}: expected a counter width of 2 .. 62 bits")
            self._counter_half[self._channels[name]] = float(1 << (int(bits) - 1))
        self.dt = float(dt_s)
        self.seed = int(seed)
        self.encoding = encoding
        self.plant = plant
        self.drives = drives
        self.link = link
        self.events: list[FaultEvent] = []
        self.errors: list[tuple[int, str, str]] = []         # (cycle, fault, what failed), the first MAX_ERRORS
        self.error_count = 0
        self.invalid = np.zeros(len(self.channel_names), bool)   # dropouts: for tests, monitors (no bus bit)
        self.any_active = False
        self.cycle = 0
        self.t = 0.0
        self._eps = 0.01 * self.dt        # the plant clock is a running sum of steps: allow its round-off
        self._entries: list[_Entry] = []
        self._requests: deque[tuple[str, int]] = deque()
        self._armed: list[_Entry] = []
        self._active: list[_Entry] = []
        self._crossings: list[_Entry] = []
        self._next_t = math.inf
        self._chain: list[Callable[[np.ndarray, np.ndarray], None]] = []
        self._offsets: list[list] = []          # [channel index, persistent offset, 2^(counter bits - 1) or 0]
        self._dropouts = np.zeros(len(self.channel_names), np.int64)
        self._stall_ns = 0
        self._time = [0.0]
        self._watch_m_idx: list[int] = []                    # channels crossing triggers read, and
        self._watch_t_idx: list[int] = []                    # their previous samples (NaN: none yet)
        self._watch_m: list[float] = []
        self._watch_t: list[float] = []
        self._watching = False
        # made here, not at the first fault that needs them: inject (API thread) and hold_brake
        # (loop thread) would race to create them. A plant without kernel arrays (a stand-in that
        # serves q_<joint> triggers only) takes no plant faults.
        self._drive_faults = _DriveFaults(drives) if drives is not None else None
        self._plant_arrays = (_PlantArrays(plant, drives) if getattr(plant, "km", None) is not None
                              else None)

    # ------------------------------------------------------------------ public API
    def channel(self, name: str) -> int:
        """Index of channel ``name`` in the measured/truth arrays."""
        try:
            return self._channels[name]
        except KeyError:
            raise KeyError(f"no channel {name!r}; channels: {', '.join(self.channel_names)}") from None

    def inject(self, fault: Fault, trigger: Trigger | None = None, duration: Duration | None = None) -> int:
        """Bind ``fault`` and arm it; returns the handle for clear(). It is armed at the next
        begin_cycle (with ``trigger=None`` it strikes there); ``duration=None`` is permanent.
        Raises FaultError for a fault that cannot act here (unknown channel, joint, message...)."""
        params = check_fault(fault)
        handle = len(self._entries)
        seq = np.random.SeedSequence(self.seed, spawn_key=(handle,))
        timing_rng, effect_rng = (np.random.default_rng(s) for s in seq.spawn(2))
        source = self._trigger_source(fault, trigger)
        effect = self._bind(fault, params, effect_rng)
        text = "; ".join([fault.describe(), trigger.describe() if trigger else "at once",
                          duration.describe() if duration else "permanent"])
        self._entries.append(_Entry(handle, fault, trigger, duration, effect, timing_rng, text, source))
        self._requests.append(("arm", handle))
        return handle

    def clear(self, handle: int) -> None:
        """Clear the fault at the next begin_cycle (recorded if it was active) and disarm it."""
        if not 0 <= handle < len(self._entries):
            raise KeyError(f"no fault with handle {handle!r}")
        self._requests.append(("clear", handle))

    def active(self) -> list[tuple[int, Fault]]:
        """(handle, fault) of every active fault, in the order they struck."""
        return [(e.handle, e.fault) for e in list(self._active)]

    def hold_brake(self, joint: int, engaged: bool) -> None:
        """Close or open joint ``joint``'s brake for an owner other than the faults (the loop's
        watchdog, safe state "brake"): the brake is closed while that owner or an active brake
        fault wants it, so neither releases the other's brake. Call it from the loop's thread."""
        if self._drive_faults is None:
            raise ValueError("hold_brake needs the engine's drives (FaultEngine(..., drives=...))")
        self._drive_faults.hold_brake(joint, engaged)

    def events_since(self, index: int) -> list[FaultEvent]:
        """The events recorded after the first ``index`` ones (for a log written cycle by cycle)."""
        return self.events[index:]

    def summary(self) -> dict:
        """Counts for the run summary: events, active faults, errors, link fault counters."""
        out = {"injections": sum(e.action == "inject" for e in self.events),
               "clearances": sum(e.action == "clear" for e in self.events),
               "active": [f.name for _, f in self.active()], "errors": self.error_count,
               "events": [list(e) for e in self.events]}
        if self.link is not None:
            out["link"] = self.link.stats()
        return out

    # ------------------------------------------------------------------ hooks
    def begin_cycle(self, cycle: int, t_s: float) -> None:
        """Cycle start: requests, ended durations, fired triggers, link releases (see module doc)."""
        self.cycle = cycle
        self.t = t_s
        if self._requests or t_s >= self._next_t:
            self._update(cycle, t_s)
        elif self._crossings:
            self._check_crossings(cycle, t_s)
        link = self.link
        if link is not None and link.busy:
            link.begin_cycle(cycle)

    def apply_signals(self, measured: np.ndarray, truth: np.ndarray) -> None:
        """After sensor sampling: signal faults change ``measured`` in place."""
        if self._watching:
            # a loop beats np.take for the few channels triggers watch
            for slot, i in enumerate(self._watch_m_idx):
                self._watch_m[slot] = measured[i]
            for slot, i in enumerate(self._watch_t_idx):
                self._watch_t[slot] = truth[i]
        for i, offset, half in self._offsets:
            measured[i] = _wrap(measured[i] + offset, half)      # the counter wraps as the real one does
        for apply in self._chain:
            try:
                apply(measured, truth)
            except Exception as exc:   # a fault must never stop the loop
                self._error(next((e.fault.name for e in self._active if e.effect.apply == apply), "?"), repr(exc))

    def stall(self) -> int:
        """In the compute phase: busy-wait while a stall fault is active; returns the ns waited."""
        ns = self._stall_ns
        if ns:
            end = time.perf_counter_ns() + ns
            while time.perf_counter_ns() < end:
                pass
        return ns

    # ------------------------------------------------------------------ scheduling
    def _update(self, cycle: int, t: float) -> None:
        self._time[0] = t
        while self._requests:
            what, handle = self._requests.popleft()
            entry = self._entries[handle]
            if what == "arm" and entry.state == "new":
                self._arm(entry, t)
            elif what == "clear":
                entry.stop_requested = True
                self._disarm(entry)
                if entry.state == "active":
                    self._deactivate(entry, cycle, t, "cleared by clear()")
                entry.state = "done"
        limit = t + self._eps
        for entry in [e for e in self._active if e.end_t <= limit]:
            self._deactivate(entry, cycle, t, self._clear_reason(entry, t))
            self._rearm_or_finish(entry, t)
        for entry in list(self._armed):
            if entry.source is not None and self._crossed(entry) or entry.due_t <= limit:
                self._activate(entry, cycle, t)
        self._reschedule()

    def _check_crossings(self, cycle: int, t: float) -> None:
        """The cycles with nothing else due: only the crossing triggers are evaluated."""
        self._time[0] = t
        fired = [e for e in self._crossings if self._crossed(e)]
        for entry in fired:
            self._activate(entry, cycle, t)
        if fired:
            self._reschedule()

    def _reschedule(self) -> None:
        self._next_t = min([e.due_t for e in self._armed] + [e.end_t for e in self._active],
                           default=math.inf) - self._eps

    def _arm(self, entry: _Entry, t: float) -> None:
        trig = entry.trigger
        entry.state = "armed"
        entry.due_t = math.inf
        if trig is None:
            entry.due_t = t
        elif trig.kind == "at":
            entry.due_t = trig.t_s
        elif trig.kind == "probability":
            entry.due_t = t + (entry.rng.geometric(trig.probability_per_cycle) - 1) * self.dt
        elif trig.kind == "mttf":
            entry.due_t = t + entry.rng.exponential(trig.mttf_s)
        else:
            entry.prev = math.nan
            self._crossings.append(entry)
        self._armed.append(entry)

    def _disarm(self, entry: _Entry) -> None:
        if entry in self._armed:
            self._armed.remove(entry)
        if entry in self._crossings:
            self._crossings.remove(entry)

    def _crossed(self, entry: _Entry) -> bool:
        owner, attr, i = entry.source
        cur = float(getattr(owner, attr)[i])
        prev, entry.prev = entry.prev, cur
        thr = entry.threshold
        return (entry.rising and prev < thr <= cur) or (entry.falling and prev > thr >= cur)

    def _activate(self, entry: _Entry, cycle: int, t: float) -> None:
        self._disarm(entry)
        try:
            entry.effect.start(self)
        except Exception as exc:   # a fault must never stop the loop
            self._error(entry.fault.name, f"start: {exc!r}")
            entry.state = "done"
            return
        entry.state = "active"
        entry.since_t = t
        dur = entry.duration
        if dur is None or dur.kind == "permanent":
            entry.end_t = math.inf
        elif dur.kind == "once":
            entry.end_t = t + 0.5 * self.dt
        elif dur.kind == "for":
            entry.end_t = t + dur.t_s
        else:
            entry.end_t = t + entry.rng.exponential(dur.mttr_s)
        self._active.append(entry)
        if entry.effect.apply is not None:
            self._chain.append(entry.effect.apply)
        self.any_active = True
        self.events.append(FaultEvent(cycle, t, "inject", entry.fault.name, entry.text))

    def _deactivate(self, entry: _Entry, cycle: int, t: float, reason: str) -> None:
        self._active.remove(entry)
        if entry.effect.apply is not None:
            self._chain.remove(entry.effect.apply)
        try:
            entry.effect.stop(self)
        except Exception as exc:   # a fault must never stop the loop
            self._error(entry.fault.name, f"stop: {exc!r}")
        self.any_active = bool(self._active)
        self.events.append(FaultEvent(cycle, t, "clear", entry.fault.name, reason))

    def _clear_reason(self, entry: _Entry, t: float) -> str:
        dur = entry.duration
        if dur.kind == "once":
            return "after one cycle"
        if dur.kind == "for":
            return f"after {dur.t_s:g} s"
        return f"repaired after {t - entry.since_t:.6g} s"

    def _rearm_or_finish(self, entry: _Entry, t: float) -> None:
        if entry.trigger is not None and entry.trigger.repeat and not entry.stop_requested:
            self._arm(entry, t)
        else:
            entry.state = "done"

    def _error(self, fault: str, what: str) -> None:
        self.error_count += 1
        if len(self.errors) < self.MAX_ERRORS:
            self.errors.append((self.cycle, fault, what))

    # ------------------------------------------------------------------ state the effects change
    def _add_offset(self, i: int, offset: float) -> None:
        """Add a persistent count offset to channel i (loop thread); on a counter channel it is
        kept within the counter's range (it acts modulo the counter's 2^bits anyway)."""
        half = float(self._counter_half[i])
        for entry in self._offsets:
            if entry[0] == i:
                break
        else:
            entry = [i, 0.0, half]
            self._offsets.append(entry)
        entry[1] = _wrap(entry[1] + offset, half)

    def _set_invalid(self, i: int, change: int) -> None:
        self._dropouts[i] += change
        self.invalid[i] = self._dropouts[i] > 0

    # ------------------------------------------------------------------ binding
    def _trigger_source(self, fault: Fault, trigger: Trigger | None) -> tuple[Any, str, int] | None:
        """(owner, array attribute, index) a crossing trigger reads at each cycle start; looked up
        by attribute because the plant and the watch list may replace their arrays."""
        if trigger is None or trigger.kind != "crossing":
            return None
        sig = trigger.signal
        if sig == "t":
            return self, "_time", 0
        if sig.startswith("q_"):
            plant = self._need(fault, "plant", "a q_<joint> trigger")
            joints = plant.layout.joint_names
            if sig[2:] not in joints:
                raise FaultError(fault.name, "trigger.signal", sig, "expected t, q_<joint> with joint in "
                                 f"{', '.join(joints)}, <channel> or truth:<channel>")
            return plant, "pos", joints.index(sig[2:])
        truth = sig.startswith("truth:")
        i = self._channel_of(fault, sig.removeprefix("truth:"), "trigger.signal")
        kind = "_t" if truth else "_m"
        getattr(self, f"_watch{kind}").append(math.nan)       # the slot first: the loop may be reading
        getattr(self, f"_watch{kind}_idx").append(i)
        self._watching = True
        return self, f"_watch{kind}", len(getattr(self, f"_watch{kind}")) - 1

    def _need(self, fault: Fault, what: str, why: str) -> Any:
        obj = getattr(self, what)
        if obj is None:
            raise FaultError(fault.name, "kind", fault.kind, f"{why} needs the engine's {what} "
                                                             f"(FaultEngine(..., {what}=...))")
        return obj

    def _channel_of(self, fault: Fault, name: str, key: str = "target") -> int:
        if name not in self._channels:
            raise FaultError(fault.name, key, name, "expected a sensor channel: " + ", ".join(self.channel_names))
        return self._channels[name]

    def _joint_of(self, fault: Fault) -> int:
        names = self.plant.layout.joint_names if self.plant is not None else list(getattr(self.drives, "names", ()))
        if fault.target not in names:
            raise FaultError(fault.name, "target", fault.target, "expected a joint: " + ", ".join(names))
        return names.index(fault.target)

    def _bind(self, fault: Fault, p: dict[str, Any], rng: np.random.Generator) -> _Effect:
        kind = fault.kind
        if kind in SIGNAL_KINDS:
            return self._bind_signal(fault, p, rng)
        if kind in BUS_KINDS or kind == "output_delay":
            link = self._need(fault, "link", f"a {kind} fault")
            target = "to_firmware" if kind == "output_delay" else fault.target
            try:
                effect = link.bind(fault.name, "frame_delay" if kind == "output_delay" else kind,
                                   target, p, rng, self.dt)
            except (KeyError, ValueError) as exc:
                raise FaultError(fault.name, "target", fault.target, str(exc.args[0])) from None
            return _LinkFault(link, effect)
        if kind == "stall":
            return _Stall(round(p["stall_s"] * 1e9))
        if kind == "encoder_disconnect":
            joint = fault.target.removeprefix("enc_")
            vel = self._channels.get(f"vel_{joint}")
            return _EncoderDisconnect(self._channel_of(fault, f"enc_{joint}"), vel)
        if kind in ("friction", "kt_loss", "brake"):
            drives = self._need(fault, "drives", f"a {kind} fault")
            factor = {"friction": p.get("friction_scale"), "kt_loss": p.get("kt_scale"), "brake": 1.0}[kind]
            what = {"friction": "friction", "kt_loss": "kt", "brake": "brake"}[kind]
            joint = self._joint_of(fault)
            holding = getattr(drives, "brake_torque", None)      # a bank that says which joints have brakes
            if kind == "brake" and holding is not None and not holding[joint] > 0:
                raise FaultError(fault.name, "target", fault.target, "expected a joint with a holding brake "
                                                                     "(brake_torque_N_m > 0 in its motor table)")
            return _DriveFault(self._drive_faults, what, joint, factor)
        return self._bind_plant(fault, p)

    def _bind_signal(self, fault: Fault, p: dict[str, Any], rng: np.random.Generator) -> _Effect:
        i = self._channel_of(fault, fault.target)
        kind = fault.kind
        if kind == "nan" and self._integer_coded(fault.target):
            raise FaultError(fault.name, "target", fault.target,
                             "expected a channel the bus carries as float32: an integer signal cannot carry "
                             "NaN (dropout or stuck model a dead sensor there)")
        if kind == "bitflip":
            if self.encoding is None:
                raise FaultError(fault.name, "kind", kind, "a bitflip fault needs the engine's encoding look-up")
            try:
                scale, offset, bits, signed = self.encoding(fault.target)
            except KeyError as exc:
                raise FaultError(fault.name, "target", fault.target, str(exc.args[0])) from None
            if not 0 <= p["bit"] < bits:
                raise FaultError(fault.name, "bit", p["bit"], f"expected a bit index 0..{bits - 1} "
                                                              f"of the {bits}-bit signal {fault.target}")
            return _BitFlip(i, p["bit"], scale, offset, bits, signed)
        make = {
            "stuck": lambda: _Stuck(i, p["value"]), "offset": lambda: _Offset(i, p["offset"]),
            "gain": lambda: _Gain(i, p["gain"]), "noise": lambda: _Noise(i, p["sigma"], rng),
            "drift": lambda: _Drift(i, p["rate"], self.dt), "delay": lambda: _Delay(i, p["samples"]),
            "dropout": lambda: _Dropout(i, p["mode"] == "hold"), "nan": lambda: _NaN(i),
            "saturation": lambda: _Saturation(i, p["low"], p["high"]),
            "quantisation": lambda: _Quantisation(i, p["lsb"]), "slip": lambda: _Slip(i, p["slip"]),
        }
        return make[kind]()

    def _integer_coded(self, channel: str) -> bool:
        if self.encoding is None:
            return False
        try:
            self.encoding(channel)
        except KeyError:
            return False
        return True

    def _bind_plant(self, fault: Fault, p: dict[str, Any]) -> _Effect:
        plant = self._need(fault, "plant", f"a {fault.kind} fault")
        arrays = self._plant_arrays
        if arrays is None:
            raise FaultError(fault.name, "kind", fault.kind, f"a {fault.kind} fault needs a hil.dynamics.plant.Plant "
                                                             "(its kernel arrays) as the engine's plant")
        if fault.kind == "stiffness_loss":
            bodies = plant.layout.body_names
            flexible = [b for k, b in enumerate(bodies) if plant.km.nm[k] > 0]
            if fault.target not in flexible:
                raise FaultError(fault.name, "target", fault.target, "expected a flexible body: " + ", ".join(flexible))
            return _StiffnessLoss(arrays, bodies.index(fault.target), p["stiffness_scale"])
        model = copy.deepcopy(plant.asm.model)
        attachment = _find_attachment(model, fault)
        mass = 0.0 if fault.kind == "payload_drop" else p["mass_kg"]
        inertia = p.get("inertia_kg_m2")
        if inertia is None:
            ratio = mass / attachment.mass_kg if attachment.mass_kg > 0 else 0.0
            attachment.inertia_kg_m2 = np.asarray(attachment.inertia_kg_m2, float) * ratio
        else:
            attachment.inertia_kg_m2 = np.diag(inertia)
        attachment.mass_kg = mass
        changed, substeps = arrays.variant(model, fault.name)
        return _Payload(arrays, changed, substeps)


def _wrap(count: float, half: float) -> float:
    """``count`` in a signed two's-complement counter whose range is [-half, half) (half =
    2^(bits - 1)); unchanged for half = 0 (not a counter). Exact for the integer counts of counters
    up to 53 bits, as hil.kernels.sensing wraps them."""
    if not half:
        return count
    return (count + half) % (2.0 * half) - half


def encoder_counter_bits(sensors: Any) -> dict[str, int]:
    """``{enc_<joint>: counter_bits}`` of the incremental encoders of a sensor suite
    (hil.devices.sensors.SensorSuite, or a list of its specs), for ``FaultEngine(counter_bits=...)``."""
    from hil.model.sensor_specs import EncoderSpec, channel_names
    specs = list(getattr(sensors, "specs", sensors))
    return {names[0]: int(s.counter_bits) for s, names in zip(specs, channel_names(specs))
            if isinstance(s, EncoderSpec)}


def _find_attachment(model: Any, fault: Fault) -> Any:
    """The attachment named by the fault's target: ``<attachment>`` or ``<body>/<attachment>``."""
    found = [(b.name, a) for b in model.bodies for a in b.attachments
             if fault.target in (a.name, f"{b.name}/{a.name}")]
    if len(found) != 1:
        names = ", ".join(f"{b.name}/{a.name}" for b in model.bodies for a in b.attachments)
        why = "is ambiguous" if found else "names no attachment"
        raise FaultError(fault.name, "target", fault.target, f"{why}; expected one of {names}")
    return found[0][1]


def bus_encoding(bus: BusMap, direction: str = "to_firmware") -> Encoding:
    """``encoding(name) -> (scale, offset, bits, signed)`` of the integer-coded signals a bus map
    carries in ``direction`` (the first message wins for a signal sent in several)."""
    table: dict[str, tuple[float, float, int, bool]] = {}
    for codec in bus.messages(direction):
        for s in codec.spec.signals:
            if not s.is_float:
                table.setdefault(s.name, (s.scale, s.offset, s.length_bits, s.signed))

    def encoding(name: str) -> tuple[float, float, int, bool]:
        try:
            return table[name]
        except KeyError:
            raise KeyError(f"{bus.source}: no integer-coded {direction} signal {name!r}") from None
    return encoding
