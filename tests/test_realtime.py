"""Real-time helpers: setup report/restore, Pacer timing and policies, CycleStats."""
import gc
import json
import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

from hil.runtime import realtime
from hil.runtime.realtime import (HIST_EDGES_NS, SERIES, CycleStats, OverrunHalt, Pacer, RealtimeSetup,
                          apply_realtime)

MS = 1_000_000
FEATURES = ["sched_fifo", "affinity", "mlockall", "gc", "kworkers", "rt_throttling_lifted"]


class FakeClock:
    """Integer-ns clock that advances `tick_ns` per read; its sleep() jumps ahead."""

    def __init__(self, tick_ns: int = 1_000) -> None:
        self.t = 0
        self.tick_ns = tick_ns
        self.sleeps: list[float] = []

    def __call__(self) -> int:
        self.t += self.tick_ns
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += round(seconds * 1e9)

    def work(self, ns: int) -> None:
        self.t += ns


def fake_pacer(**kw) -> tuple[Pacer, FakeClock, int]:
    """A 1 ms pacer on a fake clock, already started; returns it, the clock and t0."""
    clock = FakeClock()
    pacer = Pacer(1e-3, clock=clock, sleep=clock.sleep, **kw)
    assert pacer.wait() == 0
    return pacer, clock, clock.t


def deadline_of(pacer: Pacer, clock: FakeClock, t0: int) -> tuple[int, int]:
    """wait(), then return (deadline waited for, relative to t0; lateness)."""
    late = pacer.wait()
    return clock.t - late - t0, late


# --------------------------------------------------------------------------- setup

def _assert_default_state(affinity: set[int]) -> None:
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert os.sched_getaffinity(0) == affinity


def test_apply_restore_report_structure():
    affinity = os.sched_getaffinity(0)
    setup = RealtimeSetup(priority=80, cpu=min(affinity), lock_memory=True, gc_mode="freeze")
    try:
        report = setup.apply()
    finally:
        setup.restore()
    _assert_default_state(affinity)
    assert [f.name for f in report.features] == FEATURES
    for f in report.features:
        assert isinstance(f.active, bool) and f.detail
    assert report["gc"].active  # gc can never be refused
    d = report.as_dict()
    json.dumps(d)
    assert set(d["features"]) == set(FEATURES)
    assert {"sched_rt_runtime_us", "sched_rt_period_us", "clocksource"} <= set(d["system"])
    text = str(report)
    assert all(name in text for name in FEATURES) and "rt throttle" in text
    print("\n" + text)


def test_refused_features_are_reported_not_raised(monkeypatch):
    def refuse(*_):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    monkeypatch.setattr(os, "sched_setaffinity", refuse)
    affinity = os.sched_getaffinity(0)
    report = apply_realtime(cpu=0, lock_memory=False)
    report.restore()
    monkeypatch.undo()
    _assert_default_state(affinity)
    for name in ("sched_fifo", "affinity"):
        assert not report[name].active and "PermissionError" in report[name].detail
    assert report["mlockall"].detail == "not requested"


def test_nothing_requested_changes_nothing():
    report = apply_realtime(priority=None, lock_memory=False, gc_mode="keep")
    assert all(not f.active and f.detail == "not requested" for f in report.features)
    assert gc.isenabled()
    with pytest.raises(ValueError):
        RealtimeSetup(gc_mode="off")


def test_kworkers_leave_the_loop_cpu_and_come_back(tmp_path, monkeypatch):
    mask = tmp_path / "cpumask"
    mask.write_text("3\n")
    monkeypatch.setattr(realtime, "WORKQUEUE_CPUMASK", str(mask))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    setup = RealtimeSetup(priority=None, cpu=0, lock_memory=False, gc_mode="keep")
    affinity = os.sched_getaffinity(0)
    try:
        report = setup.apply()
        assert report["kworkers"].active and mask.read_text() == "2"   # CPU 1 only
    finally:
        setup.restore()
    assert mask.read_text() == "3"
    assert os.sched_getaffinity(0) == affinity


def test_kworkers_need_a_pinned_cpu_and_a_spare_one(tmp_path, monkeypatch):
    monkeypatch.setattr(realtime, "WORKQUEUE_CPUMASK", str(tmp_path / "cpumask"))
    assert apply_realtime(priority=None, lock_memory=False, gc_mode="keep")["kworkers"].detail == "not requested"
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    report = RealtimeSetup(priority=None, cpu=0, lock_memory=False, gc_mode="keep").apply()
    report.restore()
    assert not report["kworkers"].active and "no CPU left" in report["kworkers"].detail


