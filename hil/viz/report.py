"""What a run report shows, built from a run log (and its summary when it has one).

Sections: the summary table with the verdicts; joint angles with their targets, rates, drive
torques (command and delivered) and motor currents with their limits; the tip and the elastic part
of its deflection (tip minus the undeformed arm's tip at the same joint angles) and each link's
modal coordinates; amplitude spectra of the tip deflection and the IMU channels with the
whole-arm modal frequencies of the linearisation (``hil modes``) marked; loop timing
(histograms, overruns on the time axis, the firmware's command age); the event timeline (faults,
watchdog, brakes, status bits, rejected frames); joint wrenches. What the log or summary does
not hold (targets, verdicts, ``cmd_age_us``, wrench or modal columns) is left out, and a note
says so.
"""
from __future__ import annotations

import html
import math
import re
from typing import Any

import numpy as np

from hil.logs.units import BRAKE_STATES, STATUS_BITS, describe
from hil.model.linearize import arm_frequencies_hz
from hil.viz.report_model import DEFAULT_MAX_POINTS, TIME, Plot, ReportData, Section, Series
from hil.viz.scene import ArmScene, model_of_log
from hil.viz.signals import log_histogram, minmax_decimate, welch_amplitude

__all__ = ["build_report", "DEFAULT_MAX_POINTS"]

IMU_AXES = ("ax", "ay", "az", "gx", "gy", "gz")
_TIMELINE = ("inject", "clear", "watchdog_tripped", "watchdog_cleared")


