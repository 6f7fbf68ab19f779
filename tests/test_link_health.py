"""Link-health verdicts: the run's link counters judged against the firmware's targets, with limits of
zero rejected commands and zero watchdog trips by default in a run without faults. Each verdict is
shown failing on a firmware that breaks it (one NaN command among a thousand good ones, a counter gap,
a firmware that falls silent) and passing on a healthy one."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from config_schema import ConfigError
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.devices.drives import DriveBank
from hil.dynamics.plant import Plant
from hil.logs.targets import LINK_DEFAULTS, Targets, load_targets
from hil.logs.verdicts import link_health
from hil.model.config import load_model
from hil.runtime.loop import Emulator, RuntimeOptions
from hil.runtime.outcome import judge

from bus_maps import float_map
from links import MemoryLink

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["base_yaw", "shoulder_pitch", "elbow"]
FLOAT_MAP = float_map(crc="crc16", crc_byte=14)


def healthy_summary() -> dict:
    return {"commands": {"accepted": 1000, "ignored": 0, "lost": 0, "resyncs": 0,
                         "rejected": {"unknown_id": 0, "length": 0, "crc": 0, "counter": 0, "range": 0, "nan": 0}},
            "link": {"tx_frames": 1001, "rx_frames": 1000, "tx_dropped": 0, "rx_crc_errors": 0,
                     "rx_framing_errors": 0, "rx_garbage_bytes": 0, "rx_overruns": 0},
            "firmware_timing": {"cycles_with_command": 1000, "missed_cycles": 0,
                                "cmd_age_us": {"p50": 300.0, "p99": 700.0, "max": 900.0}},
            "watchdog": {"trips": 0, "events": []}, "faults": {"injections": 0, "link": {"faults": {}}}}


ALL_LIMITS = Targets(max_rejected_commands=0, max_counter_rejections=0, max_watchdog_trips=0, max_lost_commands=0,
                     max_missed_cycles=0, max_command_age_p99_s=1e-3, max_bus_errors=0)


def failed(verdicts: list[dict]) -> dict[str, str]:
    return {v["name"]: v["description"] for v in verdicts if not v["passed"]}


def test_a_healthy_link_passes_every_link_verdict():
    verdicts = link_health(ALL_LIMITS, healthy_summary())
    assert [v["name"] for v in verdicts] == ["rejected_commands", "watchdog_trips", "counter_rejections",
                                             "lost_commands", "missed_cycles", "command_age_p99", "bus_errors"]
    assert failed(verdicts) == {}


@pytest.mark.parametrize("path, value, verdict, cause", [
    (("commands", "rejected", "nan"), 1, "rejected_commands", "1 nan"),
    (("commands", "rejected", "crc"), 2, "rejected_commands", "2 crc"),
    (("commands", "rejected", "counter"), 2, "counter_rejections", "rolling-counter check"),
    (("commands", "rejected", "range"), 5, "rejected_commands", "5 range"),
    (("watchdog", "trips"), 1, "watchdog_trips", "watchdog trips"),
    (("watchdog", "events"), [["tripped", 0.25], ["cleared", 0.3]], "", "the first at t = 0.250 s"),
    (("commands", "lost"), 3, "lost_commands", "rolling counter"),
    (("firmware_timing", "missed_cycles"), 1, "missed_cycles", "without a fresh command"),
    (("firmware_timing", "cmd_age_us", "p99"), 1500.0, "command_age_p99", "age of the command"),
    (("link", "rx_crc_errors"), 1, "bus_errors", "1 rx_crc_errors"),
    (("link", "tx_dropped"), 4, "bus_errors", "4 tx_dropped"),
])
def test_each_broken_counter_fails_its_verdict_naming_the_cause(path, value, verdict, cause):
    summary = healthy_summary()
    node = summary
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    verdicts = {v["name"]: v for v in link_health(ALL_LIMITS, summary)}
    bad = failed(verdicts.values())
    if verdict:
        assert list(bad) == [verdict] and cause in bad[verdict]
    else:                                     # the trips' times alone: described, nothing fails
        assert bad == {} and cause in verdicts["watchdog_trips"]["description"]


def test_frames_left_unread_by_a_silent_firmware_are_not_bus_errors():
    summary = healthy_summary()
    summary["link"]["tx_dropped"] = 2
    summary["lockstep"] = {"dropped_while_silent": 2}
    assert failed(link_health(ALL_LIMITS, summary)) == {}


def test_the_defaults_judge_rejections_and_trips_only_in_a_run_without_faults():
    plain = Targets().with_link_defaults(faults_injected=False)
    assert {k: getattr(plain, k) for k in LINK_DEFAULTS} == LINK_DEFAULTS
    assert Targets().with_link_defaults(faults_injected=True) == Targets()
    assert Targets(max_watchdog_trips=2).with_link_defaults(False).max_watchdog_trips == 2    # given: kept
    assert link_health(Targets(), healthy_summary()) == []                                   # nothing asked


def test_the_link_keys_are_read_from_a_verdict_table_and_checked(tmp_path):
    path = tmp_path / "targets.toml"
    path.write_text("[verdict]\nmax_rejected_commands = 2\nmax_command_age_p99_s = 0.0015\n", encoding="utf-8")
    t = load_targets(path)
    assert t.max_rejected_commands == 2 and t.max_command_age_p99_s == 0.0015 and t.max_lost_commands is None
    path.write_text("[verdict]\nmax_lost_commands = -1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"verdict\.max_lost_commands = -1: expected an integer in 0\.\."):
        load_targets(path)
    path.write_text("[verdict]\nmax_rejected_command = 0\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="did you mean 'max_rejected_commands'"):
        load_targets(path)


def test_a_misspelt_joint_is_found_before_the_run_with_a_suggestion(tmp_path):
    path = tmp_path / "targets.toml"
    path.write_text("[verdict]\nsetpoints_rad = { elbw = 0.4 }\ntolerance_rad = 1e-3\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"verdict\.setpoints_rad\.elbw = 0\.4: no such joint in the arm "
                                          r"\(did you mean 'elbow'\?\)"):
        load_targets(path).check_joints(NAMES)
    Targets(setpoints_rad={"elbow": 0.4}, tolerance_rad=1e-3).check_joints(NAMES)


class OneBadCommand(MemoryLink):
    """Answers every sensor frame with the holding torques; at cue `at` with a NaN on the elbow (or, with
    `skip`, with its rolling counter advanced by two: a lost command)."""

    def __init__(self, bus: BusMap, hold: np.ndarray, at: int | None, skip: bool = False):
        super().__init__("fw")
        self.cmd, self.hold, self.at, self.skip, self.cues, self.counter = bus.codec("cmd_torque"), hold, at, skip, 0, 0

    def send(self, frame: Frame) -> bool:
        tau = self.hold.copy()
        if self.cues == self.at:
            if self.skip:
                self.counter = self.cmd.next_counter(self.counter)
            else:
                tau[2] = np.nan
        self.inbox.append(self.cmd.encode([*tau, 0], counter=self.counter, check_range=False))
        self.counter = self.cmd.next_counter(self.counter)
        self.cues += 1
        return True


def run_with(tmp_path, at: int | None, skip: bool = False) -> dict:
    bus = BusMap.from_string(FLOAT_MAP, "float map")
    plant = Plant(load_model(ROOT / "configs" / "ella.toml"))
    fw = OneBadCommand(bus, plant.equilibrium_eta(), at, skip)
    log = tmp_path / "run.msgpack"
    opts = RuntimeOptions(mode="afap", realtime=False, duration_s=0.3, log_path=str(log), start="immediately")
    emu = Emulator(plant, fw, CommandInput(bus, NAMES), SensorOutput(bus, NAMES), opts,
                   drives=DriveBank(plant, [None] * 3))
    summary = emu.run()
    judge(summary, log, plant, plant.dt, Targets(max_lost_commands=0))
    return summary


def test_one_nan_command_among_good_ones_fails_the_run_and_a_healthy_firmware_passes(tmp_path):
    healthy = run_with(tmp_path, None)
    assert failed(healthy["verdicts"]) == {} and {v["name"] for v in healthy["verdicts"]} == {
        "rejected_commands", "watchdog_trips", "lost_commands"}
    nan = run_with(tmp_path, 100)
    assert nan["commands"]["rejected"]["nan"] == 1
    # the rejected frame also leaves a gap in the accepted counters: a lost command too
    assert failed(nan["verdicts"]) == {"rejected_commands": "command frames rejected (1 nan)",
                                       "lost_commands": "command frames lost (gaps in the rolling counter)"}
    assert nan["targets"]["max_rejected_commands"] == 0


def test_a_counter_gap_fails_the_lost_commands_verdict(tmp_path):
    gap = run_with(tmp_path, 100, skip=True)
    assert gap["commands"]["lost"] >= 1
    assert "lost_commands" in failed(gap["verdicts"])
