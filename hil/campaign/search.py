"""Falsification (`hil campaign search FILE --out DIR`): look for the cases of a campaign's space that fail, or
come closest to failing, instead of sampling it.

The space is the campaign's [variations], each mapped from [0, 1] as the samplers map it
(Variation.value_at: a range linearly, integers and value lists by index), searched for every firmware x
scenario of the campaign in turn, an equal share of the `budget` of cases each. A case's robustness is
the worst of its verdicts' (robustness): how far inside its limit a verdict stays, as a fraction of
the limit (limit - value) / |limit| for a verdict "value <= limit", its quantitative robustness for a
temporal assertion (in the unit of its signals; positive: it holds); a case the run cannot judge
(error, run_failed, timeout) counts FAILED_ROBUSTNESS, below every verdict. CMA-ES (the `cma` package:
no gradient, a few dozen evaluations in a handful of dimensions, bounds handled by its own
transformation) minimises it, one population of cases at a time on the campaign's engine and workers.

The cases land in DIR/results.parquet as a campaign's rows (ids `search/<firmware>/<scenario>/<n>`, their
parameters and seed in the row: each reruns by itself), their run logs kept when they fail; DIR/search.json
lists per firmware x scenario the least robust case and every failing one, each with the `hil run` (or
`hil simulate`) command line that reproduces it. The search is deterministic for its seed: a rerun into
the same DIR takes the rows it has and runs only what is missing.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from config_schema import UserError
from hil.campaign.cases import Case, fingerprint, sample_seed
from hil.campaign.engine import execute, settings
from hil.campaign.results import ResultStore
from hil.campaign.report import run_report
from hil.campaign.run import targets_file
from hil.campaign.runner import command, model_text, run_case, safe_name
from hil.campaign.spec import NO_SCENARIO, Campaign, load_campaign
from hil.campaign.worker import WorkerPool

FAILED_ROBUSTNESS = -1e3       # a case the run could not judge: below any verdict's robustness
MAX_BUDGET = 100_000
MAX_REPORTED = 20           # failing cases reported (with a model file, a command and a report) per cell


def robustness(row: dict) -> float:
    """The worst robustness of a results row's verdicts (module docstring)."""
    if row["status"] in ("error", "run_failed", "timeout"):
        return FAILED_ROBUSTNESS
    values = []
    for key, value in row.items():
        if not key.startswith("value:"):
            continue
        name = key[len("value:"):]
        limit = row.get(f"limit:{name}")
        if value is None or limit is None:
            values.append(FAILED_ROBUSTNESS if not row.get(f"verdict:{name}") else math.inf)
        elif name.startswith("assert_"):
            values.append(float(value))
        else:
            values.append((float(limit) - float(value)) / max(abs(float(limit)), 1e-12))
    return min(values) if values else math.inf


@dataclass
class SearchOutcome:
    table: Path
    summary: Path
    cells: list[dict]          # per firmware x scenario: the least robust case, the failing ones


