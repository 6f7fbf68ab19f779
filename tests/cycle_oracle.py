"""A Python model of the emulator's cycle, the oracle the compiled cycle (hil.runtime.one_call) is held
to: the same Emulator, each stage written out in Python on the devices' own calls: the command frames
through CommandInput.feed, the watchdog and brakes through the Supervisor, the safe-state command as
hil.runtime.supervisor describes it (then DriveBank.command_for_torque), DriveBank.update, Plant.step
with the divergence guard's keep, check and recovery, SensorSuite.sample, the fault engine's signal
faults, the status word, and SensorOutput.frames for the sensor frames."""
from __future__ import annotations

import time

import numpy as np

from firmware_bridge.wire.messages import StatusFlag
from hil.dynamics.plant import SimulationError
from hil.runtime.loop import Emulator


class StageEmulator(Emulator):
    """An Emulator whose step_once runs the Python stages (module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sensor_frames, self.feed = self.sensors_out.frames, self.commands.feed

    def step_once(self, lateness_ns: int = 0) -> None:
        t0 = time.monotonic_ns()
        self.faults.begin_cycle(self.cycle, self.plant.t)
        frames = self.io.receive()
        fresh = self._decode(frames)
        cmd_age_us = self.age.cycle_start(t0)
        self.supervisor.supervise(fresh, self.cycle, self.logger)
        tau = self.drives.update(self.applied_torque(self.commands.tau))
        self.faults.stall()
        tau = self._step_plant(tau)
        self.sensors.sample()
        self.faults.apply_signals(self.sensors.measured, self.sensors.truth)
        self.cycle += 1
        status = self.status()
        sent = self.encode(status & self.supervisor.announced, self.cycle)
        if self.opt.mode != "lockstep":
            self.io.read_early()
        self.send_sensors(sent)
        if self.logger is not None:
            self.record.put(self.logger, self.cycle, self.commands.tau, tau, status, lateness_ns, 0, 0, cmd_age_us)

    def _decode(self, frames) -> bool:
        fresh = self.take_held()
        rejected = self.commands.reader.rejected_total
        for frame in frames:
            fresh |= self.take_frame(frame)
        self.supervisor.rejected_now = self.commands.reader.rejected_total > rejected
        return fresh

    def applied_torque(self, command: np.ndarray) -> np.ndarray:
        """`command`, or in the safe state the safe torques converted to each drive's command."""
        sup, protocol = self.supervisor, self.protocol
        nodes_safe = protocol is not None and protocol.any_safe
        if not sup.in_safe_state and not nodes_safe:
            return command
        self.safe_torque(sup.tau)
        self.drives.command_for_torque(sup.tau, out=sup.tau)
        if not sup.in_safe_state:           # only the joints of stopped drives in the safe state
            keep = ~protocol.safe
            sup.tau[keep] = command[keep]
        return sup.tau

    def safe_torque(self, out: np.ndarray) -> None:
        opt, sup, plant = self.opt, self.supervisor, self.plant
        qd = plant.vel[:len(out)]
        if opt.safe_state == "zero_torque":
            out[:] = 0.0
        elif opt.safe_state == "hold":
            kp, kd = opt.hold_gains
            out[:] = sup.hold_tau + kp * (sup.hold_q - plant.q()) - kd * qd
        else:
            out[:] = np.where(sup.braked, 0.0, -opt.brake_damping_N_m_s_rad * qd)

    def _step_plant(self, tau: np.ndarray) -> np.ndarray:
        guard = self.divergence
        guard.keep()
        try:
            self.plant.step(tau)
            problem = guard.deflection_problem(self.cycle)
        except SimulationError as exc:
            problem = str(exc)
        if problem is None:
            return tau
        guard.restore()
        event = guard.latch(self.cycle, guard.cause(self.commands.tau, tau, self.plant.layout.joint_names, problem))
        if self.supervisor.latch_divergence() and self.logger is not None:
            self.logger.event(event)
        self.supervisor.update_brakes()
        tau = self.drives.update(self.applied_torque(self.commands.tau))
        self.plant.step(tau)
        return tau

    def status(self) -> int:
        sup = self.supervisor
        status = int(StatusFlag.RUNNING)
        if sup.watchdog.tripped:
            status |= int(StatusFlag.COMMAND_TIMEOUT)
        if sup.rejected_now:
            status |= int(StatusFlag.COMMAND_REJECTED)
        if self.drives.torque_limited:
            status |= int(StatusFlag.TORQUE_LIMITED)
            sup.limited_cycles += 1
        if self.faults.any_active or sup.diverged:
            status |= int(StatusFlag.FAULT_ACTIVE)
        return status
