"""The kernel cache's first-run check (hil.jit_cache.needs_compiling): each loop kernel it looks for
names a module that holds compiled kernels, so the check can say "compiled" once they are cached
(a pattern naming a module that has none, such as the drive bank's before its kernels moved to
hil/kernels/drive.py, made every run announce a compile)."""
from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from hil import jit_cache


def kernel_modules(patterns) -> list[str]:
    """The pattern of each (folder, pattern) whose module holds no @kernel function."""
    missing = []
    for folder, pattern in patterns:
        module = folder / (pattern.split(".")[0] + ".py")
        source = module.read_text(encoding="utf-8") if module.exists() else ""
        kernels = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)
                   and any(getattr(d, "id", getattr(getattr(d, "func", None), "id", None)) == "kernel"
                           for d in node.decorator_list)]
        if not kernels:
            missing.append(f"{folder.name}/{pattern}")
    return missing


def test_every_loop_kernel_pattern_names_a_module_of_kernels():
    assert kernel_modules(jit_cache.LOOP_KERNELS) == []


def test_a_pattern_of_a_module_without_kernels_is_found():
    devices = Path(jit_cache.__file__).resolve().parent / "devices"
    assert kernel_modules([(devices, "drives.*.nbi")]) == ["devices/drives.*.nbi"]


def test_the_cache_needs_compiling_until_every_loop_kernel_has_an_entry(tmp_path):
    assert jit_cache.needs_compiling(tmp_path)
    for folder, pattern in jit_cache.LOOP_KERNELS:
        entries = tmp_path / f"{folder.name}_{hashlib.sha1(str(folder).encode()).hexdigest()}"
        entries.mkdir(exist_ok=True)
        (entries / pattern.replace("*", "f-1.py311")).write_bytes(b"")
    assert not jit_cache.needs_compiling(tmp_path)
