"""Fault parameters checked: :func:`check_fault` reads the parameters of a fault given in code or in
a scenario file with :mod:`config_schema`, against what its kind declares (:mod:`hil.faults.kind`,
:mod:`hil.faults.registry`): the keys with their units, defaults and bounds, the rule of the kind's
family on the target and the kind's own rules. An unknown key gets "did you mean" and every error
names the key, the value and what was expected with its unit (a :class:`FaultError`).
"""
from __future__ import annotations

from typing import Any, Sequence

from config_schema import MISSING, Document, Table, suggest
from firmware_bridge.links.faults import parse_bus_target
from hil.faults import registry
from hil.faults.fault import CHANNEL_UNITS, Fault, FaultError, channel_unit
from hil.faults.kind import FaultKind


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
    kinds = registry.names()
    if fault.kind not in kinds:
        raise doc.error("kind", fault.kind, "expected one of " + ", ".join(kinds) + suggest(fault.kind, kinds))
    spec = registry.kind(fault.kind)
    _check_target(fault, spec, doc)
    params = spec.params
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
    if spec.check is not None:
        spec.check(fault, out, list(keys))
    return out


def _check_target(fault: Fault, spec: FaultKind, doc: Document) -> None:
    """The rule of the kind's family on the target, then the kind's own."""
    kind, target = fault.kind, fault.target
    if not isinstance(target, str):
        raise doc.error("target", target, "expected a string")
    if spec.family == "timing":
        if target:
            raise doc.error("target", target, f"expected no target: a {kind} fault acts on the whole cycle")
    elif spec.family == "bus":
        try:
            parse_bus_target(target)
        except ValueError as exc:
            raise doc.error("target", target, str(exc)) from None
    elif not target:
        raise doc.error("target", target, "required: expected a " + (
            "channel name" if spec.family == "signal" else "joint, body or attachment name"))
    if spec.check_target is not None:
        spec.check_target(fault)

