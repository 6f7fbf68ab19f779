"""The spawned reference firmware ends with the emulator: killed (SIGKILL) while the bus still
carries frames, the emulator leaves no firmware behind; and the firmware keeps bounded statistics."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import can
import numpy as np

from firmware_bridge.links.udp_loopback import UdpLoopbackBus
from firmware_bridge.firmware.latency import LatencyHistogram

ROOT = Path(__file__).resolve().parent.parent
CHANNEL = f"lifetime-{os.getpid()}"      # per test process: suites running side by side keep apart

EMULATOR = f"""
import sys, time
from hil.runtime.firmware_process import endpoint_of
from hil.runtime.launch import REFERENCE_PARAMS, reference_firmware, spawn_firmware
bus = {str(ROOT / "configs" / "bus" / "compact_fd.toml")!r}
fw = spawn_firmware(reference_firmware(REFERENCE_PARAMS, bus), endpoint_of("canfd:udp_loopback:{CHANNEL},nodes=3", bus))
print(fw.pid, flush=True)
time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_killed_emulator_leaves_no_firmware_running_while_the_bus_stays_busy():
    emulator = subprocess.Popen([sys.executable, "-c", EMULATOR], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    bus = UdpLoopbackBus(CHANNEL, nodes=3)
    stop = threading.Event()

    def chatter() -> None:       # frames keep arriving: the firmware's idle timeout never runs out
        while not stop.is_set():
            bus.send(can.Message(arbitration_id=0x7F0, data=b"\x01", is_extended_id=False))
            stop.wait(0.02)
    talker = threading.Thread(target=chatter, daemon=True)
    try:
        firmware = int(emulator.stdout.readline())
        talker.start()
        time.sleep(0.3)
        assert alive(firmware)
        os.kill(emulator.pid, signal.SIGKILL)
        emulator.wait()
        deadline = time.monotonic() + 10.0           # generous: the firmware goes within milliseconds
        while alive(firmware) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not alive(firmware)
    finally:
        stop.set()
        talker.join(1.0)
        bus.shutdown()
        if emulator.poll() is None:
            emulator.kill()
        emulator.stdout.close()


def test_the_latency_statistics_are_a_bounded_histogram_with_exact_extremes():
    h = LatencyHistogram()
    size = len(h.counts)
    rng = np.random.default_rng(0)
    samples = rng.lognormal(np.log(800.0), 0.1, 200_000)
    for s in samples:
        h.add(float(s))
    s = h.summary()
    assert len(h.counts) == size and s["count"] == len(samples)
    assert s["min"] == samples.min() and s["max"] == samples.max()
    for key, q in (("p50", 50), ("p99", 99), ("p99.9", 99.9)):
        assert abs(s[key] / np.percentile(samples, q) - 1) < 0.05      # within a bin (4.7 %)
    assert LatencyHistogram().summary() == {"count": 0}



