"""`hil campaign FILE --out DIR`: expand, skip what is done, run the rest, write the table."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from hil.campaign.cases import expand, fingerprint
from hil.campaign.engine import Progress, execute, settings
from hil.campaign.results import ResultStore
from hil.campaign.runner import run_case
from hil.campaign.spec import load_campaign
from hil.campaign.toml_text import dumps


@dataclass
class Outcome:
    table: Path
    total: int
    skipped: int                 # already in the table when the run started
    ran: int
    duplicates: int              # rows refused because their case had one
    corrupt: list[str]           # parts set aside
    counts: dict[str, int]       # rows per status


def run_campaign(file: str | Path, out: str | Path, engine: str = "local", address: str | None = None,
                 workers: int = 1, limit: int | None = None, stream=sys.stderr, case_runner=None) -> Outcome:
    """Run the cases of campaign `file` that `out` has no row for (at most `limit` of them) and
    write `out`/results.parquet. `case_runner`: one that runs the cases that may in long-lived workers
    (hil.cli.campaign_case.run_case); without it each case runs in a `hil run` process of its own."""
    campaign = load_campaign(file)
    cases = expand(campaign)
    out = Path(out)
    print_ = (lambda text: print(f"hil campaign: {text}", file=stream))
    store = ResultStore(out, fingerprint(campaign, cases), str(file), warn=print_)
    todo = [c for c in cases if not store.done(c.case_id)]
    skipped = len(cases) - len(todo)
    if limit is not None:
        todo = todo[:limit]
    print_(f"{campaign.name}: {len(cases)} cases ({len(campaign.firmware)} firmware x {len(campaign.scenarios)} "
           f"scenarios x {len(cases) // (len(campaign.firmware) * len(campaign.scenarios))} samples), {skipped} done, "
           f"{len(todo)} to run on {engine}" + ("" if engine != "local" else f" with {workers} workers"))
    common = settings(campaign, out, targets_file(campaign, out), fresh_process=case_runner is None)
    if common["plan"]:
        print_("integrator: " + common["plan"].get("describe", common["plan"].get("reason", "")))
    progress = Progress(len(cases), skipped, stream)
    ran = 0

    def on_row(row: dict) -> None:
        nonlocal ran
        if store.add(row):
            ran += 1
            progress.update(row)
    try:
        execute(todo, common, engine, address, workers, f"case-{store_key(out)}", on_row, case_runner or run_case)
    finally:
        progress.close()
        table = store.write_table()
    counts: dict[str, int] = {}
    for row in store.rows.values():
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return Outcome(table, len(cases), skipped, ran, store.duplicates, store.corrupt, counts)


def store_key(out: Path) -> str:
    import hashlib
    return hashlib.sha256(str(out.resolve()).encode()).hexdigest()[:10]


def targets_file(campaign, out: Path) -> str | None:
    """The targets every case is judged against: the campaign's targets file, or its [verdict]
    table written out; None: each scenario's own [verdict]."""
    if campaign.targets is None:
        return None
    if campaign.targets.source != campaign.source:
        return str(Path(campaign.targets.source).resolve())
    path = out / "targets.toml"
    path.write_text(dumps({"verdict": campaign.targets.as_dict()}), encoding="utf-8")
    return str(path.resolve())
