"""`hil log`: run logs exported to other formats."""
from __future__ import annotations

import argparse
import os

from hil.cli.registry import command


def _log_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("export",))
    p.add_argument("path", help="run log (.msgpack)")
    p.add_argument("--csv", metavar="OUT", nargs="?", const="", help="write CSV (default: the log name with .csv)")


@command("log", "run logs: export a msgpack log as CSV", _log_arguments)
def _cmd_log(args: argparse.Namespace) -> int:
    from hil.logs.runlog import open_writer, read_run
    header, rows = read_run(args.path)
    out = args.csv or os.path.splitext(args.path)[0] + ".csv"
    writer = open_writer(out, {"columns": header["columns"]})
    for row in rows:
        writer.write(row)
    writer.close()
    if header.get("events"):
        events_out = os.path.splitext(out)[0] + ".events.csv"
        with open(events_out, "w", encoding="utf-8") as f:
            f.write("t,cycle,event,fault,detail\n")
            for e in header["events"]:
                detail = str(e.get("detail", "")).replace('"', "'")
                f.write(f"{e['t']!r},{e['cycle']},{e['event']},{e.get('fault', '')},\"{detail}\"\n")
        print(f"{len(header['events'])} events -> {events_out}")
    print(f"{len(rows)} rows -> {out}" + (f" ({header['trailing_bytes']} trailing bytes of a cut record ignored)"
                                          if header.get("trailing_bytes") else ""))
    return 0
