"""hil campaign query: SQL (DuckDB) over a campaign's Parquet parts, 10,000 synthetic rows in 500 batches."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("duckdb")
from config_schema import UserError  # noqa: E402
from hil.campaign.query import format_table, query  # noqa: E402
from hil.campaign.results import ResultStore  # noqa: E402
from hil.cli.main import main  # noqa: E402

ROWS = 10_000
WORST = "select floor(payload_kg) as bin, max(settling_s) as worst, count(*) as n from results group by bin order by bin"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A results folder as a campaign leaves it: parts of 20 rows; every 997th case failed and has an
    `error` column the other parts lack."""
    out = tmp_path_factory.mktemp("campaign")
    store = ResultStore(out, "synthetic", "synthetic.toml", warn=lambda text: None)
    rng = np.random.default_rng(7)
    rows = []
    for i in range(ROWS):
        row = {"case_id": f"case-{i:05d}", "index": i, "status": "pass", "payload_kg": float(rng.uniform(0, 5)),
               "settling_s": float(rng.uniform(0.4, 3.0))}
        if i % 997 == 0:
            row.update(status="error", error="the firmware exited with status 1")
        store.add(row)
        rows.append(row)
    store.flush()
    assert len(list((out / "parts").glob("part-*.parquet"))) == ROWS // 20
    return out, rows


def test_worst_settling_time_per_payload_bin(results):
    out, rows = results
    answer = query(out, WORST)
    assert answer.columns == ["bin", "worst", "n"] and answer.more == 0
    for bin_, worst, n in answer.rows:
        mine = [r["settling_s"] for r in rows if math.floor(r["payload_kg"]) == bin_]
        assert worst == max(mine) and n == len(mine)
    assert sum(n for _, _, n in answer.rows) == ROWS
    errors = query(out, "select count(*), count(error) from results where status = 'error'").rows
    assert errors == [(len(range(0, ROWS, 997)), len(range(0, ROWS, 997)))]     # the unified schema
    assert "(5 rows)" in format_table(answer)


def test_rows_beyond_the_limit_are_counted_not_returned(results):
    out, _ = results
    answer = query(out, "select case_id from results order by index", max_rows=100)
    assert len(answer.rows) == 100 and answer.more == ROWS - 100 and answer.rows[0] == ("case-00000",)


@pytest.mark.parametrize("sql, message", [
    ("select * from read_csv('/etc/passwd')", "Permission Error"),
    ("copy results to 'leak.csv'", "Permission Error"),
    ("set enable_external_access = true", "configuration has been locked"),
    ("selec 1", "syntax error"),
    ("select nope from results", "nope"),
    ("  ", "expected a query"),
])
def test_the_sql_touches_nothing_but_the_results_and_errors_are_one_line(results, sql, message):
    out, _ = results
    with pytest.raises(UserError, match=message) as refused:
        query(out, sql)
    assert "\n" not in str(refused.value)


def test_duckdbs_memory_is_bounded(results):
    out, _ = results
    with pytest.raises(UserError, match="Out of Memory"):
        query(out, "select string_agg(a.case_id || b.case_id, ',') from results a, results b", memory_limit="20MB")


def test_the_command_line(results, capsys, tmp_path):
    out, _ = results
    assert main(["campaign", "query", str(out), WORST, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["columns"] == ["bin", "worst", "n"] and len(printed["rows"]) == 5
    assert main(["campaign", "query", str(tmp_path), "select 1"]) != 0
    assert "no campaign results" in capsys.readouterr().err
    assert main(["campaign", "query", str(out)]) != 0
    assert "expected a results folder and one SQL query" in capsys.readouterr().err


def test_a_damaged_part_is_named_in_one_line(tmp_path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "part-1.parquet").write_bytes(b"PAR1 cut short by a crash")
    with pytest.raises(UserError, match="cannot be read together") as refused:
        query(tmp_path, "select count(*) from results")
    assert "\n" not in str(refused.value)
