"""Build ``ella-wire``, the firmware's library as a wheel of its own: the firmware's end of every bus
map (firmware_bridge.firmware), the codecs, framing and links (firmware_bridge.wire, .links),
CANopen's master, the DBC and C exports, ``python -m firmware_bridge.describe`` and the shipped
maps, with the TOML reader they use (config_schema). Nothing in it needs numpy or numba; pyserial
(extra ``serial``), python-can (``can``) and cantools (``dbc``) only where a link or format needs them.

The emulator's ends of the wire (the plant-side signal endpoints, the emulated CANopen nodes and
their EDS files, bus faults) and the reference firmware (numpy) stay in ella-hil, which contains
the whole of firmware_bridge: install one or the other in an environment, not both.

    python -m tools.wire_wheel --out dist/
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("firmware_bridge", "config_schema")
EMULATOR_SIDE = ("firmware_bridge/reference", "firmware_bridge/xcp", "firmware_bridge/wire/signals.py",
                 "firmware_bridge/canopen/network.py",
                 "firmware_bridge/formats/eds.py", "firmware_bridge/links/faults.py")
EXTRAS = {"serial": ["pyserial>=3.5"], "can": ["python-can>=4.3"], "dbc": ["cantools>=39"]}


def sources() -> list[Path]:
    """The files of the distribution, relative to the repository (the shipped maps through their link)."""
    out = []
    for package in PACKAGES:
        for folder, dirs, files in os.walk(ROOT / package, followlinks=True):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                rel = (Path(folder) / name).relative_to(ROOT)
                if rel.suffix in (".py", ".toml") and not any(
                        rel.as_posix() == e or rel.as_posix().startswith(e + "/") for e in EMULATOR_SIDE):
                    out.append(rel)
    return out


def modules() -> list[str]:
    """The importable modules of the distribution (``python -m`` entry files excluded)."""
    return [".".join(p.with_suffix("").parts[:-1] if p.stem == "__init__" else p.with_suffix("").parts)
            for p in sources() if p.suffix == ".py" and p.stem != "__main__"]


def project_toml() -> str:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    packages = sorted({".".join(p.parts[:-1]) for p in sources() if p.name == "__init__.py"})
    extras = "\n".join(f'{k} = [{", ".join(repr(v) for v in vs)}]' for k, vs in EXTRAS.items())
    return f'''[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "ella-wire"
version = "{version}"
description = "The firmware's library of the ELLA HIL emulator: bus-map codecs with CRCs and rolling counters, framing, links, CANopen master (plain Python)"
readme = "README.md"
requires-python = ">=3.11"
license = "MIT"
dependencies = []

[project.optional-dependencies]
{extras}

[project.entry-points."can.interface"]
udp_loopback = "firmware_bridge.links.udp_loopback:UdpLoopbackBus"

[tool.setuptools]
packages = [{", ".join(repr(p) for p in packages)}]

[tool.setuptools.package-data]
firmware_bridge = ["maps/*.toml"]
'''


README = """# ella-wire

The firmware's library of the ELLA hardware-in-the-loop emulator (ella-hil), in plain Python:
`firmware_bridge.firmware.FirmwareWire(MAP)` decodes the emulator's sensor frames and encodes the
torque commands of any shipped bus map, CRCs and rolling counters done; `firmware_bridge.firmware.serve`
runs a control law on a link; `python -m firmware_bridge.describe MAP` prints a map's wire format.
"""


def stage(into: Path) -> None:
    """The distribution's source tree in `into`."""
    for rel in sources():
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, target)
    (into / "pyproject.toml").write_text(project_toml())
    (into / "README.md").write_text(README)


def build(out: Path) -> Path:
    """Build the wheel into `out`; its path."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ella-wire-") as tmp:
        stage(Path(tmp))
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), tmp],
                              capture_output=True, text=True)
        if proc.returncode:
            raise SystemExit(f"tools.wire_wheel: pip wheel failed:\n{proc.stdout}{proc.stderr}")
    wheel, = sorted(out.glob("ella_wire-*.whl"), key=lambda p: p.stat().st_mtime)[-1:]
    return wheel


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="build the ella-wire wheel (the firmware's library)")
    p.add_argument("--out", type=Path, default=ROOT / "dist", help="directory for the wheel (default dist/)")
    print(build(p.parse_args(argv).out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
