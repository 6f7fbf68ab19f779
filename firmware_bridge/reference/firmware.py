"""The reference firmware: the controller side of the protocol, in its own process.

It waits for each sensor frame, computes joint torques with the reference
controller (firmware_bridge.reference.controller) and answers with the command frame(s).
Time is the emulator's cycle counter times the cycle period, so a lockstep run
is deterministic.

On a CANopen map (firmware_bridge.canopen.master) the firmware is the NMT master and SYNC
producer: once the drives have sent their boot-up (or any) heartbeat, it enables them over SDO
(CiA 402: cyclic synchronous torque, Operation enabled), starts all nodes, sends one SYNC per
cycle, computes on each complete set of position TPDOs, answers with the RPDOs (target torque,
applied by the drives at the next SYNC) followed by the next SYNC, and stops the nodes at the end. Time is then the number of SYNCs sent times the cycle period.

Supervision: an encoder count that moves further in one cycle than the fastest joint motion
allows (a dropout reading 0, a corrupted or slipped count) latches an encoder fault; the firmware
then stops commanding, so the drives' command watchdog takes the arm to its safe state (with
`hil run --safe-state brake`: the holding brakes close), as a firmware that trusts no position
must not keep driving the motors.

The firmware knows the arm only through its own parameter file (firmware_bridge.reference.nominal,
e.g. configs/firmware/ella_nominal.toml): joint names, gears, encoders, and the rigid links' masses
and centres of mass for its gravity feed-forward (firmware_bridge.reference.rigid_chain).
"""
from __future__ import annotations

import os
import select
import time
from dataclasses import dataclass, replace

import numpy as np

from firmware_bridge.canopen.master import CanopenMaster
from firmware_bridge.canopen.network import is_canopen
from firmware_bridge.links.base import Link
from firmware_bridge.reference.controller import ELLA_SETPOINTS, ControllerGains, ReferenceController
from firmware_bridge.reference.nominal import load_nominal_arm
from firmware_bridge.reference.rigid_chain import RigidChain
from firmware_bridge.reference.stats import LatencyHistogram
from firmware_bridge.wire.messages import BusMap, StatusFlag
from firmware_bridge.wire.signals import CommandOutput, SensorInput

MAX_JOINT_RATE_RAD_S = 5.0     # supervision limit: a 0.5 s set-point manoeuvre peaks near 3 rad/s
ELLA_GAINS = ControllerGains(kp=np.array([3000.0, 3000.0, 800.0]), kd=np.array([300.0, 300.0, 80.0]),
                             ki=np.array([3000.0, 3000.0, 800.0]))


class EncoderMonitor:
    """Plausibility of the motor encoder counts, cycle to cycle: a change of more than the counts
    the joint could travel at `max_rate_rad_s` in the cycles elapsed is a fault (latched)."""

    def __init__(self, gear: np.ndarray, counts_per_rev: np.ndarray | int, cycle_s: float,
                 max_rate_rad_s: float = MAX_JOINT_RATE_RAD_S, counter_bits: int = 32):
        self.limit = max_rate_rad_s * np.abs(gear) * counts_per_rev / (2 * np.pi) * cycle_s   # counts per cycle
        self.half = 1 << (counter_bits - 1)
        self.last: np.ndarray | None = None
        self.last_cycle = 0
        self.fault: str | None = None

    def check(self, counts: np.ndarray, cycle: int, names: list[str]) -> bool:
        """True while no fault is latched; the first implausible jump latches one."""
        if self.fault is not None:
            return False
        if self.last is not None:
            step = (counts - self.last + self.half) % (2 * self.half) - self.half   # across a counter wrap
            bad = np.abs(step) > self.limit * max(cycle - self.last_cycle, 1)
            if bad.any():
                k = int(np.argmax(bad))
                self.fault = f"encoder {names[k]}: {int(step[k])} counts in {max(cycle - self.last_cycle, 1)} cycle(s)"
                return False
        self.last = counts.copy()
        self.last_cycle = cycle
        return True


@dataclass
class FirmwareResult:
    cycles: int
    q: list
    q_error: list
    link: dict
    sensors: dict
    command_to_sensor_us: dict     # command sent -> next sensor frame received (computed with it)
    canopen: dict | None = None    # CANopen maps: the master's counters
    fault: str | None = None       # the supervision's latched fault, with the cycle it struck


