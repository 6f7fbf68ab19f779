"""tools/bench_kernel.py (``hil bench kernel``): the quick benchmark runs and reports sane numbers;
tools/bench_loop.py (``hil bench loop``): the model-overhead comparisons run and print every model set;
tools/bench_checkouts.py: the loop of a checkout is timed; tools/bench_components.py: every model stage
is timed."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hil.cli.main import main as hil_main
from hil.logs import writer_process
from hil.logs.runlog import read_run
from hil.runtime.stages import STAGES
from tools import bench_checkouts, bench_components, bench_kernel, bench_loop, c_firmware


def _timings(obj, key: str = ""):
    """Every number under a key that names a time in us ("us", "..._us"), with its path."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _timings(v, f"{key}.{k}" if key else k)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _timings(v, f"{key}[{i}]")
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        names = [part.split("[")[0] for part in key.split(".")]
        if any(n == "us" or n.endswith("_us") for n in names) and names[-1] != "targets_us":
            yield key, float(obj)


@pytest.fixture(scope="module")
def quick_report():
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = bench_kernel.main(["--quick", "--json"])
    assert code == 0
    return json.loads(out.getvalue())


def test_quick_json_has_every_section(quick_report):
    rep = quick_report
    assert {"host", "timing", "numba_cache_dir", "ella", "pinocchio", "scaling", "simulate", "energy",
            "elapsed_s"} <= rep.keys()
    assert rep["timing"]["timer"] == "time.thread_time_ns"
    host = rep["host"]
    for key in ("cpu", "cores", "python", "numpy", "numba", "pinocchio", "openblas_coretype_set"):
        assert key in host
    ella = rep["ella"]
    assert ella["ok"]
    assert {"aba_us", "step_us", "plan", "goals_us", "pass"} <= ella.keys()
    assert set(ella["aba_us"]) == set(ella["step_us"]) == {"kernel", "python"}
    assert ella["goals_us"] == bench_kernel.GOALS_US == {"aba_kernel": 2.5, "aba_python": 4.0, "step_kernel": 12.0,
                                                         "step_python": 12.0}
    for key, ok in ella["pass"].items():       # each verdict is its timing against its goal
        row, col = key.split("_")
        assert ok == (ella[f"{row}_us"][col] <= ella["goals_us"][key])
        t = ella["timings"][key]
        assert t["min_us"] <= t["us"] <= t["max_us"]
    assert ella["plan"]["describe"] and ella["plan"]["substeps"] >= 1
    if (ella["plan"]["method"], ella["plan"]["substeps"]) != ("rk4", 1):       # the plan's own step, timed too
        assert {"plan_step_kernel", "plan_step_python"} <= ella["timings"].keys()
    sc = rep["scaling"]
    assert [r["links"] for r in sc["rows"]] == list(bench_kernel.SCALING_LINKS_QUICK)
    assert all(r["ok"] and r["max_rel_diff"] < 1e-8 for r in sc["rows"])
    assert "crossover_links" in sc and math.isfinite(sc["exponent"]["aba"]) and math.isfinite(sc["exponent"]["dense"])
    dae = rep["screw_dae"]
    assert [r["links"] for r in dae["rows"]] == ["ella", *bench_kernel.SCALING_LINKS_QUICK]
    assert all(r["ok"] and r["max_rel_diff"] < 1e-9 and r["dae_us"] > 0 and r["dae_python_us"] > 0
               for r in dae["rows"])
    assert dae["per_link"]["dae_us"] > 0 and dae["per_link"]["aba_us"] > 0


def test_quick_json_times_are_positive_and_finite(quick_report):
    times = dict(_timings(quick_report))
    assert len(times) >= 10
    assert "ella.aba_us.kernel" in times and "ella.step_us.python" in times
    bad = {k: v for k, v in times.items() if not (math.isfinite(v) and v > 0)}
    assert not bad


