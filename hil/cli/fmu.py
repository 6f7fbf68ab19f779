"""`hil fmu export PRESET --out ARM.fmu`: the arm with its drives and sensors as an FMI 2.0 co-simulation FMU."""
from __future__ import annotations

import argparse
from pathlib import Path

from hil.cli.registry import command, output_file


def _fmu_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("export",))
    p.add_argument("config", help="arm preset: a TOML file or a shipped name (ella, ...)")
    p.add_argument("--out", required=True, help="the FMU file to write (.fmu)")


@command("fmu", "FMI co-simulation: export an arm preset with its drives and sensors as an FMU (pythonfmu; "
                "fmpy, OpenModelica, Simulink and Silver run it in a Python with this package)", _fmu_arguments)
def _cmd_fmu(args: argparse.Namespace) -> int:
    from hil.fmu.export import export
    from hil.model.config import load_model
    from hil.model.presets import resolve

    out = output_file(args.out, ".fmu")
    preset = resolve("preset", args.config)
    load_model(preset)                   # a preset the reader refuses: its one line, before the build
    path = export(preset, out)
    print(f"{path}: FMI 2.0 co-simulation, the step {_step(path):g} s; inputs tau_cmd_<joint>, outputs the "
          "joints, drive torques, tip and every sensor channel (measured and _true), parameters by model path")
    return 0


def _step(path: Path) -> float:
    import zipfile
    from xml.etree import ElementTree as ET
    with zipfile.ZipFile(path) as z:
        return float(ET.fromstring(z.read("modelDescription.xml")).find("DefaultExperiment").get("stepSize"))
