"""Fault injection end to end: every fault family through a real Emulator of ELLA.

The emulator (hil.runtime.loop.Emulator, configs/ella.toml with its drives and sensors) sits on one end
of an in-memory link (compact_fd) or a pty pair (serial_frame); the test plays the firmware on
the other end, cycle by cycle through Emulator.step_once() (or Emulator.run() for the timing and
scenario tests): it sends hold torques (or a PD law on the encoder angles it decoded) and decodes
every sensor frame it receives. Each test shows a fault's effect on the emitted frames or on the
plant while it is active, and normal behaviour again once it is cleared.

Signal faults are checked against a healthy twin: a second emulator with the same seed and the
same commands, whose frames are exactly what the faulty one would have sent without the fault.
"""
from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.links.serial import SerialLink, open_pty_pair
from firmware_bridge.wire.messages import BusMap, StatusFlag
from hil.faults.spec import Duration, Fault, FaultError, Trigger
from hil.dynamics.plant import Plant
from hil.logs import writer_process
from hil.logs.runlog import read_run
from hil.runtime.loop import Emulator
from hil.faults.scenario import load_scenario
from emulators import FakeFirmware
from emulators import make_emulator as shared_emulator
from links import AnsweringLink, memory_pair, wait_bytes

ROOT = Path(__file__).resolve().parent.parent
ARM = ROOT / "configs" / "ella.toml"
FD = ROOT / "configs" / "bus" / "compact_fd.toml"
SERIAL = ROOT / "configs" / "bus" / "serial_frame.toml"
COMBINED = ROOT / "configs" / "scenarios" / "combined.toml"
DT = 1e-3
CPR = 16384                               # counts per motor revolution of ELLA's encoders
FAULT_ACTIVE = int(StatusFlag.FAULT_ACTIVE)
REJECTED = int(StatusFlag.COMMAND_REJECTED)
TIMEOUT = int(StatusFlag.COMMAND_TIMEOUT)
TIMING_COLUMNS = ("lateness_us", "compute_us", "io_us", "cmd_age_us")   # wall-clock columns of the run log


@pytest.fixture(scope="module")
def fd():
    return BusMap.load(FD)


# ----------------------------------------------------------------------------- emulator, firmware
def make_emulator(model, bus: BusMap, link, scenario=None, **options) -> Emulator:
    """The shared factory's ELLA with the preset's drives and sensors, its frames carrying FAULT_ACTIVE."""
    return shared_emulator(model, bus, link, scenario=scenario, **{"announce_faults": True, **options})


def folded(model, bus: BusMap, law=None, **kw) -> tuple[Emulator, FakeFirmware]:
    """An emulator whose firmware answers every sensor frame with `law(fw)(t)` (default: the holding torque)."""
    link = AnsweringLink()
    emu = make_emulator(model, bus, link, **kw)
    fw = FakeFirmware(bus, None, emu)
    control = law(fw) if law else (lambda t: fw.hold)
    link.answer = lambda frame: fw.answer(frame, control)
    return emu, fw


def rig(model, bus: BusMap, **kw) -> tuple[Emulator, FakeFirmware]:
    emu_link, fw_link = memory_pair()
    emu = make_emulator(model, bus, emu_link, **kw)
    return emu, FakeFirmware(bus, fw_link, emu)


def cycle(emu: Emulator, fw: FakeFirmware, tau) -> list[dict]:
    """One cycle: the firmware's command, the emulator's step, the frames the firmware got."""
    if tau is not None:
        fw.send(tau)
    emu.step_once()
    return fw.receive()


class PD:
    """A joint PD law with the holding torque as feedforward, on the angles the firmware decoded
    (rate by differencing), towards `target(t)`; clipped to the command range."""

    LIMIT = np.array([239.0, 359.0, 89.0])

    def __init__(self, fw: FakeFirmware, kp=(600.0, 4000.0, 300.0), kd=(120.0, 400.0, 30.0), target=None):
        self.fw, self.kp, self.kd = fw, np.array(kp), np.array(kd)
        self.target = target or (lambda t: np.zeros(3))
        self.q_prev = None

    def __call__(self, t: float) -> np.ndarray:
        q = self.fw.angles()
        qd = np.zeros(3) if self.q_prev is None else (q - self.q_prev) / DT
        self.q_prev = q
        tau = self.fw.hold + self.kp * (self.target(t) - q) - self.kd * qd
        return np.clip(tau, -self.LIMIT, self.LIMIT)


# ----------------------------------------------------------------------------- signal faults
N, A, B = 200, 50, 150          # cycles run; a signal fault is active in cycles A .. B-1
PUSH = np.array([6.0, 0.0, 0.0])    # on top of the holding torque: the base turns, its count changes every cycle


def bus_scale(bus: BusMap, name: str) -> float:
    return next(s.scale for c in bus.messages("to_firmware") for s in c.spec.signals if s.name == name)


def twin_run(model, bus: BusMap, fault: Fault, duration: Duration | None = None, channel: str | None = None) -> dict:
    """The fault's channel (`channel`, default its target) in the frames of a faulty emulator and
    its healthy twin (same seed, same commands), cycle by cycle, with the channel's truth and the
    faulty frames' status. Every other signal of the frames and the whole sensor truth agree
    between the twins."""
    twins = [rig(model, bus), rig(model, bus)]
    twins[1][0].faults.inject(fault, Trigger.at(A * DT), duration or Duration.lasting((B - A) * DT))
    channel = channel or fault.target
    i = twins[0][0].sensors.channel(channel)
    out = {"healthy": [], "faulty": [], "truth": [], "status": []}
    for _ in range(N):
        (h,), (f,) = (cycle(emu, fw, fw.hold + PUSH) for emu, fw in twins)
        assert h["accepted"] and f["accepted"]
        assert {k: v for k, v in h.items() if k not in (channel, "status", "frame")} == \
               {k: v for k, v in f.items() if k not in (channel, "status", "frame")}
        np.testing.assert_array_equal(twins[1][0].sensors.truth, twins[0][0].sensors.truth)
        out["healthy"].append(h[channel])
        out["faulty"].append(f[channel])
        out["truth"].append(twins[0][0].sensors.truth[i])
        out["status"].append(int(f["status"]))
    return {k: np.array(v) for k, v in out.items()}


