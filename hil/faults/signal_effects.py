"""Signal faults: effects on the measured value of one sensor channel.

Target: a sensor channel; values in the channel's unit, written in the keys as the sensor presets
do (:mod:`hil.faults.params`). The kinds are declared at the end (FAULT_KINDS, for
:mod:`hil.faults.registry`). Several faults on one channel act in the order they became active,
each on the value as the previous left it; the engine applies them after sampling, to ``measured``
as sampled (never to its own output of the previous cycle).
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
    ``encoder_disconnect``  (a plant fault by its target: joint ``target`` or its ``enc_<joint>``
                       channel) a quadrature counter whose A/B lines are cut sees no edges, so the
                       count stops where it was (the sample of the cycle it struck) and
                       ``vel_<joint>``, if sampled, reads 0. On reconnection the counter counts on
                       from there: the motion during the disconnection is lost for good, kept as a
                       persistent count offset.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from config_schema import MISSING
from hil.faults.effects import Effect, EffectHost
from hil.faults.fault import Fault, FaultError
from hil.faults.kind import (INDEX, MAX_DELAY_SAMPLES, NONNEG, POSITIVE, BindContext, FaultKind, Param, choice,
                             integer, nonzero_integer)


class Stuck(Effect):
    def __init__(self, i: int, value: float | None):
        self.i, self.value, self.held = i, value, value

    def start(self, engine: EffectHost) -> None:
        self.held = self.value

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        if self.held is None:
            self.held = float(m[self.i])
        m[self.i] = self.held


class Offset(Effect):
    def __init__(self, i: int, offset: float):
        self.i, self.offset = i, offset

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        m[self.i] += self.offset


class Gain(Effect):
    def __init__(self, i: int, gain: float):
        self.i, self.gain = i, gain

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        m[self.i] *= self.gain


class Noise(Effect):
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


class Drift(Effect):
    def __init__(self, i: int, rate: float, dt: float):
        self.i, self.step, self.n = i, rate * dt, 0

    def start(self, engine: EffectHost) -> None:
        self.n = 0

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        m[self.i] += self.step * self.n
        self.n += 1


class Delay(Effect):
    def __init__(self, i: int, samples: int):
        self.i = i
        self.ring = np.empty(samples)
        self.k = 0
        self.primed = False

    def start(self, engine: EffectHost) -> None:
        self.k, self.primed = 0, False

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        v = m[self.i]
        if not self.primed:
            self.ring[:] = v
            self.primed = True
        m[self.i] = self.ring[self.k]
        self.ring[self.k] = v
        self.k = (self.k + 1) % len(self.ring)


class Dropout(Effect):
    def __init__(self, i: int, hold: bool):
        self.i, self.hold, self.held = i, hold, None

    def start(self, engine: EffectHost) -> None:
        self.held = None
        engine.change_dropouts(self.i, +1)

    def stop(self, engine: EffectHost) -> None:
        engine.change_dropouts(self.i, -1)

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        if not self.hold:
            m[self.i] = 0.0
            return
        if self.held is None:
            self.held = float(m[self.i])
        m[self.i] = self.held


class NaN(Effect):
    def __init__(self, i: int):
        self.i = i

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        m[self.i] = math.nan


class Saturation(Effect):
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


class BitFlip(Effect):
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


class Quantisation(Effect):
    def __init__(self, i: int, lsb: float):
        self.i, self.lsb = i, lsb

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        v = m[self.i]
        if math.isfinite(v):
            m[self.i] = math.floor(v / self.lsb + 0.5) * self.lsb


class Slip(Effect):
    def __init__(self, i: int, counts: int):
        self.i, self.counts = i, counts

    def start(self, engine: EffectHost) -> None:
        engine.add_count_offset(self.i, self.counts)


class EncoderDisconnect(Effect):
    def __init__(self, i: int, vel: int | None):
        self.i, self.vel = i, vel
        self.held: float | None = None
        self.last = 0.0

    def start(self, engine: EffectHost) -> None:
        self.held = None

    def stop(self, engine: EffectHost) -> None:
        if self.held is not None:
            engine.add_count_offset(self.i, self.held - self.last)

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        self.last = float(m[self.i])
        if self.held is None:
            self.held = self.last
        m[self.i] = self.held
        if self.vel is not None:
            m[self.vel] = 0.0


def wrap_count(count: float, half: float) -> float:
    """``count`` in a signed two's-complement counter whose range is [-half, half) (half =
    2^(bits - 1)); unchanged for half = 0 (not a counter). Exact for the integer counts of counters
    up to 53 bits, as hil.kernels.sensing wraps them."""
    if not half:
        return count
    return (count + half) % (2.0 * half) - half


# ----------------------------------------------------------------------------- the signal kinds
def _bind_nan(c: BindContext) -> NaN:
    i = c.channel()
    if _integer_coded(c):
        raise c.error("target", c.fault.target, "expected a channel the bus carries as float32: an integer "
                                                "signal cannot carry NaN (dropout or stuck model a dead sensor there)")
    return NaN(i)


def _integer_coded(c: BindContext) -> bool:
    if c.encoding is None:
        return False
    try:
        c.encoding(c.fault.target)
    except KeyError:
        return False
    return True


def _bind_bitflip(c: BindContext) -> BitFlip:
    i, fault, bit = c.channel(), c.fault, c.p["bit"]
    if c.encoding is None:
        raise c.error("kind", fault.kind, "a bitflip fault needs the engine's encoding look-up")
    try:
        scale, offset, bits, signed = c.encoding(fault.target)
    except KeyError as exc:
        raise c.error("target", fault.target, str(exc.args[0])) from None
    if not 0 <= bit < bits:
        raise c.error("bit", bit, f"expected a bit index 0..{bits - 1} of the {bits}-bit signal {fault.target}")
    return BitFlip(i, bit, scale, offset, bits, signed)


def _check_saturation(fault: Fault, values: dict[str, Any], keys: list[str]) -> None:
    low_key, high_key = keys
    low, high = values["low"], values["high"]
    if low is None and high is None:
        raise FaultError(fault.name, low_key, MISSING, f"expected {low_key} and/or {high_key}")
    if low is not None and high is not None and low > high:
        raise FaultError(fault.name, high_key, high, f"expected {high_key} >= {low_key} = {low:g}")


def _encoder_channel(fault: Fault) -> None:
    if not fault.target.startswith("enc_"):
        raise FaultError(fault.name, "target", fault.target, "expected an encoder channel enc_<joint>")


FAULT_KINDS = (
    FaultKind("stuck", "signal", (Param("value", "@", default=None),), lambda c: Stuck(c.channel(), c.p["value"])),
    FaultKind("offset", "signal", (Param("offset", "@"),), lambda c: Offset(c.channel(), c.p["offset"])),
    FaultKind("gain", "signal", (Param("gain"),), lambda c: Gain(c.channel(), c.p["gain"])),
    FaultKind("noise", "signal", (Param("sigma", "@", read=NONNEG),),
              lambda c: Noise(c.channel(), c.p["sigma"], c.rng)),
    FaultKind("drift", "signal", (Param("rate", "@/s"),), lambda c: Drift(c.channel(), c.p["rate"], c.dt)),
    FaultKind("delay", "signal", (Param("samples", "cycles", read=integer(minimum=1, maximum=MAX_DELAY_SAMPLES)),),
              lambda c: Delay(c.channel(), c.p["samples"])),
    FaultKind("dropout", "signal", (Param("mode", default="zero", read=choice("zero", "hold")),),
              lambda c: Dropout(c.channel(), c.p["mode"] == "hold")),
    FaultKind("nan", "signal", (), _bind_nan),
    FaultKind("saturation", "signal", (Param("low", "@", default=None), Param("high", "@", default=None)),
              lambda c: Saturation(c.channel(), c.p["low"], c.p["high"]), check=_check_saturation),
    FaultKind("bitflip", "signal", (Param("bit", read=INDEX),), _bind_bitflip),
    FaultKind("quantisation", "signal", (Param("lsb", "@", read=POSITIVE),),
              lambda c: Quantisation(c.channel(), c.p["lsb"])),
    FaultKind("slip", "signal", (Param("slip", "@", read=nonzero_integer),), lambda c: Slip(c.channel(), c.p["slip"]),
              check_target=_encoder_channel),
)
