"""tools/flood.py and tools/soak.py: a malformed-frame flood through the front door is counted exactly by `hil run`, and
the tool's verdict fails when one count differs, when a good command went missing or when the run
ended early; the soak samples both processes and reports memory growth after start-up."""
from __future__ import annotations

import copy
from collections import Counter

import pytest

from tools import flood


@pytest.fixture(scope="module")
def hold():
    return flood.holding_torque()


@pytest.mark.parametrize("link", ["serial", "fd"])
def test_every_malformed_frame_is_counted_under_its_kind(link, hold):
    result = flood.flood(link, cycles=150, per_cycle=6, seed=7, hold=hold)
    assert result["passed"], result["rows"]
    assert result["cycles"] == 150 and result["malformed"] == 149 * 6
    kinds = {row["check"].split(" ->")[0] for row in result["rows"]}
    assert set(flood.COMMAND_KINDS) <= kinds
    assert ("link_crc" in kinds and "cobs" in kinds) if link == "serial" else "crc" in kinds


SUMMARY = {"cycles": 100, "receive": {"frames_dropped": 0},
           "commands": {"accepted": 100, "lost": 0, "resyncs": 0,
                        "rejected": {"unknown_id": 3, "length": 2, "crc": 0, "counter": 4, "range": 1, "nan": 0}},
           "link": {"rx_crc_errors": 5, "rx_framing_errors": 0}}
SENT = Counter({"good": 100, "unknown_id": 3, "length": 2, "replay": 4, "range": 1, "link_crc": 5})


def test_the_verdict_passes_only_on_equal_counts():
    assert flood.judge(SUMMARY, SENT, 100)["passed"]


@pytest.mark.parametrize("path, value", [
    (("commands", "rejected", "counter"), 3),          # a replay taken as a good command
    (("commands", "rejected", "unknown_id"), 4),       # a count too many
    (("commands", "accepted"), 99),                    # a good command lost
    (("commands", "lost"), 1),
    (("link", "rx_crc_errors"), 0),                    # a damaged packet not seen at all
    (("link", "rx_framing_errors"), 2),                # a rejection of a kind never sent
    (("receive", "frames_dropped"), 1),
    (("cycles",), 90),                                 # the run ended early
])
def test_the_verdict_fails_on_any_difference(path, value):
    summary = copy.deepcopy(SUMMARY)
    node = summary
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert not flood.judge(summary, SENT, 100)["passed"]


def test_the_soak_reports_growth_after_start_up_and_both_processes():
    from tools import soak
    flat = [(t, 500_000 if t >= 2 else 200_000, 300_000) for t in range(1, 60)]
    leak = [(t, 500_000 + 100 * t, 300_000) for t in range(1, 60)]
    assert soak.memory(flat, 1, 5.0)["growth_kib"] == 0
    assert soak.memory(leak, 1, 5.0)["growth_kib"] == 100 * (59 - 5)
    assert soak.memory([(1, 1, None)], 2, 5.0)["end_kib"] is None         # a firmware never seen is no number
    r = soak.soak(2.0, "serial_frame", 0.25, ["--mode", "lockstep"])    # lockstep: no wall-clock verdict in the suite
    assert r["exit_status"] == 0 and r["cycles"] > 0
    assert r["emulator_memory"]["max_kib"] > 0 and r["firmware_memory"]["max_kib"] > 0