@pytest.mark.skipif(not {0, 1} <= os.sched_getaffinity(0), reason="needs CPUs 0 and 1")
def test_a_helper_process_leaves_the_loop_cpu(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        placed = RealtimeSetup(priority=None, cpu=0).place_process(helper.pid, "log_writer_cpus")
        assert placed.active and os.sched_getaffinity(helper.pid) == {1}
        unpinned = RealtimeSetup(priority=None).place_process(helper.pid, "log_writer_cpus")
        assert not unpinned.active and unpinned.detail.startswith("not requested")
        monkeypatch.setattr(os, "cpu_count", lambda: 1)
        crowded = RealtimeSetup(priority=None, cpu=0).place_process(helper.pid, "log_writer_cpus")
        assert not crowded.active and "no CPU left" in crowded.detail
    finally:
        helper.kill()
        helper.wait()


def lifting(path, cpu=0) -> RealtimeSetup:
    return RealtimeSetup(priority=None, cpu=cpu, lock_memory=False, gc_mode="keep", move_kworkers=False,
                         lift_rt_throttling=True, rt_runtime=str(path))


def test_rt_throttling_is_lifted_for_the_run_and_put_back(tmp_path, monkeypatch):
    runtime = tmp_path / "sched_rt_runtime_us"
    runtime.write_text("950000\n")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    setup = lifting(runtime)
    try:
        feature = setup.apply()["rt_throttling_lifted"]
        assert feature.active and "was 950000" in feature.detail and runtime.read_text() == "-1"
    finally:
        setup.restore()
    assert runtime.read_text() == "950000"
    # subjects that must not lift it: not asked for, no pinned CPU, no CPU left, a file that is not there
    assert RealtimeSetup(priority=None, cpu=0, lock_memory=False, gc_mode="keep", move_kworkers=False,
                         rt_runtime=str(runtime)).apply()["rt_throttling_lifted"].detail == "not requested"
    assert lifting(runtime, cpu=None).apply()["rt_throttling_lifted"].detail == "not requested"
    assert "not readable" in lifting(tmp_path / "missing").apply()["rt_throttling_lifted"].detail
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    refused = lifting(runtime).apply()
    refused.restore()
    assert not refused["rt_throttling_lifted"].active and "no CPU left" in refused["rt_throttling_lifted"].detail
    assert runtime.read_text() == "950000"


def test_rt_throttling_comes_back_when_the_emulator_is_killed(tmp_path):
    runtime = tmp_path / "sched_rt_runtime_us"
    runtime.write_text("950000")
    program = ("import os, sys, time\nos.cpu_count = lambda: 2\nfrom hil.runtime.realtime import RealtimeSetup\n"
               "r = RealtimeSetup(priority=None, cpu=0, lock_memory=False, gc_mode='keep', move_kworkers=False, "
               "lift_rt_throttling=True, rt_runtime=sys.argv[1]).apply()\n"
               "print(r['rt_throttling_lifted'].active, flush=True)\ntime.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", program, str(runtime)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "True\n" and runtime.read_text() == "-1"
    child.kill()
    child.wait()
    deadline = time.monotonic() + 30
    while runtime.read_text() != "950000" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runtime.read_text() == "950000"


def test_gc_disable_mode_does_not_freeze():
    with RealtimeSetup(priority=None, lock_memory=False, gc_mode="disable") as report:
        assert report["gc"].active and not gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.isenabled()


# --------------------------------------------------------------------------- pacer, real clock

@pytest.mark.realtime
@pytest.mark.parametrize("use_fifo", [False, True], ids=["default-sched", "fifo-setup"])
def test_pacer_1khz_real_clock(use_fifo):
    setup = RealtimeSetup(priority=80 if use_fifo else None, lock_memory=use_fifo,
                          gc_mode="freeze" if use_fifo else "keep")
    report = setup.apply()
    pacer, stats, wakes = Pacer(1e-3), CycleStats(1000), []
    try:
        for _ in range(500):
            late = pacer.wait()
            wakes.append(time.monotonic_ns())
            stats.record(late, 0, 0, 0)
    finally:
        setup.restore()
    span_ms = (wakes[-1] - wakes[0]) / MS
    # Grid slots passed: wake-ups plus the periods skipped after an overrun. Counting the
    # skipped slots keeps a rare scheduler hiccup on a loaded machine from failing the test.
    slots = len(wakes) - 1 + pacer.skipped_periods
    lat = stats.summary()["lateness"]
    print(f"\nFIFO requested={use_fifo} granted={report['sched_fifo'].active}: "
          f"mean period {span_ms / (len(wakes) - 1):.5f} ms ({span_ms / slots:.5f} ms per "
          f"slot), lateness p50 {lat['p50']:.2f} us, p99 {lat['p99']:.1f} us, "
          f"max {lat['max']:.1f} us; {pacer.counters()}")
    assert abs(span_ms / slots - 1.0) < 0.02
    assert pacer.skipped_periods <= 25  # missed-deadline budget: 5 % of the cycles
    assert lat["p99"] < 2000


# --------------------------------------------------------------------------- pacer, fake clock

def test_pacer_keeps_absolute_grid_and_spins_last_part():
    pacer, clock, t0 = fake_pacer(spin_s=150e-6)
    for k in range(1, 6):
        clock.work(300_000)
        deadline, late = deadline_of(pacer, clock, t0)
        assert deadline == k * MS and 0 <= late <= clock.tick_ns
    assert all(abs(s - 550e-6) < 5e-6 for s in clock.sleeps)  # 1 ms - 300 us work - 150 us spin
    assert pacer.overruns == pacer.skipped_periods == 0 and pacer.cycles == 6


def test_skip_policy_keeps_grid_and_counts_skipped_periods():
    pacer, clock, t0 = fake_pacer(overrun_policy="skip")
    assert deadline_of(pacer, clock, t0)[0] == 1 * MS
    clock.work(3_500_000)  # runs past the deadlines at 2, 3 and 4 ms
    assert deadline_of(pacer, clock, t0)[0] == 5 * MS
    assert (pacer.overruns, pacer.consecutive, pacer.skipped_periods) == (1, 1, 3)
    assert deadline_of(pacer, clock, t0)[0] == 6 * MS
    assert pacer.consecutive == 0 and pacer.max_consecutive == 1


def test_slip_policy_reanchors_grid_at_now():
    pacer, clock, t0 = fake_pacer(overrun_policy="slip")
    deadline_of(pacer, clock, t0)
    clock.work(3_500_000)
    now = clock.t + clock.tick_ns  # the clock read at the start of wait()
    deadline, late = deadline_of(pacer, clock, t0)
    assert deadline == now - t0 and late <= clock.tick_ns
    assert (pacer.overruns, pacer.skipped_periods) == (1, 0)
    assert deadline_of(pacer, clock, t0)[0] == now - t0 + MS


def test_halt_after_consecutive_overruns_only():
    pacer, clock, _ = fake_pacer(halt_after=2)
    for work in (1_500_000, 100_000, 1_500_000, 100_000):  # overruns, but never two in a row
        clock.work(work)
        pacer.wait()
    assert pacer.overruns == 2 and pacer.max_consecutive == 1
    clock.work(1_500_000)
    pacer.wait()
    clock.work(1_500_000)
    with pytest.raises(OverrunHalt):
        pacer.wait()
    assert pacer.consecutive == 2


def test_ignore_first_s_counts_separately_and_never_halts():
    pacer, clock, _ = fake_pacer(halt_after=1, ignore_first_s=0.010)
    for _ in range(3):
        clock.work(2_500_000)
        pacer.wait()
    assert (pacer.ignored_overruns, pacer.overruns, pacer.consecutive) == (3, 0, 0)
    clock.work(10 * MS)
    with pytest.raises(OverrunHalt):
        pacer.wait()
    assert pacer.overruns == 1


def test_afap_never_sleeps_but_counts():
    def no_sleep(_):
        raise AssertionError("afap must not sleep")

    clock = FakeClock()
    pacer = Pacer(1e-3, mode="afap", clock=clock, sleep=no_sleep)
    for _ in range(100):
        assert pacer.wait() == 0
        clock.work(2 * MS)
    c = pacer.counters()
    assert (c["cycles"], c["overruns"], c["skipped_periods"]) == (100, 0, 0)
    assert c["elapsed_s"] == pytest.approx(0.2, rel=0.01)


# --------------------------------------------------------------------------- cycle stats

def test_stats_percentiles_match_numpy_and_histogram_counts():
    rng = np.random.default_rng(1)
    data = rng.integers(0, 20 * MS, size=(4, 5000), dtype=np.int64)
    data[0, :3] = (500, 2_000, 30 * MS)  # below 1 us, inside, above 10 ms
    stats = CycleStats(5000)
    for row in data.T.tolist():
        stats.record(*row)
    s = stats.summary()
    assert (s["count"], s["retained"]) == (5000, 5000)
    for name, values in zip(SERIES, data):
        expected = np.percentile(values, [0, 50, 99, 99.9, 100]) / 1e3
        got = [s[name][k] for k in ("min", "p50", "p99", "p99.9", "max")]
        np.testing.assert_allclose(got, expected)
        hist = s["histogram"][name]
        assert len(hist) == len(HIST_EDGES_NS) + 1 and sum(hist) == 5000
        assert hist[-1] == np.count_nonzero(values >= 10 * MS)
        assert hist[0] == np.count_nonzero(values < 1_000)
    assert s["histogram"]["edges_us"][0] == 1.0 and s["histogram"]["edges_us"][-1] == 10_000.0
    json.dumps(stats.to_dict())
    table = stats.format_summary()
    assert all(name in table for name in SERIES) and "p99.9" in table


def test_stats_wraparound_keeps_last_capacity_samples():
    stats = CycleStats(100)
    for i in range(250):
        stats.record(i * 1000, 0, 0, 2 * i * 1000)
    s = stats.summary()
    assert (s["count"], s["retained"]) == (250, 100)
    assert (s["lateness"]["min"], s["lateness"]["max"]) == (150.0, 249.0)
    assert s["total"]["max"] == 498.0


def test_stats_empty_summary():
    s = CycleStats(10).summary()
    assert s["count"] == 0 and s["lateness"]["p50"] is None
    assert "-" in CycleStats(10).format_summary()


def test_stats_record_does_not_allocate():
    stats = CycleStats(1000)
    stats.record(1, 2, 3, 4)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(10_000):
            stats.record(123_456, 234_567, 345_678, 1_000_000)
        growth = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert growth < 256, growth  # one allocation per record would be >= 280 kB
    assert stats.count == 10_001
