"""`hil report`: what the page holds for a log with and without the optional columns and summary
(targets, verdicts, cmd_age_us, joint wrenches), the signal processing behind it, and the page in
a real browser (headless Chromium: every plot drawn, no script error, pixels not blank);
`hil plot` writes a figure."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from hil.cli.main import main
from hil.logs.runlog import read_run
from hil.viz.browser import find_chromium, render_page
from hil.viz.report import build_report
from hil.viz.report_html import render_html
from hil.viz.signals import log_histogram, minmax_decimate, welch_amplitude
from runlogs import SETPOINTS, write_synthetic_log


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    full, bare = d / "full.msgpack", d / "bare.msgpack"
    write_synthetic_log(full, duration_s=3.0, optional=True)
    write_synthetic_log(bare, duration_s=3.0, optional=False)
    return full, bare


def _report(path, **kw):
    header, rows = read_run(path)
    summary_path = str(path) + ".summary.json"
    import json
    summary = json.loads(open(summary_path).read()) if os.path.exists(summary_path) else None
    return build_report(header, rows, summary, path.name, **kw)


def _plot(report, pid):
    return next(p for s in report.sections for p in s.plots if p.id == pid)


def test_optional_content_is_shown_when_present(logs):
    full = _report(logs[0])
    ids = set(full.plot_ids())
    assert {"hist_cmd_age_us", "cmd_age", "w_elbow_moment", "w_base_yaw_force"} <= ids
    assert {"q_elbow", "tau_elbow", "cur_elbow", "tip_elastic", "eta_link2", "spec_tip", "spec_imu_a", "spec_imu_g",
            "hist_lateness_us", "lateness", "timeline", "brakes", "status"} <= ids
    assert _plot(full, "q_elbow").hlines == [(SETPOINTS["elbow"], "target")]
    html = full.sections[0].html
    assert "Verdicts: 1 of 2 passed" in html and "<tr class=fail><td>FAIL</td><td>overshoot" in html
    assert "settling_band_m" in html
    events = next(s for s in full.sections if s.id == "events").html
    assert "Rejected command frames" in events and "<td>crc</td><td>2</td>" in events


def test_absent_content_is_skipped_with_a_note(logs):
    bare = _report(logs[1])
    ids = set(bare.plot_ids())
    assert not {"hist_cmd_age_us", "cmd_age"} & ids and not any(i.startswith("w_") for i in ids)
    assert _plot(bare, "q_elbow").hlines == []
    assert "no verdicts" in bare.sections[0].html and "no summary" in bare.sections[0].html
    timing = next(s for s in bare.sections if s.id == "timing")
    assert "cmd_age_us" in timing.note
    assert "wrenches" not in [s.id for s in bare.sections]


def test_limits_modal_frequencies_and_overruns_are_marked(logs):
    r = _report(logs[0])
    from hil.model.config import load_model
    motor = load_model("configs/ella.toml").bodies[2].joint.motor
    assert [y for y, _ in _plot(r, "tau_elbow").hlines] == [motor.torque_limit_N_m, -motor.torque_limit_N_m]
    assert [y for y, _ in _plot(r, "cur_elbow").hlines] == [motor.current_limit_A, -motor.current_limit_A]
    marks = _plot(r, "spec_tip").vlines
    assert marks and all(f > 0 for f, _ in marks) and marks[0][1].startswith("L1 ")
    assert "1 cycles woke more than a period" in _plot(r, "lateness").title


def test_elastic_deflection_is_the_modal_part_of_the_tip(logs):
    """The synthetic tip is the model's tip at (q, eta): its elastic part vanishes with eta."""
    header, rows = read_run(logs[0])
    cols = header["columns"]
    r = build_report(header, rows, None, "x", max_points=10 ** 6)
    elastic = r.arrays["s:tip_elastic_z"]
    assert np.max(np.abs(elastic)) > 0.05                   # mm: the links ring
    still = rows.copy()
    still[:, [i for i, c in enumerate(cols) if c.startswith("eta_")]] = 0.0
    from hil.viz.scene import ArmScene, model_of_log
    scene = ArmScene(model_of_log(header))
    pos, _ = scene.coordinates(cols, still)
    still[:, [cols.index(f"tip_{a}") for a in "xyz"]] = scene.station_positions("tip", still[:, 1], pos)
    r0 = build_report(header, still, None, "x", max_points=10 ** 6)
    assert np.max(np.abs(r0.arrays["s:tip_elastic_z"])) < 1e-9


def test_display_decimation_keeps_peaks_and_order():
    t = np.arange(100_000) * 1e-3
    y = np.sin(2 * np.pi * 0.5 * t)
    y[31_337] = 25.0                                         # a one-sample spike
    y[70_001] = -30.0
    td, yd = minmax_decimate(t, y[:, None], 2000)
    assert len(td) <= 2000 and yd.max() == 25.0 and yd.min() == -30.0
    assert np.all(np.diff(td) >= 0)
    small_t, small_y = minmax_decimate(t[:100], y[:100, None], 2000)
    assert small_t is t[:100] or np.array_equal(small_t, t[:100])


