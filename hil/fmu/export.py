"""``hil fmu export PRESET --out ARM.fmu``: an FMI 2.0 co-simulation FMU of an arm preset with its drives
and sensors (the slave: hil.fmu.slave), built with pythonfmu.

Why FMI 2.0: pythonfmu (FMI 2.0) is the maintained Python exporter that fmpy, OpenModelica, Simulink
and Silver load; its FMI 3.0 sibling pythonfmu3 is younger and fewer importers read FMI 3.0 FMUs.

What the build adds to pythonfmu's model description: the fixed communication step
(``canHandleVariableCommunicationStepSize="false"``, the preset's dt as the default experiment's
step); ``canBeInstantiatedOnlyOncePerProcess="true"``, since a second instance of a pythonfmu FMU in
one process fails to instantiate (measured here with fmpy; pythonfmu issue #228): an importer runs
one instance per process; and the ``InitialUnknowns`` the FMI 2.0 standard asks for every output
whose value the initialisation calculates (pythonfmu leaves them out, and fmpy's validation
reports it). The file is
written beside its destination and renamed over it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from xml.etree import ElementTree as ET

from config_schema import UserError
from hil.fmu.slave import PRESET_FILE

MODEL_IDENTIFIER = "HilArm"
SCRIPT = f'''"""The FMU of an arm preset: hil.fmu.slave.ArmSlave under its model identifier (hil fmu export)."""
from hil.fmu.slave import ArmSlave


class {MODEL_IDENTIFIER}(ArmSlave):
    """The arm of resources/{PRESET_FILE} with its drives and sensors."""
'''


def export(preset: str | Path, out: str | Path) -> Path:
    """Build the FMU of `preset` at `out` (module docstring); UserError in one line if pythonfmu is missing."""
    try:
        from pythonfmu import FmuBuilder
    except ImportError:
        raise UserError("hil fmu export needs pythonfmu: pip install 'ella-hil[fmu]'") from None
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="hil-fmu-") as tmp:
        folder = Path(tmp)
        script = folder / f"{MODEL_IDENTIFIER}.py"
        script.write_text(SCRIPT, encoding="utf-8")
        shutil.copy(preset, folder / PRESET_FILE)
        built = FmuBuilder.build_FMU(script, dest=folder, project_files=[folder / PRESET_FILE],
                                     canHandleVariableCommunicationStepSize=False,
                                     canBeInstantiatedOnlyOncePerProcess=True)
        _complete(Path(built), out)
    return out


def _complete(built: Path, out: Path) -> None:
    """Copy the FMU `built` to `out` with the InitialUnknowns of its outputs added to its model description."""
    with zipfile.ZipFile(built) as src:
        root = ET.fromstring(src.read("modelDescription.xml"))
        structure = root.find("ModelStructure")
        outputs = structure.find("Outputs")
        if outputs is not None and structure.find("InitialUnknowns") is None:
            unknowns = ET.SubElement(structure, "InitialUnknowns")
            for unknown in outputs:
                ET.SubElement(unknowns, "Unknown", index=unknown.get("index"))
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.")
        try:
            with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as dst:
                for item in src.infolist():
                    data = src.read(item.filename)
                    if item.filename == "modelDescription.xml":
                        data = ET.tostring(root, encoding="UTF-8", xml_declaration=True)
                    dst.writestr(item, data)
            os.replace(tmp, out)
        except BaseException:
            os.unlink(tmp)
            raise
