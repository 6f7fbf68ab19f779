"""Where a campaign's cases run: here (the default: long-lived worker processes for the cases that can run
in them, hil.campaign.worker, and worker threads each driving one `hil run` process for the others; no
server to start) or on a Dask cluster (`--engine dask --address tcp://HOST:8786`). Either way this
process collects the rows and writes them (hil.campaign.results): the workers write only the run logs
they keep, into the results folder (on a cluster: a folder every worker sees at the same path).

A worker lost mid-campaign (killed, its machine gone) loses only the cases it was running: the
scheduler gives them to another worker, each case's task has a key that names it, so it runs to
one result, and the store refuses a second row for a case in any event.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from hil.campaign.cases import Case
from hil.campaign.runner import run_case, runs_inside
from hil.campaign.worker import WorkerPool, case_then_collect
from hil.campaign.spec import Campaign
from config_schema import UserError

ENGINES = ("local", "dask")
CaseRunner = Callable[[dict, dict], dict]


def settings(campaign: Campaign, out: Path, targets: str | None, fresh_process: bool = False) -> dict:
    """What every case of the campaign shares (plain data: it travels to the workers), its integrator plan
    included (hil.campaign.plan); `fresh_process`: every case in a `hil run` process of its own, none in a
    long-lived worker (hil.campaign.worker; it takes a case runner that can run a case inside: execute)."""
    from firmware_bridge.wire.messages import BusMap
    from hil.campaign.plan import campaign_plan
    return {"arm": campaign.arm, "bus": campaign.bus, "bus_kind": BusMap.load(campaign.bus).kind,
            "link": campaign.link, "mode": campaign.mode, "duration_s": campaign.duration_s,
            "timeout_s": campaign.timeout_s, "logs": campaign.logs, "targets": targets,
            "out": str(out.resolve()), "cwd": str(Path(campaign.source).resolve().parent),
            "in_process": not fresh_process, "plan": campaign_plan(campaign)}


def run_local(cases: list[Case], common: dict, workers: int, case_runner: CaseRunner = run_case,
              pool: WorkerPool | None = None) -> Iterator[dict]:
    """The rows of `cases`, as they finish, from `workers` cases at a time on this machine: the cases that run
    in long-lived worker processes on a pool of them (hil.campaign.worker; `pool`: one kept by the caller),
    the others each in its own `hil run` process driven from a thread."""
    inside = [c.as_dict() for c in cases if runs_inside(c.as_dict(), common)]
    if inside:
        own_pool = pool is None
        pool = pool or WorkerPool(workers)
        try:
            yield from pool.rows(inside, common, case_runner, lambda case, message: _lost_row(case, common, message))
        finally:
            if own_pool:
                pool.close()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="case") as threads:
        futures = [threads.submit(case_runner, c.as_dict(), common) for c in cases
                   if not runs_inside(c.as_dict(), common)]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for f in futures:
                f.cancel()


def run_dask(cases: list[Case], common: dict, address: str, key_prefix: str,
             case_runner: CaseRunner = run_case) -> Iterator[dict]:
    """The rows of `cases` from the Dask cluster at `address`; a case whose task the cluster gave
    up on (it killed workers over and over) is an error row, and the campaign goes on."""
    try:
        from distributed import Client, as_completed as dask_completed
    except ImportError as exc:
        raise UserError(f"--engine dask needs {exc.name}: pip install 'ella-hil[cluster]'") from None
    with Client(address, timeout="30s") as client:
        futures = {client.submit(case_then_collect, case_runner, c.as_dict(), common, key=f"{key_prefix}-{c.case_id}",
                                 pure=False): c for c in cases}
        for future in dask_completed(futures):
            case = futures[future]
            if future.status == "finished":
                yield future.result()
            else:
                yield _lost(case, common, repr(future.exception()))
            future.release()


def _lost(case: Case, common: dict, message: str) -> dict:
    return _lost_row(case.as_dict(), common, f"the engine gave up on the case: {message}")


def _lost_row(case: dict, common: dict, message: str) -> dict:
    """The row of a case that gave no row of its own (its worker died, the engine gave up on it)."""
    return {"case_id": case["case_id"], "index": case["index"], "firmware": case["firmware"]["name"],
            "scenario": Path(case["scenario"]).stem, "sample": case["sample"], "seed": case["seed"], "worker": "",
            "status": "error", "error": message, "passed": False, "log": "", "wall_s": 0.0,
            "ended_unix_s": time.time()}


class Progress:
    """One line on stderr: done/total, failures, errors, rate and time left; on a terminal it is
    redrawn, otherwise printed at every tenth of the campaign."""

    def __init__(self, total: int, already: int, stream=sys.stderr):
        self.total, self.done, self.start_done = total, already, already
        self.failed = self.errors = 0
        self.stream = stream
        self.tty = stream.isatty()
        self.t0 = time.monotonic()
        self._next_line = already

    def update(self, row: dict) -> None:
        self.done += 1
        self.failed += row["status"] == "failed"
        self.errors += row["status"] in ("error", "timeout", "run_failed")
        if self.tty:
            self.stream.write("\r" + self.line())
        elif self.done >= self._next_line or self.done == self.total:
            self.stream.write(self.line() + "\n")
            self._next_line = self.done + max(1, self.total // 10)
        self.stream.flush()

    def line(self) -> str:
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        ran = self.done - self.start_done
        rate = ran / max(time.monotonic() - self.t0, 1e-9)
        left = (self.total - self.done) / rate if rate > 0 else float("nan")
        return (f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} cases, {self.failed} failed, "
                f"{self.errors} errors, {rate * 60:.1f} cases/min, {left:.0f} s left")

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)))


def execute(cases: list[Case], common: dict, engine: str, address: str | None, workers: int, key_prefix: str,
            on_row: Callable[[dict], None], case_runner: CaseRunner = run_case, pool: WorkerPool | None = None) -> None:
    """Every case's row to `on_row`; `case_runner(case, settings) -> row`: hil.campaign.runner.run_case, or one
    that runs the cases that may in the worker's own process (hil.cli.campaign_case.run_case); `pool`: the
    local engine's long-lived workers, kept by the caller across calls."""
    rows = (run_local(cases, common, workers, case_runner, pool) if engine == "local"
            else run_dask(cases, common, address, key_prefix, case_runner))
    for row in rows:
        on_row(row)
