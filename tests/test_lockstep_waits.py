"""Lockstep runs never hang silently: a firmware that answers only with rejected frames steps the run at
its own pace and fails its verdict; a firmware that falls silent is reported while the loop waits, with
the resend interval and the silence timeout as options; a run waiting for its first command says so,
and when the frames that come are not the map's commands, says that the maps may differ. The tests
count cycles, resends and reports, not seconds."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hil.cli.summary import format_summary

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
HOLD = f"{PY} tests/firmwares/hold_pose.py {{bus}} serial:{{port}}"
COMMON = ("run", "ella", "--bus", "serial_frame", "--mode", "lockstep", "--no-realtime", "--json")


def hil(*args: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, dict | None]:
    proc = subprocess.run([PY, "-m", "hil", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    last = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc, json.loads(last[-1]) if last else None


def test_a_firmware_whose_every_command_is_rejected_steps_the_run_and_fails_its_verdict():
    proc, s = hil(*COMMON, "--duration", "1.0", "--check", "--firmware", HOLD + " --out-of-range-at all")
    assert proc.returncode == 1, proc.stderr
    assert s["cycles"] == 1000 and s["commands"]["accepted"] == 0
    assert s["commands"]["rejected"]["range"] >= 1000
    # every cycle answered, with a rejected frame: no wait for silence, no frame sent again
    assert s["lockstep"]["rejected_answers"] >= 999 and s["lockstep"]["silent_cycles"] == 0
    assert s["lockstep"]["resent_frames"] == 0
    failed = {v["name"]: v for v in s["verdicts"] if not v["passed"]}
    assert "rejected_commands" in failed and "range" in failed["rejected_commands"]["description"]


def test_a_firmware_that_falls_silent_is_reported_while_the_run_waits():
    proc, s = hil(*COMMON, "--duration", "0.5", "--lockstep-resend", "0.5", "--lockstep-timeout", "3",
                  "--firmware", HOLD + " --silent-from 200")
    assert proc.returncode == 0, proc.stderr
    assert s["commands"]["accepted"] == 200 and s["cycles"] == 500
    assert s["lockstep"]["silent_cycles"] == 300 and s["lockstep"]["rejected_answers"] == 0
    assert s["lockstep"]["resent_frames"] >= 5          # every 0.5 s for 3 s (one frame per cycle on this map)
    assert "lockstep: after cycle 200 (t = 0.200 s) the loop waits 2 s for the firmware's answer" in proc.stderr
    assert "sent again every 0.5 s, silent after 3 s" in proc.stderr
    assert "no answer after cycle 200 (t = 0.200 s) within 3 s: the firmware is silent" in proc.stderr


def test_a_run_without_a_firmware_says_what_it_waits_for_and_fails_at_the_start_timeout():
    proc, s = hil(*COMMON, "--duration", "0.5", "--start-timeout", "2.5")
    assert proc.returncode == 3
    assert "waiting for your firmware on serial:/dev/pts/" in proc.stderr and "--spawn-firmware" in proc.stderr
    assert "waiting for the firmware's first command on" in proc.stderr and "nothing received yet" in proc.stderr
    assert s["start"]["started"] is False
    text = format_summary(s)
    assert "start: no valid command came in" in text and "first command" not in text


def test_a_firmware_on_another_bus_map_gets_a_hint_that_the_maps_differ(tmp_path):
    other = tmp_path / "other.toml"
    text = (ROOT / "configs" / "bus" / "serial_frame.toml").read_text(encoding="utf-8")
    assert "id = 0x01\n" in text
    other.write_text(text.replace("id = 0x01\n", "id = 0x02\n"), encoding="utf-8")
    fw = f"{PY} tests/firmwares/hold_pose.py {other} serial:{{port}}"
    proc, s = hil(*COMMON, "--duration", "0.5", "--start-timeout", "2.5", "--firmware", fw)
    assert proc.returncode == 3
    failure = s["failed"]
    assert "received id 0x2 (7 bytes), but the bus map expects cmd_torque id 0x1 (7 bytes)" in failure
    assert "does the firmware use the same bus map?" in failure
