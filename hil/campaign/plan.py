"""One integrator plan for every case of a campaign, judged once at the corners of its parameter space.

A case whose variation changes the model would otherwise plan its integrator afresh: auto's converged probe
motion (hil.dynamics.motion_error) costs about half a second of a 1 s case. Instead the campaign plans at
the corners of its space before the first case: every variation at its ends (a range's bounds, the least
and greatest of numeric values, every value of a list of others) in every combination, while they number at
most MAX_CORNERS, else one variation at a time at its ends with the others at their middles; and the
middle of the space. With the preset's `auto`, the dearest plan chosen at those models (evaluations per
step) is pinned, and judged at each of them as auto judges a plan (every retained mode accurate, the probe's
joint angles within integrator.motion_tolerance_rad / MOTION_MARGIN); a preset with a pinned method and
substeps keeps its plan and is judged alike. Every case's model file then carries the plan
(integrator.method, substeps) and the judgement (integrator.judged_by): the case judges its own modes
(cheap) but not its motion again, and its rerun from that file steps exactly as it did.

No campaign plan (each case plans its own, as `hil run` would) where the variations leave the plant's arrays
alone (a sensor seed, a sensor's noise: every case's plan is then the one the plan cache keeps) or vary the
integrator, where a preset pins a method without substeps (its substeps follow each model's
stability bound), where the space has more than MAX_MODELS such models, or where the dearest plan misses a
tolerance at one of them (the reason is in the campaign's output).
"""
from __future__ import annotations

import itertools
import math
from typing import Any

from hil.campaign.spec import Campaign, Variation
from hil.dynamics import plan_cache

MAX_CORNERS = 16        # every combination of the variations' ends while they number at most this
MAX_MODELS = 33         # models planned for a campaign at most (about 0.6 s each); beyond, each case plans
PLAN_KEYS = ("integrator.method", "integrator.substeps", "integrator.judged_by")


def campaign_plan(campaign: Campaign) -> dict | None:
    """{"overrides": the plan's keys for every case's model, "describe": one line} or {"reason": why there
    is none} (module docstring); None where the campaign's models do not vary."""
    if not campaign.variations:
        return None
    if any(v.path.startswith("integrator.") for v in campaign.variations):
        return {"reason": "the campaign varies the integrator: each case plans its own"}
    integrator = campaign.preset.data.get("integrator", {})
    method, substeps = integrator.get("method", "auto"), integrator.get("substeps", 0)
    if method != "auto" and not substeps:
        return {"reason": f"{campaign.arm} pins integrator.method = {method!r} without substeps: each case "
                          "takes its own stability bound"}
    points = corners(campaign.variations)
    if len(points) > MAX_MODELS:
        return {"reason": f"{len(points)} corners to plan at (more than {MAX_MODELS}): each case plans its own"}
    models = [_assembled(campaign, p) for p in points]
    if len({plan_cache.key(asm, "plan") for asm in models}) == 1:
        return None                 # the plant's arrays do not vary (sensor seeds, noise): the plan cache serves
    return _judged(campaign, models)


def corners(variations: tuple[Variation, ...]) -> list[dict[str, Any]]:
    """The overrides of the models the campaign plans at (module docstring), the middle first."""
    middle = {v.path: _middle(v) for v in variations}
    ends = [_ends(v) for v in variations]
    if math.prod(len(e) for e in ends) <= MAX_CORNERS:
        combos = [dict(zip(middle, values)) for values in itertools.product(*ends)]
    else:
        combos = [{**middle, v.path: end} for v, e in zip(variations, ends) for end in e]
    return [middle] + [c for c in combos if c != middle]


def _ends(v: Variation) -> list:
    if v.kind != "values":
        return [v.value_at(0.0), v.value_at(1.0)]
    numbers = [x for x in v.values if isinstance(x, (int, float)) and not isinstance(x, bool)]
    if len(numbers) == len(v.values):
        return sorted({min(numbers), max(numbers)})
    return list(v.values)


def _middle(v: Variation) -> Any:
    return v.values[len(v.values) // 2] if v.kind == "values" else v.value_at(0.5)


def _assembled(campaign: Campaign, overrides: dict):
    from hil.model.assembly import assemble
    from hil.model.config import load_model_from_string

    text = campaign.preset.with_overrides(overrides, f"{campaign.source}: a corner of the campaign's space")
    return assemble(load_model_from_string(text, campaign.arm))


def _judged(campaign: Campaign, models: list) -> dict:
    """The dearest plan of the models (auto's choice at each, or the preset's pinned one), judged at each."""
    from hil.dynamics.integrator_plan import EVALUATIONS, MOTION_MARGIN, IntegratorPlan, judge, plan_integrator

    plans = [plan_integrator(asm) for asm in models]
    chosen = max(plans, key=lambda p: (EVALUATIONS[p.method] * p.substeps, p.substeps))
    worst, accurate = 0.0, True
    for asm, own in zip(models, plans):
        plan = judge(asm, IntegratorPlan(chosen.method, chosen.substeps, own.dt_s, own.f_max_hz, own.f_explicit_hz,
                                         own.bandwidth_hz))
        error = (plan.motion or {}).get("max_error_rad", 0.0)
        tolerance = asm.model.integrator.motion_tolerance_rad / MOTION_MARGIN
        if asm.model.integrator.method == "auto" and (not plan.accurate or (tolerance > 0 and error > tolerance)):
            return {"reason": f"{chosen.method} x{chosen.substeps}, the dearest plan of the campaign's corners, "
                              f"misses a tolerance at one of them ({plan.describe()}): each case plans its own"}
        worst, accurate = max(worst, error), accurate and bool(plan.accurate)
    judged = (f"campaign {campaign.name} at {len(models)} corners of its parameter space: joint angles within "
              f"{worst:.1e} rad of a converged solution over the probe, every mode "
              + ("accurate" if accurate else "NOT accurate at every corner"))
    return {"overrides": dict(zip(PLAN_KEYS, (chosen.method, chosen.substeps, judged))),
            "describe": f"{chosen.method} x{chosen.substeps} for every case ({judged})"}