def test_welch_amplitude_reads_a_sines_amplitude_at_its_frequency():
    fs = 1000.0
    t = np.arange(20_000) / fs
    x = 0.3 * np.sin(2 * np.pi * 12.0 * t) + 0.05 * np.sin(2 * np.pi * 80.0 * t) + 2.0
    f, a = welch_amplitude(x, fs)
    k = np.argmax(a)
    assert f[k] == pytest.approx(12.0, abs=0.5) and a[k] == pytest.approx(0.3, rel=0.02)
    assert a[np.argmin(np.abs(f - 80.0))] == pytest.approx(0.05, rel=0.05)
    assert a[0] < 1e-3                                       # the mean is removed


def test_log_histogram_counts_every_sample():
    v = np.concatenate([np.full(1000, 0.0), np.full(10, 5000.0), [np.nan]])
    edges, counts = log_histogram(v)
    assert counts.sum() == 1010 and counts[0] == 1000 and counts[-1] == 10 and edges[-1] == 5000.0


def test_report_command_writes_one_self_contained_page(logs, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", str(logs[0]), "--out", str(out)]) == 0
    assert "report ->" in capsys.readouterr().out
    text = out.read_text()
    assert not re.findall(r"(?:src|href)\s*=\s*[\"']?(?:https?:)?//", text) and "<link" not in text  # nothing fetched
    assert "uPlot" in text and text.count("class=plot ") == len(_report(logs[0]).plot_ids())


def _check_in_browser(html_path, tmp_path, n_plots):
    page = render_page(html_path, tmp_path / "shot.png")
    body = re.search(r"<body[^>]*>", page.dom).group(0)
    assert f'data-rendered="{n_plots}"' in body and 'data-errors="0"' in body, (body, page.console)
    assert page.dom.count("<canvas") >= n_plots
    assert not [m for m in page.console if "error" in m.lower()], page.console
    import matplotlib.image
    pixels = matplotlib.image.imread(page.screenshot)
    assert pixels.shape[0] > 500 and pixels.std() > 0.05        # not a blank page
    return page


@pytest.mark.parametrize("which", [0, 1])
def test_report_renders_in_headless_chromium(logs, tmp_path, which):
    if find_chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("CI: Chromium (Debian package chromium) is missing; .ci/run installs it")
        pytest.skip("no Chromium on this machine (Debian package chromium): the browser check needs it")
    out = tmp_path / "r.html"
    data = _report(logs[which])
    out.write_text(render_html(data))
    page = _check_in_browser(out, tmp_path, len(data.plot_ids()))
    # log axes: every tick labelled, none rounded to "0" (the spectra reach 1e-9)
    ticks = re.findall(r'data-yticks="([^"]*)"', page.dom)
    assert ticks and all(t and "0" not in t.split() for t in ticks), ticks
    assert any("e-" in t for t in ticks), ticks
    # the modal-frequency labels drawn do not overlap (a label that does not fit is left out)
    drawn = [label_spans(v) for v in re.findall(r'data-vlabels="([^"]*)"', page.dom)]
    assert any(drawn) if which == 0 else True
    for rows in drawn:
        assert not overlapping(rows), rows


def label_spans(vlabels: str) -> dict[int, list[tuple[int, int]]]:
    """The marker labels a plot drew, by row: their left and right edges in pixels."""
    rows: dict[int, list[tuple[int, int]]] = {}
    for item in filter(None, vlabels.split(";")):
        x0, x1, row = map(int, item.rsplit("@", 1)[1].split(":"))
        rows.setdefault(row, []).append((x0, x1))
    return rows


def overlapping(rows: dict[int, list[tuple[int, int]]]) -> bool:
    return any(b[0] <= a[1] for spans in rows.values() for a, b in zip(sorted(spans), sorted(spans)[1:]))


def test_the_overlap_check_finds_overlapping_labels():
    assert overlapping(label_spans("L1 b1@10:60:0;L1 b2@40:90:0"))
    assert not overlapping(label_spans("L1 b1@10:60:0;L1 b2@40:90:1;L2 b1@70:99:0"))


def test_a_lockstep_report_shows_no_lateness(logs, tmp_path):
    header, rows = read_run(logs[0])
    lockstep = build_report({**header, "mode": "lockstep"}, rows, None, "lockstep.msgpack")
    ids = set(lockstep.plot_ids())
    assert not {"hist_lateness_us", "lateness"} & ids and {"hist_compute_us", "cmd_age"} <= ids
    assert "lockstep mode keeps no wall-clock deadlines" in next(s for s in lockstep.sections if s.id == "timing").note


def test_browser_check_fails_on_a_broken_page(tmp_path):
    """The browser check itself can fail: a page whose script throws is caught."""
    if find_chromium() is None:
        pytest.skip("no Chromium on this machine")
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><html><body><script>document.body.dataset.rendered='0';"
                    "undefinedFunction();</script></body></html>")
    with pytest.raises(AssertionError):
        _check_in_browser(page, tmp_path, 3)


def test_plot_command_saves_a_figure(logs, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "q.png"
    assert main(["plot", str(logs[1]), "q_*", "tip_z", "--out", str(out)]) == 0
    assert "4 signals" in capsys.readouterr().out and out.stat().st_size > 10_000
    assert main(["plot", str(logs[1]), "nothing_*", "--out", str(out)]) == 2
