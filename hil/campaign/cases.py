"""A campaign expanded into cases: firmware x scenarios x parameter samples, each an independent,
reproducible run with its own recorded seed.

Samples: "grid" takes every combination (a range at `levels` evenly spaced points, a values list
at each value), "lhs" a Latin hypercube of `samples` points (each variation's range cut into
`samples` strata, each stratum used once, in a seeded random order), "random" `samples` independent
uniform points. A sample's seed (the sensor noise and the faults' random streams, `hil run --seed`)
follows from the campaign seed and the sample's index: every firmware and every scenario meets the
same parameters with the same noise, so their verdicts compare case by case.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hil.campaign.spec import NO_SCENARIO, Campaign, Firmware

SEED_BITS = 31


@dataclass(frozen=True)
class Case:
    index: int
    case_id: str                     # "<firmware>/<scenario>/<sample>": stable across reruns
    firmware: Firmware
    scenario: str                    # a scenario file, or "none"
    sample: int
    seed: int
    overrides: dict                  # model path -> value

    @property
    def scenario_name(self) -> str:
        return NO_SCENARIO if self.scenario == NO_SCENARIO else Path(self.scenario).stem

    def as_dict(self) -> dict:
        return {"index": self.index, "case_id": self.case_id, "firmware": self.firmware.as_dict(),
                "scenario": self.scenario, "sample": self.sample, "seed": self.seed, "overrides": self.overrides}


def samples(campaign: Campaign) -> list[dict]:
    """The parameter samples (model path -> value), in a fixed order."""
    vs = campaign.variations
    if not vs:
        return [{}]
    if campaign.method == "grid":
        axes = [list(v.values) if v.kind == "values" else _grid_axis(v, campaign.levels) for v in vs]
        return [dict(zip((v.path for v in vs), combo)) for combo in itertools.product(*axes)]
    rng = np.random.default_rng(campaign.seed)
    n = campaign.samples
    if campaign.method == "lhs":
        u = (np.stack([rng.permutation(n) for _ in vs], axis=1) + rng.random((n, len(vs)))) / n
    else:
        u = rng.random((n, len(vs)))
    return [{v.path: v.value_at(float(u[i, j])) for j, v in enumerate(vs)} for i in range(n)]


def _grid_axis(v, levels: int) -> list:
    if v.kind == "integers":
        lo, hi = v.values
        return sorted({int(round(x)) for x in np.linspace(lo, hi, min(levels, hi - lo + 1))})
    fractions = [0.5] if levels == 1 else np.linspace(0.0, 1.0, levels)
    return [v.value_at(float(u)) for u in fractions]


def sample_seed(campaign_seed: int, sample: int) -> int:
    return int(np.random.SeedSequence([campaign_seed, sample]).generate_state(1)[0] >> (32 - SEED_BITS))


def expand(campaign: Campaign) -> list[Case]:
    """Every case of the campaign: for each firmware, each scenario, each sample."""
    cases = []
    params = samples(campaign)
    for fw, scenario, (k, overrides) in itertools.product(campaign.firmware, campaign.scenarios, enumerate(params)):
        name = NO_SCENARIO if scenario == NO_SCENARIO else Path(scenario).stem
        cases.append(Case(len(cases), f"{fw.name}/{name}/{k:04d}", fw, scenario, k, sample_seed(campaign.seed, k),
                          overrides))
    return cases


def fingerprint(campaign: Campaign, cases: list[Case]) -> str:
    """What makes the campaign's results what they are: the expanded cases, the run settings and
    the text of every file they read. A results folder holds the rows of one fingerprint."""
    files = [campaign.arm, campaign.bus, *(s for s in campaign.scenarios if s != NO_SCENARIO),
             *(f.params for f in campaign.firmware if f.params)]
    blob = {"cases": [c.as_dict() for c in cases], "duration_s": campaign.duration_s, "mode": campaign.mode,
            "link": campaign.link, "targets": None if campaign.targets is None else campaign.targets.as_dict(),
            "files": {f: Path(f).read_text(encoding="utf-8") for f in files}}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:16]
