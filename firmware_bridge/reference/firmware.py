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

from dataclasses import dataclass, replace

import numpy as np

from firmware_bridge.firmware.endpoint import FirmwareWire
from firmware_bridge.firmware.serve import IDLE_TIMEOUT_S, FirmwareSession, ServeResult, serve as serve_law
from firmware_bridge.links.base import Link
from firmware_bridge.reference.controller import ELLA_SETPOINTS, ControllerGains, ReferenceController
from firmware_bridge.reference.nominal import load_nominal_arm
from firmware_bridge.reference.rigid_chain import RigidChain
from firmware_bridge.wire.messages import BusMap, StatusFlag

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
        self.wire = FirmwareWire(bus, names)
        self.bus, self.master, self.sensors, self.commands = bus, self.wire.master, self.wire.sensors, self.wire.commands
        chain = RigidChain(self.arm)
        self.ctl = ReferenceController(gear, counts_per_rev, home, self.goal, move_time_s, ELLA_GAINS, bus.cycle_s,
                                       geometry=chain if vibration_suppression else None)
        self.gravity = chain.gravity_torque
        self.names = names
        self.monitor = EncoderMonitor(gear, counts_per_rev, bus.cycle_s)
        self.ctl.g = replace(self.ctl.g, torque_limit_N_m=np.minimum(self.ctl.g.torque_limit_N_m, self.commands.limit))


def serve(fw: Firmware, link: Link, duration_s: float, idle_timeout_s: float = IDLE_TIMEOUT_S,
          parent_pid: int | None = None) -> FirmwareResult:
    """Answer every cycle's encoder frames with a command until the emulator's time passes duration_s
    (firmware_bridge.firmware.serve: the loop, the CANopen master's part, when it ends). Once the
    encoder monitor has latched a fault, no command is sent."""
    law = ReferenceLaw(fw)
    return law.result(serve_law(fw.wire, link, law, duration_s, idle_timeout_s, parent_pid))


def session(fw: Firmware, link: Link, duration_s: float) -> tuple[FirmwareSession, ReferenceLaw]:
    """The reference firmware frame by frame on `link` (pumped by the emulator's process), and its law
    (its result once the run ends: ``law.result(session.result(...))``)."""
    law = ReferenceLaw(fw)
    return FirmwareSession(fw.wire, link, law, duration_s), law


class ReferenceLaw:
    """The reference firmware's control law on the wire's sensor readings: the encoder monitor, then the
    PD law with gravity feedforward (no command once the monitor has latched a fault)."""

    def __init__(self, fw: Firmware):
        self.fw = fw
        self.fault_cycle: int | None = None

    def __call__(self, sensors, cycle: int):
        fw = self.fw
        if fw.monitor.check(np.asarray(sensors.counts, np.int64), cycle, fw.names):
            engaged = not sensors.status & StatusFlag.COMMAND_TIMEOUT      # the drives apply the commands
            return fw.ctl.update(cycle * fw.bus.cycle_s, sensors.counts, fw.gravity, np.asarray(sensors.gyro), engaged)
        if self.fault_cycle is None:
            self.fault_cycle = cycle
        return None

    def result(self, run: ServeResult) -> FirmwareResult:
        fw = self.fw
        return FirmwareResult(run.cycles, fw.ctl.q.tolist(), (fw.goal - fw.ctl.q).tolist(), run.link, run.sensors,
                              run.command_to_sensor_us, run.canopen,
                              None if fw.monitor.fault is None else f"{fw.monitor.fault} at cycle {self.fault_cycle}")
