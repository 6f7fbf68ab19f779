"""Fault parameters: which keys each kind of fault takes, in which unit, and their validation.

A parameter's key carries its unit: a fixed one in the name (``stall_s``, ``mass_kg``,
``rate_hz``), or for the signal faults the unit of the target channel as the sensor presets write
it (CHANNEL_UNITS: counts for enc_/index_/abs_, counts_s for vel_, m_s2 and rad_s for the IMU axes
*_ax..*_az and *_gx..*_gz, strain, N_m for torque_, A for cur_): ``offset_m_s2`` on ``imu_ax``,
``rate_<unit>_per_s`` for a drift. :func:`check_fault` reads the parameters of a fault given in
code or in a scenario file with :mod:`config_schema`, so an unknown key gets "did you mean" and
every error names the key, the value and what was expected with its unit (a :class:`FaultError`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from config_schema import MISSING, Document, Table, in_unit, is_integer, is_number, suggest
from firmware_bridge.links.faults import BUS_KINDS, parse_bus_target
from hil.faults.spec import (CHANNEL_UNITS, KINDS, SIGNAL_KINDS, TIMING_KINDS, Fault, FaultError,
                             channel_unit)

Read = Callable[[Table, str, str], Any]          # (the parameters, key, unit) -> the value


def _number(**bounds: Any) -> Read:
    """A finite number within Table.number's ``bounds`` (``what`` names them)."""
    return lambda t, key, unit: t.number(key, unit=unit, **bounds)


def _integer(**bounds: Any) -> Read:
    """An integer within Table.integer's ``bounds``."""
    return lambda t, key, unit: t.integer(key, unit=unit, **bounds)


def _choice(*choices: str) -> Read:
    return lambda t, key, unit: t.choice(key, MISSING, choices)


def _nonzero_integer(t: Table, key: str, unit: str) -> int:
    v = t.raw(key)
    if not is_integer(v) or v == 0:
        raise t.error(key, v, f"{'required; ' if v is MISSING else ''}expected a non-zero integer{in_unit(unit)}")
    return int(v)


def _principal_moments(t: Table, key: str, unit: str) -> tuple[float, float, float]:
    v = t.raw(key)
    if not (isinstance(v, (list, tuple)) and len(v) == 3
            and all(is_number(x) and math.isfinite(x) and x >= 0 for x in v)):
        raise t.error(key, v, f"expected 3 principal moments >= 0{in_unit(unit)}")
    return tuple(float(x) for x in v)


_FINITE = _number()
_POSITIVE = _number(positive=True)
_NONNEG = _number(nonneg=True, what="a number >= 0")
_PROBABILITY = _number(positive=True, upper=1.0, what="a probability in (0, 1]")
_FRACTION = _number(positive=True, upper=1.0, what="a factor in (0, 1]")
_COUNT = _integer(minimum=1)
_INDEX = _integer(minimum=0)


@dataclass(frozen=True)
class _Param:
    """One parameter: its key is ``stem`` for a fixed unit (the stem ends in it: ``stall_s``),
    ``<stem>_<channel unit>`` for ``unit = "@"`` and ``<stem>_<channel unit>_per_s`` for "@/s".
    ``default`` is the value when the key is left out (MISSING: required)."""

    stem: str
    unit: str = ""
    read: Read = _FINITE
    default: Any = MISSING

    def key(self, suffix: str) -> str:
        if self.unit == "@":
            return f"{self.stem}_{suffix}"
        if self.unit == "@/s":
            return f"{self.stem}_{suffix}_per_s"
        return self.stem

    def unit_text(self, unit: str) -> str:
        return {"@": unit, "@/s": f"{unit}/s"}.get(self.unit, self.unit)


_PROB_FRAME = _Param("probability_per_frame", default=1.0, read=_PROBABILITY)
_DELAY = (_Param("cycles", default=None, read=_COUNT),
          _Param("delay_s", "s", default=None, read=_POSITIVE))
_PARAMS: dict[str, tuple[_Param, ...]] = {
    "stuck": (_Param("value", "@", default=None),),
    "offset": (_Param("offset", "@"),),
    "gain": (_Param("gain"),),
    "noise": (_Param("sigma", "@", read=_NONNEG),),
    "drift": (_Param("rate", "@/s"),),
    "delay": (_Param("samples", "cycles", read=_COUNT),),
    "dropout": (_Param("mode", default="zero", read=_choice("zero", "hold")),),
    "nan": (),
    "saturation": (_Param("low", "@", default=None), _Param("high", "@", default=None)),
    "bitflip": (_Param("bit", read=_INDEX),),
    "quantisation": (_Param("lsb", "@", read=_POSITIVE),),
    "slip": (_Param("slip", "@", read=_nonzero_integer),),
    "payload": (_Param("mass_kg", "kg", read=_NONNEG),
                _Param("inertia_kg_m2", "kg m^2", default=None, read=_principal_moments)),
    "payload_drop": (),
    "friction": (_Param("friction_scale", read=_POSITIVE),),
    "kt_loss": (_Param("kt_scale", read=_NONNEG),),
    "encoder_disconnect": (),
    "stiffness_loss": (_Param("stiffness_scale", read=_FRACTION),),
    "brake": (),
    "drop": (_PROB_FRAME,),
    "duplicate": (_Param("copies", default=1, read=_COUNT), _PROB_FRAME),
    "reorder": (),
    "frame_delay": _DELAY,
    "corrupt": (_Param("bytes", default=1, read=_COUNT), _PROB_FRAME),
    "bad_crc": (_PROB_FRAME,),
    "wrong_counter": (_Param("counter_offset", default=-1, read=_nonzero_integer), _PROB_FRAME),
    "wrong_dlc": (_Param("length_bytes", read=_INDEX),),
    "silent": (),
    "period": (_Param("divider", read=_integer(minimum=2)),),
    "babble": (_Param("rate_hz", "Hz", read=_POSITIVE),
               _Param("length_bytes", default=8, read=_INDEX),
               _Param("fill_byte", default=0xAA, read=_integer(minimum=0, maximum=255, what="a byte"))),
    "stall": (_Param("stall_s", "s", read=_POSITIVE),),
    "output_delay": _DELAY,
}


