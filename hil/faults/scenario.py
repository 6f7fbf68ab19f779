"""Fault scenarios: ``configs/scenarios/*.toml``, faults with their triggers and durations.

Usage::

    scenario = load_scenario("configs/scenarios/encoder_disconnect.toml")
    handles = scenario.inject_into(engine)          # a hil.faults.engine.FaultEngine

Schema (every key is checked; a problem raises :class:`hil.model.config.ConfigError` naming the file,
the key, the value and what was expected, with the unit)::

    [scenario]          description (string), seed (integer >= 0: the engine seed a run uses)
    [[fault]]           name (unique), kind (one of hil.faults.engine.KINDS), target (a sensor channel;
                        a joint, body or attachment; "to_plant" or "to_firmware", optionally
                        ":<message name or id>"; none for the timing faults), and the kind's
                        parameters with their unit in the key: offset_m_s2, sigma_rad_s,
                        slip_counts, mass_kg, stall_s, probability_per_frame, cycles ... (the
                        channel's unit for signal faults: counts, m_s2, rad_s, rad, A, N_m, strain)
      [fault.trigger]   omitted: at the start; else exactly one of
                          at_s = T                     at the first cycle with t >= T
                          signal = S, threshold_<unit> = X, direction = "rising" (default) |
                                                       "falling" | "either"; S is t, q_<joint>,
                                                       <channel> or truth:<channel>, the unit
                                                       theirs (threshold_s, threshold_rad,
                                                       threshold_m_s2, ...)
                          probability_per_cycle = p    in (0, 1]
                          mttf_s = T                   mean time to failure, > 0
                        and optionally repeat (default false for at_s and signal, true for the
                        random triggers: re-armed after each clearance)
      [fault.duration]  omitted: permanent; else exactly one of once = true, for_s = T,
                        permanent = true, mttr_s = T (mean time to repair)
    [verdict]           optional: the firmware's targets for the run (hil.logs.targets)

See :mod:`hil.faults.engine` for what each kind does.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config_schema import Document
from hil.logs.targets import Targets, read_verdict
from hil.model.config import ConfigError, parse_toml
from hil.faults.engine import KINDS, MISSING, Duration, Fault, FaultEngine, FaultError, Trigger, check_fault, signal_unit

_TOP_KEYS = ("scenario", "fault", "verdict")
_SCENARIO_KEYS = ("description", "seed")
_FAULT_KEYS = ("name", "kind", "target", "trigger", "duration")
_TRIGGER_CHOICES = ("at_s", "signal", "probability_per_cycle", "mttf_s")
_DURATION_CHOICES = ("once", "for_s", "permanent", "mttr_s")
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


@dataclass(frozen=True)
class ScenarioFault:
    """One ``[[fault]]`` of a scenario; ``key`` names it in error messages (``fault[name]``)."""

    fault: Fault
    trigger: Trigger | None
    duration: Duration | None
    key: str


@dataclass(frozen=True)
class Scenario:
    source: str
    description: str
    seed: int | None
    faults: tuple[ScenarioFault, ...]
    targets: Targets | None = None      # the [verdict] table, if any

    def inject_into(self, engine: FaultEngine) -> list[int]:
        """Inject every fault (in file order); a fault the engine cannot bind (unknown channel,
        joint, message...) raises ConfigError naming this file and the key."""
        handles = []
        for sf in self.faults:
            try:
                handles.append(engine.inject(sf.fault, sf.trigger, sf.duration))
            except FaultError as exc:
                raise ConfigError(self.source, f"{sf.key}.{exc.key}", exc.value, exc.expected) from None
        return handles


def load_scenario(path: str | Path) -> Scenario:
    """Load and validate a scenario file."""
    return scenario_from_string(Path(path).read_text(encoding="utf-8"), str(path))


def scenario_from_string(text: str, source: str = "<string>") -> Scenario:
    """Parse scenario TOML text (``source`` names it in error messages)."""
    return _Parser(source).scenario(parse_toml(text, source))


class _Parser:
    def __init__(self, source: str):
        self.source = source

    def error(self, key: str, value: Any, expected: str) -> ConfigError:
        return ConfigError(self.source, key, value, expected)

    def keys(self, table: Any, where: str, allowed: tuple[str, ...], what: str = "a table") -> dict:
        if not isinstance(table, dict):
            raise self.error(where or "<top>", table, f"expected {what}")
        for k, v in table.items():
            if k not in allowed:
                hint = difflib.get_close_matches(k, allowed, n=1)
                did = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise self.error(f"{where}.{k}" if where else k, v,
                                 f"unknown key{did}; allowed keys here: {', '.join(allowed)}")
        return table

    def number(self, table: dict, key: str, where: str, expected: str, ok) -> float:
        v = table[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok(v):
            raise self.error(f"{where}.{key}", v, f"expected {expected}")
        return float(v)

    def flag(self, table: dict, key: str, where: str) -> bool:
        v = table[key]
        if not isinstance(v, bool):
            raise self.error(f"{where}.{key}", v, "expected true or false")
        return v

    def scenario(self, data: dict) -> Scenario:
        self.keys(data, "", _TOP_KEYS)
        head = self.keys(data.get("scenario", {}), "scenario", _SCENARIO_KEYS)
        description = head.get("description", "")
        if not isinstance(description, str):
            raise self.error("scenario.description", description, "expected a string")
        seed = head.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise self.error("scenario.seed", seed, "expected an integer >= 0")
        rows = data.get("fault", [])
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise self.error("fault", rows, "expected [[fault]] tables")
        faults, seen = [], set()
        for i, row in enumerate(rows):
            sf = self.fault(i, row)
            if sf.fault.name in seen:
                raise self.error(f"{sf.key}.name", sf.fault.name, "expected a name not used by another fault")
            seen.add(sf.fault.name)
            faults.append(sf)
        targets = read_verdict(Document(self.source), data["verdict"]) if "verdict" in data else None
        return Scenario(self.source, description, seed, tuple(faults), targets)

    def fault(self, i: int, row: dict) -> ScenarioFault:
        name = row.get("name")
        if not isinstance(name, str) or not _NAME_RE.match(name):
            raise self.error(f"fault[{i}].name", name if "name" in row else MISSING,
                             "expected a name (letters, digits, '_' or '-', not starting with a digit)")
        where = f"fault[{name}]"
        kind = row.get("kind")
        if kind not in KINDS:
            raise self.error(f"{where}.kind", kind if "kind" in row else MISSING,
                             "expected one of " + ", ".join(KINDS))
        params = {k: v for k, v in row.items() if k not in _FAULT_KEYS}
        fault = Fault(name, kind, row.get("target", ""), params)
        try:
            check_fault(fault)
        except FaultError as exc:
            raise self.error(f"{where}.{exc.key}", exc.value, exc.expected) from None
        trigger = self.trigger(row["trigger"], f"{where}.trigger") if "trigger" in row else None
        duration = self.duration(row["duration"], f"{where}.duration") if "duration" in row else None
        return ScenarioFault(fault, trigger, duration, where)

    def one_of(self, table: dict, where: str, choices: tuple[str, ...]) -> str:
        given = [k for k in choices if k in table]
        if len(given) != 1:
            raise self.error(where, table, "expected exactly one of " + ", ".join(choices))
        return given[0]

    def trigger(self, table: Any, where: str) -> Trigger:
        if not isinstance(table, dict):
            raise self.error(where, table, "expected a table")
        choice = self.one_of(table, where, _TRIGGER_CHOICES)
        if choice == "signal":
            return self.crossing(table, where)
        self.keys(table, where, (choice, "repeat"))
        repeat = self.flag(table, "repeat", where) if "repeat" in table else None
        if choice == "at_s":
            if repeat:
                raise self.error(f"{where}.repeat", repeat, "expected false: a time trigger fires once")
            return Trigger.at(self.number(table, "at_s", where, "a number >= 0 in s", lambda v: v >= 0))
        if choice == "probability_per_cycle":
            p = self.number(table, choice, where, "a probability in (0, 1] per cycle", lambda v: 0 < v <= 1)
            return Trigger.probability(p, repeat=True if repeat is None else repeat)
        mttf = self.number(table, choice, where, "a positive number in s", lambda v: v > 0)
        return Trigger.mttf(mttf, repeat=True if repeat is None else repeat)

    def crossing(self, table: dict, where: str) -> Trigger:
        signal = table["signal"]
        if not isinstance(signal, str):
            raise self.error(f"{where}.signal", signal, "expected t, q_<joint>, <channel> or truth:<channel>")
        unit = signal_unit(signal)
        if unit is None:
            raise self.error(f"{where}.signal", signal, "expected t, q_<joint>, <channel> or truth:<channel> "
                                                        "with a channel whose unit is known")
        key = f"threshold_{unit[0]}"
        self.keys(table, where, ("signal", key, "direction", "repeat"))
        if key not in table:
            raise self.error(f"{where}.{key}", MISSING, f"required; expected a finite number in {unit[1]}")
        threshold = self.number(table, key, where, f"a finite number in {unit[1]}", lambda v: True)
        direction = table.get("direction", "rising")
        if direction not in ("rising", "falling", "either"):
            raise self.error(f"{where}.direction", direction, 'expected one of "rising", "falling", "either"')
        repeat = self.flag(table, "repeat", where) if "repeat" in table else False
        return Trigger.crossing(signal, threshold, direction, repeat)

    def duration(self, table: Any, where: str) -> Duration:
        if not isinstance(table, dict):
            raise self.error(where, table, "expected a table")
        choice = self.one_of(table, where, _DURATION_CHOICES)
        self.keys(table, where, (choice,))
        if choice in ("once", "permanent"):
            if table[choice] is not True:
                raise self.error(f"{where}.{choice}", table[choice], "expected true")
            return Duration.once() if choice == "once" else Duration.permanent()
        t = self.number(table, choice, where, "a positive number in s", lambda v: v > 0)
        return Duration.lasting(t) if choice == "for_s" else Duration.mttr(t)
