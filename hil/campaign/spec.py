"""Campaign files (``configs/campaigns/*.toml``): one arm, firmware, fault scenarios, parameter
variations and targets, expanded into independent runs (hil.campaign.cases).

Schema (every key checked; a problem raises config_schema.ConfigError naming the file, the key,
the value and what was expected with its unit)::

    [campaign]     name, description, arm (preset file or shipped name), bus (bus map), link
                   ("pty" | "udp_loopback": the run's link, inside one worker), mode ("lockstep" |
                   "afap"; never wall-clock real time), duration_s > 0, seed (integer >= 0: the
                   samples and every case's seed), timeout_s > 0 (wall-clock limit of one case:
                   beyond it the case is an error and the campaign goes on), logs ("all" |
                   "failing" | "none": which cases keep their run log), scenarios (a list of
                   scenario files or shipped names; "none" runs without faults), targets (a targets
                   file or shipped name; default: the [verdict] table below, else each scenario's)
    [[firmware]]   name (unique), kind = "reference" (the reference firmware: params, move_time_s,
                   vibration_suppression) | "command" (command: a command line with the
                   placeholders of `hil run --firmware`: {port}, {link}, {interface}, {channel}, {bus})
                   | "controller" (controller = "MODULE:FACTORY": an in-process controller on the
                   plant alone, `hil simulate --controller`: no bus, ideal measurements, no faults,
                   so scenarios = ["none"])
    [sampling]     method = "grid" (every combination; a range gets `levels` evenly spaced points)
                   | "lhs" (Latin hypercube of `samples` points) | "random" (`samples` points)
    [variations]   "<model path>" = {uniform = [lo, hi]} (in the parameter's unit) | {scale = [lo, hi]}
                   (a factor on the preset's value) | {values = [v1, v2, ...]} | {integers = [lo, hi]}
                   (seeds; inclusive); model paths as hil.campaign.overrides describes
    [verdict]      the targets (hil.logs.targets)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from config_schema import MISSING, ConfigError, Document, Table, is_number, load_toml
from hil.campaign.overrides import Preset
from hil.logs.targets import Targets, load_targets, read_verdict
from hil.model.presets import resolve

TOP_KEYS = ("campaign", "firmware", "sampling", "variations", "verdict")
CAMPAIGN_KEYS = ("name", "description", "arm", "bus", "link", "mode", "duration_s", "seed", "timeout_s", "logs",
                 "scenarios", "targets")
FIRMWARE_KEYS = ("name", "kind", "params", "move_time_s", "vibration_suppression", "command", "controller")
FIRMWARE_KINDS = ("reference", "command", "controller")
KIND_KEYS = {"reference": ("params", "move_time_s", "vibration_suppression"), "command": ("command",),
             "controller": ("controller",)}
SAMPLING_KEYS = ("method", "levels", "samples")
MAX_CASES = 1_000_000       # cases of one campaign: their rows and the expanded case list stay within ~1 GB
VARIATION_KINDS = ("uniform", "scale", "values", "integers")
NO_SCENARIO = "none"


@dataclass(frozen=True)
class Firmware:
    name: str
    kind: str                              # "reference" | "command" | "controller"
    params: str | None = None              # reference: its nominal arm parameter file
    move_time_s: float = 1.0
    vibration_suppression: bool = False
    command: str = ""                      # command: the command line with placeholders
    controller: str = ""                   # controller: MODULE:FACTORY (`hil simulate --controller`)

    def as_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "params": self.params, "move_time_s": self.move_time_s,
                "vibration_suppression": self.vibration_suppression, "command": self.command,
                "controller": self.controller}


@dataclass(frozen=True)
class Variation:
    path: str
    kind: str                              # one of VARIATION_KINDS
    values: tuple                          # [lo, hi] for ranges, the list for values
    base: Any = None                       # scale: the preset's value

    def value_at(self, u: float) -> Any:
        """The value at the fraction u in [0, 1] of the variation's range (values: the index)."""
        if self.kind == "values":
            return self.values[min(int(u * len(self.values)), len(self.values) - 1)]
        lo, hi = self.values
        if self.kind == "integers":
            return int(min(lo + int(u * (hi - lo + 1)), hi))
        x = lo + u * (hi - lo)
        return _scaled(self.base, x) if self.kind == "scale" else float(x)


@dataclass(frozen=True)
class Campaign:
    source: str
    name: str
    description: str
    arm: str
    bus: str
    link: str
    mode: str
    duration_s: float
    seed: int
    timeout_s: float
    logs: str
    scenarios: tuple[str, ...]
    firmware: tuple[Firmware, ...]
    method: str
    levels: int
    samples: int
    variations: tuple[Variation, ...]
    targets: Targets | None
    preset: Preset = field(repr=False, compare=False, default=None)


