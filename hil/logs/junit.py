"""JUnit XML of verdicts, for CI servers (Jenkins, GitLab, GitHub) and audits (``--junit FILE``).

One ``<testsuite>`` per run (``hil run --check``, a test of the pytest plugin) or per campaign
(``hil campaign run``); in it one ``<testcase>`` per verdict (a run) or per case (a campaign).
A verdict that fails is a ``<failure>`` whose message gives the value and the limit with the unit
(a temporal assertion: its robustness and the time of its first violation);
a run that proves nothing (the firmware crashed or never answered, no cycle: the summary's
``run_failures``) is one ``<error>`` testcase ``run``. Each testcase carries ``<properties>``: the
requirement's ID and text where the targets trace it to one (``[verdict.requirements]``, an
assertion's ``requirement``), the value, the limit and the unit, and the run log's and report's
paths. The element and attribute names are those of the JUnit schema Jenkins and junitparser read
(testsuites, testsuite, testcase, properties, property, failure, error, system-out).

The file is written whole to a temporary file beside it and renamed over it: a reader never sees
half a file, and a failed write leaves the old one.
"""
from __future__ import annotations

import math
import os
import re
import socket
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path


@dataclass
class Case:
    """One testcase: a verdict or a campaign case."""
    name: str
    classname: str
    time_s: float = 0.0
    failure: str | None = None             # the failure's message (None: passed)
    error: str | None = None               # a run that proves nothing
    text: str = ""                         # the failure's or error's body
    properties: dict[str, str] = field(default_factory=dict)


@dataclass
class Suite:
    name: str
    cases: list[Case]
    time_s: float = 0.0
    properties: dict[str, str] = field(default_factory=dict)


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "none"
    text = f"{value:.6g}" if math.isfinite(value) else str(value)
    return f"{text} {unit}".strip()


def verdict_case(v: dict, classname: str, paths: dict[str, str] | None = None) -> Case:
    """A verdict of a run summary as a testcase (hil.logs.verdicts), `paths`: the run log's and report's."""
    unit = v.get("unit", "")
    props = {"value": number(v.get("value")), "limit": number(v.get("limit")), "unit": unit}
    if v.get("requirement"):
        props["requirement"] = v["requirement"]["id"]
        props["requirement_text"] = v["requirement"].get("text", "")
    if v.get("first_violation_s") is not None:
        props["first_violation_s"] = f"{v['first_violation_s']:.6g}"
    props.update(paths or {})
    failure = None
    if not v["passed"]:
        if v["name"].startswith("assert_"):
            at = v.get("first_violation_s")
            failure = f"{v['name']}: robustness {number(v.get('value'), unit)}, limit 0" + (
                f", first violated at t = {at:.3f} s" if at is not None else "")
        else:
            failure = f"{v['name']}: value {number(v.get('value'), unit)}, limit {number(v.get('limit'), unit)}"
        if v.get("requirement"):
            failure += f" [{v['requirement']['id']}]"
    return Case(v["name"], classname, failure=failure, text=v.get("description", ""), properties=props)


def run_suite(summary: dict, name: str, log_path: str | None = None, report_path: str | None = None) -> Suite:
    """A run's summary as a suite: one testcase per verdict, or one error testcase for a run that proves nothing."""
    paths = {k: str(p) for k, p in (("run_log", log_path), ("report", report_path)) if p}
    classname = ".".join(re.findall(r"[A-Za-z0-9_\-]+", name))      # "hil run ella" -> hil.run.ella
    if summary.get("run_failures"):
        cases = [Case("run", classname, error="; ".join(summary["run_failures"]), text="\n".join(summary["run_failures"]),
                      properties=paths)]
    else:
        cases = [verdict_case(v, classname, paths) for v in summary.get("verdicts", [])]
    props = {"targets": str(summary.get("targets_file", "")), "cycles": str(summary.get("cycles", ""))}
    return Suite(name, cases, float(summary.get("t_s") or 0.0), props)      # the run's (simulated) time


def write(path: str | Path, suites: list[Suite]) -> None:
    """The suites as one JUnit XML file at `path` (module docstring)."""
    root = ET.Element("testsuites", name="hil", tests=str(sum(len(s.cases) for s in suites)),
                      failures=str(sum(c.failure is not None for s in suites for c in s.cases)),
                      errors=str(sum(c.error is not None for s in suites for c in s.cases)),
                      time=f"{sum(s.time_s for s in suites):.3f}")
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for s in suites:
        node = ET.SubElement(root, "testsuite", name=s.name, tests=str(len(s.cases)),
                             failures=str(sum(c.failure is not None for c in s.cases)),
                             errors=str(sum(c.error is not None for c in s.cases)), skipped="0",
                             time=f"{s.time_s:.3f}", timestamp=stamp, hostname=socket.gethostname())
        _properties(node, s.properties)
        for c in s.cases:
            case = ET.SubElement(node, "testcase", name=c.name, classname=c.classname, time=f"{c.time_s:.3f}")
            _properties(case, c.properties)
            if c.error is not None:
                ET.SubElement(case, "error", message=c.error, type="run").text = c.text
            elif c.failure is not None:
                ET.SubElement(case, "failure", message=c.failure, type="verdict").text = c.text
            elif c.text:
                ET.SubElement(case, "system-out").text = c.text
    ET.indent(root)
    data = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data + b"\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _properties(node: ET.Element, props: dict[str, str]) -> None:
    if props:
        parent = ET.SubElement(node, "properties")
        for key, value in props.items():
            ET.SubElement(parent, "property", name=key, value=str(value))


def campaign_suite(rows: list[dict], name: str, out: str | Path) -> Suite:
    """A campaign's results table as a suite: one testcase per case (hil.campaign.runner's rows), a failed
    verdict a failure naming each failing verdict with its value, limit and requirement; a case that
    proves nothing (run_failed, error, timeout) an error."""
    out = Path(out)
    report = out / "report.html"
    cases = []
    for row in sorted(rows, key=lambda r: r["index"]):
        props = {k: str(row[k]) for k in ("firmware", "scenario", "seed") if row.get(k) is not None}
        props.update({k: str(v) for k, v in row.items() if k.startswith("param:") and v is not None})
        if row.get("log"):
            props["run_log"] = str(out / row["log"])
        if report.exists():
            props["report"] = str(report)
        failing = [k.split(":", 1)[1] for k, v in row.items() if k.startswith("verdict:") and v is False]
        required = sorted({row[f"requirement:{v}"] for v in failing if row.get(f"requirement:{v}")})
        if required:
            props["requirements_failed"] = ", ".join(required)
        case = Case(row["case_id"], f"hil.campaign.{name}", float(row.get("wall_s") or 0.0), properties=props)
        if row["status"] in ("run_failed", "error", "timeout"):
            case.error = f"{row['status']}: {row.get('error') or 'no message'}"
            case.text = row.get("error") or ""
        elif row["status"] == "failed":
            parts = [f"{v}: value {number(row.get(f'value:{v}'))}, limit {number(row.get(f'limit:{v}'))}"
                     + (f" [{row[f'requirement:{v}']}]" if row.get(f"requirement:{v}") else "") for v in failing]
            case.failure = "; ".join(parts) or "failed"
        cases.append(case)
    return Suite(name, cases, sum(c.time_s for c in cases))
