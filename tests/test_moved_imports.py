"""The old flat module paths of firmware_bridge still import for one release: each gives the module at
its new path (the same object) with a DeprecationWarning naming that path; a name that never
existed is still not found. Each case runs in a fresh interpreter, where nothing is imported yet."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from firmware_bridge import MOVED

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str) -> dict:
    """What `code` (which binds `result`) leaves in `result`, run in a fresh interpreter in the tree."""
    program = ("import json, warnings\nwarnings.simplefilter('always')\n" + code
               + "\nprint(json.dumps(result))")
    out = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


OLD_IMPORT = """
import importlib
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    old = importlib.import_module({old!r})
new = importlib.import_module({new!r})
result = {{"same": old is new, "name": old.__name__, "spec": old.__spec__.name,
          "warnings": [(w.category.__name__, str(w.message)) for w in caught]}}
"""


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_gives_the_module_at_its_new_path_and_warns(old):
    new = f"firmware_bridge.{MOVED[old]}"
    result = _run(OLD_IMPORT.format(old=f"firmware_bridge.{old}", new=new))
    assert result["same"] and result["name"] == new and result["spec"] == new
    assert ["DeprecationWarning", f"firmware_bridge.{old} moved to {new}"] in result["warnings"]


def test_the_old_import_statements_work(monkeypatch):
    import firmware_bridge
    for old in ("messages", "link_faults"):                    # as if not imported yet in this process
        monkeypatch.delitem(sys.modules, f"firmware_bridge.{old}", raising=False)
        monkeypatch.delattr(firmware_bridge, old, raising=False)
    with pytest.warns(DeprecationWarning, match=r"firmware_bridge\.messages moved to firmware_bridge\.wire\.messages"):
        import firmware_bridge.messages as m
    import firmware_bridge.wire.messages as w
    assert m is w
    with pytest.warns(DeprecationWarning,
                      match=r"firmware_bridge\.link_faults moved to firmware_bridge\.links\.faults"):
        from firmware_bridge import link_faults
    from firmware_bridge.links import faults
    assert link_faults is faults


def test_the_names_of_the_old_canopen_module_come_from_canopen_network():
    from firmware_bridge.canopen import network
    with pytest.warns(DeprecationWarning, match=r"firmware_bridge\.canopen\.DriveNodes moved to "
                                                r"firmware_bridge\.canopen\.network\.DriveNodes"):
        from firmware_bridge.canopen import DriveNodes
    assert DriveNodes is network.DriveNodes
    from firmware_bridge.canopen import od                      # a submodule, not a moved name
    assert od.__name__ == "firmware_bridge.canopen.od"
    with pytest.raises(AttributeError):
        import firmware_bridge.canopen as package
        package.no_such_name


@pytest.mark.parametrize("name", ["firmware_bridge.no_such_module", "firmware_bridge.wire.messages_v2",
                                  "firmware_bridge.links.link"])
def test_a_name_that_never_existed_is_not_found(name):
    result = _run(f"import importlib\ntry:\n    importlib.import_module({name!r})\n    result = 'imported'\n"
                  "except ModuleNotFoundError as error:\n    result = error.name\n")
    assert result == name


def test_python_dash_m_on_an_old_path_runs_the_new_module():
    out = subprocess.run([sys.executable, "-W", "always::DeprecationWarning", "-m", "firmware_bridge.messages",
                          "configs/bus/serial_frame.toml"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("configs/bus/serial_frame.toml: serial")
    assert "firmware_bridge.messages moved to firmware_bridge.wire.messages" in out.stderr
