"""What a campaign costs on this machine: cases per second with 1 and 2 workers (the local engine,
or a Dask cluster of 1 and 2 worker processes on 127.0.0.1 with --engine dask), the overhead per
case against a bare `hil run` of the same case (the same command line, run by hand one after the
other, half before and half after the campaign) and the campaign's own time per case outside its
cases' processes (collecting, writing rows), and the memory a worker needs (the largest resident set of a case's `hil run` process, and
with --engine dask of a worker process).

The cases: ELLA, the reference firmware over a serial pty pair, lockstep, no fault, the payload
mass drawn at random; --cases of them (goal: 2 workers at least 1.8 times the rate of 1 for 40).
On a machine shared with other work the rates move with its load: compare runs made together.

    python -m tools.bench_campaign [--cases 40] [--duration 0.5] [--bare 5] [--engine local|dask] [--json]
    hil bench campaign ...
"""
from __future__ import annotations

import argparse
import io
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hil.campaign.cases import expand
from hil.campaign.engine import settings
from hil.campaign.results import read_results
from hil.campaign.run import run_campaign
from hil.campaign.runner import command, resident_mb
from hil.campaign.spec import load_campaign

CAMPAIGN = """[campaign]
name = "bench"
arm = "ella"
bus = "serial_frame"
mode = "lockstep"
duration_s = {duration}
seed = 1
logs = "none"

[[firmware]]
name = "pid"
move_time_s = 0.3

[sampling]
method = "random"
samples = {cases}

[variations]
body.link2.attachment.payload.mass_kg = {{uniform = [1.8, 2.4]}}
"""


