"""What the drives get while the firmware's commands are not to be trusted, and the status word.

The supervisor keeps the command watchdog (hil.runtime.options.Watchdog), the safe state (all joints
while the watchdog is tripped or the plant has diverged, the joints of stopped CANopen drive nodes),
the pose safe_state "hold" keeps and the holding brakes the safe state closes (through the fault
engine, so that a brake fault's brake stays closed, and vice versa). The compiled cycle
(hil.kernels.emulator_cycle) computes the safe-state command (zero torque, holding the pose, or the
holding brakes with damping elsewhere) and the status word from the state kept here: ``hold_tau``,
``hold_q``, ``braked``, the command buffer ``tau``, the watchdog and ``diverged``.
"""
from __future__ import annotations

import numpy as np

from firmware_bridge.wire.messages import StatusFlag
from hil.devices.drives import DriveBank
from hil.dynamics.plant import Plant
from hil.faults.engine import FaultEngine
from hil.runtime.options import RuntimeOptions, Watchdog

class Supervisor:
    """The watchdog, safe state and holding brakes of one emulator (module docstring).
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

    def supervise_nodes(self) -> None:
        """A CANopen cycle's frames taken in: the poses of drives that stopped and the holding brakes."""
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

    def hold_newly_safe_joints(self) -> None:
        """Protocol: the pose at which a drive was stopped is the one safe_state "hold" keeps."""
        safe = self.protocol.safe
        if self.protocol.any_safe or self.safe_before.any():
            newly = safe & ~self.safe_before
            if newly.any():
                self.hold_q[newly] = self.plant.q()[newly]
            self.safe_before[:] = safe

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