def active(first: int, end: int) -> np.ndarray:
    return (np.arange(N) >= first) & (np.arange(N) < end)


SIGNAL_CASES = [   # fault; its channel in the active cycles k from the healthy series h
    (Fault("stuck_value", "stuck", "imu_gz", {"value_rad_s": 0.5}), lambda h, k: np.full(len(k), 0.5)),
    (Fault("stuck_last", "stuck", "enc_base_yaw"), lambda h, k: np.full(len(k), h[A])),
    (Fault("offset", "offset", "imu_ax", {"offset_m_s2": 0.4}), lambda h, k: h[k] + 0.4),
    (Fault("gain", "gain", "imu_az", {"gain": 2.0}), lambda h, k: 2.0 * h[k]),
    (Fault("drift", "drift", "imu_ay", {"rate_m_s2_per_s": 5.0}), lambda h, k: h[k] + 5.0 * DT * (k - A)),
    (Fault("delay", "delay", "enc_base_yaw", {"samples": 5}), lambda h, k: h[np.maximum(k - 5, A)]),
    (Fault("dropout", "dropout", "imu_gx"), lambda h, k: np.zeros(len(k))),
    (Fault("saturation", "saturation", "imu_az", {"high_m_s2": 5.0}), lambda h, k: np.minimum(h[k], 5.0)),
    (Fault("bitflip", "bitflip", "enc_shoulder_pitch", {"bit": 4}), lambda h, k: h[k].astype(np.int64) ^ 16),
    (Fault("quantisation", "quantisation", "imu_az", {"lsb_m_s2": 0.5}), lambda h, k: np.round(h[k] / 0.5) * 0.5),
]


@pytest.mark.parametrize("fault, expected", SIGNAL_CASES, ids=[f.name for f, _ in SIGNAL_CASES])
def test_signal_fault_changes_the_frames_while_active_and_clearing_restores_them(model, fd, fault, expected):
    r = twin_run(model, fd, fault)
    h, f, truth = r["healthy"], r["faulty"], r["truth"]
    lsb = bus_scale(fd, fault.target)
    k = np.arange(A, B)
    np.testing.assert_allclose(f[A:B], expected(h, k), rtol=0, atol=0.5 * lsb * 1.0001)
    assert not np.allclose(f[A:B], h[A:B], rtol=0, atol=lsb)                # the fault shows in the frames
    np.testing.assert_array_equal(f[:A], h[:A])
    np.testing.assert_array_equal(f[B:], h[B:])                             # cleared: the frames are healthy again
    # the healthy frames carry the truth up to the sensor's own errors: an encoder's floor, the
    # IMU's bias, misalignment, noise and quantisation (ella.toml: < 0.3 m/s^2, < 0.01 rad/s at rest)
    bound = 1.0 if fault.target.startswith("enc_") else {"a": 0.3, "g": 0.01}[fault.target[len("imu_")]]
    assert np.max(np.abs(h - truth)) < bound
    assert np.array_equal(r["status"] & FAULT_ACTIVE != 0, active(A, B))


def test_stuck_count_stays_while_the_joint_turns(model, fd):
    r = twin_run(model, fd, Fault("stuck", "stuck", "enc_base_yaw"))
    assert np.all(r["faulty"][A:B] == r["faulty"][A])
    assert r["truth"][B - 1] - r["truth"][A] > 500                # counts the frozen channel missed


def test_noise_fault_has_its_sigma_in_the_frames(model, fd):
    sigma = 0.05
    r = twin_run(model, fd, Fault("noise", "noise", "imu_gx", {"sigma_rad_s": sigma}))
    err = r["faulty"][A:B] - r["healthy"][A:B]
    assert np.std(err) == pytest.approx(sigma, rel=0.25)
    assert abs(np.mean(err)) < 4 * sigma / math.sqrt(B - A)
    np.testing.assert_array_equal(r["faulty"][B:], r["healthy"][B:])


def test_slip_offsets_the_count_for_good(model, fd):
    r = twin_run(model, fd, Fault("slip", "slip", "enc_elbow", {"slip_counts": 400}), Duration.once())
    np.testing.assert_array_equal(r["faulty"][:A], r["healthy"][:A])
    np.testing.assert_array_equal(r["faulty"][A:] - r["healthy"][A:], 400)     # also after the clearance
    assert np.array_equal(r["status"] & FAULT_ACTIVE != 0, active(A, A + 1))


def test_encoder_disconnect_freezes_the_count_and_the_motion_meanwhile_stays_lost(model, fd):
    r = twin_run(model, fd, Fault("cut", "encoder_disconnect", "base_yaw"), channel="enc_base_yaw")
    h, f = r["healthy"], r["faulty"]
    assert np.all(f[A:B] == h[A])
    lost = h[B - 1] - h[A]
    assert lost > 500
    np.testing.assert_array_equal(f[B:], h[B:] - lost)          # reconnected: counts on from the frozen value
    assert np.array_equal(r["status"] & FAULT_ACTIVE != 0, active(A, B))


def test_nan_is_refused_on_every_integer_coded_channel(model, fd):
    emu, fw = rig(model, fd)
    carried = [s.name for c in fd.messages("to_firmware") for s in c.spec.signals
               if s.name in emu.sensors.channel_names]
    assert carried and not any(s.is_float for c in fd.messages("to_firmware") for s in c.spec.signals)
    for name in carried:
        with pytest.raises(FaultError, match="float32"):
            emu.faults.inject(Fault("nan", "nan", name))
    frames = cycle(emu, fw, fw.hold)
    assert frames[0]["accepted"] and not int(frames[0]["status"]) & FAULT_ACTIVE


