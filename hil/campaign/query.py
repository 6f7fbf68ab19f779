"""SQL over a campaign's results (``hil campaign query DIR "SQL"``): DuckDB reading the Parquet parts.

The table is ``results``: the rows of every part (``DIR/parts/part-*.parquet``, one file per batch,
each case once), their schemas unified (a column one batch lacks reads NULL there); a folder with
only ``results.parquet`` is read from that. DuckDB scans the files through Arrow in batches, so a
question such as "worst settling time per payload bin" needs the columns it names, not the table in
memory; ``memory_limit`` bounds what DuckDB may hold.

The SQL is the user's, so the connection may not touch anything else: the files are registered
first, then DuckDB's file system access is switched off and the configuration locked (a query that
reads or writes a file, or sets an option, is refused with DuckDB's message). At most ``max_rows``
rows come back; the rest are counted, up to a million.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from config_schema import UserError

MAX_ROWS = 1000
MEMORY_LIMIT = "1GB"
SQL_LIMIT = 100_000             # characters of SQL
COUNT_LIMIT = 1_000_000         # rows beyond max_rows counted at most (then "at least")


@dataclass
class Answer:
    columns: list[str]
    rows: list[tuple]
    more: int                   # rows beyond max_rows, not returned (counted up to COUNT_LIMIT)


def result_files(out: str | Path) -> list[Path]:
    """The Parquet files holding a results folder's rows (module docstring)."""
    out = Path(out)
    parts = sorted((out / "parts").glob("part-*.parquet"))
    if parts:
        return parts
    if (out / "results.parquet").is_file():
        return [out / "results.parquet"]
    raise UserError(f"{out}: no campaign results (parts/part-*.parquet or results.parquet); run the campaign first")


def query(out: str | Path, sql: str, max_rows: int = MAX_ROWS, memory_limit: str = MEMORY_LIMIT) -> Answer:
    """Run ``sql`` over the results of folder ``out`` (module docstring)."""
    try:
        import duckdb
        import pyarrow as pa
        import pyarrow.dataset as ds
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise UserError(f"hil campaign query needs {exc.name}: pip install 'ella-hil[campaign]'") from None
    if not sql.strip() or len(sql) > SQL_LIMIT:
        raise UserError(f"the SQL: expected a query of 1 to {SQL_LIMIT} characters")
    files = result_files(out)
    try:
        schema = pa.unify_schemas([pq.read_schema(f) for f in files], promote_options="permissive")
    except (pa.ArrowException, OSError) as exc:
        raise UserError(f"{out}: the results' parts cannot be read together: {exc}") from None
    con = duckdb.connect(config={"memory_limit": memory_limit, "threads": 2})
    try:
        con.register("results", ds.dataset([str(f) for f in files], schema=schema, format="parquet"))
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description or []]
        rows = cursor.fetchmany(max_rows)
        more = 0
        while more < COUNT_LIMIT and (batch := cursor.fetchmany(10_000)):
            more += len(batch)
    except duckdb.Error as exc:
        raise UserError(f"the SQL: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    return Answer(columns, rows, more)


def format_table(answer: Answer) -> str:
    """The answer as aligned text, with the count of rows not shown."""
    cells = [[_cell(v) for v in row] for row in answer.rows]
    widths = [max([len(c)] + [len(r[k]) for r in cells]) for k, c in enumerate(answer.columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(answer.columns, widths)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells]
    more = f"at least {answer.more}" if answer.more >= COUNT_LIMIT else str(answer.more)
    lines.append(f"({len(answer.rows)} rows" + (f", {more} more not shown: --max-rows)" if answer.more else ")"))
    return "\n".join(lines)


def _cell(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)
