"""The package layers: no import runs from a lower layer to a higher one, and no import cycle.

Every import statement of every module counts (also those inside functions): an import made
late to dodge a cycle is still a dependency.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("config_schema", "firmware_bridge", "hil")

# lowest first; a module may import from its own layer or any lower one. An entry names a package
# (with everything inside it) or, for the modules at the root of hil, one module.
ROOT_MODULES = {"hil", "hil.jit_cache", "hil.__main__"}
LAYERS = (
    ("config_schema",),
    ("firmware_bridge",),
    ("hil", "hil.jit_cache"),
    ("hil.kernels", "hil.logs"),
    ("hil.model",),
    ("hil.dynamics",),
    ("hil.devices",),
    ("hil.faults",),
    ("hil.viz", "hil.replay"),
    ("hil.runtime",),
    ("hil.testing",),
    ("hil.campaign",),
    ("hil.fit", "hil.fmu"),
    ("hil.cli", "hil.__main__"),
)


def layer_of(module: str) -> int:
    """The layer of a project module: the longest layer prefix that names it."""
    best, rank = -1, -1
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            inside = module == p or (p not in ROOT_MODULES and module.startswith(p + "."))
            if inside and len(p) > best:
                best, rank = len(p), i
    if rank < 0:
        raise AssertionError(f"module {module} is in no layer; add its package to LAYERS")
    return rank


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_imports(path: Path) -> set[str]:
    """The project modules a file imports (absolute and relative, at any depth)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        out.update(n for n in names if n.split(".")[0] in PACKAGES)
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (names that are attributes, not modules, dropped)."""
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    modules = {module_name(p): p for p in files}
    graph = {}
    for name, path in modules.items():
        graph[name] = {m for m in project_imports(path) if m in modules and m != name}
    return graph


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a lower layer to a higher one."""
    return sorted(f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
                  for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    assert violations(import_graph()) == []


def test_the_import_graph_has_no_cycle():
    assert cycles(import_graph()) == []


def test_every_project_module_is_in_a_layer():
    for module in import_graph():
        layer_of(module)


def test_the_checks_flag_an_upward_import_and_a_cycle():
    graph = {"hil.model.config": {"hil.runtime.loop"}, "hil.runtime.loop": {"hil.model.config"},
             "firmware_bridge.wire.messages": {"hil.model.config"}}
    assert violations(graph) == [
        "firmware_bridge.wire.messages (layer 1) imports hil.model.config (layer 4)",
        "hil.model.config (layer 4) imports hil.runtime.loop (layer 9)"]
    assert cycles(graph) == [["hil.model.config", "hil.runtime.loop"]]
    with pytest.raises(AssertionError, match="in no layer"):
        layer_of("hil.gadgets")


def flat_modules(package: Path) -> list[str]:
    """The modules at the root of `package` besides its __init__.py: firmware_bridge keeps its modules
    in subpackages named after their jobs (links, wire, canopen, formats, reference)."""
    return sorted(p.name for p in package.glob("*.py") if p.name != "__init__.py")


def test_firmware_bridge_has_no_flat_modules():
    assert flat_modules(ROOT / "firmware_bridge") == []


def test_the_check_flags_a_flat_module(tmp_path):
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "base.py").write_text("")
    assert flat_modules(tmp_path) == []
    (tmp_path / "messages.py").write_text("")
    assert flat_modules(tmp_path) == ["messages.py"]


MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
# the kernels' algorithm passes, each one pass of its paper's equations read top to bottom (the module
# docstrings give the equations): split, they would only pass their many local sums to each other
ALGORITHM_PASSES = {("hil/kernels/aba.py", "eliminate_modes"), ("hil/kernels/bodies.py", "joint_kinematics"),
                    ("hil/kernels/bodies.py", "body_inertia"), ("hil/kernels/screw_dae.py", "link_terms")}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_is_over_500_lines(package):
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / package).rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """Name -> length in lines of every function (and method) of `source` longer than `limit`."""
    return {node.name: node.end_lineno - node.lineno + 1 for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit}


