"""Closed loop: `hil run` (emulator) and the spawned reference firmware in two processes.

Each run goes through the CLI exactly as a user would start it (`hil run ... --spawn-firmware
--json`) over a pty pair (serial framing), an slcan pty pair (emulated adapter on the emulator's
side, python-can `slcan` on the firmware's) and the udp_loopback CAN interface (127.0.0.1 only),
in lockstep mode for speed and determinism: 4 s of simulated time, the manoeuvre runs 0.2-2.2 s.
Also: lockstep runs are bit-identical, and the log of a SIGKILLed run is readable and exportable.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hil.logs.runlog import read_run

ROOT = Path(__file__).resolve().parent.parent
ARM = "configs/ella.toml"
DURATION_S = 4.0
CYCLES = round(DURATION_S / 1e-3)
JOINTS = ("base_yaw", "shoulder_pitch", "elbow")


def _hil(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "hil", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"hil {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def _run(bus: str, link: str, *extra: str, mode: str = "lockstep") -> dict:
    """`hil run` with the spawned firmware; the JSON summary."""
    proc = _hil("run", ARM, "--bus", f"configs/bus/{bus}.toml", "--link", link, "--spawn-firmware",
                "--mode", mode, "--no-realtime", "--duration", str(DURATION_S), "--targets", "seed000_setpoints",
                "--json", *extra)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert lines, f"no output from hil run:\n{proc.stderr}"
    return json.loads(lines[-1])


def _channel(tag: str) -> str:
    return f"closed-loop-{os.getpid()}-{tag}"


LINKS = {
    "serial-pty": ("serial_frame", "pty"),
    "slcan-pty-classic": ("compact_classic", "slcan-pty"),
    "slcan-pty-fd": ("compact_fd", "slcan-pty"),
    "udp-loopback-fd": ("compact_fd", f"canfd:udp_loopback:{_channel('fd')},nodes=2"),
    "udp-loopback-classic": ("compact_classic", f"can:udp_loopback:{_channel('classic')},nodes=2"),
}


def _numbers(name: str, s: dict) -> str:
    t = s["timing"]
    return (f"{name}: {s['cycles']} cycles, loop {s['pacer'].get('elapsed_s', float('nan')):.2f} s wall; "
            f"compute p50 {t['compute']['p50']:.1f} p99 {t['compute']['p99']:.1f} us, "
            f"io p50 {t['io']['p50']:.1f} p99 {t['io']['p99']:.1f} us")


@pytest.mark.parametrize("name", list(LINKS))
def test_closed_loop_reaches_set_points_without_loss(name):
    bus, link = LINKS[name]
    t0 = time.monotonic()
    s = _run(bus, link)
    wall = time.monotonic() - t0
    print(_numbers(name, s), f"(process wall {wall:.2f} s)")

    assert s["halted"] is None
    assert s["cycles"] == CYCLES
    errors = {v["name"]: v["value"] for v in s["verdicts"] if v["name"].startswith("setpoint_")}
    assert set(errors) == {f"setpoint_{j}" for j in JOINTS}
    for verdict, err in errors.items():
        assert err < 1e-3, f"{name}: {verdict}: {err:.5f} rad from its set-point"
    assert s["watchdog"]["trips"] == 0 and s["run_failures"] == []
    # sensor frames sent again, duplicates to the firmware: the first ones before the first command, and in
    # lockstep a cycle's frames left unanswered for a second (a busy machine)
    resent = s["start"]["resent"] + s.get("lockstep", {}).get("resent_frames", 0)

    # emulator side: every command frame taken, none rejected, nothing lost on the link
    emu_link, cmds = s["link"], s["commands"]
    assert all(v == 0 for v in cmds["rejected"].values()), cmds
    assert cmds["accepted"] == emu_link["rx_frames"] == CYCLES
    for key in ("rx_crc_errors", "rx_framing_errors", "rx_garbage_bytes", "rx_overruns", "tx_dropped"):
        assert emu_link[key] == 0, (key, emu_link)

    # firmware side: one command per cycle, computed on every complete set of sensor frames
    fw = s["firmware"]
    assert fw is not None, "the firmware printed no result"
    assert fw["cycles"] == CYCLES
    fw_link, sensors = fw["link"], fw["sensors"]
    assert sensors["rejected"]["counter"] <= resent                    # a duplicate repeats its counter
    assert all(v == 0 for k, v in sensors["rejected"].items() if k != "counter"), sensors
    assert sensors["accepted"] + sensors["rejected"]["counter"] == fw_link["rx_frames"]
    for key in ("rx_crc_errors", "rx_framing_errors", "rx_garbage_bytes", "rx_overruns", "tx_dropped"):
        assert fw_link[key] == 0, (key, fw_link)
    assert fw_link["tx_frames"] == CYCLES + 1          # an answer to the first sensor frame, and to each cycle's
    assert np.max(np.abs(fw["q_error"])) < 1e-3

    # what one side sent, the other received: at most the last frame is left unread at the end
    assert 0 <= emu_link["tx_frames"] - fw_link["rx_frames"] <= 1 + resent, (emu_link, fw_link)
    assert 0 <= fw_link["tx_frames"] - emu_link["rx_frames"] <= 1, (emu_link, fw_link)


def _log_table(path: Path) -> tuple[list[str], np.ndarray]:
    header, rows = read_run(path)
    assert header["trailing_bytes"] == 0
    keep = [i for i, c in enumerate(header["columns"]) if not c.endswith("_us")]
    return [header["columns"][i] for i in keep], rows[:, keep]


@pytest.mark.parametrize("name", ["serial-pty", "udp-loopback-classic"])
def test_lockstep_runs_are_bit_identical(tmp_path, name):
    bus, link = LINKS[name]
    tables = []
    for k in range(2):
        log = tmp_path / f"run{k}.msgpack"
        s = _run(bus, link.replace(_channel("classic"), _channel(f"det{k}")), "--log", str(log))
        assert s["cycles"] == CYCLES and s["log_dropped"] == 0
        assert s["integrator"]["method"] == "fitted_midpoint" and s["integrator"]["accurate"] is True
        assert s["integrator"]["motion_error_rad"] <= 1e-6 and s["integrator"]["modal_error"] <= 1e-3
        assert set(s["input_hold"]["joints"]) == {"base_yaw", "shoulder_pitch", "elbow"}
        tables.append(_log_table(log))
    (cols_a, a), (cols_b, b) = tables
    assert cols_a == cols_b and "lateness_us" not in cols_a and "q_elbow" in cols_a
    assert a.shape == (CYCLES, len(cols_a))
    assert a.tobytes() == b.tobytes(), [c for i, c in enumerate(cols_a) if not np.array_equal(a[:, i], b[:, i])]


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                    # a zombie of ours counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _has_rows(log: Path) -> bool:
    try:
        return len(read_run(log)[1]) > 0
    except (OSError, ValueError):           # not there yet, or the header not yet complete
        return False


def test_log_of_a_sigkilled_run_is_readable_and_exports(tmp_path):
    log = tmp_path / "killed.msgpack"
    proc = subprocess.Popen([sys.executable, "-m", "hil", "run", ARM, "--bus", "configs/bus/serial_frame.toml",
                             "--link", "pty", "--spawn-firmware", "--mode", "realtime", "--no-realtime",
                             "--duration", "30", "--log", str(log)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    firmware: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while not _has_rows(log):                   # the loop runs: its first rows were flushed
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "hil run wrote no rows"
            time.sleep(0.1)
        time.sleep(2.0)
        firmware = _children(proc.pid)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
        # the orphaned firmware sees its pty hang up and stops after its idle timeout
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in firmware) and time.monotonic() < deadline:
            time.sleep(0.1)
        for p in firmware:
            if _alive(p):
                os.kill(p, signal.SIGKILL)

    header, rows = read_run(log)
    cols = header["columns"]
    assert header["format"] == "hil-run" and header["mode"] == "realtime"
    assert rows.shape[1] == len(cols) and len(rows) > 500, rows.shape
    print(f"killed run: {len(rows)} rows readable, {header['trailing_bytes']} trailing bytes")
    cycle = rows[:, cols.index("cycle")]
    assert np.array_equal(cycle, np.arange(1, len(rows) + 1))          # no row lost or torn up to the cut
    assert np.all(np.isfinite(rows))

    csv = tmp_path / "killed.csv"
    out = _hil("log", "export", str(log), "--csv", str(csv)).stdout
    assert f"{len(rows)} rows" in out
    csv_header, csv_rows = read_run(csv)
    assert csv_header["columns"] == cols
    assert np.array_equal(csv_rows, rows)
