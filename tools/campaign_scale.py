"""A large campaign from start to table, as a user runs it: `hil campaign` killed part-way, resumed, queried.

Two kinds of case: `controller` (the seed 000 PD controller in process, `--duration` each, the sensor seeds spread:
the model and its plan the same for every case) or `reference` (the reference firmware in lockstep, the payload
spread over 1.8-2.4 kg: every case a new model, the campaign's one integrator plan). The campaign runs as a `hil
campaign` process on `--workers` long-lived workers; after `--kill-after` seconds it is killed (SIGKILL) and its
workers must be gone; the rerun completes it (with `--kill-after 0` it runs through at once: its wall time); a
DuckDB query counts the rows and the workers' resident memory.

    python -m tools.campaign_scale [--cases 10000] [--kind controller|reference] [--duration 0.02]
                                   [--kill-after 90] [--workers 2] [--out DIR] [--json]
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASE = {"controller": '[[firmware]]\nname = "pd"\nkind = "controller"\ncontroller = "tools.seed000_experiment:controller"\n'
                      '\n[variations]\nmodel.sensor_seed = {integers = [0, 1000000]}\n',
        "reference": '[[firmware]]\nname = "pid"\nkind = "reference"\nmove_time_s = 0.6\n'
                     '\n[variations]\nbody.link2.attachment.payload.mass_kg = {uniform = [1.8, 2.4]}\n'}
HEAD = """[campaign]
name = "scale"
arm = "ella"
bus = "serial_frame"
mode = "lockstep"
duration_s = {duration}
seed = 9
timeout_s = 120
logs = "none"
scenarios = ["none"]

[sampling]
method = "random"
samples = {cases}

[verdict]
max_torque_N_m = 250.0

"""
SQL = ("select count(*) as cases, count(distinct case_id) as ids, min(worker_rss_mb) as rss_min, "
       "max(worker_rss_mb) as rss_max, count(distinct worker) as workers from results")


def hil(*args: str) -> list[str]:
    return [sys.executable, "-m", "hil", *args]


def workers_of(pid: int) -> list[int]:
    """The long-lived workers (spawned interpreters) of the campaign process `pid`."""
    out = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            if f"PPid:\t{pid}\n" in status.read_text() and b"spawn_main" in (status.parent / "cmdline").read_bytes():
                out.append(int(status.parent.name))
        except OSError:
            continue
    return out


def alive(pid: int) -> bool:
    """The process exists and is no zombie."""
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def measure(cases: int, kind: str, duration: float, kill_after: float, workers: int, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "scale.toml"
    path.write_text(HEAD.format(duration=duration, cases=cases) + CASE[kind], encoding="utf-8")
    results = out / "results"
    run = hil("campaign", str(path), "--out", str(results), "--workers", str(workers), "--json", "--yes")
    killed_s, left = killed_part_way(run, kill_after) if kill_after > 0 else (0.0, [])
    t1 = time.monotonic()
    rerun = subprocess.run(run, capture_output=True, text=True, check=True)
    resumed_s = time.monotonic() - t1
    outcome = json.loads(rerun.stdout.splitlines()[-1])
    t2 = time.monotonic()
    query = subprocess.run(hil("campaign", "query", str(results), SQL, "--json"), capture_output=True, text=True,
                           check=True)
    query_s = time.monotonic() - t2
    answer = json.loads(query.stdout)
    return {"cases": cases, "kind": kind, "duration_s": duration, "workers": workers, "killed_after_s": killed_s,
            "workers_left_after_kill": len(left), "rows_before_resume": outcome["skipped"],
            "resumed_s": resumed_s, "total_s": killed_s + resumed_s, "duplicates_refused": outcome["duplicates_refused"],
            "status": outcome["status"], "query_s": query_s, "table": dict(zip(answer["columns"], answer["rows"][0]))}


def killed_part_way(run: list[str], kill_after: float) -> tuple[float, list[int]]:
    """Run the campaign for `kill_after` s and kill it (SIGKILL): the seconds it ran, its workers still alive."""
    t0 = time.monotonic()
    first = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(kill_after)
    pool = workers_of(first.pid)
    first.kill()
    first.wait()
    killed_s = time.monotonic() - t0
    time.sleep(3.0)
    return killed_s, [pid for pid in pool if alive(pid)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.campaign_scale", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=10_000)
    p.add_argument("--kind", choices=tuple(CASE), default="controller")
    p.add_argument("--duration", type=float, default=0.02, help="simulated seconds per case")
    p.add_argument("--kill-after", type=float, default=90.0,
                   help="seconds before the first run is killed (0: none, the campaign runs through once)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", help="folder for the campaign file and its results (default: a temporary one, removed)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="hil-campaign-scale-"))
    try:
        r = measure(args.cases, args.kind, args.duration, args.kill_after, args.workers, out)
    finally:
        if not args.out:
            shutil.rmtree(out, ignore_errors=True)
    if args.json:
        print(json.dumps(r))
        return 0
    t = r["table"]
    head = f"{r['cases']} {r['kind']} cases of {r['duration_s']} s on {r['workers']} workers: "
    if r["killed_after_s"]:
        print(head + f"killed after {r['killed_after_s']:.0f} s with {r['rows_before_resume']} rows kept "
              f"({r['workers_left_after_kill']} workers left), resumed in {r['resumed_s']:.0f} s: {r['total_s']:.0f} s in all")
    else:
        print(head + f"{r['total_s']:.0f} s ({r['cases'] / r['total_s']:.2f} cases/s)")
    print(f"  table: {t['cases']} rows, {t['ids']} distinct ids, {r['duplicates_refused']} duplicates refused, "
          f"status {r['status']}; worker memory {t['rss_min']:.0f}-{t['rss_max']:.0f} MB; the query {r['query_s']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
