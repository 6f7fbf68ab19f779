"""`hil bus`: bus maps exported to the standard files other tools read.

    hil bus export MAP --dbc OUT.dbc    a CAN map as a DBC, and its sidecar OUT.dbc.toml (firmware_bridge.formats.dbc)
    hil bus export MAP --c DIR          C pack/unpack, CRCs, counters (and serial packets) for firmware
    hil bus export MAP --eds DIR        one CiA 306 EDS per emulated node of a CANopen map

MAP is a bus-map file (TOML, or a DBC with its sidecar) or the name of a shipped one (``canopen_cst``
for configs/bus/canopen_cst.toml).
Each output format is an :class:`Exporter` in EXPORTERS (its option ``--<name>``); several may be
given in one call.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from hil.cli.registry import CliError, command

SHIPPED_MAPS = Path(__file__).resolve().parents[2] / "configs" / "bus"


@dataclass(frozen=True)
class Exporter:
    name: str                                   # the option: --<name> OUT
    metavar: str
    help: str
    write: Callable[[object, Path], list[Path]]  # write(bus_map, out) -> the files written


def _eds(bus, out: Path) -> list[Path]:
    from firmware_bridge.formats.eds import export_eds
    return export_eds(bus, out)       # a map that is not CANopen: a ValueError naming it


def _dbc(bus, out: Path) -> list[Path]:
    from firmware_bridge.formats.dbc import export_dbc
    return export_dbc(bus.spec(), out, bus.source)     # a serial map: a ConfigError saying why not


def _c(bus, out: Path) -> list[Path]:
    from firmware_bridge.formats.c_export import export_c
    return export_c(bus.spec(), c_name(bus.source), out, bus.source)


def c_name(source: str) -> str:
    """The C prefix of a map: its file name without .toml / .dbc, as an identifier (compact_fd)."""
    stem = Path(source).name.removesuffix(".toml").removesuffix(".dbc").replace(".", "_")
    name = re.sub(r"\W", "_", stem)
    return name if re.match(r"[A-Za-z_]", name) else f"map_{name}"


EXPORTERS = {e.name: e for e in (
    Exporter("dbc", "OUT.dbc", "CAN map: a DBC file and its sidecar OUT.dbc.toml (counters, CRCs, cycle)", _dbc),
    Exporter("c", "DIR", "C header and source for firmware: <map>.h/.c (pack/unpack, cantools) and "
                         "<map>_protocol.h/.c (CRCs, counters, serial packets)", _c),
    Exporter("eds", "DIR", "CANopen map: one EDS (CiA 306) per emulated node, <map>_node<id>_<label>.eds in DIR",
             _eds),
)}


def resolve_map(text: str) -> Path:
    """A bus-map file, or the name of a shipped map (configs/bus/<name>.toml)."""
    path = Path(text)
    if path.is_file():
        return path
    shipped = SHIPPED_MAPS / f"{path.name.removesuffix('.toml')}.toml"
    if not path.suffix and shipped.is_file():
        return shipped
    names = ", ".join(sorted(p.stem for p in SHIPPED_MAPS.glob("*.toml")))
    raise CliError(f"bus map {text!r}: no such file, and not a shipped map ({names})")


def load_bus(path: str | Path):
    """BusMap.load, with a missing cantools (a DBC map) as a one-line CliError."""
    from firmware_bridge.wire.messages import BusMap
    try:
        return BusMap.load(path)
    except ImportError as exc:
        raise CliError(f"bus map {path}: {exc}") from None


def _bus_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("export",))
    p.add_argument("map", help="bus map: a TOML file, a DBC with its sidecar, or a shipped map's name "
                               "(configs/bus/<name>.toml)")
    for e in EXPORTERS.values():
        p.add_argument(f"--{e.name}", metavar=e.metavar, type=Path, help=e.help)


@command("bus", "bus maps: export standard interface files (--dbc, --c, --eds)", _bus_arguments)
def _cmd_bus(args: argparse.Namespace) -> int:
    chosen = [(e, getattr(args, e.name)) for e in EXPORTERS.values() if getattr(args, e.name) is not None]
    if not chosen:
        raise CliError("nothing to export: give " + " and/or ".join(f"--{e.name} {e.metavar}" for e in EXPORTERS.values()))
    bus = load_bus(resolve_map(args.map))
    for exporter, out in chosen:
        try:
            written = exporter.write(bus, out)
        except ImportError as exc:
            raise CliError(f"--{exporter.name}: {exc}") from None
        for path in written:
            print(path)
    return 0
