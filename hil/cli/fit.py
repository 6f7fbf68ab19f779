"""`hil fit`: the model's parameters fitted to recorded runs (hil.fit.fit)."""
from __future__ import annotations

import argparse
import html
import json
from pathlib import Path

from hil.cli.registry import CliError, command

FIT_HELP = """\
FIT.toml names the model, the recorded runs (training and validation, each with a window), the
parameters to fit (model paths with bounds and unit) and the channels to match (with weights);
see docs/fitting.md. Writes to --out (default: beside the fit file, FIT.fit/): calibrated.toml
(the preset with the fitted values and their provenance), fit.json (this summary) and
report.html. Exit status 0 only when every channel of every validation recording keeps its
normalised rms residual within [validation] max_nrmse, 1 otherwise, 2 for a bad fit file or
recording."""


def _fit_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("fit_file", metavar="FIT.toml", help="the fit file")
    p.add_argument("--out", metavar="DIR", help="output folder (default: FIT.fit beside the fit file)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


@command("fit", "fit the model's parameters to recorded runs; calibrated preset, report", _fit_arguments,
         description=FIT_HELP)
def _cmd_fit(args: argparse.Namespace) -> int:
    from hil.fit.fit import calibrated_toml, run_fit, summary
    from hil.fit.fit_file import load_fit

    spec = load_fit(args.fit_file)
    out = Path(args.out) if args.out else Path(args.fit_file).with_suffix(".fit")
    if not out.parent.is_dir():
        raise CliError(f"--out {out}: the folder {out.parent} does not exist; create it first")
    out.mkdir(exist_ok=True)
    result, problem = run_fit(spec)
    report = summary(problem, result)
    (out / "calibrated.toml").write_text(calibrated_toml(problem, result), encoding="utf-8")
    (out / "fit.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    (out / "report.html").write_text(report_html(report), encoding="utf-8")
    print(json.dumps(report) if args.json else format_fit(report, out))
    return 0 if result.passed else 1


def format_fit(r: dict, out: Path) -> str:
    lines = [f"{r['fit']}: {r['evaluations']} plant replays in {r['wall_s']:.1f} s; {r['message']}",
             f"{'parameter':<40} {'start':>12} {'fitted':>12} {'95 % interval':>27} unit"]
    for p in r["parameters"]:
        lo, hi = p["ci95"]
        bound = "  (at a bound)" if p["at_bound"] else ""
        lines.append(f"{p['path']:<40} {p['start']:12.5g} {p['value']:12.5g} {lo:13.5g} .. {hi:11.5g} "
                     f"{p['unit']}{bound}")
    for pair in r["unidentifiable"]:
        lines.append(f"not identifiable apart from each other by these recordings: {', '.join(pair)}")
    for role in ("training", "validation"):
        for rec, chans in r["nrmse"][role].items():
            lines.append(f"{role} {rec}: NRMSE " + ", ".join(f"{c} {v:.3g}" for c, v in chans.items()))
    lines.append(f"verdict: {'PASS' if r['passed'] else 'FAIL'} (every validation channel's NRMSE <= "
                 f"{r['max_nrmse']:g})" + "".join(f"\n  {f}" for f in r["failing"]))
    lines.append(f"written: {out / 'calibrated.toml'}, {out / 'fit.json'}, {out / 'report.html'}")
    return "\n".join(lines)


def report_html(r: dict) -> str:
    e = html.escape
    rows = "".join(f"<tr><td>{e(p['path'])}</td><td>{p['start']:.6g}</td><td>{p['value']:.6g}</td>"
                   f"<td>{p['stderr']:.3g}</td><td>{p['ci95'][0]:.6g} .. {p['ci95'][1]:.6g}</td><td>{e(p['unit'])}</td>"
                   f"</tr>" for p in r["parameters"])
    names = [p["path"] for p in r["parameters"]]
    corr = "".join("<tr><th>" + e(n) + "</th>" + "".join(
        f"<td{' class=bad' if i != j and abs(v) > 0.95 else ''}>{v:+.3f}</td>" for j, v in enumerate(row)) + "</tr>"
        for i, (n, row) in enumerate(zip(names, r["correlation"])))
    fits = "".join(f"<tr><td>{e(role)}</td><td>{e(rec)}</td><td>{e(c)}</td><td>{v:.4g}</td></tr>"
                   for role in ("start", "training", "validation") for rec, chans in r["nrmse"][role].items()
                   for c, v in chans.items())
    verdict = "PASS" if r["passed"] else "FAIL: " + "; ".join(r["failing"])
    return (f"<!doctype html><meta charset=utf-8><title>hil fit {e(r['fit'])}</title>"
            "<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;text-align:right}"
            ".bad{background:#fbb}</style>"
            f"<h1>Fit of {e(r['model'])}</h1><p>{e(r['fit'])}: {r['evaluations']} plant replays, "
            f"{r['wall_s']:.1f} s; {e(r['message'])}</p><h2>Verdict</h2><p>{e(verdict)}</p>"
            "<h2>Parameters</h2><table><tr><th>path</th><th>start</th><th>fitted</th><th>standard error</th>"
            f"<th>95 % interval</th><th>unit</th></tr>{rows}</table>"
            f"<h2>Correlation</h2><table>{corr}</table>"
            "<h2>Normalised rms residual per channel</h2><table><tr><th>when</th><th>recording</th><th>channel</th>"
            f"<th>NRMSE</th></tr>{fits}</table>")