# compact_fd with the gyro z axis as a float32 signal: a map on which a NaN can reach the firmware
FLOAT_GYRO_MAP = (FD.read_text(encoding="utf-8")
                  .replace('name = "imu_gz"\n  type = "int16"\n  start_bit = 176\n  scale = 0.0010652644360316951',
                           'name = "imu_gz"\n  type = "float32"\n  start_bit = 224')
                  .replace('name = "cycle"\n  type = "uint8"\n  start_bit = 216',
                           'name = "cycle"\n  type = "uint8"\n  start_bit = 176'))


def test_nan_on_a_float32_channel_reaches_the_firmware_as_nan(model):
    bus = BusMap.from_string(FLOAT_GYRO_MAP, "compact_fd with float32 imu_gz")
    assert any(s.name == "imu_gz" and s.is_float for s in bus.codec("sensors").spec.signals)
    emu, fw = rig(model, bus)
    emu.faults.inject(Fault("nan", "nan", "imu_gz"), Trigger.at(0.005), Duration.lasting(0.005))
    got = [cycle(emu, fw, fw.hold)[0] for _ in range(15)]
    # five NaN frames rejected as such; the next one's counter jumped by 6: rejected, the one after it
    # continues that sequence: taken (a new sequence)
    assert [g["accepted"] for g in got] == [True] * 5 + [False] * 6 + [True] * 4
    assert fw.input.reader.rejected["nan"] == 5 and fw.input.reader.rejected["counter"] == 1


# ----------------------------------------------------------------------------- bus faults
# The sensor frame of cycle k carries the rolling counter k (the emulator's writer counts its frames
# from 0), and the firmware's command of cycle k carries counter k. A receiver's counter check
# accepts steps of 1 or 2 (one frame lost) and rejects repeats and larger jumps without moving its
# expected counter; two rejected frames in order start a new sequence: the first frame after a gap
# of more than one rejects as "counter", the second is taken.
BN, BA, BB = 80, 20, 40         # cycles run; a bus fault is active in cycles BA .. BB-1
K = np.arange(BN)
WINDOW = (K >= BA) & (K < BB)
STEP = 0.02                     # the firmware's base torque grows by one LSB per cycle: which command applies


def per_cycle(inside, outside=1) -> np.ndarray:
    return np.where(WINDOW, inside, outside)


def held_until(last: int) -> np.ndarray:
    """Applied command per cycle when none is taken in from BA until `last` (the last good one holds)."""
    return np.where((K >= BA) & (K <= last), BA - 1, K)


def swapped_pairs() -> list[list[int]]:
    """Sensor frames received per cycle under "reorder": a frame is held and follows the next one."""
    return [([] if (k - BA) % 2 == 0 else [k, k - 1]) if BA <= k < BB else [k] for k in range(BN)]


def delayed(n: int) -> list[list[int]]:
    """Sensor frames received per cycle under an n-cycle frame delay."""
    out = []
    for k in range(BN):
        if BA <= k < BB:
            out.append([k - n] if k - n >= BA else [])
        elif k == BB:                       # the clearance releases the held frames, then the cycle's own
            out.append(list(range(BB - n, BB + 1)))
        else:
            out.append([k])
    return out


