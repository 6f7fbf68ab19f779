"""What the drives get while the firmware's commands are not to be trusted, and the status word.

The supervisor keeps the command watchdog (hil.runtime.options.Watchdog), the safe state (all joints
while the watchdog is tripped or the plant has diverged, the joints of stopped CANopen drive nodes),
the safe-state command (zero torque, holding the pose, or the holding brakes with damping elsewhere)
and the holding brakes the safe state closes (through the fault engine, so that a brake fault's brake
stays closed, and vice versa). The compiled cycle (hil.kernels.emulator_cycle) computes the same
safe-state command on its common path from the arrays bound here: ``hold_tau``, ``hold_q``,
``braked`` and the command buffer ``tau``.
"""
from __future__ import annotations

import numpy as np

from firmware_bridge.wire.messages import StatusFlag
from hil.devices.drives import DriveBank
from hil.dynamics.plant import Plant
from hil.faults.engine import FaultEngine
from hil.runtime.options import RuntimeOptions, Watchdog

# the status bits as plain ints (IntFlag arithmetic costs about a microsecond per cycle)
_RUNNING, _COMMAND_TIMEOUT, _COMMAND_REJECTED, _TORQUE_LIMITED, _FAULT_ACTIVE = map(int, (
    StatusFlag.RUNNING, StatusFlag.COMMAND_TIMEOUT, StatusFlag.COMMAND_REJECTED, StatusFlag.TORQUE_LIMITED,
    StatusFlag.FAULT_ACTIVE))


class Supervisor:
    """The watchdog, safe state, holding brakes and status word of one emulator (module docstring).
    `protocol`: the CANopen drive nodes (their ``safe`` joints), or None."""

    def __init__(self, plant: Plant, drives: DriveBank, faults: FaultEngine, options: RuntimeOptions, protocol=None):
        self.plant, self.drives, self.faults, self.opt, self.protocol = plant, drives, faults, options, protocol
        self.watchdog = Watchdog(options.watchdog_s)
        nj = plant.layout.n_joints
        self.tau = np.zeros(nj)                         # the safe-state command
        self.hold_q = plant.q().copy()                  # the pose safe_state "hold" keeps
        self.hold_tau = plant.tau[:nj].copy()     # the torque holding the arm at start (Plant.equilibrium_eta)
        self.braked = (drives.brake_torque > 0) & (options.safe_state == "brake")   # brakes the safe state closes
        self.brakes_closed = np.zeros(nj, bool)   # by the safe state (watchdog trip or a stopped drive node)
        self.any_braked, self.any_brake_closed = bool(self.braked.any()), False    # their any(), kept
        self.safe_before = np.zeros(nj, bool)   # protocol: joints in the safe state last cycle
        self.diverged = False               # latched: the plant blew up, the safe state holds to the end
        self.rejected_now = False           # a command frame was rejected this cycle
        self.limited_cycles = 0             # cycles with a drive at its torque or current limit
        self.announced = ~0 if options.announce_faults else ~int(StatusFlag.FAULT_ACTIVE)   # status bits sent

    @property
    def in_safe_state(self) -> bool:
        """All joints in the safe state: the watchdog tripped, or the plant diverged (latched)."""
        return self.watchdog.tripped or self.diverged

    def supervise(self, fresh: bool, cycle: int, logger) -> None:
        """The command watchdog (`fresh`: a valid command this cycle; its trips and clears to `logger`),
        the poses of drives that stopped (CANopen) and the holding brakes."""
        self.check_watchdog(fresh, cycle, logger)
        if self.protocol is not None:
            self.hold_newly_safe_joints()
        self.update_brakes()

    def check_watchdog(self, fresh: bool, cycle: int, logger) -> None:
        was_tripped = self.watchdog.tripped
        tripped = self.watchdog.check(self.plant.t, fresh)
        if tripped and not was_tripped:
            self.hold_q[:] = self.plant.q()          # the pose at the trip, held by safe_state "hold"
        if tripped != was_tripped and logger is not None:
            logger.event({"event": "watchdog_" + ("tripped" if tripped else "cleared"), "cycle": cycle,
                          "t": self.plant.t})

    def latch_divergence(self) -> bool:
        """The plant diverged: the safe state holds from now on (the pose now, FAULT_ACTIVE announced
        to the firmware too: a drive fault). True the first time."""
        first = not self.diverged
        self.diverged = True
        if first:
            self.hold_q[:] = self.plant.q()
            self.announced = ~0
        return first

    def applied_torque(self, command: np.ndarray) -> np.ndarray:
        """The drives' commands: `command` as received, or in the safe state the safe torques, converted
        to each drive's command (a voltage drive's duty)."""
        nodes_safe = self.protocol is not None and self.protocol.any_safe
        if not self.in_safe_state and not nodes_safe:
            return command
        self.safe_torque()
        self.drives.command_for_torque(self.tau, out=self.tau)
        if not self.in_safe_state:          # only the joints of stopped drives in the safe state
            keep = ~self.protocol.safe
            self.tau[keep] = command[keep]
        return self.tau

    def hold_newly_safe_joints(self) -> None:
        """Protocol: the pose at which a drive was stopped is the one safe_state "hold" keeps."""
        safe = self.protocol.safe
        if self.protocol.any_safe or self.safe_before.any():
            newly = safe & ~self.safe_before
            if newly.any():
                self.hold_q[newly] = self.plant.q()[newly]
            self.safe_before[:] = safe

    def safe_torque(self) -> None:
        qd = self.plant.vel[: len(self.tau)]
        if self.opt.safe_state == "zero_torque":
            self.tau[:] = 0.0
        elif self.opt.safe_state == "hold":
            kp, kd = self.opt.hold_gains
            self.tau[:] = self.hold_tau + kp * (self.hold_q - self.plant.q()) - kd * qd
        else:                               # joints with a holding brake: brake, no torque; else damping
            self.tau[:] = np.where(self.braked, 0.0, -self.opt.brake_damping_N_m_s_rad * qd)

    def update_brakes(self) -> None:
        """Safe state "brake": a joint's holding brake is closed while the watchdog is tripped or its
        drive node is in the safe state, open otherwise."""
        nodes = self.protocol is not None and self.protocol.any_safe
        if not (self.in_safe_state or nodes or self.any_brake_closed) or not self.any_braked:
            return
        want = self.braked & (self.in_safe_state | (self.protocol.safe if nodes else False))
        for k in np.flatnonzero(want != self.brakes_closed):
            self.faults.hold_brake(int(k), bool(want[k]))
        self.brakes_closed[:] = want
        self.any_brake_closed = bool(want.any())

    def status(self) -> int:
        """The status word of this cycle (all bits; the firmware gets those in ``announced``)."""
        status = _RUNNING
        if self.watchdog.tripped:
            status |= _COMMAND_TIMEOUT
        if self.rejected_now:
            status |= _COMMAND_REJECTED
        if self.drives.torque_limited:
            status |= _TORQUE_LIMITED
            self.limited_cycles += 1
        if self.faults.any_active or self.diverged:
            status |= _FAULT_ACTIVE
        return status
