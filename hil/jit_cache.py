"""Where the compiled kernels are cached.

numba keys a cache entry on the source file of the function itself, so a kernel that
calls a function from another, edited file would load stale machine code. The cache
directory is therefore keyed on a hash of every kernel source: any edit starts a fresh
directory. The base directory is $NUMBA_CACHE_DIR if set, else the user cache folder
(~/.cache/ella-hil/numba): one cache whatever the entry point (`hil`, `make`, pytest).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"
LOOP_KERNELS = ((KERNEL_DIR, "cycle.step_and_sample-*.nbi"),        # what the loop's first cycle compiles
                (KERNEL_DIR, "cycle.drive_step_sense-*.nbi"), (KERNEL_DIR, "frame_codec.*.nbi"),
                (KERNEL_DIR, "drive.*.nbi"), (KERNEL_DIR, "emulator_cycle.emulator_cycle-*.nbi"))


def kernel_sources_hash() -> str:
    h = hashlib.sha256()
    for path in sorted(KERNEL_DIR.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def needs_compiling(path: Path) -> bool:
    """Whether the cache at `path` (configure()) lacks the loop's kernels for this checkout, so
    that a first run compiles them (numba keeps each source folder's entries in
    <folder>_<sha1 of its path>)."""
    for folder, pattern in LOOP_KERNELS:
        entries = path / f"{folder.name}_{hashlib.sha1(str(folder).encode()).hexdigest()}"
        if not any(entries.glob(pattern)):
            return True
    return False


def configure() -> Path:
    """Point numba's cache at <base>/kernels-<hash> (must run before hil.kernels is imported)."""
    from numba.core import config

    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ella-hil", "numba")
    path = Path(base) / f"kernels-{kernel_sources_hash()}"
    path.mkdir(parents=True, exist_ok=True)
    config.CACHE_DIR = str(path)
    return path