class _Builder:
    def __init__(self, header: dict[str, Any], rows: np.ndarray, summary: dict | None, name: str, max_points: int):
        self.h, self.rows, self.summary = header, rows, summary or {}
        self.cols = header["columns"]
        self.index = {c: i for i, c in enumerate(self.cols)}
        self.t = rows[:, self.index["t"]] if "t" in self.index else np.arange(len(rows), dtype=float)
        self.max_points = max_points
        self.signals: dict[str, np.ndarray] = {}
        mode = header.get("mode") or self.summary.get("mode") or "?"
        self.out = ReportData(f"Run report: {name}", f"{header.get('config', '?')}, mode {mode}, {len(rows)} rows, "
                                                     f"{self.t[-1] - self.t[0] if len(rows) else 0:.3f} s")
        self.out.events = list(header.get("events", []))
        self.asm = self._model()
        self.elastic: np.ndarray | None = None        # tip minus the undeformed tip (n, 3) [m]
        self.joints = self.asm.layout.joint_names if self.asm else \
            [c[2:] for c in self.cols if c.startswith("q_")]

    def _model(self):
        try:
            return model_of_log(self.h)
        except (ValueError, OSError) as exc:
            self.out.notes.append(f"arm model unavailable ({exc}): no elastic deflection, modal frequencies or limits")
            return None

    # ------------------------------------------------------------------ helpers
    def has(self, name: str) -> bool:
        return name in self.index

    def col(self, name: str) -> np.ndarray:
        return self.rows[:, self.index[name]]

    def sig(self, name: str, values: np.ndarray | None = None) -> str:
        """Register a full-rate time signal; returns its array key."""
        key = f"s:{name}"
        self.signals[key] = self.col(name) if values is None else values
        return key

    def series(self, name: str, label: str | None = None, **kw) -> Series:
        return Series(label or name, self.sig(name), **kw)

    def unit(self, name: str) -> str:
        return describe(name)[0]

    def motor(self, joint: str):
        if not self.asm:
            return None
        return self.asm.model.bodies[self.asm.layout.joint_names.index(joint)].joint.motor

    # ------------------------------------------------------------------ sections
    def build(self) -> ReportData:
        self.out.sections.append(self.summary_section())
        for section in (self.joint_section(), self.tip_section(), self.spectra_section(), self.timing_section(),
                        self.event_section(), self.wrench_section()):
            if section.plots or section.html:
                self.out.sections.append(section)
        self.decimate()
        return self.out

    def summary_section(self) -> Section:
        s = Section("summary", "Summary")
        parts = [_verdict_table(self.summary.get("verdicts")), _targets_table(self.summary.get("targets")),
                 _key_numbers(self.summary, self.h)]
        if not self.summary:
            parts.append("<p class=note>no summary beside the log (&lt;log&gt;.summary.json): verdicts and counters "
                         "are not shown</p>")
        s.html = "".join(parts)
        return s

    def _targets(self) -> dict[str, float]:
        return (self.summary.get("targets") or {}).get("setpoints_rad") or {}

    def joint_section(self) -> Section:
        s = Section("joints", "Joints and drives")
        targets = self._targets()
        for j in self.joints:
            if not self.has(f"q_{j}"):
                continue
            hl = [(float(targets[j]), "target")] if j in targets else []
            s.plots.append(Plot(f"q_{j}", f"joint angle {j}", TIME, [self.series(f"q_{j}", "q")], "rad", hlines=hl,
                                events=True))
        rates = [self.series(f"qd_{j}", j) for j in self.joints if self.has(f"qd_{j}")]
        if rates:
            s.plots.append(Plot("qd", "joint rates", TIME, rates, "rad/s", events=True))
        for j in self.joints:
            series = [self.series(n, lab) for n, lab in ((f"tau_cmd_{j}", "command"), (f"tau_{j}", "delivered"))
                      if self.has(n)]
            if series:
                m = self.motor(j)
                lim = m.torque_limit_N_m if m is not None else math.inf
                hl = [(lim, "limit"), (-lim, "-limit")] if math.isfinite(lim) else []
                s.plots.append(Plot(f"tau_{j}", f"drive torque {j} (link side)", TIME, series, "N m", hlines=hl,
                                    events=True))
        for j in self.joints:
            if self.has(f"cur_{j}"):
                m = self.motor(j)
                lim = m.current_limit_A if m is not None else math.inf
                hl = [(lim, "limit"), (-lim, "-limit")] if math.isfinite(lim) else []
                series = [self.series(f"cur_{j}", "measured")]
                if self.has(f"cur_{j}_true"):
                    series.append(self.series(f"cur_{j}_true", "true", dash=True))
                s.plots.append(Plot(f"cur_{j}", f"motor current {j}", TIME, series, "A", hlines=hl, events=True))
        return s

    def _elastic_tip(self) -> np.ndarray | None:
        """Tip minus the undeformed arm's tip at the same joint angles, (n, 3) [m]."""
        logged = all(self.has(f"tip_{a}") for a in "xyz")
        if self.asm is None or not logged or "tip" not in self.asm.layout.station_names:
            return None
        scene = ArmScene(self.asm)
        pos, _ = scene.coordinates(self.cols, self.rows)
        rigid = scene.station_positions("tip", self.t, scene.rigid(pos))
        return np.column_stack([self.col(f"tip_{a}") for a in "xyz"]) - rigid

    def tip_section(self) -> Section:
        s = Section("tip", "Tip and link deformation")
        if all(self.has(f"tip_{a}") for a in "xyz"):
            s.plots.append(Plot("tip", "tip position (world)", TIME, [self.series(f"tip_{a}", a) for a in "xyz"], "m",
                                events=True))
        self.elastic = self._elastic_tip()
        if self.elastic is not None:
            series = [Series(a, self.sig(f"tip_elastic_{a}", self.elastic[:, i] * 1e3)) for i, a in enumerate("xyz")]
            s.plots.append(Plot("tip_elastic", "elastic tip deflection (tip minus the undeformed arm's tip), world",
                                TIME, series, "mm", events=True))
        bodies = {}
        for c in self.cols:
            m = re.fullmatch(r"eta_(.+?)_((?:bending_[yz]|torsion|axial)_\d+)", c)
            if m:
                bodies.setdefault(m.group(1), []).append((c, m.group(2)))
        for body, entries in bodies.items():
            s.plots.append(Plot(f"eta_{body}", f"modal coordinates of {body} (tip amplitude per mode)", TIME,
                                [self.series(c, label) for c, label in entries], "m | rad", events=True))
        if not bodies:
            s.note = "the log has no modal coordinates (eta_<body>_<mode>)"
        return s

    def _modal_lines(self) -> list[tuple[float, str]]:
        if self.asm is None:
            return []
        freqs = arm_frequencies_hz(self.asm)
        lines = []
        for tag, values in (("L", freqs.locked_hz), ("F", freqs.free_hz)):     # joints locked, joints free
            modes = [float(f) for f in values if f > 0.05]
            lines += [(f, f"{tag}{i + 1} {f:.1f} Hz" if i < 4 else "") for i, f in enumerate(modes)]
        return lines

    def spectra_section(self) -> Section:
        s = Section("spectra", "Vibration spectra")
        if len(self.t) < 32:
            return s
        fs = 1.0 / float(np.median(np.diff(self.t)))
        marks = self._modal_lines()
        s.note = "Welch amplitude spectra (Hann, 2 s segments, half overlap) of the whole run"
        if marks:
            s.note += ("; vertical lines: whole-arm modal frequencies of the linearisation at the preset's initial "
                       "pose (hil modes): L joints locked, F joints free (the first four labelled)")
        if self.elastic is not None:
            s.plots.append(self._spectrum("spec_tip", "elastic tip deflection", [(a, self.elastic[:, i] * 1e3)
                                                                                for i, a in enumerate("xyz")],
                                          fs, "mm", marks))
        imus = sorted({c[:-3] for c in self.cols if re.fullmatch(r".+_(ax|ay|az|gx|gy|gz)", c)})
        for imu in imus:
            for group, unit in (("a", "m/s^2"), ("g", "rad/s")):
                chans = [(f"{imu}_{group}{x}", self.col(f"{imu}_{group}{x}")) for x in "xyz"
                         if self.has(f"{imu}_{group}{x}")]
                if chans:
                    what = "specific force" if group == "a" else "angular rate"
                    s.plots.append(self._spectrum(f"spec_{imu}_{group}", f"{imu} {what}", chans, fs, unit, marks))
        return s

    def _spectrum(self, pid: str, title: str, channels, fs: float, unit: str, marks) -> Plot:
        series = []
        f = None
        for label, x in channels:
            f, a = welch_amplitude(x, fs)
            key = self.out.add(f"{pid}:{label}", np.maximum(a[1:], 1e-30))
            series.append(Series(label, key))
        fkey = self.out.add(f"{pid}:f", f[1:], np.float64)
        top = f[-1] if len(f) else 0
        return Plot(pid, f"amplitude spectrum: {title}", fkey, series, unit, "f [Hz]",
                    vlines=[m for m in marks if m[0] <= top], logx=True, logy=True)

    def timing_section(self) -> Section:
        s = Section("timing", "Loop timing")
        period_us = float(self.h.get("period_s") or (self.asm.model.integrator.dt_s if self.asm else 1e-3)) * 1e6
        paced = self.h.get("mode", "realtime") == "realtime"     # lockstep and afap keep no deadlines: no lateness
        for name, title in (("lateness_us", "wake-up lateness"), ("compute_us", "compute time"), ("io_us", "I/O time"),
                            ("cmd_age_us", "command age (the firmware's reaction time)")):
            if not self.has(name) or (name == "lateness_us" and not paced):
                continue
            edges, counts = log_histogram(self.col(name))
            if len(edges):
                x = self.out.add(f"h:{name}:x", edges[:-1], np.float64)
                y = self.out.add(f"h:{name}:n", np.where(counts > 0, counts, np.nan))
                s.plots.append(Plot(f"hist_{name}", f"histogram: {title}", x, [Series("cycles", y, bars=True)],
                                    "cycles", "us", logx=True, logy=True))
        if not paced:
            s.note = f"{self.h.get('mode')} mode keeps no wall-clock deadlines: no lateness to show"
        if self.has("lateness_us") and paced:
            late = self.col("lateness_us")
            over = np.where(late > period_us, late, np.nan)
            n_over = int(np.count_nonzero(late > period_us))
            s.plots.append(Plot("lateness", f"lateness over the run: {n_over} cycles woke more than a period "
                                            f"({period_us:.0f} us) late", TIME,
                                [self.series("lateness_us", "lateness"),
                                 Series("later than a period", self.sig("overrun_us", over), points=True)],
                                "us", hlines=[(period_us, "period")], events=True))
        if self.has("cmd_age_us"):
            s.plots.append(Plot("cmd_age", "command age over the run", TIME, [self.series("cmd_age_us", "age")], "us",
                                events=True))
        else:
            s.note = "; ".join(filter(None, [s.note, "the log has no cmd_age_us column (the firmware's command age)"]))
        return s

    def event_section(self) -> Section:
        s = Section("events", "Events, brakes and status")
        lanes = list(_TIMELINE) + sorted({e["event"] for e in self.out.events} - set(_TIMELINE))
        if self.out.events:
            series = []
            for k, kind in enumerate(lanes):
                y = np.full(len(self.t), np.nan)
                for e in self.out.events:
                    if e["event"] == kind:
                        y[min(np.searchsorted(self.t, float(e["t"])), len(self.t) - 1)] = k
                series.append(Series(kind, self.sig(f"event_{kind}", y), points=True))
            s.plots.append(Plot("timeline", "event timeline", TIME, series, "", lanes=lanes, events=True))
        brakes = [self.series(f"brake_{j}", j) for j in self.joints if self.has(f"brake_{j}")]
        if brakes:
            s.plots.append(Plot("brakes", "holding brakes", TIME, brakes, "", events=True,
                                lanes=[BRAKE_STATES[k] for k in sorted(BRAKE_STATES)]))
        if self.has("status"):
            status = self.col("status").astype(np.int64)
            bits = [(b, n) for b, n in STATUS_BITS.items() if n != "RUNNING"]
            series = [Series(n, self.sig(f"status_{n}", np.where(status & b, k + 0.8, k).astype(float)))
                      for k, (b, n) in enumerate(bits)]
            s.plots.append(Plot("status", "status bits (raised: set in that cycle)", TIME, series, "",
                                lanes=[n for _, n in bits], events=True))
        s.html = _events_table(self.out.events) + _rejections_table(self.summary)
        return s

    def wrench_section(self) -> Section:
        s = Section("wrenches", "Joint wrenches")
        for j in self.joints:
            for kind, unit, axes in (("moment", "N m", ("mx", "my", "mz")), ("force", "N", ("fx", "fy", "fz"))):
                names = [f"w_{j}_{a}" for a in axes if self.has(f"w_{j}_{a}")]
                if names:
                    s.plots.append(Plot(f"w_{j}_{kind}", f"joint {j}: interaction {kind}", TIME,
                                        [self.series(n, n.rsplit("_", 1)[1]) for n in names], unit, events=True))
        if not s.plots:
            s.note = "the log has no joint wrench columns (w_<joint>_mx ... _fz)"
        return s

    def decimate(self) -> None:
        keys = list(self.signals)
        values = np.column_stack([self.signals[k] for k in keys]) if keys else np.zeros((len(self.t), 0))
        t, v = minmax_decimate(self.t, values, self.max_points)
        self.out.add(TIME, t, np.float64)
        for i, k in enumerate(keys):
            self.out.add(k, v[:, i])
        if len(t) < len(self.t):
            self.out.notes.append(f"time plots show min/max pairs of {math.ceil(len(self.t) / (len(t) // 2))}-sample "
                                  f"buckets ({len(self.t)} samples per signal in the log; statistics and spectra use "
                                  f"every sample)")


