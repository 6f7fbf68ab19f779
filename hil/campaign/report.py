"""`hil campaign FILE --report`: DIR/report.html from a campaign's results table.

The pass/fail matrix by scenario and firmware; the worst cases (errors first, then by their worst
verdict margin, value / limit), each with its run's HTML report when its log was kept; and which
parameter moves each verdict: the Spearman rank correlation of every varied parameter with each
verdict's value over the cases that ran (|rho| near 1: the parameter decides the verdict; near 0:
it does not matter within its spread), ranked.
"""
from __future__ import annotations

import html
import json
import math
from pathlib import Path

import numpy as np

from hil.campaign.results import read_results
from hil.campaign.runner import safe_name
from hil.campaign.spec import load_campaign
from config_schema import UserError

WORST = 10
STYLE = """body{font:14px sans-serif;margin:2em}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #bbb;padding:4px 8px;text-align:right}th{background:#eee}
.ok{background:#cfc}.bad{background:#fcc}.mixed{background:#ffc}td.l{text-align:left}"""


def write_report(file: str | Path, out: str | Path, worst: int = WORST) -> Path:
    """Write `out`/report.html (and the HTML reports of the worst cases whose logs were kept)."""
    campaign = load_campaign(file)
    out = Path(out)
    if not (out / "results.parquet").is_file():
        raise UserError(f"{out}: no results table (results.parquet): run the campaign first, "
                         f"hil campaign {file} --out {out}")
    rows = read_results(out)
    parts = [f"<h1>Campaign {html.escape(campaign.name)}</h1><p>{html.escape(campaign.description)}</p>",
             _totals(rows), "<h2>Pass / fail by scenario and firmware</h2>", _matrix(rows),
             f"<h2>The {worst} worst cases</h2>", _worst(rows, out, worst),
             "<h2>Which parameter moves each verdict</h2>", _sensitivity(rows)]
    path = out / "report.html"
    path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(campaign.name)}</title>"
                    f"<style>{STYLE}</style></head><body>{''.join(parts)}</body></html>", encoding="utf-8")
    return path


def _totals(rows: list[dict]) -> str:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return "<p>" + f"{len(rows)} cases: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + "</p>"


def _matrix(rows: list[dict]) -> str:
    scenarios = sorted({r["scenario"] for r in rows})
    firmware = sorted({r["firmware"] for r in rows})
    head = "<tr><th>scenario</th>" + "".join(f"<th>{html.escape(f)}</th>" for f in firmware) + "</tr>"
    body = ""
    for s in scenarios:
        body += f"<tr><td class='l'>{html.escape(s)}</td>"
        for f in firmware:
            cell = [r for r in rows if r["scenario"] == s and r["firmware"] == f]
            passed = sum(bool(r["passed"]) for r in cell)
            cls = "ok" if passed == len(cell) else "bad" if passed == 0 else "mixed"
            body += f"<td class='{cls}'>{passed} / {len(cell)}</td>"
        body += "</tr>"
    return f"<table>{head}{body}</table>"


def margin(row: dict) -> float:
    """How badly the case did: inf for a case that did not run to a judgement, else its largest
    verdict value / limit (above 1: failed)."""
    if row["status"] in ("error", "timeout", "run_failed"):
        return math.inf
    ratios = []
    for key, value in row.items():
        if key.startswith("value:"):
            limit = row.get("limit:" + key[6:])
            if value is None:
                ratios.append(math.inf)
            elif limit:
                ratios.append(abs(value) / limit)
    return max(ratios, default=0.0)


def _worst(rows: list[dict], out: Path, n: int) -> str:
    ranked = sorted(rows, key=lambda r: (-margin(r), r["index"]))[:n]
    head = "<tr><th>case</th><th>status</th><th>worst value / limit</th><th>failed verdicts</th><th>parameters</th>" \
           "<th>seed</th><th>message</th><th>report</th></tr>"
    body = ""
    for r in ranked:
        failed = ", ".join(k[8:] for k, v in r.items() if k.startswith("verdict:") and v is False)
        params = "; ".join(f"{k[6:]} = {_fmt(v)}" for k, v in r.items() if k.startswith("param:"))
        link = _case_report(r, out)
        body += (f"<tr class='{'ok' if r['passed'] else 'bad'}'><td class='l'>{html.escape(r['case_id'])}</td>"
                 f"<td>{r['status']}</td><td>{_fmt(margin(r))}</td><td class='l'>{html.escape(failed)}</td>"
                 f"<td class='l'>{html.escape(params)}</td><td>{r['seed']}</td>"
                 f"<td class='l'>{html.escape(r['error'] or '')}</td><td>{link}</td></tr>")
    return f"<table>{head}{body}</table>"


def _case_report(row: dict, out: Path) -> str:
    if not row.get("log"):
        return "(log not kept)"
    log = out / row["log"]
    if not log.exists():
        return "(log missing)"
    page = out / "reports" / f"{safe_name(row['case_id'])}.html"
    if not page.exists():
        try:
            run_report(log, page)
        except (ValueError, OSError) as exc:       # a log the run left without rows, or damaged
            return html.escape(f"(no report: {exc})")
    return f"<a href='{html.escape(str(page.relative_to(out)))}'>report</a>"


def run_report(log: Path, page: Path) -> None:
    """The HTML report of a case's run log (`hil report`'s page) at `page`."""
    from hil.logs.runlog import read_run
    from hil.viz.report import build_report
    from hil.viz.report_html import render_html
    from hil.viz.report_model import DEFAULT_MAX_POINTS
    summary_file = Path(str(log) + ".summary.json")
    summary = json.loads(summary_file.read_text(encoding="utf-8")) if summary_file.exists() else None
    header, data = read_run(str(log))
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render_html(build_report(header, data, summary, log.name, DEFAULT_MAX_POINTS)), encoding="utf-8")


def sensitivity(rows: list[dict]) -> list[tuple[str, str, float, int]]:
    """(parameter, verdict, Spearman rho, cases) for every varied parameter and verdict value,
    strongest first; cases without a value are left out, pairs with fewer than 3 cases too."""
    params = sorted({k for r in rows for k in r if k.startswith("param:")})
    values = sorted({k for r in rows for k in r if k.startswith("value:")})
    out = []
    for p in params:
        for v in values:
            pairs = [(r[p], r[v]) for r in rows if isinstance(r.get(p), (int, float)) and r.get(v) is not None]
            if len(pairs) < 3:
                continue
            x, y = np.array(pairs, dtype=float).T
            rho = _spearman(x, y)
            if rho is not None:
                out.append((p[6:], v[6:], rho, len(pairs)))
    return sorted(out, key=lambda t: -abs(t[2]))


def _spearman(x: np.ndarray, y: np.ndarray) -> float | None:
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks with ties given their mean rank."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    for value in np.unique(x):
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def _sensitivity(rows: list[dict]) -> str:
    ranking = sensitivity(rows)
    if not ranking:
        return "<p>No parameter was varied over three or more judged cases.</p>"
    head = "<tr><th>parameter</th><th>verdict value</th><th>Spearman rho</th><th>cases</th></tr>"
    body = "".join(f"<tr><td class='l'>{html.escape(p)}</td><td class='l'>{html.escape(v)}</td><td>{rho:+.2f}</td>"
                   f"<td>{n}</td></tr>" for p, v, rho, n in ranking)
    return f"<table>{head}{body}</table>"


def _fmt(v) -> str:
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.4g}"
    return html.escape(str(v))
