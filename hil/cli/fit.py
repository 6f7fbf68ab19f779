"""`hil fit`: the model's parameters fitted to recorded runs (hil.fit.fit)."""
from __future__ import annotations

import argparse
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
    from hil.fit.fit import run_fit
    from hil.fit.outputs import calibrated_toml, summary
    from hil.fit.fit_file import load_fit
    from hil.fit.report import fit_report_html, traces

    spec = load_fit(args.fit_file)
    out = Path(args.out) if args.out else Path(args.fit_file).with_suffix(".fit")
    if not out.parent.is_dir():
        raise CliError(f"--out {out}: the folder {out.parent} does not exist; create it first")
    out.mkdir(exist_ok=True)
    result, problem = run_fit(spec)
    report = summary(problem, result)
    (out / "calibrated.toml").write_text(calibrated_toml(problem, result), encoding="utf-8")
    (out / "fit.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    (out / "report.html").write_text(fit_report_html(report, traces(problem, result)), encoding="utf-8")
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

