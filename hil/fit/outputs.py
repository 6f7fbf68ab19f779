"""What `hil fit` writes: the calibrated preset (every fitted value with its provenance) and the JSON
summary (hil.fit.fit has the method; hil.fit.report the HTML page)."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np

from config_schema import parse_toml
from hil.campaign.overrides import element
from hil.campaign.toml_text import dumps
from hil.fit.fit import FitProblem, FitResult, Recording
from hil.fit.fit_file import DELAY_PATH


def calibrated_toml(problem: FitProblem, result: FitResult) -> str:
    """The preset with the fitted values, each with its provenance: the recordings and windows it was
    fitted to, the date and its standard error."""
    data = parse_toml(problem.model_text(result.values), problem.spec.source)
    provenance = data.setdefault("provenance", {})
    recordings = ", ".join(f"{r.spec.file.name} [{_window(r)}]" for r in problem.training)
    today = dt.date.today().isoformat()
    errors: dict[str, list[str]] = {}          # a parameter -> the standard errors of its fitted value or elements
    for p in (p for p in problem.spec.parameters if p.path != DELAY_PATH):   # the delay is the recordings', in fit.json
        base, index = element(p.path)
        label = "" if index is None else f"[{index}] "
        errors.setdefault(base, []).append(f"{label}{result.stderr[p.path]:.3g} {p.unit}")
    for base, stderr in errors.items():
        provenance[base] = (f"fitted: hil fit {Path(problem.spec.source).name} on {today} to {recordings}; "
                            f"standard error {', '.join(stderr)}")
    return dumps(data)


def _window(rec: Recording) -> str:
    t = rec.rows[rec.window, rec.header["columns"].index("t")]
    return f"{t[0]:g} .. {t[-1]:g} s"


def summary(problem: FitProblem, result: FitResult) -> dict:
    spec = problem.spec
    params = []
    for p in spec.parameters:
        v, se = result.values[p.path], result.stderr[p.path]
        params.append({"path": p.path, "unit": p.unit, "start": result.start[p.path],
                       "modal_start": result.modal_start[p.path], "value": v, "stderr": se,
                       "ci95": [v - 1.96 * se, v + 1.96 * se], "lower": p.lower, "upper": p.upper,
                       "at_bound": bool(np.isclose(v, p.lower) or np.isclose(v, p.upper))})
    recordings = {r.spec.file.name: {"role": r.spec.role, "rows": len(r.rows), "window_rows": int(r.window.sum()),
                                     "resampled": r.header["resampled"]} for r in problem.recordings}
    return {"fit": spec.source, "model": spec.model, "parameters": params, "recordings": recordings,
            "modes_matched": result.modes_matched, "correlation": result.correlation, "unidentifiable": result.unidentifiable,
            "nrmse": {"start": result.start_nrmse, "training": result.training_nrmse,
                      "validation": result.validation_nrmse},
            "max_nrmse": spec.max_nrmse, "passed": result.passed, "failing": result.failing,
            "converged": result.converged, "message": result.message, "evaluations": result.evaluations,
            "wall_s": result.wall_s}
