"""The firmware's library (firmware_bridge.firmware, the ella-wire distribution): every module of
the distribution imports without numpy or numba, a firmware built on it closes the loop with the
emulator in lockstep on every kind of map, and the wheel installs alone in a fresh environment
without numpy and runs one there."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.firmware import FirmwareWire, serve
from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from links import memory_pair
from tools import wire_wheel

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
WITHOUT_NUMPY = ROOT / "tests/firmwares/without_numpy.py"
JOINTS = ["base_yaw", "shoulder_pitch", "elbow"]


def _sensor_frames(bus: BusMap, cycle: int, values: dict[str, float]) -> list[Frame]:
    """The emulator's sensor frames of `cycle`, every channel the map carries 0 but those in `values`."""
    channels = [n for c in bus.messages("to_firmware") for n in c.signal_names
                if n not in ("status", "cycle") and n != c.spec.counter]
    out = _outputs.setdefault(id(bus), SensorOutput(bus, JOINTS))
    if not out._channels:
        out.bind(channels)
    return out.frames(cycle, np.array([values.get(n, 0.0) for n in channels]), 0)


_outputs: dict[int, SensorOutput] = {}


def _import_without_numpy(modules: list[str]) -> subprocess.CompletedProcess:
    code = (f"import runpy, sys; runpy.run_path({str(WITHOUT_NUMPY)!r}); import importlib\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'numba', 'hil'}))")
    return subprocess.run([PY, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_every_module_of_the_wire_distribution_imports_without_numpy():
    modules = wire_wheel.modules()
    assert {"firmware_bridge.firmware.endpoint", "firmware_bridge.firmware.serve", "firmware_bridge.canopen.master",
            "firmware_bridge.links.serial", "firmware_bridge.describe", "config_schema"} <= set(modules)
    proc = _import_without_numpy(modules)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_the_emulator_side_left_out_of_the_distribution_needs_numpy():
    """The check can fail: the emulator's end of the wire does not import under the same block."""
    assert "firmware_bridge.wire.signals" not in wire_wheel.modules()
    proc = _import_without_numpy(["firmware_bridge.wire.signals"])
    assert proc.returncode != 0 and "blocked" in proc.stderr


def test_the_firmware_end_reads_what_the_emulator_end_writes_and_back():
    bus = BusMap.load(ROOT / "configs/bus/compact_fd.toml")
    wire = FirmwareWire("compact_fd")
    assert wire.joint_names == JOINTS and wire.master is None
    measured = {"enc_base_yaw": 123456.0, "enc_shoulder_pitch": -7, "enc_elbow": 2 ** 20, "imu_az": 9.81}
    for cycle in range(300):                         # the 8-bit cycle counter wraps; the cycle is unwrapped
        complete = [wire.sensors.feed(f) for f in _sensor_frames(bus, cycle, measured)]
    assert complete[-1] and wire.sensors.cycle == 299
    assert wire.sensors.counts == [123456, -7, 2 ** 20] and all(type(c) is int for c in wire.sensors.counts)
    assert wire.sensors.value("imu_az") == pytest.approx(9.81, abs=0.01)
    with pytest.raises(KeyError, match="no to_firmware signal 'imu_qz'.*imu_az"):
        wire.sensors.value("imu_qz")
    commands = CommandInput(bus, JOINTS)
    for f in wire.commands.frames([12.34, -500.0, 1e9], 41):       # beyond the ranges: saturated
        assert commands.feed(f)
    assert commands.tau.tolist() == pytest.approx([12.34, -wire.commands.limit[1], wire.commands.limit[2]], abs=0.01)
    assert wire.commands.writer.saturated == 1 and commands.counters()["rejected"]["counter"] == 0


def test_a_damaged_sensor_frame_is_counted_not_taken():
    bus = BusMap.load(ROOT / "configs/bus/compact_fd.toml")
    wire = FirmwareWire(bus)
    frame, = _sensor_frames(bus, 0, {"enc_base_yaw": 1.0})
    damaged = Frame(frame.arbitration_id, bytes([frame.data[0] ^ 1]) + frame.data[1:], frame.is_fd)
    assert not wire.sensors.feed(damaged) and wire.sensors.counts == [0, 0, 0]
    assert wire.sensors.reader.stats()["rejected"]["crc"] == 1


def test_serve_asks_the_law_once_per_cycle_and_answers_a_repeated_frame_with_the_same_torques():
    """On a map whose sensor frame carries the cycle without a rolling counter (with one, a repeated
    frame is rejected by the counter check: E2E's REPEATED)."""
    text = (ROOT / "configs/bus/serial_frame.toml").read_text()
    assert text.count('counter = "cycle"\n') == 1
    bus = BusMap.from_string(text.replace('counter = "cycle"\n', ""), "no_sensor_counter.toml")
    emulator, firmware = memory_pair()
    frames = {cycle: _sensor_frames(bus, cycle, {"enc_base_yaw": 10.0 * cycle}) for cycle in (0, 1, 2)}
    for cycle in (0, 1, 1, 2):                      # cycle 1 sent twice, as a waiting lockstep emulator does
        for f in frames[cycle]:
            emulator.send(f)
    calls = []

    def law(sensors, cycle):
        calls.append((cycle, list(sensors.counts)))
        return [float(cycle), 0.0, 0.0]

    result = serve(FirmwareWire(bus), firmware, law, duration_s=0.002, idle_timeout_s=0.05)
    assert calls == [(0, [0, 0, 0]), (1, [10, 0, 0]), (2, [20, 0, 0])]
    assert (result.answered, result.repeats, result.ended_by, result.cycles) == (3, 1, "duration", 2)
    commands = CommandInput(bus, JOINTS)
    taken = []
    while (f := emulator.recv()) is not None:
        assert commands.feed(f)                      # every answer a new rolling counter
        taken.append(commands.tau[0])
    assert taken == [0.0, 1.0, 1.0, 2.0]


def test_serve_ends_when_the_emulator_falls_silent():
    bus = BusMap.load(ROOT / "configs/bus/serial_frame.toml")
    result = serve(FirmwareWire(bus), memory_pair()[1], lambda s, c: [0.0] * 3, idle_timeout_s=0.01)
    assert result.ended_by == "idle" and result.answered == 0


def _lockstep(bus: str, firmware: str, link: str | None, duration: str = "1") -> dict:
    args = [PY, "-m", "hil", "run", "ella", "--bus", bus, "--mode", "lockstep", "--duration", duration, "--json",
            "--firmware", firmware] + (["--link", link] if link else [])
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("bus, link", [("serial_frame", None), ("canopen_cst", "can:udp_loopback:wire-co-{pid}")])
def test_a_firmware_on_the_library_without_numpy_closes_the_loop_in_lockstep(bus, link):
    link = link.format(pid=os.getpid()) if link else None
    s = _lockstep(bus, f"{PY} {WITHOUT_NUMPY} examples/wire_firmware.py {{link}} --bus {bus}", link)
    assert s["cycles"] == 1000 and s["run_failures"] == []
    assert s["commands"]["accepted"] >= 1000 and not any(s["commands"]["rejected"].values())


def test_a_firmware_that_needs_numpy_fails_under_the_same_block():
    """The lockstep check can fail: the reference firmware needs numpy, and under the block it never answers."""
    firmware = f"{PY} {WITHOUT_NUMPY} -m hil firmware --params ella_nominal --bus serial_frame --link {{link}}"
    args = [PY, "-m", "hil", "run", "ella", "--bus", "serial_frame", "--mode", "lockstep", "--duration", "1",
            "--json", "--lockstep-timeout", "3", "--firmware", firmware]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0


@pytest.mark.wheel
def test_the_wire_wheel_installs_alone_without_numpy_and_its_firmware_closes_the_loop(tmp_path):
    wheel = wire_wheel.build(tmp_path / "dist")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"firmware_bridge/firmware/serve.py", "firmware_bridge/maps/compact_fd.toml",
            "config_schema/__init__.py"} <= names
    assert not any(n.startswith(("hil/", "firmware_bridge/reference/")) for n in names)
    venv = tmp_path / "venv"
    subprocess.run([PY, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "-q", f"{wheel}[serial]"], capture_output=True,
                             text=True, timeout=900)
    assert install.returncode == 0, install.stdout + install.stderr
    where = subprocess.run([python, "-c", "import firmware_bridge, importlib.util; print(firmware_bridge.__file__); "
                            "print(importlib.util.find_spec('numpy'), importlib.util.find_spec('numba'))"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert str(venv) in where.stdout.splitlines()[0] and where.stdout.splitlines()[1] == "None None"
    s = _lockstep("serial_frame", f"{python} examples/wire_firmware.py {{link}} --bus serial_frame", None)
    assert s["cycles"] == 1000 and s["commands"]["accepted"] == 1000 and s["run_failures"] == []
    table = subprocess.run([python, "-m", "firmware_bridge.describe", "compact_fd"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert table.returncode == 0 and "Profile 5" in table.stdout