def build_report(header: dict[str, Any], rows: np.ndarray, summary: dict | None = None, name: str = "run",
                 max_points: int = DEFAULT_MAX_POINTS) -> ReportData:
    """The report's content (module docstring) from a run log's header and rows."""
    return _Builder(header, rows, summary, name, max_points).build()


# ---------------------------------------------------------------------- tables
def _esc(v: Any) -> str:
    return html.escape(str(v))


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return _esc(v)


def _verdict_table(verdicts: list[dict] | None) -> str:
    if not verdicts:
        return "<p class=note>no verdicts (the run had no targets)</p>"
    rows = "".join(
        f"<tr class={'pass' if v.get('passed') else 'fail'}><td>{'PASS' if v.get('passed') else 'FAIL'}</td>"
        f"<td>{_esc(v.get('name'))}</td><td>{_requirement(v.get('requirement'))}</td>"
        f"<td>{_esc(v.get('description', ''))}</td><td>{_num(v.get('value'))}</td>"
        f"<td>{_num(v.get('limit'))}</td><td>{_esc(v.get('unit', ''))}</td></tr>" for v in verdicts)
    passed = sum(bool(v.get("passed")) for v in verdicts)
    return (f"<div><h3>Verdicts: {passed} of {len(verdicts)} passed</h3><table class=verdicts><tr><th></th>"
            f"<th>name</th><th>requirement</th><th>description</th><th>value</th><th>limit</th><th>unit</th></tr>"
            f"{rows}</table></div>")


