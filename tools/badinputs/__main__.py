"""Broken inputs against the `hil` command: each case of a data file runs `hil ARGS` in a fresh folder and is
classed as a clean error (a one-line refusal, no traceback), ok, a traceback, a silent accept (exit 0 where
an error was due) or a hang (no end within the timeout).

    python -m tools.badinputs [--cases FILE ...] [--timeout 120] [--only TEXT] [--json]

The cases: tools/badinputs/cases.toml (written by hand) and tools/badinputs/preset_values.toml (every
value of the ELLA preset broken three ways, written by `python -m tools.badinputs.generate`).

Prints a table and the totals; exit status 1 if any case is a traceback, a silent accept or a hang.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(__file__).resolve().parent / "cases.toml"
PRESET_VALUES = Path(__file__).resolve().parent / "preset_values.toml"     # made by tools.badinputs.generate
ERROR_EXITS = (1, 2, 3, 4)          # a refusal, or a run judged failed (hil/cli/registry.py, docs "Exit status")
CLASSES = ("clean error", "ok", "traceback", "silent accept", "hang", "unexpected error")


def make_files(folder: Path, files: dict) -> None:
    """The case's files: text, a copy of a shipped file with one replacement (or one line replaced), a FIFO, a symbolic link, a run log
    (rows, optionally with NaN time), or an arm of many bodies."""
    for name, spec in files.items():
        path = folder / name
        if isinstance(spec, str):
            path.write_text(spec, encoding="utf-8")
        elif "copy" in spec and "line" in spec:
            lines = (ROOT / spec["copy"]).read_text(encoding="utf-8").splitlines(keepends=True)
            lines[spec["line"] - 1] = spec["text"] + "\n"
            path.write_text("".join(lines), encoding="utf-8")
        elif "copy" in spec:
            old, new = spec["replace"]
            text = (ROOT / spec["copy"]).read_text(encoding="utf-8")
            if old not in text:
                raise ValueError(f"{name}: {old!r} is not in {spec['copy']}")
            path.write_text(text.replace(old, new, 1), encoding="utf-8")
        elif spec.get("fifo"):
            os.mkfifo(path)
        elif "symlink" in spec:
            path.symlink_to(folder / spec["symlink"])
        elif "log_rows" in spec:
            _write_log(path, spec["log_rows"], spec.get("nan_time", False))
        elif "deep_bodies" in spec:
            path.write_text(_deep_arm(spec["deep_bodies"]), encoding="utf-8")
        else:
            raise ValueError(f"{name}: an unknown kind of file {spec!r}")


def _write_log(path: Path, rows: int, nan_time: bool) -> None:
    import numpy as np

    from hil.logs.runlog import open_writer
    with open_writer(str(path), {"columns": ["cycle", "t", "q_elbow"], "config": "configs/ella.toml"}) as w:
        for k in range(rows):
            w.write(np.array([k, np.nan if nan_time else k * 1e-3, 0.0]))


def _deep_arm(n: int) -> str:
    body = ('[[body]]\nname = "b{i}"\nparent = "{p}"\n  [body.joint]\n  type = "revolute"\n  axis = [0, 0, 1]\n'
            '  [body.rigid]\n  mass_kg = 1.0\n  com_m = [0.1, 0, 0]\n'
            '  inertia_kg_m2 = [[0.01,0,0],[0,0.01,0],[0,0,0.01]]\n  length_m = 0.2\n')
    return '[model]\nname = "deep"\n' + "".join(body.format(i=i, p="base" if i == 0 else f"b{i - 1}") for i in range(n))


def classify(expect: str, status: int | None, stderr: str) -> str:
    """The class of one outcome (CLASSES)."""
    if status is None:
        return "hang"
    if "Traceback (most recent call last)" in stderr or status == 70:
        return "traceback"
    if expect == "error":
        return "clean error" if status in ERROR_EXITS else "silent accept"
    return "ok" if status == 0 else "unexpected error"


def run_case(case: dict, timeout_s: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="hil-badinputs-") as tmp:
        folder = Path(tmp)
        make_files(folder, case.get("files", {}))
        argv = [a.replace("{dir}", tmp) for a in case["args"]]
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "hil", *argv], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout_s)
            status = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            _, err = proc.communicate()
            status = None
    lines = [line for line in err.splitlines() if line and "compiling kernels" not in line]
    return {"name": case["name"], "expect": case["expect"], "status": status,
            "class": classify(case["expect"], status, err), "wall_s": round(time.monotonic() - t0, 2),
            "message": lines[-1][:200] if lines else ""}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.badinputs", description=__doc__.splitlines()[0])
    p.add_argument("--cases", action="append", default=None,
                   help="a file of cases (TOML; repeatable; default: cases.toml and preset_values.toml beside this)")
    p.add_argument("--timeout", type=float, default=120.0, help="s of wall time before a case counts as a hang")
    p.add_argument("--only", default=None, help="run the cases whose name contains this text")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    cases = []
    for path in args.cases or [str(CASES), str(PRESET_VALUES)]:
        with open(path, "rb") as f:
            cases += [c for c in tomllib.load(f)["case"] if args.only is None or args.only in c["name"]]
    results = [run_case(c, args.timeout) for c in cases]
    totals = {k: sum(r["class"] == k for r in results) for k in CLASSES}
    if args.json:
        print(json.dumps({"cases": results, "totals": {"tried": len(results), **totals}}))
    else:
        for r in results:
            print(f"{r['class']:<16} {r['status']!s:>4} {r['wall_s']:6.1f} s  {r['name']}: {r['message']}")
        print(f"tried {len(results)}: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
    bad = totals["traceback"] + totals["silent accept"] + totals["hang"] + totals["unexpected error"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
