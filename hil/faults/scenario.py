"""Fault scenarios: ``configs/scenarios/*.toml``, faults with their triggers and durations.

Usage::

    scenario = load_scenario("configs/scenarios/encoder_disconnect.toml")
    handles = scenario.inject_into(engine)          # a hil.faults.engine.FaultEngine

Schema (every key is checked; a problem raises :class:`config_schema.ConfigError` naming the file,
the key, the value and what was expected, with the unit)::

    [scenario]          description (string), seed (integer >= 0: the engine seed a run uses),
                        expect_divergence (boolean, default false: a run whose plant diverges fails,
                        unless the scenario is about making it diverge)
    [[fault]]           name (unique), kind (one of hil.faults.spec.KINDS), target (a sensor channel;
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

What each kind does: :mod:`hil.faults.signal_effects`, :mod:`hil.faults.plant_effects` and
:mod:`hil.faults.effects` (bus and timing faults); the parameters and their units: :mod:`hil.faults.params`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config_schema import MISSING, NAME_RE, ConfigError, Document, Table, bare_key, load_toml, parse_toml, suggest
from hil.faults import registry
from hil.faults.engine import FaultEngine
from hil.faults.fault import DIRECTIONS, Duration, Fault, FaultError, Trigger, signal_unit
from hil.faults.params import check_fault
from hil.logs.targets import Targets, read_verdict

TOP_KEYS = ("scenario", "fault", "verdict")
SCENARIO_KEYS = ("description", "seed", "expect_divergence")
FAULT_KEYS = ("name", "kind", "target", "trigger", "duration")
TRIGGER_CHOICES = ("at_s", "signal", "probability_per_cycle", "mttf_s")
DURATION_CHOICES = ("once", "for_s", "permanent", "mttr_s")
_NAME_TEXT = "a name (letters, digits, '_' or '-', not starting with a digit)"


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
    expect_divergence: bool = False     # a diverged plant is the point of the scenario, not a failed run

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
    """Load and validate a scenario file; a missing, unreadable or binary file is a ConfigError
    naming it."""
    return _read_scenario(load_toml(path), str(path))


def scenario_from_string(text: str, source: str = "<string>") -> Scenario:
    """Parse scenario TOML text (``source`` names it in error messages)."""
    return _read_scenario(parse_toml(text, source), source)


def _read_scenario(data: dict, source: str) -> Scenario:
    doc = Document(source)
    top = doc.root(data, TOP_KEYS)
    head = top.table("scenario", SCENARIO_KEYS)
    description = head.string("description", "") if head is not None else ""
    seed = head.integer("seed", None, minimum=0) if head is not None else None
    expect_divergence = head.boolean("expect_divergence", False) if head is not None else False
    faults, seen = [], set()
    for i, row in enumerate(top.array_of_tables("fault", what="[[fault]] tables")):
        sf = _fault(doc, i, row)
        if sf.fault.name in seen:
            raise doc.error(f"{sf.key}.name", sf.fault.name, "expected a name not used by another fault")
        seen.add(sf.fault.name)
        faults.append(sf)
    targets = read_verdict(doc, data["verdict"]) if "verdict" in data else None
    if not faults and targets is None:
        raise ConfigError(source, None, MISSING, "a [[fault]] or a [verdict] table",
                          message=f"{source}: no [[fault]] and no [verdict] table: a scenario needs at least one")
    return Scenario(source, description, seed, tuple(faults), targets, expect_divergence)


def _fault(doc: Document, i: int, row: dict) -> ScenarioFault:
    """One [[fault]]: its own keys here, the kind's parameters (every other key) by check_fault."""
    _misspelt_fault_key(doc, i, row)
    name = row.get("name", MISSING)
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise doc.error(f"fault[{i}].name", name, f"{'required; ' if name is MISSING else ''}expected {_NAME_TEXT}")
    where = f"fault[{name}]"
    t = Table(doc, {k: v for k, v in row.items() if k in FAULT_KEYS}, where, f"fault.{name}", FAULT_KEYS)
    kind = t.choice("kind", MISSING, registry.names())
    params = {k: v for k, v in row.items() if k not in FAULT_KEYS}
    fault = Fault(name, kind, t.raw("target", ""), params)
    try:
        check_fault(fault, other_keys=FAULT_KEYS)
    except FaultError as exc:
        raise doc.error(f"{where}.{exc.key}", exc.value, exc.expected) from None
    trigger = _trigger(doc, t.raw("trigger"), f"{where}.trigger") if t.has("trigger") else None
    duration = _duration(doc, t.raw("duration"), f"{where}.duration") if t.has("duration") else None
    return ScenarioFault(fault, trigger, duration, where)


