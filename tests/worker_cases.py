"""Stand-ins for a campaign case in the worker-pool tests (importable by the pool's spawned workers): a case
that kills its worker process, the others a row naming the process that ran them."""
from __future__ import annotations

import os


def row_or_die(case: dict, common: dict) -> dict:
    if case["index"] == common["fatal_index"]:
        os._exit(3)         # a crash of native code, as far as the pool can tell
    return {"case_id": case["case_id"], "status": "passed", "worker": os.getpid()}


def lost(case: dict, message: str) -> dict:
    return {"case_id": case["case_id"], "status": "error", "error": message}