# "corrupt" damages one byte (its default): a CRC-8 detects every error burst of up to 8 bits, so
# each damaged frame fails the check (more bytes may pass it by chance, 1 in 256)
TO_FIRMWARE = [   # fault on the sensor frames: the frames the firmware receives, and what it rejects
    (Fault("drop", "drop", "to_firmware"), {"frames": per_cycle(0), "fw_rejected": {"counter": 1}}),
    (Fault("duplicate", "duplicate", "to_firmware"), {"frames": per_cycle(2), "fw_rejected": {"counter": BB - BA}}),
    (Fault("reorder", "reorder", "to_firmware"),     # the overtaken frame of each pair is stale: rejected, lost
     {"cycles": swapped_pairs(), "fw_rejected": {"counter": (BB - BA) // 2}, "fw_lost": (BB - BA) // 2}),
    (Fault("delay", "frame_delay", "to_firmware", {"cycles": 3}), {"cycles": delayed(3)}),
    (Fault("corrupt", "corrupt", "to_firmware"), {"fw_rejected": {"crc": BB - BA, "counter": 1}}),
    (Fault("bad_crc", "bad_crc", "to_firmware"), {"fw_rejected": {"crc": BB - BA, "counter": 1}}),
    (Fault("wrong_counter", "wrong_counter", "to_firmware"), {"fw_rejected": {"counter": 1}, "fw_lost": 1}),
    (Fault("wrong_dlc", "wrong_dlc", "to_firmware", {"length_bytes": 8}),
     {"fw_rejected": {"length": BB - BA, "counter": 1}}),
    (Fault("bus_off", "silent", "to_firmware"), {"frames": per_cycle(0), "fw_rejected": {"counter": 1}}),
    (Fault("period", "period", "to_firmware", {"divider": 2}),
     {"frames": per_cycle((K - BA + 1) % 2), "fw_lost": (BB - BA) // 2}),
    (Fault("babble", "babble", "to_firmware:0x7F", {"rate_hz": 2000.0}),
     {"frames": per_cycle(3), "fw_rejected": {"unknown_id": 2 * (BB - BA)}}),
]
TO_PLANT = [      # fault on the command frames: the command the emulator applies, and what it rejects
    (Fault("drop", "drop", "to_plant"), {"applied": held_until(BB), "emu_rejected": {"counter": 1}}),
    (Fault("duplicate", "duplicate", "to_plant"), {"emu_rejected": {"counter": BB - BA}}),
    (Fault("reorder", "reorder", "to_plant"),     # 21 overtakes 20 (stale: rejected), 23 overtakes 22, ...
     {"applied": np.where(WINDOW, K - (K - BA + 1) % 2, K), "emu_rejected": {"counter": (BB - BA) // 2},
      "emu_lost": (BB - BA) // 2}),
    (Fault("delay", "frame_delay", "to_plant", {"cycles": 3}),
     {"applied": np.where(WINDOW, np.maximum(K - 3, BA - 1), K)}),
    (Fault("corrupt", "corrupt", "to_plant"),
     {"applied": held_until(BB), "emu_rejected": {"crc": BB - BA, "counter": 1}}),
    (Fault("bad_crc", "bad_crc", "to_plant"),
     {"applied": held_until(BB), "emu_rejected": {"crc": BB - BA, "counter": 1}}),
    (Fault("wrong_counter", "wrong_counter", "to_plant"), {"applied": held_until(BA), "emu_rejected": {"counter": 1},
                                                            "emu_lost": 1, "duration": Duration.once()}),
    (Fault("wrong_dlc", "wrong_dlc", "to_plant", {"length_bytes": 6}),
     {"applied": held_until(BB), "emu_rejected": {"length": BB - BA, "counter": 1}}),
    (Fault("silent", "silent", "to_plant"), {"applied": held_until(BB), "emu_rejected": {"counter": 1}}),
    (Fault("period", "period", "to_plant", {"divider": 2}),
     {"applied": np.where(WINDOW, K - (K - BA) % 2, K), "emu_lost": (BB - BA) // 2}),
    (Fault("babble", "babble", "to_plant:0x7F", {"rate_hz": 2000.0}), {"emu_rejected": {"unknown_id": 2 * (BB - BA)}}),
]


def bus_run(model, bus: BusMap, fault: Fault, duration: Duration | None = None) -> dict:
    """BN cycles with the fault struck at BA (lasting to BB unless `duration`); the firmware sends
    the command of cycle k (holding torque + STEP * k on the base) and keeps every frame it receives."""
    emu, fw = rig(model, bus)
    emu.faults.inject(fault, Trigger.at(BA * DT), duration or Duration.lasting((BB - BA) * DT))
    r = {"received": [], "applied": [], "rejected_now": [], "tripped": []}
    for k in range(BN):
        rejected = emu.commands.reader.rejected_total
        r["received"].append(cycle(emu, fw, fw.hold + [STEP * k, 0.0, 0.0]))
        r["applied"].append(round((emu.commands.tau[0] - fw.hold[0]) / STEP))
        r["rejected_now"].append(emu.commands.reader.rejected_total > rejected)
        r["tripped"].append(emu.watchdog.tripped)
    r.update(emu=emu, fw=fw)
    return r


def check_bus_run(r: dict, expected: dict) -> None:
    """The counters of both receivers, the frames per cycle, the applied commands and the status
    bits are as expected; after the clearance every cycle is normal again."""
    emu, fw = r["emu"], r["fw"]
    for got, side in ((fw.input.reader.stats(), "fw"), (emu.commands.counters(), "emu")):
        want = {k: expected.get(f"{side}_rejected", {}).get(k, 0) for k in got["rejected"]}
        assert (side, got["rejected"], got["lost"]) == (side, want, expected.get(f"{side}_lost", 0))
    if "cycles" in expected:
        assert [fw.cycles_in(frames) for frames in r["received"]] == expected["cycles"]
    frames = expected.get("frames", [len(c) for c in expected["cycles"]] if "cycles" in expected else np.ones(BN))
    np.testing.assert_array_equal([len(f) for f in r["received"]], frames)
    np.testing.assert_array_equal(r["applied"], expected.get("applied", K))
    for received in r["received"]:                     # the status bits as the emulator set them in that cycle
        for e in (e for e in received if e["accepted"]):
            k = int(e["cycle"])
            assert bool(int(e["status"]) & FAULT_ACTIVE) == (BA <= k < (BA + 1 if "duration" in expected else BB))
            assert bool(int(e["status"]) & REJECTED) == r["rejected_now"][k]
    assert not any(r["tripped"])
    for received in r["received"][BB + 1:]:           # cleared: one good sensor frame per cycle again
        assert [e["accepted"] for e in received] == [True]


@pytest.mark.parametrize("fault, expected", TO_FIRMWARE, ids=[f.name for f, _ in TO_FIRMWARE])
def test_bus_fault_on_the_sensor_frames(model, fd, fault, expected):
    check_bus_run(bus_run(model, fd, fault), expected)


@pytest.mark.parametrize("fault, expected", TO_PLANT, ids=[f.name for f, _ in TO_PLANT])
def test_bus_fault_on_the_command_frames(model, fd, fault, expected):
    check_bus_run(bus_run(model, fd, fault, expected.get("duration")), expected)


def test_silent_firmware_trips_the_watchdog_and_the_recovery_clears_it(model, fd):
    emu, fw = rig(model, fd)
    emu.faults.inject(Fault("firmware_bus_off", "silent", "to_plant"), Trigger.at(BA * DT), Duration.lasting(0.1))
    status, tau = [], []
    for k in range(BA + 140):
        status.append(int(cycle(emu, fw, fw.hold)[0]["status"]))
        tau.append(emu.plant.tau[:3].copy())
    timeout = np.array([s & TIMEOUT != 0 for s in status])
    trip, clear = np.flatnonzero(np.diff(timeout.astype(int))) + 1
    assert trip in (BA + 49, BA + 50)                         # 50 ms after the last command taken in
    assert clear == BA + 101                                  # the first command back jumps its counter: rejected
    assert [e[0] for e in emu.watchdog.events] == ["tripped", "cleared"] and emu.watchdog.trips == 1
    assert status[clear - 1] & REJECTED and not status[clear] & REJECTED
    np.testing.assert_allclose(np.array(tau)[trip + 5:clear], 0.0, atol=1e-9)   # safe state zero_torque
    np.testing.assert_allclose(tau[-1], fw.hold, atol=0.5)    # the drives follow the commands again


# ----------------------------------------------------------------------------- serial link (pty pair)
@pytest.mark.parametrize("kind", ["corrupt", "bad_crc"])
@pytest.mark.parametrize("direction", ["to_firmware", "to_plant"])
def test_damaged_serial_packets_fail_the_crc16_and_clearing_restores_them(model, kind, direction):
    bus = BusMap.load(SERIAL)
    master, slave_path = open_pty_pair()
    emu_link, fw_link = SerialLink.from_fd(master, name="emulator"), SerialLink(slave_path)
    try:
        emu = make_emulator(model, bus, emu_link)
        fw = FakeFirmware(bus, fw_link, emu)
        emu.faults.inject(Fault(kind, kind, direction), Trigger.at(BA * DT), Duration.lasting((BB - BA) * DT))
        accepted = []
        for k in range(BN):
            fw.send(fw.hold + [STEP * k, 0.0, 0.0])
            wait_bytes(master, 12)                  # one command packet: 7 bytes + id, CRC-16, COBS, delimiter
            emu.step_once()
            wait_bytes(fw_link.fileno(), 31)        # one sensor packet: 26 bytes + 5
            accepted.append([e["accepted"] for e in fw.receive()])
            lost = direction == "to_plant" and BA <= k <= BB      # damaged commands, then the counter jump
            assert round((emu.commands.tau[0] - fw.hold[0]) / STEP) == (BA - 1 if lost else k)
        damaged_here, other = (emu_link, fw_link) if direction == "to_plant" else (fw_link, emu_link)
        assert damaged_here.counters.rx_crc_errors == BB - BA and other.counters.rx_crc_errors == 0
        receiver = emu.commands.counters() if direction == "to_plant" else fw.input.reader.stats()
        assert receiver["rejected"]["counter"] == 1 and sum(receiver["rejected"].values()) == 1
        if direction == "to_firmware":      # the link drops damaged packets; the first one back jumps the counter
            assert accepted == [[True]] * BA + [[]] * (BB - BA) + [[False]] + [[True]] * (BN - BB - 1)
        else:
            assert accepted == [[True]] * BN
    finally:
        emu_link.close()
        fw_link.close()


# ----------------------------------------------------------------------------- timing faults
def test_stall_in_realtime_mode_provokes_overruns_the_pacer_counts(model, fd, tmp_path):
    log = tmp_path / "stall.msgpack"
    emu, _ = folded(model, fd, mode="realtime", duration_s=0.4, ignore_first_s=0.0, log_path=str(log))
    stalls = (0.1, 0.2, 0.3)
    for t in stalls:
        emu.faults.inject(Fault(f"stall_{t}", "stall", params={"stall_s": 0.0015}), Trigger.at(t), Duration.once())
    summary = emu.run()
    assert summary["cycles"] == 400 and summary["halted"] is None
    assert summary["log"]["writer"] == ("process" if writer_process.available() else "thread")
    assert summary["log_dropped"] == 0 and summary["log"]["writer_error"] is None
    assert summary["overrun_causes"]["heartbeat"] is True  # 1 kHz: the loop sleeps, a heartbeat runs beside it
    assert summary["pacer"]["overruns"] >= len(stalls) and summary["pacer"]["skipped_periods"] >= len(stalls)
    header, rows = read_run(log)
    compute = rows[:, header["columns"].index("compute_us")]
    stalled = [round(t / DT) for t in stalls]
    assert np.all(compute[stalled] >= 1500.0)                 # the busy wait counts as compute time
    assert [(e["event"], e["cycle"]) for e in header["events"]] == [(a, c + d) for c in stalled
                                                                     for a, d in (("inject", 0), ("clear", 1))]


def test_output_delay_shifts_the_sensor_frames_by_whole_cycles(model, fd):
    emu, fw = rig(model, fd)
    n = 2
    emu.faults.inject(Fault("late", "output_delay", params={"cycles": n}), Trigger.at(A * DT),
                      Duration.lasting((B - A) * DT))
    enc = emu.sensors.channel("enc_base_yaw")
    computed, received = [], []
    for k in range(N):
        received.append([e["enc_base_yaw"] for e in cycle(emu, fw, fw.hold + PUSH) if e["accepted"]])
        computed.append(emu.sensors.measured[enc])
    assert received[:A] == [[c] for c in computed[:A]]
    assert received[A:A + n] == [[]] * n
    assert received[A + n:B] == [[c] for c in computed[A:B - n]]          # n cycles late
    assert received[B] == computed[B - n:B + 1]                           # cleared: the held frames at once
    assert received[B + 1:] == [[c] for c in computed[B + 1:]]
    assert computed[B - 1] - computed[A] > 500                            # the base turned meanwhile


# ----------------------------------------------------------------------------- plant faults
def run_cycles(emu: Emulator, fw: FakeFirmware, n: int, law) -> dict:
    """n cycles with the firmware commanding `law(t)`; the plant's applied torque, q, qd and the tip."""
    out = {"tau": [], "q": [], "qd": [], "tip_z": []}
    for k in range(n):
        cycle(emu, fw, law(k * DT))
        out["tau"].append(emu.plant.tau[:3].copy())
        out["q"].append(emu.plant.q().copy())
        out["qd"].append(emu.plant.vel[:3].copy())
        out["tip_z"].append(emu.sensors.tip[2])
    return {k: np.array(v) for k, v in out.items()}


def holding_torque_without_payload(model) -> np.ndarray:
    bare = copy.deepcopy(model)
    payload = next(a for b in bare.bodies for a in b.attachments if a.name == "payload")
    payload.mass_kg, payload.inertia_kg_m2 = 0.0, np.zeros((3, 3))
    return Plant(bare).equilibrium_eta()


def test_payload_drop_lowers_the_holding_torque_and_the_arm_rises(model, fd):
    model.integrator.motion_tolerance_rad = 0.0     # the plan by the modes alone: x2, which the bare link outruns
    emu, fw = rig(model, fd)
    substeps = emu.plant.plan.substeps
    emu.faults.inject(Fault("drop", "payload_drop", "payload"), Trigger.at(0.3), Duration.lasting(1.0))
    r = run_cycles(emu, fw, 300, PD(fw))
    assert emu.plant.plan.substeps == substeps
    r_drop = run_cycles(emu, fw, 1000, PD(fw))
    assert emu.plant.plan.substeps > substeps           # the bare link 2 vibrates faster
    r_back = run_cycles(emu, fw, 800, PD(fw))
    assert emu.plant.plan.substeps == substeps
    hold, bare = emu.hold_tau[1], holding_torque_without_payload(emu.plant.asm.model)[1]
    assert hold - bare == pytest.approx(-2.1 * 9.81 * 1.88, rel=0.03)    # payload x g x its reach
    # the PD firmware (holding torque as feedforward) ends up applying the new holding torque
    assert np.mean(r["tau"][:, 1]) == pytest.approx(hold, rel=1e-3)
    assert np.mean(r_drop["tau"][500:, 1]) == pytest.approx(bare, rel=0.01)
    assert np.mean(r_back["tau"][400:, 1]) == pytest.approx(hold, rel=0.01)
    assert np.min(r_drop["q"][:, 1]) < -0.005                           # pitch < 0: up
    assert np.mean(r_drop["tip_z"][500:]) - np.mean(r["tip_z"]) > 0.01
    assert abs(np.mean(r_back["tip_z"][400:]) - np.mean(r["tip_z"])) < 0.002


def test_friction_increase_stops_a_driven_joint_until_cleared(model, fd):
    emu, fw = rig(model, fd)
    nominal = emu.plant.km.coulomb.copy()
    emu.faults.inject(Fault("sticky", "friction", "elbow", {"friction_scale": 10.0}), Trigger.at(0.2),
                      Duration.lasting(0.3))
    push = fw.hold + [0.0, 0.0, 2.0]                   # 2 N m: above the nominal Coulomb 0.5 N m, below 5 N m
    r = run_cycles(emu, fw, 700, lambda t: push)
    qd, q = r["qd"][:, 2], r["q"][:, 2]
    assert qd[199] > 0.1                                 # accelerating before
    # ten times the friction (5 N m > the 2 N m push) stops it: it creeps at about 13 mrad/s, below
    # the Coulomb smoothing, which the drive bank widened to 28 mrad/s for the scaled friction (the
    # configured 1 mrad/s, slope 5 N m / 1 mrad/s, is beyond RK4's real-axis bound at one 1 ms substep)
    assert np.mean(np.abs(qd[350:500])) < 0.1 * qd[199] and q[499] - q[349] < 0.003
    assert qd[699] - qd[499] > 0.5 * qd[199]            # cleared: accelerates again
    np.testing.assert_array_equal(emu.plant.km.coulomb, nominal)


def test_torque_constant_loss_halves_the_applied_torque(model, fd):
    emu, fw = rig(model, fd)
    emu.faults.inject(Fault("demagnetised", "kt_loss", "shoulder_pitch", {"kt_scale": 0.5}), Trigger.at(0.05),
                      Duration.lasting(0.05))
    r = run_cycles(emu, fw, 150, lambda t: fw.hold)
    tau = r["tau"]
    np.testing.assert_allclose(tau[1:50], np.broadcast_to(fw.hold, (49, 3)), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(tau[50:100, 1], 0.5 * fw.hold[1], rtol=1e-9)
    np.testing.assert_allclose(tau[50:100, [0, 2]], 0.0, atol=1e-9)
    np.testing.assert_allclose(tau[100:], np.broadcast_to(fw.hold, (50, 3)), rtol=1e-9, atol=1e-9)
    assert r["q"][99, 1] - r["q"][49, 1] > 0.005            # half the holding torque: the arm sinks
    assert emu.drives.kt_scale[1] == 1.0


def test_brake_fault_stops_a_moving_joint_until_released(model, fd):
    emu, fw = rig(model, fd)
    emu.faults.inject(Fault("brake", "brake", "elbow"), Trigger.at(0.2), Duration.lasting(0.2))
    engaged, qd = [], []
    for k in range(600):
        cycle(emu, fw, fw.hold + [0.0, 0.0, 2.0])
        qd.append(emu.plant.vel[2])
        engaged.append(bool(emu.drives.brake_engaged[2]))
    qd = np.array(qd)
    assert engaged == [False] * 200 + [True] * 200 + [False] * 200
    assert qd[199] > 0.1
    assert np.all(qd[220:400] == 0.0)                   # held: the brake sticks
    assert 0 < qd[420] < qd[599] and qd[599] > 0.5 * qd[199]       # released: moving, faster and faster


def frequency_hz(x: np.ndarray) -> float:
    """Mean frequency of an oscillation from its zero crossings about the mean."""
    s = np.signbit(x - x.mean())
    crossings = np.flatnonzero(s[1:] != s[:-1])
    return (len(crossings) - 1) / 2 / ((crossings[-1] - crossings[0]) * DT)


def test_stiffness_loss_doubles_the_static_deflection_and_lowers_the_frequency(model, fd):
    emu, fw = rig(model, fd)
    emu.faults.inject(Fault("crack", "stiffness_loss", "link1", {"stiffness_scale": 0.5}), Trigger.at(0.1),
                      Duration.lasting(1.5))
    i = emu.plant.layout.eta_index(1, 2)        # link 1, first bending mode along z: the one gravity deflects
    pd, eta = PD(fw), []
    for k in range(2600):
        cycle(emu, fw, pd(k * DT))
        eta.append(emu.plant.pos[i])
    eta = np.array(eta)
    nominal, weak, healed = eta[:100], eta[100:1600], eta[1600:]
    assert np.ptp(nominal) < 1e-5                                        # at rest before
    assert np.mean(weak) / np.mean(nominal) == pytest.approx(2.0, rel=0.05)     # half the stiffness: twice the sag
    assert np.mean(healed) / np.mean(nominal) == pytest.approx(1.0, rel=0.05)
    # the strike and the clearance each set the link ringing about its new rest shape
    assert frequency_hz(weak) < 0.85 * frequency_hz(healed)


# ----------------------------------------------------------------------------- watchdog brake
def test_watchdog_brake_closes_the_holding_brakes_on_a_trip_and_opens_them_when_commands_return(model, fd):
    runs = {}
    for safe_state in ("brake", "zero_torque"):
        emu, fw = rig(model, fd, safe_state=safe_state)
        r = {"engaged": [], "tau": [], "q": [], "qd": [], "status": []}
        for k in range(400):
            got = cycle(emu, fw, fw.hold if not 100 <= k < 300 else None)     # silent for 200 ms
            r["status"].append(int(got[0]["status"]))
            r["engaged"].append(emu.drives.brake_engaged.copy())
            r["tau"].append(emu.plant.tau[:3].copy())
            r["q"].append(emu.plant.q().copy())
            r["qd"].append(emu.plant.vel[:3].copy())
        runs[safe_state] = {k: np.array(v) for k, v in r.items()} | {"emu": emu, "fw": fw}
    r, emu = runs["brake"], runs["brake"]["emu"]
    tripped = (r["status"] & TIMEOUT) != 0
    trip, clear = np.flatnonzero(np.diff(tripped.astype(int))) + 1
    assert 148 <= trip <= 151 and clear == 300
    np.testing.assert_array_equal(r["engaged"], np.broadcast_to(tripped[:, None], (400, 3)))
    np.testing.assert_allclose(r["tau"][trip + 3:clear], 0.0, atol=1e-6)      # brakes, no drive torque (once
                                                                              # the current loop has decayed)
    assert np.all(r["qd"][trip + 20:clear] == 0.0)                            # the brakes hold the arm
    assert np.max(np.abs(r["q"][clear - 1] - r["q"][trip])) < 1e-3
    np.testing.assert_allclose(r["tau"][-1], runs["brake"]["fw"].hold, atol=0.5)   # released: driven again
    falling = runs["zero_torque"]
    assert falling["q"][clear - 1, 1] - falling["q"][trip, 1] > 0.05          # without brakes the arm falls
    assert emu.watchdog.trips == 1


def test_a_brake_fault_keeps_its_brake_through_a_watchdog_trip_and_clearance(model, fd):
    emu, fw = rig(model, fd, safe_state="brake")
    handle = emu.faults.inject(Fault("elbow_brake", "brake", "elbow"))
    engaged = []
    for k in range(300):
        cycle(emu, fw, fw.hold if not 50 <= k < 150 else None)
        engaged.append(emu.drives.brake_engaged.copy())
        if k == 200:
            emu.faults.clear(handle)
    engaged = np.array(engaged)
    assert emu.watchdog.trips == 1 and not emu.watchdog.tripped
    assert np.all(engaged[:201, 2])                 # the fault's brake, the watchdog's besides
    assert not np.any(engaged[201:, 2])            # released with the fault (cleared after cycle 200)
    assert np.all(engaged[105:150, :2]) and not np.any(engaged[160:, :2])


# ----------------------------------------------------------------------------- status, events, log
def column(header: dict, rows: np.ndarray, name: str) -> np.ndarray:
    return rows[:, header["columns"].index(name)]


def test_fault_active_status_and_events_in_the_run_log_and_the_summary(model, fd, tmp_path):
    log = tmp_path / "events.msgpack"
    emu, _ = folded(model, fd, duration_s=0.4, log_path=str(log))
    for name, kind, target, params, t, length in (
            ("bias", "offset", "imu_ax", {"offset_m_s2": 0.4}, 0.05, 0.05),
            ("frozen_gyro", "stuck", "imu_gz", {}, 0.08, 0.07),
            ("mute", "silent", "to_plant", {}, 0.2, 0.08)):
        emu.faults.inject(Fault(name, kind, target, params), Trigger.at(t), Duration.lasting(length))
    summary = emu.run()
    header, rows = read_run(log)
    assert summary["log_dropped"] == 0 and len(rows) == 400
    # row k: cycle k (events name the cycle at whose start they happened, t its start time)
    status = column(header, rows, "status").astype(int)
    k = np.arange(400)
    any_active = ((k >= 50) & (k < 150)) | ((k >= 200) & (k < 280))
    np.testing.assert_array_equal(status & FAULT_ACTIVE != 0, any_active)
    faults = [e for e in header["events"] if e["event"] in ("inject", "clear")]
    assert [(e["event"], e["fault"], e["cycle"]) for e in faults] == [
        ("inject", "bias", 50), ("inject", "frozen_gyro", 80), ("clear", "bias", 100),
        ("clear", "frozen_gyro", 150), ("inject", "mute", 200), ("clear", "mute", 280)]
    for e in header["events"]:
        assert e["t"] == pytest.approx(e["cycle"] * DT, abs=1e-9)
    assert "offset on imu_ax" in faults[0]["detail"] and faults[2]["detail"] == "after 0.05 s"
    watchdog = [(e["event"], e["cycle"]) for e in header["events"] if e["event"].startswith("watchdog")]
    assert [w[0] for w in watchdog] == ["watchdog_tripped", "watchdog_cleared"]
    assert 249 <= watchdog[0][1] <= 251 and watchdog[1][1] == 281     # the first command back: a counter jump
    timeout = column(header, rows, "status").astype(int) & TIMEOUT != 0
    np.testing.assert_array_equal(np.flatnonzero(np.diff(timeout.astype(int))) + 1, [w[1] for w in watchdog])
    # the summary: the same events, counted
    assert [tuple(e[:4]) for e in summary["faults"]["events"]] == [(e["cycle"], e["t"], e["event"], e["fault"])
                                                                    for e in faults]
    assert (summary["faults"]["injections"], summary["faults"]["clearances"], summary["faults"]["active"],
            summary["faults"]["errors"]) == (3, 3, [], 0)
    assert summary["watchdog"]["trips"] == 1
    # the log keeps the truth beside the measured value: the offset shows as their difference
    error = column(header, rows, "imu_ax") - column(header, rows, "imu_ax_true")
    assert np.mean(error[50:100]) - np.mean(error[:50]) == pytest.approx(0.4, abs=0.01)
    assert np.mean(error[100:150]) - np.mean(error[:50]) == pytest.approx(0.0, abs=0.01)
    gz = column(header, rows, "imu_gz")
    assert np.all(gz[80:150] == gz[80]) and np.ptp(gz[150:220]) > 0      # stuck, then noisy again


# ----------------------------------------------------------------------------- a scenario file
def elbow_move(fw: FakeFirmware) -> PD:
    """The firmware holds the arm and turns the elbow to 0.3 rad between 0.3 and 1.3 s (past the
    0.2 rad at which combined.toml's encoder slip strikes)."""
    return PD(fw, target=lambda t: np.array([0.0, 0.0, 0.3 * min(max(t - 0.3, 0.0), 1.0)]))


def scenario_run(model, fd, scenario, path: Path) -> tuple[dict, dict, np.ndarray]:
    emu, _ = folded(model, fd, law=elbow_move, scenario=scenario, duration_s=4.0, log_path=str(path))
    summary = emu.run()
    header, rows = read_run(path)
    return summary, header, rows


def test_combined_scenario_runs_the_same_twice_and_another_seed_moves_the_random_faults(model, fd, tmp_path):
    scenario = load_scenario(COMBINED)
    first = scenario_run(model, fd, scenario, tmp_path / "a.msgpack")
    again = scenario_run(model, fd, scenario, tmp_path / "b.msgpack")
    summary, header, rows = first
    assert summary["halted"] is None and summary["cycles"] == 4000 and summary["log_dropped"] == 0
    assert summary["faults"]["errors"] == 0
    struck = {e["fault"] for e in header["events"] if e["event"] == "inject"}
    assert struck == {sf.fault.name for sf in scenario.faults}          # every fault struck, the slip too
    status = column(header, rows, "status").astype(int)
    assert np.all(status[800:] & FAULT_ACTIVE)                          # something is active from 0.8 s on
    assert column(header, rows, "compute_us")[2500] >= 1500.0           # the 1.5 ms stall
    # bit-identical: every column but the wall-clock times, and every event
    keep = [i for i, c in enumerate(header["columns"]) if c not in TIMING_COLUMNS]
    assert np.array_equal(rows[:, keep], again[2][:, keep])
    assert header["events"] == again[1]["events"]
    assert summary["faults"]["events"] == again[0]["faults"]["events"]

    reseeded = dataclasses.replace(scenario, seed=scenario.seed + 1)
    other = scenario_run(model, fd, reseeded, tmp_path / "c.msgpack")
    random_times = [[e["cycle"] for e in run[1]["events"] if e["fault"] == "accel_x_intermittent"]
                    for run in (first, other)]
    assert random_times[0] and random_times[1] and random_times[0] != random_times[1]
    timed = [[(e["fault"], e["cycle"]) for e in run[1]["events"] if e.get("fault") in ("gyro_z_noise", "compute_stall")]
             for run in (first, other)]
    assert timed[0] == timed[1]                                         # the timed faults stay where they were


@pytest.mark.parametrize("fault, offset", [(Fault("bias", "offset", "imu_ax", {"offset_m_s2": 0.4}), 0.4),
                                           (Fault("slip", "slip", "enc_elbow", {"slip_counts": 400}), 400)],
                         ids=["offset", "slip"])
def test_signal_faults_act_once_on_a_value_a_slower_sensor_holds(model, fd, fault, offset):
    """Sensors sampled every 2nd step hold their value between samples: a fault acts on the value as
    sampled, not again on its own output of the cycle before."""
    slow = copy.deepcopy(model)
    slow.sensors = [dataclasses.replace(s, divider=2) for s in slow.sensors]
    r = twin_run(slow, fd, fault, Duration.once() if fault.kind == "slip" else None)
    h, f = r["healthy"], r["faulty"]
    if fault.kind == "offset":                                          # each sample held for two cycles
        assert np.count_nonzero(np.diff(h[A:B]) == 0) >= (B - A) // 2 - 1
    end = N if fault.kind == "slip" else B
    np.testing.assert_allclose(f[A:end] - h[A:end], offset, atol=0.5 * bus_scale(fd, fault.target) * 1.0001)
    np.testing.assert_array_equal(f[end:], h[end:])


def test_fault_active_is_logged_but_kept_from_the_firmware_unless_announced(model, fd, tmp_path):
    """A firmware under test should react to a fault's effect, not to the emulator's bookkeeping."""
    log = tmp_path / "run.msgpack"
    emu, fw = rig(model, fd, announce_faults=False, duration_s=0.02, log_path=str(log))
    emu.faults.inject(Fault("accel_bias", "offset", "imu_ax", {"offset_m_s2": 0.1}))
    emu.run()
    frames = fw.receive()
    assert len(frames) == 21 and not any(int(f["status"]) & FAULT_ACTIVE for f in frames if f["accepted"])
    header, rows = read_run(log)
    status = rows[:, header["columns"].index("status")].astype(int)
    assert np.all(status & FAULT_ACTIVE)