def search(file: str | Path, out: str | Path, budget: int, popsize: int | None = None, seed: int | None = None,
           engine: str = "local", address: str | None = None, workers: int = 1, case_runner=None,
           stream=sys.stderr) -> SearchOutcome:
    """Search campaign `file`'s space for failing cases with `budget` cases in all (module docstring)."""
    try:
        import cma
    except ImportError:
        raise UserError("hil campaign search needs cma: pip install 'ella-hil[campaign]'") from None
    campaign = load_campaign(file)
    if not campaign.variations:
        raise UserError(f"{file}: [variations] is empty: a search needs a parameter space")
    if not 1 <= budget <= MAX_BUDGET:
        raise UserError(f"--budget {budget}: expected 1 to {MAX_BUDGET} cases")
    out = Path(out)
    seed = campaign.seed if seed is None else seed
    cells = [(fw, scenario) for fw in campaign.firmware for scenario in campaign.scenarios]
    share = max(1, budget // len(cells))
    key = hashlib.sha256(f"{fingerprint(campaign, [])}/{budget}/{popsize}/{seed}".encode()).hexdigest()[:16]
    store = ResultStore(out, f"search-{key}", str(file), warn=lambda text: print(f"hil campaign: {text}", file=stream))
    common = {**settings(campaign, out, targets_file(campaign, out), fresh_process=case_runner is None), "logs": "failing"}
    pool = WorkerPool(workers) if engine == "local" and case_runner is not None else None
    run_cases = functools.partial(execute, common=common, engine=engine, address=address, workers=workers,
                                  key_prefix=f"search-{key}", on_row=store.add, case_runner=case_runner or run_case,
                                  pool=pool)
    results = []
    try:
        for index, (fw, scenario) in enumerate(cells):
            options = {"bounds": [0.0, 1.0], "seed": seed + index + 1, "maxfevals": share, "verbose": -9}
            if popsize:
                options["popsize"] = popsize
            es = cma.CMAEvolutionStrategy([0.5] * len(campaign.variations), 0.3, options)
            say = (lambda text, cell=f"{fw.name} / {Path(scenario).stem}": print(f"hil campaign search: {cell}: {text}",
                                                                               file=stream))
            results.append(_cell(es, campaign, fw, scenario, share, store, common, run_cases, say))
    finally:
        table = store.write_table()
        if pool is not None:
            pool.close()
    summary = out / "search.json"
    summary.write_text(json.dumps({"campaign": str(file), "budget": budget, "seed": seed, "cells": results},
                                  indent=1, default=str), encoding="utf-8")
    return SearchOutcome(table, summary, results)


def _cell(es, campaign: Campaign, fw, scenario: str, share: int, store: ResultStore, common: dict,
          run_cases: Callable[[list[Case]], None], say: Callable[[str], None]) -> dict:
    """CMA-ES on one firmware x scenario until its share of cases is spent (`run_cases`: their rows into the
    store; `say`: a progress line per generation); what it found."""
    name = NO_SCENARIO if scenario == NO_SCENARIO else Path(scenario).stem
    rows: list[dict] = []
    cases: dict[str, Case] = {}
    while not es.stop() and len(rows) < share:
        points = es.ask()[:share - len(rows)]
        batch = [_case(campaign, fw, scenario, name, len(rows) + i, x) for i, x in enumerate(points)]
        cases.update((c.case_id, c) for c in batch)
        todo = [c for c in batch if not store.done(c.case_id)]
        run_cases(todo)
        found = [store.rows[c.case_id] for c in batch]
        rows += found
        if len(points) == es.popsize:
            es.tell(points, [robustness(r) for r in found])
        say(f"{len(rows)}/{share} cases, {sum(robustness(r) < 0 for r in rows)} failing, least robust so far "
            f"{min(robustness(r) for r in rows):+.4g}")
    worst = min(rows, key=robustness)
    failing = [r for r in rows if robustness(r) < 0]
    return {"firmware": fw.name, "scenario": name, "cases": len(rows), "min_robustness": robustness(worst),
            "least_robust": _found(worst, cases[worst["case_id"]], campaign, common),
            "failing": [_found(r, cases[r["case_id"]], campaign, common) for r in failing[:MAX_REPORTED]]}


def _case(campaign: Campaign, fw, scenario: str, name: str, n: int, x) -> Case:
    overrides = {v.path: v.value_at(float(u)) for v, u in zip(campaign.variations, x)}
    return Case(n, f"search/{fw.name}/{name}/{n:04d}", fw, scenario, n, sample_seed(campaign.seed, n), overrides)


def _found(row: dict, case: Case, campaign: Campaign, common: dict) -> dict:
    """A case the search reports: its id, robustness, parameters, the command line that reruns it (its model
    file written beside the results, as `hil campaign` writes a case's) and the report of its kept log."""
    out = Path(common["out"])
    model = out / "models" / f"{safe_name(case.case_id)}.toml"
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_text(model_text(case.as_dict(), common), encoding="utf-8")
    rerun = ["hil"] + command(case.as_dict(), common, model, out / "rerun.msgpack")[3:]
    report = None
    if row["log"]:
        page = out / "reports" / f"{safe_name(case.case_id)}.html"
        run_report(out / row["log"], page)
        report = str(page.relative_to(out))
    return {"case_id": row["case_id"], "robustness": robustness(row), "status": row["status"],
            "params": case.overrides, "seed": case.seed, "log": row["log"], "report": report, "rerun": rerun,
            "error": row["error"]}