def test_quick_json_agrees_with_pinocchio(quick_report):
    pin = quick_report["pinocchio"]
    if not pin["available"]:
        pytest.skip("pinocchio is not installed")
    assert [r["joints"] for r in pin["chains"]] == list(bench_kernel.PIN_JOINTS_QUICK)
    for r in pin["chains"]:
        assert r["agree"] and r["ok"], r
        assert r["max_abs_diff"] >= 0
        assert r["pinocchio_us"] > 0 and r["ours_kernel_us"] > 0 and r["ours_python_us"] > 0
        for key in ("ratio_kernel", "ratio_python"):
            assert r["pass"][key] == (r[key] <= pin["goals"][key])
        assert r["ratio_kernel"] == pytest.approx(r["ours_kernel_us"] / r["pinocchio_us"])
    assert pin["all_agree"]


def test_quick_json_times_hil_simulate_in_a_child_process(quick_report):
    sim = quick_report["simulate"]
    assert "error" not in sim, sim
    assert sim["duration_s"] == 1.0 and len(sim["runs"]) == 1 and "hil simulate" in sim["command"]
    assert 0 < sim["loop_s"] < sim["wall_s"] and sim["cpu_s"] > 0
    assert sim["pass"] == (sim["wall_s"] <= sim["goal_s"] == bench_kernel.SIMULATE_GOAL_S)


def test_quick_json_judges_the_energy_of_each_plan_against_the_goal(quick_report):
    en = quick_report["energy"]
    assert en["goal"] == bench_kernel.ENERGY_GOAL == 1e-6 and en["duration_s"] == 1.0
    own, with_tolerance, *plans = en["rows"]
    assert (own["method"], own["substeps"]) == ("fitted_midpoint", 3)                  # ELLA's auto plan
    assert (with_tolerance["method"], with_tolerance["substeps"]) == ("rk4", 4)      # auto with the tolerance
    assert [(r["method"], r["substeps"]) for r in plans] == list(bench_kernel.ENERGY_PLANS[:1])
    for r in en["rows"]:
        assert r["pass_max"] == (r["max_deviation"] <= en["goal"]) and r["pass_drift"] == (abs(r["drift"]) <= en["goal"])
    assert with_tolerance["pass_max"] and not own["pass_max"]         # 1 s: 1.2e-9 against 1.5e-5


def test_quick_json_sets_the_default_plan_beside_rk4(quick_report):
    """Section 7: ELLA's default plan (the fitted midpoint x3) and RK4 at its stable substeps (x3, its friction
    resolved), each with its worst modal error, its joint motion error over the probe and its cost."""
    rows = {r["plan"]: r for r in quick_report["plans"]["rows"] if r["preset"] == "ella"}
    default, rk4 = rows["default"], rows["rk4"]
    assert (default["method"], default["substeps"], default["evaluations"]) == ("fitted_midpoint", 3, 6)
    assert (rk4["method"], rk4["substeps"], rk4["evaluations"]) == ("rk4", 3, 12)
    assert default["motion_error_rad"] <= 1e-6 and rk4["motion_error_rad"] < default["motion_error_rad"]
    assert 0 < default["modal_error"] < 1e-3 and 0 < rk4["modal_error"] < 1e-3
    assert default["step"]["us"] > 0 and default["step"]["ok"] and rk4["step"]["ok"]


def test_hil_bench_kernel_tables(capsys, quick_report):
    code = hil_main(["bench", "kernel", "--quick", "--sections", "ella"])
    out, _ = capsys.readouterr()
    assert code == 0
    assert out.startswith("host")
    assert "OPENBLAS_CORETYPE" in out and "integrator plan:" in out
    assert "forward dynamics (ABA)" in out and "1 ms step, RK4 x 1" in out and "[" in out   # median [spread]
    assert "1 ms step, fitted_midpoint x 3" in out                                 # ELLA's plan (auto)
    assert ("PASS" in out) or ("MISS" in out)
    assert "2. rigid limit" not in out and "3. scaling" not in out


def test_hil_bench_kernel_prints_the_energy_next_to_its_goal(capsys):
    assert hil_main(["bench", "kernel", "--quick", "--sections", "energy"]) == 0
    out = capsys.readouterr().out
    assert "6. energy of the undamped arm" in out and "goal 1e-06" in out
    assert "rk4 x4 (energy_tolerance 1e-06)" in out and "PASS" in out and "MISS" in out


