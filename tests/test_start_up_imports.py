"""`hil simulate` starts with what it runs: none of the optional heavy packages (plots, bus tools,
Pinocchio) nor the emulator's real-time, device, fault, campaign or report layers, its kernels loaded
from the cache without numba's compiler registries, only the step kernel of the plan's method; the
imports' objects go to the garbage collector's oldest generation (a caller's frozen ones stay frozen);
and the `hil` process freezes its start-up out of the garbage collector, an in-process caller's
collector is left alone."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# what a simulation from a torque table does not need (the CLI's other commands and the optional extras)
NOT_FOR_SIMULATE = ("matplotlib", "scipy", "pinocchio", "PIL", "can", "serial", "cantools", "canopen", "asammdf",
                    "mcap", "firmware_bridge", "hil.runtime", "hil.devices", "hil.faults", "hil.campaign",
                    "hil.replay", "hil.viz", "hil.testing")
# modules that only numba's compiler registries import (numba.core.cpu.CPUContext.load_additional_registries)
NUMBA_REGISTRIES = {"numba.np.linalg", "numba.typed.dictimpl", "numba.np.polynomial.polynomial_core"}
SIMULATE_ELLA = "from hil.cli.main import main\nassert main(['simulate', 'ella', '--duration', '0.01']) == 0"


def _printed_after(code: str, expression: str):
    """The value of the JSON `expression` after running `code` in a fresh interpreter (in the repository root)."""
    out = subprocess.run([sys.executable, "-c", code + f"\nimport json, sys; print(json.dumps({expression}))"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def _modules_after(code: str) -> set[str]:
    """sys.modules after running `code` in a fresh interpreter (in the repository root)."""
    return set(_printed_after(code, "sorted(sys.modules)"))


def _second_run(code: str, expression: str):
    """_printed_after of a second run of `code`: the first compiles the kernels and plans this
    checkout's caches lack (compiling loads numba's registries, and a kernel compiles its callees)."""
    _printed_after(code, "0")
    return _printed_after(code, expression)


def _unneeded(loaded: set[str]) -> set[str]:
    return {name for name in loaded for heavy in NOT_FOR_SIMULATE if name == heavy or name.startswith(heavy + ".")}


def test_simulate_imports_none_of_the_heavy_modules():
    """None beyond what `import numba` loads itself (numba imports scipy when it is installed, for its
    LAPACK bindings: the fit extra installs it)."""
    loaded = _modules_after(SIMULATE_ELLA)
    assert "hil.dynamics.plant" in loaded
    assert _unneeded(loaded - _modules_after("import numba")) == set()


def test_simulate_loads_its_kernels_without_numbas_compiler_registries():
    loaded = set(_second_run(SIMULATE_ELLA, "sorted(sys.modules)"))
    assert "hil.kernels.fitted_midpoint" in loaded
    assert NUMBA_REGISTRIES & loaded == set()


def test_the_check_sees_the_registries_numbas_own_cache_loads():
    loaded = _modules_after("from numba.core.caching import FunctionCache\nfrom hil.kernels.outputs import evaluate\n"
                            "evaluate._cache = FunctionCache(evaluate.py_func)\n" + SIMULATE_ELLA)
    assert NUMBA_REGISTRIES <= loaded


_LOADED_STEPS = "[len(k.signatures) for k in (integrate.advance, fitted_midpoint.advance)]"
_ELLA_PLANT = ("from hil.dynamics.plant import Plant\nfrom hil.kernels import fitted_midpoint, integrate\n"
               "from hil.model.config import load_model\nfrom hil.model.presets import resolve\n"
               "plant = Plant(load_model(resolve('preset', 'ella')), {method})")


def test_a_plant_loads_only_its_methods_step_kernel():
    # ELLA's plan: the fitted midpoint, whose own kernel is loaded; the step of every method is not
    assert _second_run(_ELLA_PLANT.format(method=None), _LOADED_STEPS) == [0, 1]
    # the check sees the step of every method where a method has no kernel of its own
    assert _second_run(_ELLA_PLANT.format(method="'rk4'"), _LOADED_STEPS) == [1, 0]


def test_the_check_sees_the_heavy_modules_of_another_command():
    loaded = _modules_after("from hil.cli.main import build_parser\n"
                            "build_parser()\n"                     # every command's arguments: the report's too
                            "import hil.runtime.launch")
    assert {"hil.viz.report_model", "hil.runtime.launch", "firmware_bridge"} <= _unneeded(loaded)


def _freeze_count(call: str) -> int:
    code = (f"import gc, sys\nsys.argv = ['hil', 'log', '--help']\nfrom hil.cli.main import main\n"
            f"try:\n    {call}\nexcept SystemExit:\n    pass\nprint(gc.get_freeze_count())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return int(out.stdout.splitlines()[-1])


def test_the_hil_process_freezes_its_objects_before_exit():
    assert _freeze_count("main()") > 0                        # the process's own command line: it ends next


def test_an_in_process_caller_keeps_its_garbage_collector():
    assert _freeze_count("main(['log', '--help'])") == 0


def test_the_imports_objects_go_to_the_oldest_generation():
    young, oldest = _printed_after("import gc\nimport hil.cli.main",
                                   "[len(gc.get_objects(0)) + len(gc.get_objects(1)), len(gc.get_objects(2))]")
    assert oldest > 20_000
    assert young * 20 < oldest          # a young collection after the imports would have kept them young


def test_a_callers_frozen_objects_stay_frozen_over_the_imports():
    before, after = _printed_after("import gc\nkept = [[i] for i in range(10_000)]\ngc.freeze()\n"
                                   "before = gc.get_freeze_count()\nimport hil.cli.main",
                                   "[before, gc.get_freeze_count()]")
    assert before > 10_000
    assert after > before // 2
