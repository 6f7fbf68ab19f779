"""Where the compiled kernels are cached.

numba keys a cache entry on the source file of the function itself, so a kernel that
calls a function from another, edited file would load stale machine code. The cache
directory is therefore keyed on a hash of every kernel source: any edit starts a fresh
directory. The base directory is $NUMBA_CACHE_DIR if set, else the user cache folder.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"


def kernel_sources_hash() -> str:
    h = hashlib.sha256()
    for path in sorted(KERNEL_DIR.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def configure() -> Path:
    """Point numba's cache at <base>/kernels-<hash> (must run before hil.kernels is imported)."""
    from numba.core import config

    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ella-hil", "numba")
    path = Path(base) / f"kernels-{kernel_sources_hash()}"
    path.mkdir(parents=True, exist_ok=True)
    config.CACHE_DIR = str(path)
    return path