class _FaultParameters(Document):
    """The parameters of one fault as a config_schema document: its errors are FaultErrors."""

    def __init__(self, fault: str):
        super().__init__(f"fault {fault!r}")
        self.fault = fault

    def error(self, key: str | None, value: Any, expected: str) -> FaultError:
        return FaultError(self.fault, key, value, expected)


def _known_prefixes() -> str:
    return ", ".join([f"{p}* ({u})" for p, _, u in CHANNEL_UNITS] + ["*_ax|ay|az (m/s^2)", "*_gx|gy|gz (rad/s)"])


def check_fault(fault: Fault, other_keys: Sequence[str] = ()) -> dict[str, Any]:
    """The fault's parameters by stem, validated against its kind and target; raises FaultError
    naming the key and what was expected (with the unit). ``other_keys``: the keys a scenario's
    [[fault]] table has besides the parameters, suggested too for an unknown key."""
    doc = _FaultParameters(fault.name)
    if fault.kind not in _PARAMS:
        raise doc.error("kind", fault.kind, "expected one of " + ", ".join(KINDS) + suggest(fault.kind, KINDS))
    _check_target(fault, doc)
    params = _PARAMS[fault.kind]
    suffix, unit = "", ""
    in_channel_unit = [p for p in params if p.unit.startswith("@")]
    if in_channel_unit:
        found = channel_unit(fault.target)
        # a channel of unknown unit is fine as long as nothing is given in its unit (stuck at last)
        if found is None and (fault.params or any(p.default is MISSING for p in in_channel_unit)):
            raise doc.error("target", fault.target, f"expected a channel whose unit is known: {_known_prefixes()}")
        suffix, unit = found or ("", "")
    keys = {p.key(suffix): p for p in params}
    for key, value in fault.params.items():
        if key not in keys:
            allowed = ", ".join(f"{k} [{p.unit_text(unit)}]" if p.unit_text(unit) else k for k, p in keys.items())
            raise doc.error(key, value, f"unknown parameter of {fault.kind} faults{suggest(key, [*keys, *other_keys])}; "
                                        f"expected {allowed or 'no parameters'}")
    table = Table(doc, dict(fault.params), "", "", tuple(keys))
    out = {p.stem: p.read(table, key, p.unit_text(unit)) if table.has(key) or p.default is MISSING else p.default
           for key, p in keys.items()}
    _check_combination(fault, out, keys, doc)
    return out


def _check_target(fault: Fault, doc: Document) -> None:
    kind, target = fault.kind, fault.target
    if not isinstance(target, str):
        raise doc.error("target", target, "expected a string")
    if kind in TIMING_KINDS:
        if target:
            raise doc.error("target", target, f"expected no target: a {kind} fault acts on the whole cycle")
    elif kind in BUS_KINDS:
        try:
            _, message = parse_bus_target(target)
        except ValueError as exc:
            raise doc.error("target", target, str(exc)) from None
        if kind == "babble" and message is None:
            raise doc.error("target", target, "expected \"<direction>:<message name or id>\": the id babbled")
    elif not target:
        raise doc.error("target", target, "required: expected a " + (
            "channel name" if kind in SIGNAL_KINDS else "joint, body or attachment name"))
    if kind == "slip" and not target.startswith("enc_"):
        raise doc.error("target", target, "expected an encoder channel enc_<joint>")


def _check_combination(fault: Fault, out: dict, keys: dict[str, _Param], doc: Document) -> None:
    if fault.kind in ("frame_delay", "output_delay") and (out["cycles"] is None) == (out["delay_s"] is None):
        raise doc.error("cycles", fault.params.get("cycles", MISSING), "expected exactly one of cycles, delay_s")
    if fault.kind == "saturation":
        low_key, high_key = list(keys)
        if out["low"] is None and out["high"] is None:
            raise doc.error(low_key, MISSING, f"expected {low_key} and/or {high_key}")
        if out["low"] is not None and out["high"] is not None and out["low"] > out["high"]:
            raise doc.error(high_key, out["high"], f"expected {high_key} >= {low_key} = {out['low']:g}")