def cpu_s() -> float:
    """CPU time of this process and its finished children [s]: unlike wall time, barely moved by other jobs."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def bare_runs(path: Path, folder: Path, n: int) -> tuple[float, float]:
    """Mean wall-clock and CPU time of `n` cases run as plain `hil run` processes, one after the other [s]."""
    campaign = load_campaign(path)
    common = settings(campaign, folder, None)
    walls = []
    cpu0 = cpu_s()
    for case in expand(campaign)[:n]:
        model = folder / "model.toml"
        from hil.campaign.overrides import Preset
        model.write_text(Preset(campaign.arm).with_overrides(case.overrides, "bench"), encoding="utf-8")
        t0 = time.monotonic()
        subprocess.run(command(case.as_dict(), common, model, folder / "bare.msgpack"), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder)
        walls.append(time.monotonic() - t0)
    return sum(walls) / len(walls), (cpu_s() - cpu0) / len(walls)


def campaign_rate(path: Path, out: Path, workers: int, engine: str,
                  case_runner=None) -> tuple[float, float | None, float, float]:
    """Cases per second of the whole campaign with `workers` workers, the largest worker process
    (Dask) in MB, the campaign's own time per case outside its cases' processes [s] and the CPU time
    per case of this process and its children [s] (local engine; a Dask worker's is not counted);
    `case_runner`: hil.cli.campaign_case.run_case for the cases in long-lived workers, else a process each."""
    t0, cpu0 = time.monotonic(), cpu_s()
    if engine == "local":
        outcome = run_campaign(path, out, workers=workers, stream=io.StringIO(), case_runner=case_runner)
        worker_mb = None
    else:
        with DaskCluster(out.parent / f"cluster-{out.name}", workers) as cluster:
            outcome = run_campaign(path, out, engine="dask", address=cluster.address, stream=io.StringIO(),
                                   case_runner=case_runner)
            worker_mb = cluster.worker_rss_mb()
    wall = time.monotonic() - t0
    bad = {k: v for k, v in outcome.counts.items() if k != "passed"}
    if bad:
        raise RuntimeError(f"benchmark cases did not pass: {bad}")
    case_s = sum(r["wall_s"] for r in read_results(out))
    return outcome.ran / wall, worker_mb, (wall * workers - case_s) / outcome.ran, (cpu_s() - cpu0) / outcome.ran


class DaskCluster:
    """A Dask scheduler and `n` single-threaded worker processes (no nanny) on 127.0.0.1."""

    def __init__(self, folder: Path, n: int):
        folder.mkdir(parents=True, exist_ok=True)
        self.file = folder / "scheduler.json"
        cli = [sys.executable, "-m"]
        self.procs = [subprocess.Popen(cli + ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                                              "--no-dashboard", "--scheduler-file", str(self.file)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
        self.procs += [subprocess.Popen(cli + ["distributed.cli.dask_worker", "--scheduler-file", str(self.file),
                                               "--host", "127.0.0.1", "--nthreads", "1", "--no-nanny",
                                               "--no-dashboard"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                       for _ in range(n)]
        self.n = n

    def __enter__(self) -> "DaskCluster":
        from distributed import Client
        while not self.file.exists():
            time.sleep(0.1)
        self.address = json.loads(self.file.read_text())["address"]
        with Client(self.address, timeout="60s") as client:
            client.wait_for_workers(self.n, timeout=120)
        return self

    def worker_rss_mb(self) -> float:
        return max(resident_mb(p.pid) for p in self.procs[1:])

    def __exit__(self, *exc) -> None:
        for p in self.procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def in_workers(path: Path, folder: Path, engine: str) -> dict:
    """The same campaign in long-lived workers (hil.campaign.worker): cases/s with 1 and 2 workers, whole
    (the workers' start included) and steady (once every worker has run a case: steady_rate), and with 1
    worker, steady, a case's own loop time (its cycles: row loop_s) and its time beyond it. The campaign's
    integrator plan is made first (its time reported), so every run below starts alike."""
    from hil.campaign.plan import campaign_plan
    from hil.cli.campaign_case import run_case

    campaign = load_campaign(path)
    t0 = time.monotonic()
    campaign_plan(campaign)
    plan_s = time.monotonic() - t0
    one, _, _, cpu_case = campaign_rate(path, folder / "w1", 1, engine, run_case)
    two, mb2, _, _ = campaign_rate(path, folder / "w2", 2, engine, run_case)
    (steady_1, loop_s), (steady_2, _) = steady_rate(folder / "w1", 1), steady_rate(folder / "w2", 2)
    return {"cases_per_s_1_worker": one, "cases_per_s_2_workers": two, "speedup_2_workers": two / one,
            "steady_cases_per_s_1_worker": steady_1, "steady_cases_per_s_2_workers": steady_2,
            "steady_speedup_2_workers": None if steady_2 is None else steady_2 / steady_1,
            "campaign_plan_s": plan_s, "case_loop_s": loop_s,
            "overhead_per_case_s": None if steady_1 is None else 1 / steady_1 - loop_s,
            "campaign_cpu_per_case_s": cpu_case,
            "worker_process_rss_mb": mb2 if engine == "dask" else
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def steady_rate(out: Path, workers: int) -> tuple[float | None, float | None]:
    """Cases/s once the workers are up, from the rows in `out`: the cases that ended after the
    `workers`-th over the time from its end to the last's (each worker has run a case by then), and those
    cases' own loop time (their cycles) on average [s]; None for a campaign of no more cases than workers."""
    rows = sorted(read_results(out), key=lambda r: r["ended_unix_s"])
    if len(rows) <= workers:
        return None, None
    steady = rows[workers:]
    rate = len(steady) / max(rows[-1]["ended_unix_s"] - rows[workers - 1]["ended_unix_s"], 1e-9)
    return rate, sum(r["loop_s"] for r in steady) / len(steady)


def measure(cases: int, duration: float, bare: int, engine: str) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="hil-bench-campaign-"))
    try:
        path = folder / "bench.toml"
        path.write_text(CAMPAIGN.format(cases=cases, duration=duration), encoding="utf-8")
        # bare runs before and after the 1-worker campaign: the machine's load drifts
        (before, cpu_before) = bare_runs(path, folder, (bare + 1) // 2)
        one, _, own_s, cpu_case = campaign_rate(path, folder / "one", 1, engine)
        (after, cpu_after) = bare_runs(path, folder, bare // 2) if bare > 1 else (before, cpu_before)
        bare_s = (before * ((bare + 1) // 2) + after * (bare // 2)) / bare if bare > 1 else before
        bare_cpu = (cpu_before * ((bare + 1) // 2) + cpu_after * (bare // 2)) / bare if bare > 1 else cpu_before
        two, mb2, _, _ = campaign_rate(path, folder / "two", 2, engine)
        case_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        workers = in_workers(path, folder, engine)
        return {"engine": engine, "cases": cases, "duration_s": duration, "bare_hil_run_s": bare_s,
                "bare_before_s": before, "bare_after_s": after,
                "cases_per_s_1_worker": one, "cases_per_s_2_workers": two, "speedup_2_workers": two / one,
                "overhead_per_case": (1 / one) / bare_s - 1, "own_time_per_case_s": own_s,
                "bare_cpu_s": bare_cpu, "campaign_cpu_per_case_s": cpu_case if engine == "local" else None,
                "cpu_overhead_per_case": cpu_case / bare_cpu - 1 if engine == "local" else None,
                "own_overhead_per_case": own_s / (1 / one - own_s), "case_process_max_rss_mb": case_mb,
                "worker_process_rss_mb": mb2 if engine == "dask" else None,
                "in_workers": workers, "load_average": os.getloadavg()}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hil bench campaign", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=40, help="cases per campaign (default 40)")
    p.add_argument("--duration", type=float, default=0.5, help="simulated seconds per case (default 0.5)")
    p.add_argument("--bare", type=int, default=5, help="bare hil runs for the reference time (default 5)")
    p.add_argument("--engine", choices=("local", "dask"), default="local")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    r = measure(args.cases, args.duration, args.bare, args.engine)
    if args.json:
        print(json.dumps(r))
        return 0
    print(f"campaign of {r['cases']} cases x {r['duration_s']} s (lockstep, reference firmware), engine {r['engine']}")
    print(f"  bare hil run of one case        {r['bare_hil_run_s']:.2f} s (before {r['bare_before_s']:.2f} s, "
          f"after {r['bare_after_s']:.2f} s the 1-worker campaign)")
    print(f"  1 worker                        {r['cases_per_s_1_worker']:.3f} cases/s "
          f"(overhead per case against bare runs {r['overhead_per_case'] * 100:+.1f} %, goal < 10 %; the "
          f"campaign's own time outside its cases {r['own_time_per_case_s'] * 1e3:.0f} ms = "
          f"{r['own_overhead_per_case'] * 100:.1f} % per case)")
    if r["cpu_overhead_per_case"] is not None:
        print(f"  CPU time per case               {r['campaign_cpu_per_case_s']:.2f} s in the campaign, "
              f"{r['bare_cpu_s']:.2f} s bare ({r['cpu_overhead_per_case'] * 100:+.1f} %, goal < 10 %)")
    print(f"  2 workers                       {r['cases_per_s_2_workers']:.3f} cases/s "
          f"(x{r['speedup_2_workers']:.2f}, goal >= 1.8)")
    print(f"  memory: a case's hil run process at most {r['case_process_max_rss_mb']:.0f} MB"
          + (f", a Dask worker process {r['worker_process_rss_mb']:.0f} MB" if r["worker_process_rss_mb"] else ""))
    w = r["in_workers"]
    print(f"  in long-lived workers (the firmware in each): 1 worker {w['cases_per_s_1_worker']:.3f} cases/s "
          f"(x{w['cases_per_s_1_worker'] / r['cases_per_s_1_worker']:.1f} the process per case), 2 workers "
          f"{w['cases_per_s_2_workers']:.3f} cases/s (x{w['speedup_2_workers']:.2f} of 1)")
    if w["steady_cases_per_s_2_workers"] is not None:
        print(f"    once the workers are up: 1 worker {w['steady_cases_per_s_1_worker']:.3f} cases/s, 2 workers "
              f"{w['steady_cases_per_s_2_workers']:.3f} (x{w['steady_speedup_2_workers']:.2f}, goal >= 1.9); "
              f"the campaign's integrator plan {w['campaign_plan_s']:.1f} s")
    if w["overhead_per_case_s"] is not None:
        print(f"    a case's own loop {w['case_loop_s'] * 1e3:.0f} ms; beyond it per case "
              f"{w['overhead_per_case_s'] * 1e3:.0f} ms (goal 20 ms)")
    print(f"    CPU per case {w['campaign_cpu_per_case_s']:.2f} s; a worker process at most "
          f"{w['worker_process_rss_mb']:.0f} MB")
    print(f"  load average during the run: {', '.join(f'{x:.1f}' for x in r['load_average'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
