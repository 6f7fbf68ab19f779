"""The shipped bus maps by name: ``firmware_bridge/maps`` (the repository's ``configs/bus``), so that a
firmware's tools find ``compact_fd`` or ``serial_frame`` without a path."""
from __future__ import annotations

from pathlib import Path

from config_schema import UserError, suggest

MAPS = Path(__file__).resolve().parent.parent / "maps"


def shipped() -> list[str]:
    """The names of the shipped bus maps."""
    return sorted(p.stem for p in MAPS.glob("*.toml"))


def resolve(name: str) -> Path:
    """A map file: `name` itself if it is a path, else the shipped map of that name (UserError if none)."""
    path = Path(name)
    if path.exists() or "/" in name or path.suffix in (".toml", ".dbc"):
        return path
    candidate = MAPS / f"{name}.toml"
    if candidate.is_file():
        return candidate
    raise UserError(f"bus map {name!r}: no such file, and no shipped map of that name{suggest(name, shipped())}; "
                    f"shipped: {', '.join(shipped())}")
