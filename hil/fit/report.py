"""`hil fit`'s report.html, in the style of `hil report` (hil.viz.report_html: one self-contained
page, uPlot charts, offline): the verdict, the parameter table with 95 % intervals, the
correlation matrix with unidentifiable pairs marked, each channel's NRMSE, and per recording and
channel the measured signal against the simulated one before (the start values) and after the
fit, with the amplitude spectra of both residuals (what the model still misses, and at which
frequencies: a mode the model lacks shows as a peak the fit cannot remove).
"""
from __future__ import annotations

import html

import numpy as np

from hil.fit.fit import FitProblem, FitResult
from hil.fit.trust import CORRELATED
from hil.viz.report_html import render_html
from hil.viz.report_model import Plot, ReportData, Section, Series
from hil.viz.signals import minmax_decimate, welch_amplitude

MAX_POINTS = 4000          # stored points per time series (min/max pairs beyond)
SPECTRUM_SEGMENT_S = 2.0   # Welch segment of the residual spectra
MARKED = " style='background:#f8d3cd'"


def traces(problem: FitProblem, result: FitResult) -> dict[str, dict[str, dict[str, np.ndarray]]]:
    """Per recording and channel: t, measured, simulated with the start and with the fitted values
    (two replays per recording)."""
    out = {}
    for rec in problem.recordings:
        start = problem.simulated(rec, result.start)
        fitted = problem.simulated(rec, result.values)
        t = rec.rows[:, rec.header["columns"].index("t")]
        out[rec.spec.file.name] = {c: {"t": t[rec.masks[c]], "measured": rec.measured[c], "start": start[c],
                                       "fitted": fitted[c]} for c in problem.channels}
    return out


def fit_report_html(summary: dict, signals: dict[str, dict[str, dict[str, np.ndarray]]]) -> str:
    """The page (module docstring) from the fit's summary (hil.fit.fit.summary) and its traces()."""
    verdict = "PASS" if summary["passed"] else "FAIL"
    report = ReportData(f"hil fit {summary['fit']}: {verdict}",
                        f"model {summary['model']}; {summary['evaluations']} plant replays in "
                        f"{summary['wall_s']:.1f} s; {summary['message']}")
    report.sections.append(Section("verdict", "Verdict and parameters", html=_verdict(summary) + _parameters(summary)))
    report.sections.append(Section("correlation", "Correlation", html=_correlation(summary),
                                   note=f"pairs beyond {CORRELATED:g} in magnitude (marked) are ones these "
                                        "recordings cannot tell apart"))
    report.sections.append(Section("nrmse", "Normalised rms residual per channel", html=_nrmse(summary)))
    roles = {name: r["role"] for name, r in summary["recordings"].items()}
    for k, (name, channels) in enumerate(signals.items()):
        section = Section(f"rec{k}", f"{roles.get(name, '')} recording {name}",
                          note="measured, simulated with the start values and with the fitted ones; "
                               "the residuals' amplitude spectra (Welch, Hann, 2 s segments)")
        for j, (channel, s) in enumerate(channels.items()):
            section.plots += _channel_plots(report, f"r{k}c{j}", channel, s)
        report.sections.append(section)
    return render_html(report)


def _channel_plots(report: ReportData, key: str, channel: str, s: dict[str, np.ndarray]) -> list[Plot]:
    t, values = minmax_decimate(s["t"], np.column_stack([s["measured"], s["start"], s["fitted"]]), MAX_POINTS)
    report.add(f"{key}/t", t, np.float64)
    series = [Series(label, report.add(f"{key}/{label}", values[:, i]), color, dash)
              for i, (label, color, dash) in enumerate((("measured", "#222222", False), ("start", "#d9822b", True),
                                                         ("fitted", "#1f6fd1", False)))]
    plots = [Plot(f"{key}-time", channel, f"{key}/t", series, ylabel=channel)]
    fs = 1.0 / float(np.median(np.diff(s["t"]))) if len(s["t"]) > 1 else 1.0
    f, before = welch_amplitude(s["measured"] - s["start"], fs, SPECTRUM_SEGMENT_S)
    _, after = welch_amplitude(s["measured"] - s["fitted"], fs, SPECTRUM_SEGMENT_S)
    if len(f) > 2:
        report.add(f"{key}/f", f[1:], np.float64)
        spectra = [Series("residual at the start", report.add(f"{key}/before", before[1:]), "#d9822b", True),
                   Series("residual fitted", report.add(f"{key}/after", after[1:]), "#1f6fd1")]
        plots.append(Plot(f"{key}-spectrum", f"{channel}: residual spectrum", f"{key}/f", spectra,
                          ylabel="amplitude", xlabel="f [Hz]", logx=True, logy=True))
    return plots


def _verdict(r: dict) -> str:
    if r["passed"]:
        text = f"PASS: every validation channel's NRMSE is at most {r['max_nrmse']:g}"
    else:
        text = "FAIL: " + "; ".join(r["failing"])
    return f"<p><b>{html.escape(text)}</b></p>"


def _parameters(r: dict) -> str:
    e = html.escape
    rows = "".join(f"<tr><td>{e(p['path'])}</td><td>{p['start']:.6g}</td><td>{p['modal_start']:.6g}</td>"
                   f"<td>{p['value']:.6g}</td><td>{p['stderr']:.3g}</td>"
                   f"<td>{p['ci95'][0]:.6g} .. {p['ci95'][1]:.6g}</td><td>{e(p['unit'])}</td>"
                   f"<td>{'at a bound' if p['at_bound'] else ''}</td></tr>" for p in r["parameters"])
    return ("<table><tr><th>parameter</th><th>start</th><th>after the pre-fit</th><th>fitted</th>"
            f"<th>standard error</th><th>95 % interval</th><th>unit</th><th></th></tr>{rows}</table>")


def _correlation(r: dict) -> str:
    e = html.escape
    names = [p["path"] for p in r["parameters"]]
    head = "<tr><th></th>" + "".join(f"<th>{k + 1}</th>" for k in range(len(names))) + "</tr>"
    rows = "".join(f"<tr><th>{k + 1} {e(n)}</th>" + "".join(
        f"<td{MARKED if k != j and abs(v) > CORRELATED else ''}>{v:+.3f}</td>" for j, v in enumerate(row))
        + "</tr>" for k, (n, row) in enumerate(zip(names, r["correlation"])))
    pairs = "".join(f"<p>not identifiable apart by these recordings: {e(', '.join(p))}</p>" for p in r["unidentifiable"])
    return f"<table>{head}{rows}</table>{pairs}"


def _nrmse(r: dict) -> str:
    e = html.escape
    rows = []
    for role in ("start", "training", "validation"):
        for rec, channels in r["nrmse"][role].items():
            for c, v in channels.items():
                bad = role == "validation" and not v <= r["max_nrmse"]
                rows.append(f"<tr class={'fail' if bad else 'pass' if role == 'validation' else ''}>"
                            f"<td>{e(role)}</td><td>{e(rec)}</td><td>{e(c)}</td><td>{v:.4g}</td></tr>")
    return ("<table><tr><th>when</th><th>recording</th><th>channel</th><th>NRMSE</th></tr>"
            + "".join(rows) + "</table>")
