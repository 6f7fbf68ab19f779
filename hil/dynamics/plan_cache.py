"""The integrator plans already made, on disk beside the compiled kernels.

A plan costs every start (ELLA: the arm's frequencies by central differences, the linearised map of
every candidate, the fitted blocks and the oracle kernels they load, the probe motion and its converged
solution: about 1 s of CPU; with an energy tolerance, measured runs of 10 s, about 2 s more). It depends
only on the kernel arrays (mi, mf), the initial state, the integrator settings, the drives' specs (the
probe's rate and torque limits), the requested method and substeps and the code that plans, so it is
kept under that key in <numba cache>/plans (the numba cache folder is itself keyed on the kernel sources:
hil.jit_cache). A later start with the same key takes the plan as it was made. A plan that warned warns
again when taken from here. The folder keeps at most MAX_ENTRIES files (a campaign of new payloads
adds a few per case): every PRUNE_EVERY writes of a process, the oldest written beyond it go.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import os
import threading
from pathlib import Path
from typing import Callable

import numpy as np
from numba.core import config as numba_config

from hil.model.assembly import Assembled

# the code whose results are kept (plant.py: the apparent inertias); the kernels key the folder itself
PLANNING_SOURCES = ("integrator_plan.py", "energy_error.py", "motion_error.py", "trial_run.py", "plan_cache.py",
                    "plant.py", "../model/linearize.py", "../model/midpoint_fit.py")


@functools.lru_cache(maxsize=1)
def _planning_code_hash() -> bytes:
    """The planning code's hash, read once: the code this process runs is the code it imported."""
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in PLANNING_SOURCES:
        h.update((here / name).read_bytes())
    return h.digest()


def key(asm: Assembled, *request) -> str:
    """The key of what is planned for `asm` given `request` (JSON-able values)."""
    km = asm.km
    h = hashlib.sha256(_planning_code_hash())
    for a in (km.mi, km.mf, asm.pos0, asm.vel0):
        h.update(a.tobytes())
    settings = dataclasses.asdict(asm.model.integrator)
    drives = [dataclasses.asdict(b.joint.motor) if b.joint.motor else None for b in asm.model.bodies]
    h.update(json.dumps([settings, drives, *request], sort_keys=True).encode())
    return h.hexdigest()[:32]


def _path(cache_key: str, suffix: str = ".json") -> Path:
    return Path(numba_config.CACHE_DIR) / "plans" / f"{cache_key}{suffix}"


def remembered(asm: Assembled, what: str, compute: Callable[[], np.ndarray], *request) -> np.ndarray:
    """An array computed from `asm` alone (the fitted midpoint blocks, the joints' apparent inertias):
    stored under key(asm, what, *request) the first time, read from there later."""
    path = _path(key(asm, what, *request), ".npy")
    try:
        return np.load(path)
    except (OSError, ValueError):
        pass
    value = compute()
    _write(path, lambda f: np.save(f, value))
    return value


def load(cache_key: str) -> dict | None:
    """The stored plan's fields, or None (none stored, or unreadable: planned again)."""
    try:
        return json.loads(_path(cache_key).read_text())
    except (OSError, ValueError):
        return None


def store(cache_key: str, fields: dict) -> None:
    """Keep a plan's fields (written whole or not at all; a read-only cache folder keeps nothing)."""
    _write(_path(cache_key), lambda f: f.write(json.dumps(fields).encode()))


MAX_ENTRIES = 4096
PRUNE_EVERY = 64
_written = itertools.count()


def _write(path: Path, write: Callable) -> None:
    """write(binary file) into a temporary file beside path, then rename it (readers see all or nothing)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.parent / f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as f:
            write(f)
        os.replace(tmp, path)
        if next(_written) % PRUNE_EVERY == 0:
            _prune(path.parent)
    except OSError:
        pass


def _prune(folder: Path) -> None:
    """The oldest written entries beyond MAX_ENTRIES removed (another process may remove them first)."""
    entries = []
    for entry in os.scandir(folder):
        try:
            entries.append((entry.stat().st_mtime_ns, entry.path))
        except OSError:
            continue
    entries.sort()
    for _, path in entries[:max(len(entries) - MAX_ENTRIES, 0)]:
        try:
            os.unlink(path)
        except OSError:
            pass
