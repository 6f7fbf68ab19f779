"""`hil simulate` starts with what it runs: none of the optional heavy packages (plots, bus tools,
Pinocchio) nor the emulator's real-time, device, fault, campaign or report layers; and the `hil`
process freezes its start-up out of the garbage collector, an in-process caller's collector is left alone."""
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


def _modules_after(code: str) -> set[str]:
    """sys.modules after running `code` in a fresh interpreter (in the repository root)."""
    out = subprocess.run([sys.executable, "-c", code + "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def _unneeded(loaded: set[str]) -> set[str]:
    return {name for name in loaded for heavy in NOT_FOR_SIMULATE if name == heavy or name.startswith(heavy + ".")}


def test_simulate_imports_none_of_the_heavy_modules():
    loaded = _modules_after("from hil.cli.main import main\n"
                            "assert main(['simulate', 'ella', '--duration', '0.01']) == 0")
    assert "hil.dynamics.plant" in loaded
    assert _unneeded(loaded) == set()


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
