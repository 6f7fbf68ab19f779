"""Presets, bus maps, fault scenarios, target files and the reference firmware's parameter files
by name: ``ella``, ``serial_frame``, ``ella_nominal``.

They ship with the package (``hil/configs``, the repository's ``configs/`` folder), so an
installed emulator finds them without a checkout: ``hil run ella --bus serial_frame``. A
name that is an existing file is that file; a bare name is looked up among the shipped files.
"""
from __future__ import annotations

from pathlib import Path

from config_schema import UserError, suggest

CONFIG_ROOT = Path(__file__).resolve().parent.parent / "configs"
FOLDERS = {"preset": "", "bus": "bus", "scenario": "scenarios", "targets": "targets", "firmware": "firmware",
           "campaign": "campaigns"}


def shipped(kind: str) -> list[str]:
    """The names of the shipped files of a kind (preset, bus, scenario, targets, firmware)."""
    return sorted(p.stem for p in (CONFIG_ROOT / FOLDERS[kind]).glob("*.toml"))


def resolve(kind: str, name: str | Path) -> str:
    """The file for `name`: itself if it exists or looks like a path, else the shipped
    ``<name>.toml`` of that kind; ValueError naming the shipped ones if there is none."""
    text = str(name)
    if Path(text).exists() or "/" in text or text.endswith(".toml"):
        return text
    candidate = CONFIG_ROOT / FOLDERS[kind] / f"{text}.toml"
    if candidate.is_file():
        return str(candidate.resolve())
    raise UserError(f"{kind} {text!r}: no such file, and no shipped {kind} of that name{suggest(text, shipped(kind))} "
                     f"(shipped: {', '.join(shipped(kind))})")
