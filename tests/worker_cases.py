"""Stand-ins for a campaign case in the worker-pool tests (importable by the pool's spawned workers): a case
that kills its worker process, the others a row naming the process that ran them; a case that stops on SIGTERM as
the loop does, and a campaign process of them."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from hil.campaign.worker import WorkerPool


def row_or_die(case: dict, common: dict) -> dict:
    if case["index"] == common["fatal_index"]:
        os._exit(3)         # a crash of native code, as far as the pool can tell
    return {"case_id": case["case_id"], "status": "passed", "worker": os.getpid()}


def lost(case: dict, message: str) -> dict:
    return {"case_id": case["case_id"], "status": "error", "error": message}


def stopped_by_sigterm(case: dict, common: dict) -> dict:
    """A case that stops gracefully on SIGTERM, as the real-time loop does (its handler), then gives its row."""
    stop = []
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    Path(common["started"]).write_text(str(os.getpid()))
    deadline = time.monotonic() + 60.0
    while not stop and time.monotonic() < deadline:
        time.sleep(0.01)
    signal.signal(signal.SIGTERM, previous)
    return {"case_id": case["case_id"], "status": "halted" if stop else "passed", "worker": os.getpid()}


def campaign_of_sigterm_cases(started: str) -> None:
    """A campaign process: a pool of one worker running SIGTERM-stopped cases, one after another."""
    pool = WorkerPool(1)
    cases = [{"case_id": f"c{i}", "index": i} for i in range(3)]
    for _ in pool.rows(cases, {"started": started}, stopped_by_sigterm, lost):
        pass


def cyclic_garbage(case: dict, common: dict) -> dict:
    """A case that leaves 20 MB in a reference cycle behind, as an emulator's object graph does; its row
    gives the worker's resident memory [MB] as the case ends."""
    from hil.campaign.runner import resident_mb
    import numpy as np

    held = {"samples": np.ones(common["megabytes"] * 131072)}
    held["self"] = held
    return {"case_id": case["case_id"], "status": "passed", "worker_rss_mb": resident_mb()}
