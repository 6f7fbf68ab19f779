"""`hil log`: run logs exported to the formats other tools open (CSV, MDF4, MCAP, Parquet)."""
from __future__ import annotations

import argparse
import os
import time

from hil.cli.registry import CliError, command, positive_float

FORMATS = ("csv", "mdf4", "mcap", "parquet")
EXTRA = "pip install 'ella-hil[viz]'"


def _log_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("export",))
    p.add_argument("path", help="run log (.msgpack)")
    p.add_argument("--format", choices=FORMATS, default="csv",
                   help="csv (rows, events beside them), mdf4 (asammdf: CANape, INCA, dSPACE), mcap (Foxglove: "
                        "signals, the arm's 3D scene, events), parquet (pyarrow: pandas, polars)")
    p.add_argument("--out", help="output file (default: the log name with the format's suffix)")
    p.add_argument("--csv", metavar="OUT", nargs="?", const="", help="the same as --format csv [--out OUT]")
    p.add_argument("--scene-rate", type=positive_float, default=50.0, help="mcap: 3D scene messages per second of run")


@command("log", "run logs: export a msgpack log as CSV, MDF4, MCAP or Parquet", _log_arguments)
def _cmd_log(args: argparse.Namespace) -> int:
    from hil.logs.export import EXPORT_SUFFIX
    from hil.logs.runlog import integrity_text, read_run

    fmt = "csv" if args.csv is not None else args.format
    out = args.out or args.csv or os.path.splitext(args.path)[0] + EXPORT_SUFFIX[fmt]
    header, rows = read_run(args.path)
    t0 = time.perf_counter()
    try:
        written = _exporter(fmt, args.scene_rate)(header, rows, out)
    except ImportError as exc:
        raise CliError(f"--format {fmt} needs {exc.name}: {EXTRA}") from None
    wall = time.perf_counter() - t0
    missing = integrity_text(header)
    print(f"{len(rows)} rows, {len(header.get('events', []))} events -> {', '.join(map(str, written))} "
          f"({wall:.2f} s)" + (f"; the log lacks: {missing}" if missing else ""))
    return 0


def _exporter(fmt: str, scene_rate_hz: float):
    from hil.logs import export
    if fmt == "mcap":
        from hil.viz.mcap import export_mcap
        return lambda header, rows, out: export_mcap(header, rows, out, scene_rate_hz)
    return {"csv": export.export_csv, "mdf4": export.export_mdf4, "parquet": export.export_parquet}[fmt]