def test_no_function_is_over_80_lines_but_the_kernels_algorithm_passes():
    long = {(str(p.relative_to(ROOT)), name): n for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
            for name, n in long_functions(p.read_text(encoding="utf-8")).items()}
    assert set(long) == ALGORITHM_PASSES, long


def test_the_function_check_counts_a_long_function():
    def body(n: int, indent: str) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(n))
    assert long_functions("def short():\n" + body(79, "    ")) == {}            # 80 lines with its def
    assert long_functions("class C:\n    def long(self):\n" + body(80, "        ")) == {"long": 81}


MAX_KERNEL_PARAMETERS = 12


def wide_kernels(source: str, limit: int = MAX_KERNEL_PARAMETERS) -> dict[str, int]:
    """Name -> parameter count of every compiled function (decorated @kernel, or numba's @njit/@jit) of
    `source` with more than `limit` parameters."""
    compiled = {"kernel", "njit", "jit"}

    def decorator_name(d) -> str | None:
        d = d.func if isinstance(d, ast.Call) else d
        return d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", None)
    return {node.name: len(node.args.args) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef) and len(node.args.args) > limit
            and any(decorator_name(d) in compiled for d in node.decorator_list)}


def test_no_compiled_function_takes_more_than_12_parameters():
    wide = {(str(p.relative_to(ROOT)), name): n for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
            for name, n in wide_kernels(p.read_text(encoding="utf-8")).items()}
    assert wide == {}


def test_the_parameter_check_counts_a_wide_kernel():
    params = ", ".join(f"a{i}" for i in range(13))
    assert wide_kernels(f"@kernel\ndef wide({params}):\n    pass\n") == {"wide": 13}
    assert wide_kernels(f"@numba.njit(cache=True)\ndef wide({params}):\n    pass\n") == {"wide": 13}
    assert wide_kernels(f"def python({params}):\n    pass\n") == {}
    assert wide_kernels("@kernel\ndef narrow(a, b):\n    pass\n") == {}


# ----------------------------------------------------------------------------- private state
# private attributes of objects that are not ours, reached on purpose (each with its reason)
FOREIGN_PRIVATE = {
    ("hil/kernels/jit.py", "_cache"): "numba's cache of a compiled function (hil.kernels.jit's docstring)",
    ("hil/runtime/sysguard.py", "_exit"): "os._exit: the guardian leaves without running the parent's cleanup",
}


def private_reaches(source: str) -> list[tuple[int, str]]:
    """(line, name) of every reach into another module's private state: ``x._name`` on anything but
    self or cls, where this module sets no ``self._name`` of its own (its classes' private attributes
    are its own business), and ``from m import _name``."""
    tree = ast.parse(source)
    own = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
           and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")}
    reaches = [(node.lineno, node.attr) for node in ast.walk(tree)
               if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
               and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")) and node.attr not in own]
    imported = [(node.lineno, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    return sorted(reaches + imported)


def test_no_module_reaches_into_another_modules_private_state():
    found = {(str(p.relative_to(ROOT)), attr): line for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
             for line, attr in private_reaches(p.read_text(encoding="utf-8"))}
    assert set(found) == set(FOREIGN_PRIVATE), {k: v for k, v in found.items() if k not in FOREIGN_PRIVATE}


def test_the_scan_flags_a_planted_reach_into_private_state():
    planted = ("class Loop:\n    def __init__(self):\n        self._cycle = 0\n\n"
               "def drive(emu, link):\n    emu._rejected_now = True\n    link._slave_fd = 3\n    return emu._cycle\n")
    assert private_reaches(planted) == [(6, "_rejected_now"), (7, "_slave_fd")]
    assert private_reaches("from .integrate import STAGES, _stage_state\n") == [(1, "_stage_state")]
    assert private_reaches("def f(self):\n    self._x = 1\n    return self._x\n") == []
