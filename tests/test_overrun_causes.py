"""Overruns attributed to their cause: the emulator's own compute or I/O, a late wake-up, or a host
stall (nothing of the process ran: shown here with a real SIGSTOP of the whole process)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hil.cli.integrity_summary import integrity_lines
from hil.runtime.pacer import Pacer
from hil.runtime.stalls import Heartbeat, OverrunCauses, thread_usage, usage_between

ROOT = Path(__file__).resolve().parent.parent
MS = 1_000_000


def causes_with_gap(gap: tuple[int, int] | None) -> OverrunCauses:
    hb = Heartbeat()                      # not started: its gaps are set by hand
    if gap is not None:
        hb.gaps[0] = gap
        hb.count = 1
    return OverrunCauses(1e-3, hb)


def test_only_a_pacer_that_sleeps_has_room_for_a_heartbeat():
    assert Pacer(1e-3).sleeps and not Pacer(1e-4).sleeps and not Pacer(1e-3, mode="afap").sleeps


def test_a_loop_never_switched_out_that_got_no_cpu_was_not_run_by_the_host():
    c = OverrunCauses(1e-4, None)           # no heartbeat: the loop never sleeps (10 kHz)
    # 2 ms late, 0.1 ms of CPU time, never switched out: the machine did not run it
    assert c.attribute(0, 2 * MS, cpu_ns=MS // 10, compute_ns=30_000, io_ns=20_000, switches=0) == "host_stall"
    # subjects that must fail: it was switched out (slept, waited for a lock, was preempted) ...
    assert c.attribute(0, 2 * MS, cpu_ns=MS // 10, compute_ns=30_000, io_ns=20_000, switches=1) == "late_wakeup"
    # ... or it ran through the stretch: its own work, or a late wake-up
    assert c.attribute(0, 2 * MS, cpu_ns=2 * MS, compute_ns=150_000, io_ns=20_000, switches=0) == "compute"
    assert c.attribute(0, 2 * MS, cpu_ns=2 * MS, compute_ns=30_000, io_ns=20_000, switches=0) == "late_wakeup"
    summary = c.summary()
    assert summary["heartbeat"] is False and summary["host_stall"] == 1
    line, = integrity_lines({"overrun_causes": summary, "pacer": {"overruns": 4}})
    assert "host stall 1 (no heartbeat: the loop never sleeps" in line
    beat = causes_with_gap((10 * MS, 19 * MS)).summary()
    assert "(heartbeat gaps 1, longest" in integrity_lines({"overrun_causes": beat, "pacer": {"overruns": 1}})[0]


def test_thread_usage_counts_cpu_time_and_switches():
    before = thread_usage()
    end = time.monotonic_ns() + 20 * MS
    while time.monotonic_ns() < end:
        pass
    assert usage_between(before, thread_usage())[0] > 0
    before = thread_usage()
    time.sleep(0.01)                                # a sleep is a context switch
    assert usage_between(before, thread_usage())[1] >= 1


def test_each_cause_is_told_apart():
    c = causes_with_gap((10 * MS, 19 * MS))
    # a stretch with a heartbeat gap in which the loop thread barely ran: the host stalled
    assert c.attribute(9 * MS, 20 * MS, cpu_ns=MS // 10, compute_ns=MS // 10, io_ns=MS // 20) == "host_stall"
    # the same stretch, but the loop thread computed through it: its own work
    assert c.attribute(9 * MS, 20 * MS, cpu_ns=10 * MS, compute_ns=10 * MS, io_ns=MS // 20) == "compute"
    # no gap: long work is compute or I/O by the larger part, short work a late wake-up
    assert c.attribute(30 * MS, 33 * MS, cpu_ns=MS, compute_ns=MS // 10, io_ns=2 * MS) == "io"
    assert c.attribute(30 * MS, 33 * MS, cpu_ns=MS // 10, compute_ns=MS // 10, io_ns=MS // 10) == "late_wakeup"
    assert c.counts == {"host_stall": 1, "compute": 1, "io": 1, "late_wakeup": 1}


def test_a_gap_the_heartbeat_has_not_yet_noted_is_a_host_stall_too():
    """After a stop both threads wake; when the loop looks first, the heartbeat's last beat is old."""
    c = causes_with_gap(None)
    c.heartbeat.last_ns = 10 * MS                    # no beat since 10 ms, 10 ms before the loop looks
    assert c.attribute(9 * MS, 20 * MS, cpu_ns=MS // 10, compute_ns=MS // 10, io_ns=MS // 20) == "host_stall"
    c.heartbeat.last_ns = 19 * MS                    # a beat 1 ms ago: the process ran
    assert c.attribute(9 * MS, 20 * MS, cpu_ns=MS // 10, compute_ns=MS // 10, io_ns=MS // 20) == "late_wakeup"


def test_without_a_heartbeat_nothing_is_called_a_host_stall():
    c = OverrunCauses(1e-3, None)
    assert c.attribute(0, 20 * MS, cpu_ns=0, compute_ns=0, io_ns=0) == "late_wakeup"
    assert c.summary()["heartbeat_gaps"] == 0


def test_the_heartbeat_notes_a_thread_that_could_not_run():
    hb = Heartbeat().start()
    try:
        time.sleep(0.01)
        start = time.monotonic_ns()
        # hold the GIL for 20 ms: the heartbeat cannot run meanwhile, like a stopped machine
        deadline = start + 20 * MS
        while time.monotonic_ns() < deadline:
            pass
        time.sleep(0.01)
        assert hb.count >= 1 and hb.overlaps(start, deadline) and hb.max_gap_ns > 4 * MS
    finally:
        hb.stop()


EMULATOR = """
import json, sys
import numpy
sys.path.insert(0, "tests")
from firmware_bridge.wire.messages import BusMap
from hil.model.config import load_model
from emulators import make_emulator
from links import AnsweringLink, on_cue
bus = BusMap.load("configs/bus/compact_fd.toml")
model = load_model("configs/ella.toml")
cmd = bus.codec("cmd_torque")
from hil.dynamics.plant import Plant
hold = numpy.round(Plant(model).equilibrium_eta() / 0.02) * 0.02
def answer(k):
    if k == 200:                      # the loop has run 200 cycles: the heartbeat is on
        print("running", flush=True)
    return [cmd.encode([*hold, 0], counter=k)]
link = AnsweringLink(on_cue(0x110, answer))
emu = make_emulator(model, bus, link, ideal_drives=True, mode="realtime", duration_s=3.0, period_s=1e-3)
print(json.dumps(emu.run()["overrun_causes"]), flush=True)
"""


def test_a_stopped_process_is_a_host_stall():
    proc = subprocess.Popen([sys.executable, "-c", EMULATOR], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "running"       # from inside the loop, 200 cycles in
        time.sleep(0.3)
        os.kill(proc.pid, signal.SIGSTOP)             # the whole process stops, as under a stalled host
        time.sleep(0.1)
        os.kill(proc.pid, signal.SIGCONT)
        causes = json.loads(proc.stdout.readline())
        assert causes["host_stall"] >= 1 and causes["max_heartbeat_gap_us"] > 50_000, json.dumps(causes)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