def _misspelt_fault_key(doc: Document, i: int, row: dict) -> None:
    """A key close to a missing name, kind or target is a typo of it, not a parameter of the fault."""
    missing = [k for k in ("name", "kind", "target") if k not in row]
    name = row.get("name")
    label = f"fault[{name}]" if isinstance(name, str) and NAME_RE.match(name) else f"fault[{i}]"
    for k, v in row.items():
        hint = suggest(k, missing) if k not in FAULT_KEYS else ""
        if hint:
            raise doc.error(f"{label}.{bare_key(k)}", v, f"unknown key{hint}; allowed keys here: "
                                                         f"{', '.join(FAULT_KEYS)} and the parameters of the kind")


def _exactly_one(doc: Document, raw: Any, where: str, choices: tuple[str, ...], also: tuple[str, ...]) -> str:
    """The one key of ``choices`` that ``raw`` (a table) has; with none of them, a key that is none
    of ``choices`` or ``also`` is reported as a typo of the closest choice."""
    if not isinstance(raw, dict):
        raise doc.error(where, raw, "expected a table")
    given = [k for k in choices if k in raw]
    if len(given) == 1:
        return given[0]
    expected = "expected exactly one of " + ", ".join(choices)
    for k, v in raw.items():
        if not given and k not in also and not k.startswith("threshold_"):
            raise doc.error(f"{where}.{bare_key(k)}", v, f"unknown key{suggest(k, choices)}; {expected}")
    raise doc.error(where, raw, expected)


def _trigger(doc: Document, raw: Any, where: str) -> Trigger:
    choice = _exactly_one(doc, raw, where, TRIGGER_CHOICES, ("repeat", "direction"))
    if choice == "signal":
        return _crossing(doc, raw, where)
    t = Table(doc, raw, where, where, (choice, "repeat"))
    repeat = t.boolean("repeat", None)
    if choice == "at_s":
        if repeat:
            raise t.error("repeat", repeat, "expected false: a time trigger fires once")
        return Trigger.at(t.number("at_s", unit="s", nonneg=True, what="a number >= 0"))
    if choice == "probability_per_cycle":
        p = t.number(choice, unit="", positive=True, upper=1.0, what="a probability in (0, 1] per cycle")
        return Trigger.probability(p, repeat=True if repeat is None else repeat)
    mttf = t.number(choice, unit="s", positive=True)
    return Trigger.mttf(mttf, repeat=True if repeat is None else repeat)


def _crossing(doc: Document, raw: dict, where: str) -> Trigger:
    what = "t, q_<joint>, <channel> or truth:<channel>"
    signal = raw["signal"]
    if not isinstance(signal, str):
        raise doc.error(f"{where}.signal", signal, f"expected {what}")
    unit = signal_unit(signal)
    if unit is None:
        raise doc.error(f"{where}.signal", signal, f"expected {what} with a channel whose unit is known")
    key = f"threshold_{unit[0]}"
    t = Table(doc, raw, where, where, ("signal", key, "direction", "repeat"))
    threshold = t.number(key, unit=unit[1])
    direction = t.choice("direction", "rising", DIRECTIONS)
    return Trigger.crossing(signal, threshold, direction, t.boolean("repeat", False))


def _duration(doc: Document, raw: Any, where: str) -> Duration:
    choice = _exactly_one(doc, raw, where, DURATION_CHOICES, ())
    t = Table(doc, raw, where, where, (choice,))
    if choice in ("once", "permanent"):
        if t.raw(choice) is not True:
            raise t.error(choice, t.raw(choice), "expected true")
        return Duration.once() if choice == "once" else Duration.permanent()
    d = t.number(choice, unit="s", positive=True)
    return Duration.lasting(d) if choice == "for_s" else Duration.mttr(d)