def load_campaign(path: str | Path) -> Campaign:
    """Read and validate a campaign file; the preset, bus map, scenarios and targets it names are
    read too, and every variation's ends are applied to the preset and validated by its reader."""
    source = str(path)
    doc = Document(source)
    top = doc.root(load_toml(path), TOP_KEYS)
    c = top.table("campaign", CAMPAIGN_KEYS, required=True, what="a [campaign] table")
    base = Path(source).resolve().parent
    arm = _file(c, "arm", "preset", base)
    preset = Preset(arm)
    mode = c.choice("mode", "lockstep", ("lockstep", "afap"))
    scenarios = _scenarios(c, base)
    targets = _targets(doc, top, c, base)
    sampling = top.table("sampling", SAMPLING_KEYS)
    s = sampling or Table(doc, {}, "sampling", "sampling", SAMPLING_KEYS)
    method = s.choice("method", "grid", ("grid", "lhs", "random"))
    samples = s.integer("samples", 1 if method == "grid" else MISSING, minimum=1, maximum=MAX_CASES,
                        what="parameter samples")
    firmware = _firmware(doc, top, base)
    if any(f.kind == "controller" for f in firmware) and scenarios != (NO_SCENARIO,):
        raise c.error("scenarios", list(c.raw("scenarios")), 'expected ["none"] with an in-process controller: '
                      "it drives the plant without the bus, the sensor models and the fault engine")
    campaign = Campaign(
        source=source, name=c.name("name"), description=c.string("description", ""), arm=arm,
        bus=_file(c, "bus", "bus", base), link=c.choice("link", "pty", ("pty", "udp_loopback")), mode=mode,
        duration_s=c.number("duration_s", unit="s", positive=True), seed=c.integer("seed", 0, minimum=0),
        timeout_s=c.number("timeout_s", 300.0, unit="s", positive=True),
        logs=c.choice("logs", "failing", ("all", "failing", "none")), scenarios=scenarios,
        firmware=firmware, method=method, levels=s.integer("levels", 3, minimum=1, maximum=MAX_CASES),
        samples=samples, variations=_variations(doc, top, preset), targets=targets, preset=preset)
    if case_bound(campaign) > MAX_CASES:
        raise doc.error("sampling", case_bound(campaign), f"a campaign of at most {MAX_CASES} cases (firmware x "
                        "scenarios x parameter samples); split it, or sample it (method = \"lhs\")")
    return campaign


def case_bound(campaign: Campaign) -> int:
    """firmware x scenarios x parameter samples, without expanding them: a grid is the product of its axes (an
    integer axis counted at its most, before equal rounded levels merge)."""
    if campaign.method == "grid":
        samples = math.prod(len(v.values) if v.kind == "values" else
                            min(campaign.levels, v.values[1] - v.values[0] + 1) if v.kind == "integers" else
                            campaign.levels for v in campaign.variations)
    else:
        samples = campaign.samples if campaign.variations else 1
    return len(campaign.firmware) * len(campaign.scenarios) * samples


def _file(t: Table, key: str, kind: str, base: Path) -> str:
    name = t.string(key, what=f"a {kind} file or the name of a shipped one")
    local = base / name
    try:
        return resolve(kind, str(local) if local.is_file() else name)
    except ValueError as exc:
        raise t.error(key, name, str(exc).split(": ", 1)[-1]) from None


def _scenarios(c: Table, base: Path) -> tuple[str, ...]:
    raw = c.raw("scenarios", [NO_SCENARIO])
    if not isinstance(raw, list) or not raw or not all(isinstance(x, str) for x in raw):
        raise c.error("scenarios", raw, 'expected a non-empty list of scenario files or shipped names ("none": no fault)')
    if len(set(raw)) != len(raw):
        raise c.error("scenarios", raw, "expected each scenario once")
    out = []
    for name in raw:
        if name == NO_SCENARIO:
            out.append(NO_SCENARIO)
            continue
        sub = Table(c.doc, {"scenarios": name}, c.where, c.path, ("scenarios",))
        path = _file(sub, "scenarios", "scenario", base)
        if any(Path(p).stem == Path(path).stem for p in out):
            raise c.error("scenarios", name, "expected scenario files of distinct names (a case is named by it)")
        from hil.faults.scenario import load_scenario
        load_scenario(path)
        out.append(path)
    return tuple(out)