def _requirement(req: dict | None) -> str:
    """A verdict's requirement: its ID, its text on hover."""
    return "" if not req else f"<span title='{_esc(req.get('text', ''))}'>{_esc(req['id'])}</span>"


def _targets_table(targets: dict | None) -> str:
    if not targets:
        return ""
    def cell(v: Any) -> str:
        return ", ".join(f"{_esc(a)} {_num(b)}" for a, b in v.items()) if isinstance(v, dict) else _num(v)
    rows = "".join(f"<tr><td>{_esc(k)}</td><td>{cell(v)}</td></tr>" for k, v in targets.items())
    return f"<div><h3>Targets</h3><table>{rows}</table></div>"


def _key_numbers(s: dict, header: dict) -> str:
    items = [("config", header.get("config")), ("bus", header.get("bus")), ("link", header.get("link")),
             ("scenario", header.get("scenario")), ("cycles", s.get("cycles")), ("simulated time [s]", s.get("t_s")),
             ("mode", s.get("mode")), ("stopped", s.get("halted")),
             ("overruns", (s.get("pacer") or {}).get("overruns")),
             ("watchdog trips", (s.get("watchdog") or {}).get("trips")), ("log rows dropped", s.get("log_dropped")),
             ("tip residual vibration [mm p-p]", (s.get("tip_metrics") or {}).get("residual_pp_mm")),
             ("tip within the band of its final position from [s]", (s.get("tip_metrics") or {}).get("settled_at_s"))]
    for k, v in zip(s.get("joints") or [], s.get("q") or []):
        items.append((f"final angle {k} [rad]", v))
    timing = s.get("timing") or {}
    for key in ("lateness", "compute", "io"):
        if key in timing and timing[key]["p50"] is not None:      # none without cycles
            v = timing[key]
            items.append((f"{key} [us] p50 / p99 / max", f"{v['p50']:.1f} / {v['p99']:.1f} / {v['max']:.1f}"))
    fw = s.get("firmware") or {}
    if fw.get("fault"):
        items.append(("firmware fault", fw["fault"]))
    rows = "".join(f"<tr><td>{_esc(k)}</td><td>{_num(v)}</td></tr>" for k, v in items if v is not None)
    return f"<div><h3>Run</h3><table class=numbers>{rows}</table></div>"


def _events_table(events: list[dict]) -> str:
    if not events:
        return "<p class=note>no events in the log</p>"
    rows = "".join(f"<tr><td>{float(e['t']):.4f}</td><td>{_esc(e.get('cycle', ''))}</td><td>{_esc(e['event'])}</td>"
                   f"<td>{_esc(e.get('fault', ''))}</td><td>{_esc(e.get('detail', ''))}</td></tr>" for e in events)
    return (f"<div><h3>Events ({len(events)})</h3><table class=events><tr><th>t [s]</th><th>cycle</th><th>event</th>"
            f"<th>fault</th><th>detail</th></tr>{rows}</table></div>")


def _rejections_table(summary: dict) -> str:
    rejected = (summary.get("commands") or {}).get("rejected")
    if not rejected:
        return ""
    cells = "".join(f"<tr><td>{_esc(k)}</td><td>{_num(v)}</td></tr>" for k, v in rejected.items())
    link = summary.get("link") or {}
    cells += "".join(f"<tr><td>link {_esc(k)}</td><td>{_num(v)}</td></tr>" for k, v in link.items())
    return f"<div><h3>Rejected command frames per kind, link counters</h3><table class=numbers>{cells}</table></div>"
