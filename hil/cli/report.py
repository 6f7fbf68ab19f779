"""`hil report` (a run as one self-contained HTML page) and `hil plot` (a quick figure of log columns)."""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import time
from pathlib import Path

from hil.cli.registry import CliError, command, finite_float, positive_int


def _report_arguments(p: argparse.ArgumentParser) -> None:
    from hil.viz.report_model import DEFAULT_MAX_POINTS
    p.add_argument("log", help="run log (.msgpack or .csv); its summary (<log>.summary.json) is read when present")
    p.add_argument("--out", help="HTML file (default: the log name with .html)")
    p.add_argument("--max-points", type=positive_int, default=DEFAULT_MAX_POINTS,
                   help="stored points per time signal; beyond, min/max pairs per bucket (the page re-decimates "
                        "the visible window on zoom; statistics and spectra always use every sample)")
    p.add_argument("--screenshot", metavar="PNG", help="also save a screenshot of the page's top (headless Chromium)")


def summary_of(log: str) -> dict | None:
    path = log + ".summary.json"
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CliError(f"{path}: not a run summary (JSON): {exc}") from None


def write_report(log: str, out: str | None = None, max_points: int | None = None) -> tuple[Path, float]:
    """Write the HTML report of a run log; returns (path, seconds taken)."""
    from hil.logs.runlog import read_run
    from hil.viz.report import build_report
    from hil.viz.report_model import DEFAULT_MAX_POINTS
    from hil.viz.report_html import render_html

    t0 = time.perf_counter()
    header, rows = read_run(log)
    data = build_report(header, rows, summary_of(log), Path(log).name, max_points or DEFAULT_MAX_POINTS)
    path = Path(out or os.path.splitext(log)[0] + ".html")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(data), encoding="utf-8")
    return path, time.perf_counter() - t0


@command("report", "a run as one self-contained HTML page: signals, spectra, timing, events, verdicts",
         _report_arguments)
def _cmd_report(args: argparse.Namespace) -> int:
    path, wall = write_report(args.log, args.out, args.max_points)
    print(f"report -> {path} ({path.stat().st_size / 1e6:.2f} MB, {wall:.2f} s)")
    if args.screenshot:
        from hil.viz.browser import render_page
        page = render_page(path, args.screenshot)
        print(f"screenshot -> {page.screenshot}")
    return 0


def _plot_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("log", help="run log (.msgpack or .csv)")
    p.add_argument("signals", nargs="+", metavar="SIGNAL_GLOB", help="columns or globs, e.g. 'q_*' tip_z")
    p.add_argument("--out", help="save the figure (.png, .svg, .pdf) instead of opening a window")
    p.add_argument("--t0", type=finite_float, default=None, help="from this time [s]")
    p.add_argument("--t1", type=finite_float, default=None, help="to this time [s]")


@command("plot", "a quick figure of log columns (matplotlib), one panel per unit", _plot_arguments)
def _cmd_plot(args: argparse.Namespace) -> int:
    from hil.logs.runlog import read_run
    from hil.viz.figure import plot_columns

    if args.t0 is not None and args.t1 is not None and args.t1 <= args.t0:
        raise CliError(f"--t0 {args.t0:g} --t1 {args.t1:g}: an empty window; expected t1 > t0 (s)")
    header, rows = read_run(args.log)
    cols = header["columns"]
    chosen = [c for c in cols if any(fnmatch.fnmatchcase(c, g) for g in args.signals) and c != "t"]
    if not chosen:
        raise CliError(f"no column of {args.log} matches {' '.join(args.signals)} "
                       f"(columns: {', '.join(cols[:12])} ...)")
    try:
        out = plot_columns(cols, rows, chosen, args.out, Path(args.log).name, args.t0, args.t1)
    except ImportError as exc:
        raise CliError(f"hil plot needs {exc.name}: pip install 'ella-hil[viz]'") from None
    if out:
        print(f"{len(chosen)} signals -> {out}")
    return 0