def _targets(doc: Document, top: Table, c: Table, base: Path) -> Targets | None:
    if top.has("verdict") and c.has("targets"):
        raise c.error("targets", c.raw("targets"), "expected either targets or a [verdict] table, not both")
    if top.has("verdict"):
        return read_verdict(doc, top.raw("verdict"))
    return load_targets(_file(c, "targets", "targets", base)) if c.has("targets") else None


def _firmware(doc: Document, top: Table, base: Path) -> tuple[Firmware, ...]:
    out: list[Firmware] = []
    for i, raw in enumerate(top.array_of_tables("firmware", required=True, what="at least one [[firmware]] table")):
        label = raw.get("name") if isinstance(raw.get("name"), str) else f"#{i + 1}"
        f = Table(doc, raw, f"firmware[{label}]", f"firmware.{label}", FIRMWARE_KEYS)
        name = f.name("name")
        if any(x.name == name for x in out):
            raise f.error("name", name, "expected a unique firmware name")
        kind = f.choice("kind", "reference", FIRMWARE_KINDS)
        for key in FIRMWARE_KEYS[2:]:
            if f.has(key) and key not in KIND_KEYS[kind]:
                raise f.error(key, f.raw(key), f"expected only with kind = {next(k for k, v in KIND_KEYS.items() if key in v)!r}")
        if kind == "command":
            out.append(Firmware(name, kind, command=f.string("command", what="a command line with placeholders "
                                                                              "({port}, {link}, ...)")))
            continue
        if kind == "controller":
            text = f.string("controller", what="MODULE:FACTORY, an in-process controller (hil simulate --controller)")
            if ":" not in text:
                raise f.error("controller", text, "expected MODULE:FACTORY")
            out.append(Firmware(name, kind, controller=text))
            continue
        out.append(Firmware(name, kind, params=_file(f, "params", "firmware", base) if f.has("params") else None,
                            move_time_s=f.number("move_time_s", 1.0, unit="s", positive=True),
                            vibration_suppression=f.boolean("vibration_suppression", False)))
    return tuple(out)


def _variations(doc: Document, top: Table, preset: Preset) -> tuple[Variation, ...]:
    raw = top.raw("variations", {})
    if not isinstance(raw, dict):
        raise doc.error("variations", raw, 'expected a table of "<model path>" = {uniform = [lo, hi]} ...')
    out = []
    for path, spec in _leaves(raw, ""):
        key = f"variations.{path}"
        preset.check_path(doc.source, key, path)
        out.append(_variation(doc, key, path, spec, preset))
    return tuple(out)


def _leaves(raw: dict, prefix: str):
    """(path, spec) of every variation; unquoted dotted keys arrive as nested tables."""
    for k, v in raw.items():
        path = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict) and not set(v) & set(VARIATION_KINDS) and any(isinstance(x, dict) for x in v.values()):
            yield from _leaves(v, path)
        else:
            yield path, v


def _variation(doc: Document, key: str, path: str, spec: Any, preset: Preset) -> Variation:
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in VARIATION_KINDS:
        raise doc.error(key, spec, "expected exactly one of {uniform = [lo, hi]} (in the parameter's unit), "
                                   "{scale = [lo, hi]}, {values = [...]}, {integers = [lo, hi]}")
    kind, values = next(iter(spec.items()))
    base = None
    if kind == "values":
        if not isinstance(values, list) or not values:
            raise doc.error(key, spec, "expected values = a non-empty list of the parameter's values")
    else:
        check = (lambda x: isinstance(x, int) and not isinstance(x, bool)) if kind == "integers" else is_number
        if not isinstance(values, list) or len(values) != 2 or not all(check(x) for x in values) \
                or values[0] > values[1]:
            what = "integers" if kind == "integers" else "numbers"
            raise doc.error(key, spec, f"expected {kind} = [lo, hi], two {what} with lo <= hi")
    if kind == "scale":
        try:
            base = preset.value(path)
        except KeyError:
            raise doc.error(key, spec, f"expected uniform or values: {preset.path} leaves {path} to its default, "
                                       "so there is no value to scale") from None
    variation = Variation(path, kind, tuple(values), base)
    ends = variation.values if kind == "values" else (variation.value_at(0.0), variation.value_at(1.0))
    for value in ends:
        try:
            preset.with_overrides({path: value}, f"{doc.source}: {key} applied to {preset.path}")
        except ConfigError as exc:
            raise ConfigError(doc.source, key, spec, f"expected values the preset accepts; at {value!r}: "
                              f"{exc.key} = {exc.value!r}: {exc.expected}") from None
    return variation


def _scaled(base: Any, factor: float) -> Any:
    if isinstance(base, list):
        return [_scaled(b, factor) for b in base]
    return float(base) * factor
