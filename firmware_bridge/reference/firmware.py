"""The reference firmware: the controller side of the protocol, in its own process.

It waits for each sensor frame, computes joint torques with the reference
controller (firmware_bridge.reference.controller) and answers with the command frame(s).
Time is the emulator's cycle counter times the cycle period, so a lockstep run
is deterministic.

On a CANopen map (firmware_bridge.canopen) the firmware is the NMT master and SYNC
producer: it starts all nodes once the drives have sent their boot-up (or any) heartbeat,
sends one SYNC per cycle, computes on each complete set of position TPDOs, answers with the
RPDOs (target torque, applied by the drives at the next SYNC) followed by the next SYNC, and
stops the nodes at the end. Time is then the number of SYNCs sent times the cycle period.

Supervision: an encoder count that moves further in one cycle than the fastest joint motion
allows (a dropout reading 0, a corrupted or slipped count) latches an encoder fault; the firmware
then stops commanding, so the drives' command watchdog takes the arm to its safe state (with
`hil run --safe-state brake`: the holding brakes close), as a firmware that trusts no position
must not keep driving the motors.
"""
from __future__ import annotations

import select
import time
from dataclasses import dataclass, replace

import numpy as np

from hil.model.assembly import assemble, make_work
from hil.model.config import load_model
from hil.model.linearize import static_forces
from hil.model.assembly import rpy_matrix
from firmware_bridge.canopen import CanopenMaster, is_canopen
from firmware_bridge.reference.controller import ELLA_SETPOINTS, ChainGeometry, ControllerGains, ReferenceController
from firmware_bridge.link import Link
from firmware_bridge.messages import BusMap
from firmware_bridge.signals import CommandOutput, SensorInput

MAX_JOINT_RATE_RAD_S = 5.0     # supervision limit: a 0.5 s set-point manoeuvre peaks near 3 rad/s
ELLA_GAINS = ControllerGains(kp=np.array([3000.0, 3000.0, 800.0]), kd=np.array([300.0, 300.0, 80.0]),
                             ki=np.array([3000.0, 3000.0, 800.0]))
COUNTS_PER_REV = 4096 * 4


class GravityModel:
    """Gravity torque of the undeformed arm at joint angles q, from the arm model the firmware
    is written for (the feedforward a real firmware computes from its own model)."""

    def __init__(self, model) -> None:
        self.asm = assemble(model)
        self.work = make_work(self.asm.km)
        self.pos = np.zeros(self.asm.layout.nq)
        self.nj = self.asm.layout.n_joints
        self(np.zeros(self.nj))          # compile before the first cycle

    def __call__(self, q: np.ndarray) -> np.ndarray:
        self.pos[: self.nj] = q
        return static_forces(self.asm, self.pos, self.work)[: self.nj]


class EncoderMonitor:
    """Plausibility of the motor encoder counts, cycle to cycle: a change of more than the counts
    the joint could travel at `max_rate_rad_s` in the cycles elapsed is a fault (latched)."""

    def __init__(self, gear: np.ndarray, counts_per_rev: int, cycle_s: float,
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

    def __init__(self, bus: BusMap, arm_config: str, move_time_s: float = 2.0, vibration_suppression: bool = False):
        model = load_model(arm_config)
        names = [b.joint.name for b in model.bodies]
        gear = np.array([b.joint.gear_ratio for b in model.bodies])
        q0 = np.array([b.joint.q0_rad for b in model.bodies])
        self.goal = np.array([ELLA_SETPOINTS.get(n, q) for n, q in zip(names, q0)])
        self.bus = bus
        self.master = CanopenMaster(bus, names) if is_canopen(bus) else None
        self.sensors = SensorInput(bus, names)
        self.commands = CommandOutput(bus, names, self.master.own_ids if self.master else ())
        geometry = ChainGeometry(np.array([b.joint.axis / np.linalg.norm(b.joint.axis) for b in model.bodies]),
                                 np.array([rpy_matrix(b.joint.rpy_rad) for b in model.bodies]))
        self.ctl = ReferenceController(gear, COUNTS_PER_REV, q0, self.goal, move_time_s, ELLA_GAINS, bus.cycle_s,
                                       geometry=geometry if vibration_suppression else None)
        self.gravity = GravityModel(model)
        self.names = names
        self.monitor = EncoderMonitor(gear, COUNTS_PER_REV, bus.cycle_s)
        self.ctl.g = replace(self.ctl.g, torque_limit_N_m=np.minimum(self.ctl.g.torque_limit_N_m, self.commands.limit))


IDLE_TIMEOUT_S = 10.0     # no frame for this long: the emulator is gone (a busy machine can hold a pty's
                          # data for seconds; a lockstep emulator sends an unanswered frame again every second)


def serve(fw: Firmware, link: Link, duration_s: float, idle_timeout_s: float = IDLE_TIMEOUT_S) -> FirmwareResult:
    """Answer every encoder frame with a command until the emulator's time passes duration_s.

    CANopen: heartbeats go to the master (which starts the network); once it has started, only
    PDOs count as activity for the idle timeout."""
    bus, sensors, commands, ctl, gravity, goal = fw.bus, fw.sensors, fw.commands, fw.ctl, fw.gravity, fw.goal
    master = fw.master
    last_rx = time.monotonic()
    fd = _descriptor(link)
    sent_at = None
    fault_cycle = None
    latency = []
    cycle = sensors.cycle
    while time.monotonic() - last_rx < idle_timeout_s:
        frame = link.recv()
        if frame is None:
            _wait(fd)
            continue
        if master is not None and master.is_protocol(frame):
            if not master.started:
                last_rx = time.monotonic()
            for f in master.on_heartbeat(frame):       # NMT start and the first SYNC
                link.send(f)
            continue
        last_rx = time.monotonic()
        if not sensors.feed(frame):
            continue
        if sent_at is not None:
            latency.append(last_rx - sent_at)
        cycle = sensors.cycle if master is None else master.syncs
        if fw.monitor.check(sensors.counts, cycle, fw.names):
            tau = ctl.update(cycle * bus.cycle_s, sensors.counts, gravity, sensors.gyro)
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
                          link.counters.as_dict(), sensors.reader.stats(), _distribution_us(latency),
                          None if master is None else master.stats(),
                          None if fw.monitor.fault is None else f"{fw.monitor.fault} at cycle {fault_cycle}")


def _distribution_us(seconds: list[float]) -> dict:
    if not seconds:
        return {"count": 0}
    v = np.asarray(seconds) * 1e6
    return {"count": len(v), "min": float(v.min()), "p50": float(np.percentile(v, 50)),
            "p99": float(np.percentile(v, 99)), "p99.9": float(np.percentile(v, 99.9)), "max": float(v.max())}


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
