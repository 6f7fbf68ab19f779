"""The reference firmware in the emulator's own process (`hil run --firmware-in-process`,
firmware_bridge.links.in_process, firmware_bridge.firmware.serve.FirmwareSession): the same lockstep run as with
the firmware in its own process over a pty, bit for bit in every logged column but the wall-clock timings, on a
serial, a CAN FD and a CANopen map, with and without bus faults; what it cannot do is one line before the run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hil.logs.compare import DEFAULT_IGNORE, compare_runs
from hil.logs.runlog import read_run

ROOT = Path(__file__).resolve().parent.parent


def hil_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", "run", "ella", "--mode", "lockstep", "--duration", "0.6",
                           "--move-time", "0.4", "--json", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


@pytest.mark.parametrize("bus, link, scenario", [("serial_frame", "pty", None),
                                                 ("compact_fd", "slcan-pty", "bus_faults"),
                                                 ("canopen_cst", "slcan-pty", None)])
def test_a_run_with_the_firmware_in_process_equals_the_run_with_it_in_its_own_process(tmp_path, bus, link, scenario):
    extra = ["--scenario", scenario] if scenario else []
    own = hil_run("--bus", bus, "--link", link, "--spawn-firmware", "--log", str(tmp_path / "own.msgpack"), *extra)
    inside = hil_run("--bus", bus, "--firmware-in-process", "--log", str(tmp_path / "inside.msgpack"), *extra)
    assert own.returncode in (0, 1) and inside.returncode == own.returncode, inside.stderr[-2000:]
    ha, ra = read_run(tmp_path / "own.msgpack")
    hb, rb = read_run(tmp_path / "inside.msgpack")
    assert len(ra) == len(rb) == 600
    result = compare_runs(ha["columns"], ra, hb["columns"], rb, 0.0, [], DEFAULT_IGNORE, ())
    assert result.passed, result.as_dict()
    a, b = json.loads(own.stdout.splitlines()[-1]), json.loads(inside.stdout.splitlines()[-1])
    assert a["firmware"]["q"] == b["firmware"]["q"] and a["firmware"]["cycles"] == b["firmware"]["cycles"]
    assert a["firmware"]["sensors"] == b["firmware"]["sensors"]
    if scenario:
        assert b["faults"]["injections"] > 0


def test_a_firmware_gone_silent_in_process_resends_and_times_out_as_over_a_pty_without_waiting(tmp_path):
    """The encoder fault latches at 0.7 s, the firmware stops answering: the loop resends the unanswered
    sensor frames, declares the firmware silent after its timeout and steps on, the same frames and rows
    as over a pty, where the waits are real and in process they pass at once (summary lockstep.waits_passed_s)."""
    args = ["--bus", "serial_frame", "--scenario", "encoder_signal_loss", "--safe-state", "brake", "--watchdog", "0.02",
            "--lockstep-timeout", "1.0", "--lockstep-resend", "0.25", "--duration", "1.0"]
    own = hil_run("--link", "pty", "--spawn-firmware", "--log", str(tmp_path / "own.msgpack"), *args)
    inside = hil_run("--firmware-in-process", "--log", str(tmp_path / "inside.msgpack"), *args)
    assert inside.returncode == own.returncode, inside.stderr[-2000:]
    ha, ra = read_run(tmp_path / "own.msgpack")
    hb, rb = read_run(tmp_path / "inside.msgpack")
    assert len(ra) == len(rb) == 1000
    assert compare_runs(ha["columns"], ra, hb["columns"], rb, 0.0, [], DEFAULT_IGNORE, ()).passed
    a, b = (json.loads(p.stdout.splitlines()[-1])["lockstep"] for p in (own, inside))
    assert a["silent_cycles"] == b["silent_cycles"] > 0 and a["resent_frames"] == b["resent_frames"] > 0
    assert a["waits_passed_s"] == 0.0 and b["waits_passed_s"] >= 1.0


@pytest.mark.parametrize("args, message", [
    (["--mode", "realtime"], "--firmware-in-process runs in lockstep"),
    (["--link", "serial:/dev/null"], "--firmware-in-process brings its own link"),
    (["--spawn-firmware"], "not allowed with argument"),
])
def test_what_the_in_process_firmware_cannot_do_is_one_line(tmp_path, args, message):
    proc = hil_run("--bus", "serial_frame", "--firmware-in-process", "--log", str(tmp_path / "run.msgpack"), *args)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "run.msgpack").exists()
