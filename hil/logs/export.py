"""Run logs in the formats other tools open: CSV, MDF4 (asammdf), Parquet (pyarrow).

Every exporter takes what ``hil.logs.runlog.read_run`` gives (header with its events, rows) and
keeps every sample as logged (float64; no resampling). Units and descriptions come from the
column names (``hil.logs.units``). The MCAP export with the arm's 3D scene needs the model's
kinematics and lives in ``hil.viz.mcap``.

* CSV: the rows, and the events beside them in ``<out>.events.csv``.
* MDF4: one channel group on the master channel ``t`` [s]; every column a float64 channel with
  its unit and description (the channel comment); every event an MDF4 marker event at its time
  (sync type seconds, ns resolution), named by its kind, its whole map as JSON in the comment.
  dSPACE, Vector CANape and ETAS INCA read MDF4; ``asammdf.MDF(path)`` reads it back.
* Parquet: one float64 column per log column with the unit and description in the field
  metadata; the header (without events) and the events as JSON in the schema metadata
  (``hil.header``, ``hil.events``), readable by pandas, polars and pyarrow.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from hil.logs.run_writers import open_writer
from hil.logs.units import describe

__all__ = ["export_csv", "export_mdf4", "export_parquet", "read_mdf4_events", "EXPORT_SUFFIX"]

EXPORT_SUFFIX = {"csv": ".csv", "mdf4": ".mf4", "parquet": ".parquet", "mcap": ".mcap"}
_NS = 1e-9


def export_csv(header: dict[str, Any], rows: np.ndarray, out: str | Path) -> list[Path]:
    """Rows as CSV (shortest round-trip floats); events, if any, in ``<out stem>.events.csv``."""
    writer = open_writer(out, {"columns": header["columns"]})
    for row in rows:
        writer.write(row)
    writer.close()
    written = [Path(out)]
    if header.get("events"):
        events_out = Path(out).with_suffix(".events.csv")
        with open(events_out, "w", encoding="utf-8") as f:
            f.write("t,cycle,event,fault,detail\n")
            for e in header["events"]:
                detail = str(e.get("detail", "")).replace('"', "'")
                f.write(f"{e['t']!r},{e['cycle']},{e['event']},{e.get('fault', '')},\"{detail}\"\n")
        written.append(events_out)
    return written


def _event_json(event: dict[str, Any]) -> str:
    return json.dumps(event, sort_keys=True, default=str)


def export_mdf4(header: dict[str, Any], rows: np.ndarray, out: str | Path) -> list[Path]:
    """An MDF 4.10 file: all columns on the master channel ``time`` (the log's ``t``; asammdf's name for
    the master), units and comments, marker events. asammdf writes the suffix .mf4 whatever `out`
    ends with; the path returned is the file written."""
    from asammdf import MDF, Signal
    from asammdf.blocks import v4_constants as v4c
    from asammdf.blocks.v4_blocks import EventBlock

    cols = header["columns"]
    t = rows[:, cols.index("t")]
    signals = []
    for i, name in enumerate(cols):
        if name == "t":
            continue
        unit, text = describe(name)
        signals.append(Signal(samples=np.ascontiguousarray(rows[:, i]), timestamps=t, name=name, unit=unit,
                              comment=text))
    mdf = MDF(version="4.10")
    mdf.append(signals, acq_name="hil run", comment=f"run log {header.get('config', '')}")
    for e in header.get("events", []):
        block = EventBlock(event_type=v4c.EVENT_TYPE_MARKER, sync_type=v4c.EVENT_SYNC_TYPE_S,
                           range_type=v4c.EVENT_RANGE_TYPE_POINT, cause=v4c.EVENT_CAUSE_TOOL,
                           sync_base=int(round(float(e["t"]) / _NS)), sync_factor=_NS)
        block.name = str(e["event"])
        block.comment = _event_json(e)
        mdf.events.append(block)
    written = mdf.save(out, overwrite=True)
    mdf.close()
    return [Path(written)]


def read_mdf4_events(mdf) -> list[dict[str, Any]]:
    """The run log events of an MDF4 file written by export_mdf4 (from the event comments)."""
    return [json.loads(ev.comment) for ev in mdf.events]


def export_parquet(header: dict[str, Any], rows: np.ndarray, out: str | Path) -> list[Path]:
    """A Parquet table, one float64 column per log column; units, header and events as metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields, arrays = [], []
    for i, name in enumerate(header["columns"]):
        unit, text = describe(name)
        fields.append(pa.field(name, pa.float64(), metadata={"unit": unit, "description": text}))
        arrays.append(pa.array(np.ascontiguousarray(rows[:, i])))
    kept = {k: v for k, v in header.items() if k != "events"}
    meta = {"hil.header": json.dumps(kept, default=str), "hil.events": json.dumps(header.get("events", []),
                                                                                  default=str)}
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=meta))
    pq.write_table(table, out)
    return [Path(out)]
