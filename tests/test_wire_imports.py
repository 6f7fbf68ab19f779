"""The wire package stands alone: a firmware author who imports the codecs does not load the plant
(hil), the JIT compiler (numba) or, for the bus maps and codecs, numpy."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# every module of firmware_bridge but the reference firmware
WIRE = sorted(".".join(p.relative_to(ROOT).with_suffix("").parts) for p in (ROOT / "firmware_bridge").glob("*/*.py")
              if p.stem != "__init__" and p.parent.name != "reference")


def _loaded_after(module: str) -> set[str]:
    """The top-level packages in sys.modules after importing `module` in a fresh interpreter."""
    code = (f"import importlib, json, sys; importlib.import_module({module!r}); "
            "print(json.dumps(sorted({name.partition('.')[0] for name in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return set(json.loads(out.stdout))


@pytest.mark.parametrize("module", WIRE)
def test_a_wire_module_loads_neither_the_plant_nor_numba(module):
    loaded = _loaded_after(module)
    assert "hil" not in loaded and "numba" not in loaded, module


@pytest.mark.parametrize("module", ["firmware_bridge.wire.messages", "firmware_bridge.wire.codec",
                                    "firmware_bridge.wire.bus_schema", "config_schema"])
def test_bus_maps_and_codecs_load_without_numpy(module):
    assert "numpy" not in _loaded_after(module)


def test_the_check_sees_a_module_that_loads_the_plant():
    assert {"hil", "numba", "numpy"} <= _loaded_after("hil.dynamics.plant")
