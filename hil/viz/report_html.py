"""The report as one self-contained HTML file: uPlot and the report's script inlined, the data
embedded as base64 float arrays; it opens offline (no network, no CDN).

uPlot (MIT licence, ``static/LICENSE.uPlot``, 51 kB) draws canvas line charts of 10^5..10^6
points in milliseconds; the page keeps every stored sample and re-decimates the visible window on
each zoom (``static/report.js``).
"""
from __future__ import annotations

import base64
import html
import json
from importlib import resources

import numpy as np

from hil.viz.report_model import ReportData

__all__ = ["render_html"]

_CSS = """
body { font-family: system-ui, sans-serif; margin: 0 1.5em 3em; color: #222; max-width: 1500px; }
header { position: sticky; top: 0; background: #fff; padding: .5em 0; border-bottom: 1px solid #ddd; z-index: 10; }
h1 { font-size: 1.3em; margin: .2em 0; } h2 { margin-top: 1.6em; border-bottom: 2px solid #1f6fd1; }
nav a { margin-right: 1em; } .sub { color: #555; } .note { color: #666; font-style: italic; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; }
td, th { border: 1px solid #ddd; padding: .2em .6em; text-align: left; vertical-align: top; }
tr.pass td:first-child { background: #d7f2dc; font-weight: bold; } tr.fail td:first-child { background: #f8d3cd; font-weight: bold; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(620px, 1fr)); gap: .4em 1.2em; }
.plot { margin: .6em 0; min-height: 120px; min-width: 0; } .uplot { font-size: 12px; }
.tables { display: flex; flex-wrap: wrap; gap: 0 2em; }
"""


def _arrays_json(arrays: dict[str, np.ndarray]) -> dict:
    return {k: {"dtype": "f8" if v.dtype == np.float64 else "f4",
                "b64": base64.b64encode(v.astype("<f8" if v.dtype == np.float64 else "<f4").tobytes()).decode()}
            for k, v in arrays.items()}


def _static(name: str) -> str:
    return resources.files("hil.viz").joinpath("static", name).read_text(encoding="utf-8")


def _script_safe(text: str) -> str:
    """Text placed inside a <script> element: no "</" can close it early."""
    return text.replace("</", "<\\/")


def render_html(report: ReportData) -> str:
    """The whole page (module docstring)."""
    plots = [p.as_dict() for s in report.sections for p in s.plots]
    payload = {"plots": plots, "events": report.events, "arrays": _arrays_json(report.arrays)}
    nav = "".join(f"<a href='#{s.id}'>{html.escape(s.title)}</a>" for s in report.sections)
    body = []
    for s in report.sections:
        body.append(f"<section id='{s.id}'><h2>{html.escape(s.title)}</h2><div class=tables>{s.html}</div>")
        if s.note:
            body.append(f"<p class=note>{html.escape(s.note)}</p>")
        body += ["<div class=plots>"] + [f"<div class=plot id='plot-{p.id}'></div>" for p in s.plots] + ["</div>"]
        body.append("</section>")
    notes = "".join(f"<p class=note>{html.escape(n)}</p>" for n in report.notes)
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(report.title)}</title>"
            f"<style>{_static('uPlot.min.css')}{_CSS}</style></head><body>"
            f"<header><h1>{html.escape(report.title)}</h1><div class=sub>{html.escape(report.subtitle)}</div>"
            f"<nav>{nav}</nav></header>{notes}{''.join(body)}"
            f"<script type='application/json' id='report-data'>{_script_safe(_json(payload))}</script>"
            f"<script>{_script_safe(_static('uPlot.iife.min.js'))}</script>"
            f"<script>{_script_safe(_static('report.js'))}</script></body></html>")


def _json(payload: dict) -> str:
    """Strict JSON (NaN or infinity would break the page's parser)."""
    return json.dumps(payload, allow_nan=False)