def test_bad_section_is_a_usage_error(capsys):
    assert bench_kernel.main(["--sections", "ella,nonsense"]) == 2
    assert "nonsense" in capsys.readouterr().err


def test_loop_bench_models_prints_each_model_set_against_ideal(capsys):
    assert bench_loop.main(["--models", "--duration", "0.3", "--links", "pty", "--cpu", "-1"]) == 0
    out = capsys.readouterr().out
    rows = {line[2:20].strip(): line for line in out.splitlines() if line.startswith("  ")}
    for name in ("before", "models", "faulted", "models - before", "faulted - before"):
        assert "compute p50" in rows[name] and "total p50" in rows[name], out
    assert "configs/scenarios/overhead.toml" in out and "budget of 10 us" in out and "fault load" in out


def test_loop_bench_inprocess_reports_every_model_set(capsys):
    assert bench_loop.main(["--inprocess", "--cycles", "200", "--json"]) == 0
    ip = json.loads(capsys.readouterr().out)["inprocess"]
    t = ip["timing"]
    assert [t[n]["faults_active"] for n in ("before", "models", "faulted")] == [0, 0, 7]
    assert t["models"]["channels"] == t["faulted"]["channels"] > t["before"]["channels"]   # + motor currents
    for name in ("models", "faulted"):
        for series in ("compute", "total"):
            for q in ("p50", "p99"):
                assert 0 < t[name][series][q] < math.inf
                assert ip["difference_us"][name][series][q] == pytest.approx(t[name][series][q] - t["before"][series][q])
    stages = t["models"]["stages_us"]          # the compiled call is the "plant" stage; decode and encode around it
    assert stages["plant"]["p50"] > stages["sensors"]["p50"] and stages["decode"]["p50"] > 0
    assert list(t) == ["before", "models", "faulted"]
    for name in t:
        assert set(t[name]["stages_us"]) == {*STAGES, "compute", "cycle"}


