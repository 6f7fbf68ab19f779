"""A campaign's results folder: one row per case, written as it finishes, never twice.

    DIR/campaign.json         the campaign's fingerprint (hil.campaign.cases.fingerprint) and file
    DIR/parts/part-*.parquet  rows in batches, each file written whole (temporary name, then renamed)
    DIR/results.parquet       every row in case order, rebuilt from the parts at the end of a run
    DIR/logs/                 the run logs kept (all, or only the failing cases')

A rerun reads the parts, skips the cases that have a row and runs the rest. A part that cannot be
read (a file cut short by a crash of the machine, or damaged) is set aside as
``*.parquet.corrupt``, said on stderr, and its cases run again. A row for a case that already has
one is refused and counted (`duplicates`), so the table holds each case exactly once; rows from a
folder of another campaign (another fingerprint) are refused as a whole.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from config_schema import UserError

FLUSH_ROWS = 20
FLUSH_S = 10.0


class ResultsError(UserError):
    """The results folder belongs to another campaign, or is not a results folder."""


class ResultStore:
    def __init__(self, out: str | Path, fingerprint: str, campaign_file: str, warn=None):
        self.out = Path(out)
        self.parts = self.out / "parts"
        self.warn = warn or (lambda text: print(f"hil campaign: {text}", file=sys.stderr))
        self.duplicates = 0
        self.corrupt: list[str] = []
        self._pending: list[dict] = []
        self._last_flush = time.monotonic()
        self._check_manifest(fingerprint, campaign_file)
        self.rows: dict[str, dict] = {}
        self._load()

    # ------------------------------------------------------------------ reading
    def _check_manifest(self, fingerprint: str, campaign_file: str) -> None:
        manifest = self.out / "campaign.json"
        if manifest.exists():
            found = json.loads(manifest.read_text(encoding="utf-8")).get("fingerprint")
            if found != fingerprint:
                raise ResultsError(f"{self.out} holds the results of another campaign (fingerprint {found}, "
                                   f"this one {fingerprint}): give a new --out, or remove the folder")
            return
        self.parts.mkdir(parents=True, exist_ok=True)
        manifest.write_text(json.dumps({"fingerprint": fingerprint, "campaign": str(campaign_file)}), encoding="utf-8")

    def _load(self) -> None:
        for part in sorted(self.parts.glob("part-*.parquet")):
            try:
                rows = pq.read_table(part).to_pylist()
            except (pa.ArrowException, OSError) as exc:
                aside = part.with_name(part.name + ".corrupt")
                os.replace(part, aside)
                self.corrupt.append(str(aside))
                self.warn(f"{part}: unreadable ({exc}); set aside as {aside.name}, its cases run again")
                continue
            for row in rows:
                self._accept(row)

    def _accept(self, row: dict) -> bool:
        if row["case_id"] in self.rows:
            self.duplicates += 1
            return False
        self.rows[row["case_id"]] = row
        return True

    def done(self, case_id: str) -> bool:
        return case_id in self.rows

    # ------------------------------------------------------------------ writing
    def add(self, row: dict) -> bool:
        """Keep the row of a finished case; False (and counted) if the case already has one."""
        if not self._accept(row):
            self.warn(f"case {row['case_id']}: a second result refused (the table keeps the first)")
            return False
        self._pending.append(row)
        if len(self._pending) >= FLUSH_ROWS or time.monotonic() - self._last_flush >= FLUSH_S:
            self.flush()
        return True

    def flush(self) -> None:
        if not self._pending:
            return
        name = f"part-{time.time_ns():020d}-{os.getpid()}"
        tmp = self.parts / f".{name}.tmp"
        pq.write_table(_table(self._pending), tmp)
        os.replace(tmp, self.parts / f"{name}.parquet")
        self._pending = []
        self._last_flush = time.monotonic()

    def write_table(self) -> Path:
        """results.parquet: every row, in case order."""
        self.flush()
        path = self.out / "results.parquet"
        tmp = self.out / ".results.parquet.tmp"
        pq.write_table(_table(sorted(self.rows.values(), key=lambda r: r["index"])), tmp)
        os.replace(tmp, path)
        return path


def _table(rows: list[dict]) -> pa.Table:
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    return pa.Table.from_pylist([{c: row.get(c) for c in columns} for row in rows])


def read_results(out: str | Path) -> list[dict]:
    """The rows of results.parquet, in case order."""
    return pq.read_table(Path(out) / "results.parquet").to_pylist()