class Firmware:
    """The reference firmware for one arm on one bus map; serve() runs it on a link."""

    def __init__(self, bus: BusMap, params: str, move_time_s: float = 2.0, vibration_suppression: bool = False):
        """`params`: the firmware's nominal arm parameter file (TOML)."""
        self.arm = load_nominal_arm(params)
        names = self.arm.joint_names
        gear, counts_per_rev, home = self.arm.gear_ratios, self.arm.counts_per_rev, self.arm.home_rad
        self.goal = np.array([ELLA_SETPOINTS.get(n, q) for n, q in zip(names, home)])
        self.bus = bus
        self.master = CanopenMaster(bus, names) if is_canopen(bus) else None
        self.sensors = SensorInput(bus, names)
        self.commands = CommandOutput(bus, names, self.master.own_ids if self.master else ())
        chain = RigidChain(self.arm)
        self.ctl = ReferenceController(gear, counts_per_rev, home, self.goal, move_time_s, ELLA_GAINS, bus.cycle_s,
                                       geometry=chain if vibration_suppression else None)
        self.gravity = chain.gravity_torque
        self.names = names
        self.monitor = EncoderMonitor(gear, counts_per_rev, bus.cycle_s)
        self.ctl.g = replace(self.ctl.g, torque_limit_N_m=np.minimum(self.ctl.g.torque_limit_N_m, self.commands.limit))


IDLE_TIMEOUT_S = 10.0     # no frame for this long: the emulator is gone (a busy machine can hold a pty's
                          # data for seconds; a lockstep emulator sends an unanswered frame again every second)


def serve(fw: Firmware, link: Link, duration_s: float, idle_timeout_s: float = IDLE_TIMEOUT_S,
          parent_pid: int | None = None) -> FirmwareResult:
    """Answer every encoder frame with a command until the emulator's time passes duration_s.

    CANopen: heartbeats, SDO responses and EMCYs go to the master (which enables the drives and starts
    the network); once it has started, only PDOs count as activity for the idle timeout. With
    `parent_pid` (the emulator that started this process) the firmware stops as soon as that process
    is gone (looked at whenever no frame is waiting, at least every millisecond), instead of waiting
    for the idle timeout."""
    bus, sensors, commands, ctl, gravity, goal = fw.bus, fw.sensors, fw.commands, fw.ctl, fw.gravity, fw.goal
    master = fw.master
    last_rx = time.monotonic()
    fd = _descriptor(link)
    sent_at = None
    fault_cycle = None
    latency = LatencyHistogram()
    cycle = sensors.cycle
    while True:
        frame = link.recv()
        if frame is None:   # idle: only now the timeout counts (a firmware process that was not scheduled for
            # a while finds the frames that waited meanwhile first)
            if parent_pid is not None and os.getppid() != parent_pid:
                break                       # the emulator is gone (its pty or bus may still look alive)
            if time.monotonic() - last_rx >= idle_timeout_s:
                break
            _wait(fd)
            continue
        if master is not None and master.is_protocol(frame):
            if not master.started:
                last_rx = time.monotonic()
            for f in master.on_frame(frame):       # the drives' enabling, NMT start and the first SYNC
                link.send(f)
            continue
        last_rx = time.monotonic()
        if not sensors.feed(frame):
            continue
        if sent_at is not None:
            latency.add((last_rx - sent_at) * 1e6)
        cycle = sensors.cycle if master is None else master.syncs
        if fw.monitor.check(sensors.counts, cycle, fw.names):
            engaged = not sensors.status & StatusFlag.COMMAND_TIMEOUT      # the drives apply the commands
            tau = ctl.update(cycle * bus.cycle_s, sensors.counts, gravity, sensors.gyro, engaged)
            for f in commands.frames(tau, cycle):
                link.send(f)
        elif fault_cycle is None:
            fault_cycle = cycle
        done = cycle * bus.cycle_s >= duration_s
        if master is not None:
            link.send(master.stop() if done else master.sync())
        sent_at = time.monotonic() if fw.monitor.fault is None else None
        if done:
            break
    return FirmwareResult(sensors.cycle if master is None else cycle, ctl.q.tolist(), (goal - ctl.q).tolist(),
                          link.counters.as_dict(), sensors.reader.stats(), latency.summary(),
                          None if master is None else master.stats(),
                          None if fw.monitor.fault is None else f"{fw.monitor.fault} at cycle {fault_cycle}")


def _descriptor(link: Link) -> int | None:
    try:
        return link.fileno()
    except (AttributeError, NotImplementedError, OSError):
        return None


def _wait(fd: int | None) -> None:
    """Block briefly for input: select on the link's descriptor if it has one, else a short sleep."""
    if fd is not None and fd >= 0:
        select.select([fd], [], [], 1e-3)
    else:
        time.sleep(50e-6)