@pytest.mark.skipif(c_firmware.compiler() is None, reason="no C compiler on this machine")
def test_loop_bench_rate10k_runs_both_firmwares_and_reports_overruns_by_cause_and_the_run_logs(capsys, tmp_path):
    pytest.importorskip("cantools")
    log = tmp_path / "tenk.msgpack"
    assert bench_loop.main(["--rate10k", "--duration", "0.3", "--cpu", "-1", "--log", str(log), "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["rate10k"]
    assert list(runs) == ["reference", "c"]
    writer = "process" if writer_process.available() else "thread"
    for firmware, s in runs.items():
        assert "error" not in s, s
        assert s["firmware"] == firmware and s["cycles"] == 3000 and "overruns" in s["pacer"]
        assert s["timing"]["lateness"]["p99"] is not None and len(s["loadavg_before"]) == 3
        assert s["overrun_causes"]["heartbeat"] is False       # the loop never sleeps: no heartbeat beside it
        assert s["commands"]["accepted"] > 0                    # the firmware answered (the C one on the generated code)
        rows = bench_loop.rate_rows(s, 0.3)
        assert any(f"10 kHz, {bench_loop.firmware_label(firmware)}" in row for row in rows)
        assert any("not caused by the host" in row for row in rows)
        # 3000 rows fit the writer process's ring even if it never ran: none may be missing
        assert s["log"]["writer"] == writer and s["log"]["writer_error"] is None
        assert any(f"run log ({writer} writer): {s['log']['dropped_rows']} rows dropped" in row for row in rows)
        _, logged = read_run(tmp_path / f"tenk_{firmware}.msgpack")
        if writer == "process":
            assert s["log"]["dropped_rows"] == 0 and len(logged) == 3000
        assert len(logged) + s["log"]["dropped_rows"] == 3000


def test_rate10k_counts_every_overrun_but_the_host_stalls_against_the_goal():
    s = {"firmware": "c", "cycles": 600000, "loadavg_before": [0.1] * 3, "loadavg_after": [0.2] * 3,
         "pacer": {"overruns": 1000, "max_consecutive": 40, "skipped_periods": 50},
         "overrun_causes": {"host_stall": 400, "compute": 100, "io": 300, "late_wakeup": 200, "heartbeat": False},
         "timing": {series: {"p50": 1.0, "p99": 2.0, "p99.9": 3.0, "max": 4.0}
                    for series in ("lateness", "compute", "io", "total")}}
    assert bench_loop.not_host_overruns(s) == 600
    rows = bench_loop.rate_rows(s, 60.0)
    assert "not caused by the host: 600 = 0.100 % of the cycles (goal at most 0.1 %)" in rows[2]
    assert "host stall 400, compute 100, I/O 300, late wake-up 200" in rows[1]
    s["overrun_causes"]["host_stall"] = 0                       # host stalls do not count; the others do
    s["overrun_causes"]["io"] = 1300
    assert bench_loop.not_host_overruns(s) == 1600


def test_rate10k_refuses_an_unknown_firmware_and_reports_one_that_does_not_build(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit):
        bench_loop.main(["--rate10k", "--rate10k-firmware", "reference,rust", "--duration", "0.1"])
    assert "--rate10k-firmware 'reference,rust'" in capsys.readouterr().err
    monkeypatch.setattr(bench_loop, "C_FIRMWARE_10KHZ", "no_such_firmware.c")
    s = bench_loop.rate_10khz(0.1, None, None, firmware="c")
    assert s["firmware"] == "c" and s["error"].startswith("C firmware not built:"), s
    assert bench_loop.rate_rows(s, 0.1) == [f"10 kHz, the C firmware (no_such_firmware.c): failed: {s['error']}"]


def test_checkout_bench_times_the_loop_of_each_checkout(capsys):
    root = Path(__file__).resolve().parent.parent
    assert bench_checkouts.main([str(root), "--cycles", "50", "--rounds", "1", "--json"]) == 0
    (name, run), = json.loads(capsys.readouterr().out)["runs"]
    assert name == str(root) and 0 < run["compute"]["p50"] <= run["total"]["p50"] < math.inf


def test_checkout_kernel_table_gives_each_row_the_median_over_rounds_and_its_spread():
    runs = [("/a", {"fd kernel": 8.0, "simulate 10 s wall s": 2.0}), ("/b", {"fd kernel": 2.5}),
            ("/a", {"fd kernel": 9.0, "simulate 10 s wall s": 2.2}), ("/b", {"error": "boom"}),
            ("/a", {"fd kernel": 8.5, "simulate 10 s wall s": 2.1})]
    lines = bench_checkouts.kernel_table(runs)
    header, fd, sim = lines[:3]
    assert header.split() == ["a", "b"]
    assert fd.split()[2:] == ["8.5", "[8-9]", "2.5", "[2.5-2.5]"]
    assert sim.split()[5:] == ["2.1", "[2-2.2]", "-"]
    assert lines[-1].strip() == "/b: failed: boom"


def test_trace_analysis_finds_silent_stretches_and_waits_of_the_loop():
    from tools.trace_stalls import analyse, parse

    def line(t: float, name: str, rest: str) -> str:
        return f"          <idle>-0       [000] d..2. {t:.6f}: {name}: {rest}"

    def wakeup(t: float) -> str:
        return line(t, "sched_wakeup", "comm=hil pid=7 prio=19 target_cpu=000")

    def switch(t: float, prev: int, state: str, nxt: int) -> str:
        return line(t, "sched_switch", f"prev_comm=x prev_pid={prev} prev_prio={19 if prev == 7 else 120} "
                                       f"prev_state={state} ==> next_comm=y next_pid={nxt} next_prio=120")
    lines = []
    for k in range(6000):                     # the loop (pid 7, SCHED_FIFO 80) wakes and runs every 1 ms
        t = 1e-3 * k
        if 3.0 < t < 3.009:                   # 9 ms without any event: the CPU was not running
            continue
        if k == 4000:                         # at 4 s it waits 1.6 ms for the CPU after its wake-up
            lines += [wakeup(t), line(t + 8e-4, "irq_handler_entry", "irq=11 name=x"),
                      switch(t + 1.6e-3, 0, "R", 7), switch(t + 1.8e-3, 7, "S", 0)]
        elif k != 4001:
            lines += [wakeup(t), switch(t + 1e-5, 0, "R", 7), switch(t + 2e-4, 7, "S", 0)]
    report = analyse(parse("\n".join(lines)), 1.5e-3)
    assert report["loop_pid"] == "7"
    assert [(round(g["at_s"], 4), round(g["ms"], 1)) for g in report["gaps"]] == [(3.0002, 8.8)]
    assert [(round(w["at_s"], 3), round(w["ms"], 2)) for w in report["waits"]] == [(4.0, 1.6)]


def test_component_bench_times_every_stage(capsys):
    assert bench_components.main(["--number", "20", "--repeat", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {"drives", "sensors", "faults", "codecs", "canopen"}
    for section in report.values():
        for what, us in section.items():
            assert 0 < us < math.inf or what.startswith("sensor stage"), (what, us)


def test_campaign_bench_reports_rates_overhead_and_memory(capsys):
    assert hil_main(["bench", "campaign", "--cases", "2", "--bare", "1", "--duration", "0.2", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["cases"] == 2 and r["engine"] == "local"
    assert r["bare_hil_run_s"] > 0 and r["cases_per_s_1_worker"] > 0 and r["cases_per_s_2_workers"] > 0
    assert math.isclose(r["speedup_2_workers"], r["cases_per_s_2_workers"] / r["cases_per_s_1_worker"])
    assert math.isfinite(r["overhead_per_case"]) and r["case_process_max_rss_mb"] > 50   # numba and the plant
    # a case's hil run and firmware processes are children: their CPU time is counted, not only the campaign's
    assert r["bare_cpu_s"] > 0.5 and r["campaign_cpu_per_case_s"] > 0.5
    assert math.isclose(r["cpu_overhead_per_case"], r["campaign_cpu_per_case_s"] / r["bare_cpu_s"] - 1)
    w = r["in_workers"]            # the same cases in long-lived workers
    assert w["cases_per_s_1_worker"] > 0 and w["cases_per_s_2_workers"] > 0 and 0 < w["case_loop_s"] < 10
    assert w["steady_cases_per_s_1_worker"] > 0 and w["steady_cases_per_s_2_workers"] is None     # 2 cases, 2 workers
    assert math.isclose(w["overhead_per_case_s"], 1 / w["steady_cases_per_s_1_worker"] - w["case_loop_s"])


def test_the_steady_campaign_rate_counts_the_cases_that_ended_after_every_worker_had_one(tmp_path):
    """Rows in case order, ends out of order: 2 workers' first cases end at 10 and 12 s, three more at 13,
    14 and 16 s: 3 cases over 4 s, their own loops 0.2, 0.3 and 0.4 s. A campaign of no more cases than
    workers has no steady rate."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tools.bench_campaign import steady_rate
    ends, loops = [12.0, 16.0, 10.0, 14.0, 13.0], [0.1, 0.4, 0.1, 0.3, 0.2]
    pq.write_table(pa.table({"case_id": [f"c{i}" for i in range(5)], "ended_unix_s": ends, "loop_s": loops}),
                   tmp_path / "results.parquet")
    assert steady_rate(tmp_path, 2) == pytest.approx((3 / 4, 0.3))
    assert steady_rate(tmp_path, 1) == pytest.approx((4 / 6, (0.1 + 0.2 + 0.3 + 0.4) / 4))
    assert steady_rate(tmp_path, 5) == (None, None)


def test_the_friction_chatter_scan_puts_the_onset_above_the_bound_the_plant_keeps():
    """tools.friction_chatter on the real kernel: at the bound FRICTION_BOUND keeps (15) no run of the scan
    chatters; at 27 some do (the subject the floor exists for)."""
    from hil.dynamics.integrator_plan import FRICTION_BOUND
    from tools import friction_chatter

    rep = friction_chatter.scan("fitted_midpoint", [FRICTION_BOUND["fitted_midpoint"], 27.0])
    quiet, loud = rep["rows"]
    assert quiet["chattering_runs"] == 0 and loud["chattering_runs"] > 0 and rep["onset_ratio"] == 27.0


def test_lockstep_checkouts_compares_bit_for_bit_and_refuses_what_it_cannot_run(tmp_path, capsys):
    """tools.lockstep_checkouts: two logs alike but for the timings are identical, a one-ulp change of a joint
    angle is found; a checkout that cannot run is an exit status 2 naming it (the tool's whole runs are
    measured in the closing notes: minutes per pair of checkouts)."""
    import numpy as np
    from runlogs import write_synthetic_log

    from hil.logs.runlog import MsgpackRunWriter
    from tools import lockstep_checkouts

    header, rows = write_synthetic_log(tmp_path / "a.msgpack")
    cols = header["columns"]

    def variant(name, change):
        out = rows.copy()
        change(out)
        with MsgpackRunWriter(tmp_path / name, {"columns": cols}) as w:
            for row in out:
                w.write(row)
        return tmp_path / name

    timings = variant("b.msgpack", lambda r: r.__setitem__((slice(None), cols.index("lateness_us")), 7.0))
    moved = variant("c.msgpack", lambda r: r.__setitem__((5, cols.index("q_elbow")),
                                                          np.nextafter(r[5, cols.index("q_elbow")], 1.0)))
    assert lockstep_checkouts.compare(tmp_path / "a.msgpack", timings)["identical"]
    assert lockstep_checkouts.compare(tmp_path / "a.msgpack", moved)["differing"] == ["q_elbow"]
    assert lockstep_checkouts.main([str(tmp_path / "nowhere"), ".", "--runs", "pid", "--duration", "0.1"]) == 2
    assert "nowhere" in capsys.readouterr().err


def test_loop_bench_measures_a_co_simulated_fmu_against_the_loop_without_it(tmp_path, capsys):
    pytest.importorskip("fmpy")
    from pythonfmu import FmuBuilder

    FmuBuilder.build_FMU(Path(__file__).parent / "fmus" / "spring_load.py", dest=tmp_path)
    connect = "joint.elbow.q_rad=SpringLoad.q, SpringLoad.load=joint.elbow.load_N_m"
    assert bench_loop.main(["--fmu", str(tmp_path / "SpringLoad.fmu"), "--connect", connect, "--duration", "0.3",
                            "--cpu", "-1", "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["fmu"]
    assert set(f["timing"]) == {"without", "with_fmu"} and f["difference_us"] is not None
    assert 0 < f["step_us"]["cycles"] <= 300 and 0 < f["step_us"]["p50_us"] <= f["step_us"]["max_us"]
    with pytest.raises(SystemExit) as exit_info:
        bench_loop.main(["--fmu", str(tmp_path / "SpringLoad.fmu")])
    assert exit_info.value.code == 2 and "--fmu and --connect go together" in capsys.readouterr().err


def test_loop_bench_measures_the_xcp_slave_idle_and_with_daq(capsys):
    assert bench_loop.main(["--xcp", "--cycles", "300", "--json"]) == 0
    x = json.loads(capsys.readouterr().out)["xcp"]
    assert set(x["stats_us"]) == {"none", "none (A/A)", "idle", "daq20"}
    assert set(x["difference_us"]) == {"none (A/A)", "idle", "daq20"}
    # every timed and warm-up cycle of the DAQ setting sent one packet, and the master got each
    assert x["daq_packets_sent"] == 300 + 1000 and x["daq_packets_lost"] == 0
    assert x["daq_packets_received"] == x["daq_packets_sent"]
    assert bench_loop.main(["--xcp", "--cycles", "300"]) == 0
    assert "the idle slave adds" in capsys.readouterr().out


def test_campaign_scale_kills_resumes_and_queries_a_campaign(capsys):
    """tools.campaign_scale on 400 short cases killed after 4 s: no worker outlives the kill, the rerun completes the
    table with one row per case, and the query counts them."""
    from tools import campaign_scale

    assert campaign_scale.main(["--cases", "400", "--kill-after", "4", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["workers_left_after_kill"] == 0 and r["duplicates_refused"] == 0 and r["status"] == {"passed": 400}
    assert r["table"]["cases"] == r["table"]["ids"] == 400 and r["rows_before_resume"] < 400
    assert r["table"]["rss_max"] > 50
