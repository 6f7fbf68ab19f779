"""A campaign on a real Dask cluster on this machine: a scheduler and two worker processes on
127.0.0.1. The results table equals a local sequential run's, case by case; a worker killed
mid-campaign loses nothing and duplicates nothing."""
from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from campaigns import PAYLOAD, TWO_FIRMWARE, comparable, write_campaign
from hil.campaign.results import read_results
from hil.campaign.run import run_campaign

pytest.importorskip("distributed")

SCENARIOS = '["none", "imu_degradation", "bus_faults"]'
START_S = 120.0      # generous: the machine is shared


def _dask(*args: str) -> list[str]:
    return [sys.executable, "-m", "distributed.cli." + args[0], *args[1:]]


class Cluster:
    def __init__(self, folder: Path, workers: int = 2):
        self.scheduler_file = folder / "scheduler.json"
        self.procs = [subprocess.Popen(_dask("dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                             "--scheduler-file", str(self.scheduler_file)),
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)]
        self.workers = [subprocess.Popen(_dask("dask_worker", "--scheduler-file", str(self.scheduler_file),
                                               "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard",
                                               "--name", f"w{i}"),
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                                         env={**os.environ, "NUMBA_CACHE_DIR": os.environ.get("NUMBA_CACHE_DIR", "")})
                        for i in range(workers)]
        self.procs += self.workers
        self.address = self._wait(workers)

    def _wait(self, n: int) -> str:
        from distributed import Client
        deadline = time.monotonic() + START_S
        while not self.scheduler_file.exists():
            assert time.monotonic() < deadline, "the dask scheduler did not start"
            time.sleep(0.2)
        import json
        address = json.loads(self.scheduler_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(n, timeout=START_S)
            assert all(w.startswith("tcp://127.0.0.1:") for w in client.scheduler_info()["workers"])
        return address

    def kill_worker(self, i: int) -> None:
        os.killpg(self.workers[i].pid, signal.SIGKILL)       # the nanny and its worker process

    def close(self) -> None:
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    c.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """3 scenarios x 2 payloads x 2 firmware settings, run locally two cases at a time."""
    folder = tmp_path_factory.mktemp("campaign")
    path = write_campaign(folder, firmware=TWO_FIRMWARE, scenarios=SCENARIOS, variations=PAYLOAD, duration_s=0.6,
                          logs="none")
    outcome = run_campaign(path, folder / "local", workers=2, stream=io.StringIO())
    assert outcome.counts.get("error", 0) == outcome.counts.get("timeout", 0) == 0
    return path, read_results(folder / "local")


def test_a_dask_cluster_gives_the_local_table_case_by_case(reference, cluster, tmp_path):
    path, local = reference
    outcome = run_campaign(path, tmp_path / "dask", engine="dask", address=cluster.address, stream=io.StringIO())
    rows = read_results(tmp_path / "dask")
    assert outcome.ran == len(local) == 12
    assert [r["case_id"] for r in rows] == [r["case_id"] for r in local]
    assert comparable(rows) == comparable(local)
    assert len({r["worker"] for r in rows}) == 2                     # both workers ran cases


def test_a_worker_killed_mid_campaign_loses_and_duplicates_nothing(reference, cluster, tmp_path):
    from distributed import Client
    path, local = reference
    out = tmp_path / "dask"
    result = {}
    runner = threading.Thread(target=lambda: result.update(outcome=run_campaign(
        path, out, engine="dask", address=cluster.address, stream=io.StringIO())))
    runner.start()
    with Client(cluster.address, timeout="60s") as client:
        victim = next(a for a, w in client.scheduler_info()["workers"].items() if w["name"] == "w0")
        deadline = time.monotonic() + 600
        while not client.processing(workers=[victim])[victim]:       # a case in flight on the victim
            assert time.monotonic() < deadline and runner.is_alive()
            time.sleep(0.1)
        time.sleep(1.0)                                             # its hil run process is running
        in_flight = client.processing(workers=[victim])[victim]
        survivor = next(a for a, w in client.scheduler_info()["workers"].items() if w["name"] == "w1")
        survivor_pid = client.run(os.getpid, workers=[survivor])[survivor]
        cluster.kill_worker(0)
    runner.join(900)
    assert not runner.is_alive()
    rows = read_results(out)
    assert result["outcome"].duplicates == 0
    assert sorted(r["case_id"] for r in rows) == sorted(r["case_id"] for r in local)
    assert comparable(rows) == comparable(local)
    rerun = [r for r in rows if any(key.endswith(r["case_id"]) for key in in_flight)]
    assert rerun and all(r["worker"].endswith(f":{survivor_pid}") for r in rerun)   # finished on the other worker


def documented_dask_commands() -> list[list[str]]:
    """The manual's commands that start a scheduler and a worker (docs/campaigns.md), as argv."""
    import shlex
    text = (Path(__file__).resolve().parent.parent / "docs" / "campaigns.md").read_text(encoding="utf-8")
    lines = [line.split("#")[0].strip().rstrip("&").strip() for line in text.splitlines()
             if line.startswith(("dask scheduler", "dask worker"))]
    return [shlex.split(line) for line in lines[:2]]


def non_loopback_listeners(addresses: list[tuple[str, int]]) -> list[tuple[str, int]]:
    return [(ip, port) for ip, port in addresses if ip not in ("127.0.0.1", "::1")]


def test_the_check_finds_a_socket_on_every_interface():
    assert non_loopback_listeners([("127.0.0.1", 8786), ("0.0.0.0", 8787)]) == [("0.0.0.0", 8787)]


def test_the_documented_cluster_listens_on_loopback_only(tmp_path):
    """The manual's scheduler and worker commands (ports made free), started: every listening socket of
    both processes, dashboards included, is on 127.0.0.1."""
    import psutil
    import socket
    free = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free.append(s.getsockname()[1])
    scheduler, worker = documented_dask_commands()
    assert scheduler[:2] == ["dask", "scheduler"] and worker[:2] == ["dask", "worker"]
    swap = {"8786": str(free[0]), "127.0.0.1:8787": f"127.0.0.1:{free[1]}", "tcp://127.0.0.1:8786":
            f"tcp://127.0.0.1:{free[0]}"}
    argv = [[swap.get(a, a) for a in cmd[2:]] for cmd in (scheduler, worker)]
    procs = [subprocess.Popen(_dask("dask_scheduler", *argv[0]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)]
    try:
        from distributed import Client
        deadline = time.monotonic() + START_S
        while True:
            try:
                with Client(f"tcp://127.0.0.1:{free[0]}", timeout="5s"):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the documented scheduler did not start"
                time.sleep(0.5)
        procs.append(subprocess.Popen(_dask("dask_worker", *argv[1]), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        with Client(f"tcp://127.0.0.1:{free[0]}", timeout="60s") as client:
            client.wait_for_workers(1, timeout=START_S)
        listening = []
        for p in procs:
            for proc in [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)]:
                listening += [(c.laddr.ip, c.laddr.port) for c in proc.net_connections(kind="inet")
                              if c.status == psutil.CONN_LISTEN]
        ports = {port for _, port in listening}
        assert free[0] in ports and free[1] in ports            # the scheduler and its dashboard
        assert len(listening) >= 4                              # and the worker's own two
        assert non_loopback_listeners(listening) == []
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
