"""When the plant blows up: keep the last good state, say why, and go to the safe state.

Before every step the guard keeps the plant's state (a copy of a few dozen floats). A step that
ends in a non-finite state (hil.dynamics.plant.SimulationError), or a link that deflects beyond its
own length (every CHECK_EVERY cycles: the assumed modes no longer describe it, the tip would be
kilometres away), is a divergence: the state goes back to the last good one, the cause is named
and the loop latches its safe state (the watchdog's: zero torque, hold or brake) for the rest of the
run, with FAULT_ACTIVE in the status. The cycle's row, with the command that came in, is logged as
any other, and a ``diverged`` event carries the cause.

The cause is the command when some joint's torque exceeds its drive's limit, or would turn the joint
by more than MAX_TURN_RAD in one step on its own (|tau| dt^2 / J, J the joint's apparent inertia):
no integrator resolves that, and it is the torque that must be bounded (the drive's limits or the
bus map's command range). Otherwise the integration lost the state at moderate torques: a smaller
dt, more substeps or imex_midpoint.
"""
from __future__ import annotations

import numpy as np

MAX_TURN_RAD = 1.0
CHECK_EVERY = 10        # cycles between checks of the links' deflection


class DivergenceGuard:
    """The plant's last good state, the deflection check and the cause of a divergence."""

    def __init__(self, plant, drives):
        self.plant = plant
        self.limit = np.array([s.torque_limit_N_m for s in drives.specs], float)
        self.inertia = np.asarray(drives.inertia, float)
        self._pos, self._vel = plant.pos.copy(), plant.vel.copy()
        self.kept_t = plant.t
        lay = plant.layout
        nj = lay.n_joints
        self._eta = plant.pos[nj:nj + lay.n_eta]
        lengths = np.zeros(lay.n_eta)
        for body in plant.asm.model.bodies:
            if body.beam is not None:
                k = lay.body_names.index(body.name)
                a = lay.mode_offsets[k]
                lengths[a:a + len(lay.mode_labels[k])] = body.beam.length_m
        self.reach = np.where(lengths > 0, lengths, np.inf)     # a modal coordinate beyond this: diverged
        self.event: dict | None = None

    def keep(self) -> None:
        """Keep the state before a step."""
        np.copyto(self._pos, self.plant.pos)
        np.copyto(self._vel, self.plant.vel)
        self.kept_t = self.plant.t

    def kept(self) -> tuple[np.ndarray, np.ndarray]:
        """The arrays keep() copies position and velocity into, for a caller that copies them itself
        (setting `kept_t`)."""
        return self._pos, self._vel

    def restore(self) -> None:
        """Back to the state kept before the step."""
        np.copyto(self.plant.pos, self._pos)
        np.copyto(self.plant.vel, self._vel)
        self.plant.t = self.kept_t

    def deflection_problem(self, cycle: int) -> str | None:
        """A link deflecting beyond its length (looked at every CHECK_EVERY cycles), else None."""
        if cycle % CHECK_EVERY or not np.any(np.abs(self._eta) > self.reach):
            return None
        k = int(np.argmax(np.abs(self._eta) / self.reach))
        return (f"t = {self.plant.t:.6f} s: a link deflects {abs(self._eta[k]):.3g} m, beyond its own length "
                f"{self.reach[k]:g} m (modal coordinate {k}): outside the small-deflection range of its modes")

    def cause(self, command: np.ndarray, applied: np.ndarray, joints: list[str], problem: str) -> str:
        """Why the plant diverged in this step: the command's magnitude, or the integration."""
        dt = self.plant.dt
        turn = np.abs(applied) * dt * dt / self.inertia
        over = np.abs(command) > self.limit
        k = int(np.argmax(np.where(over, np.inf, turn)))
        if over[k] or turn[k] > MAX_TURN_RAD:
            limit = f"its drive's limit {self.limit[k]:g} N m" if np.isfinite(self.limit[k]) else "its drive has no limit"
            return (f"{problem}: the command diverged the plant: tau_cmd_{joints[k]} = {command[k]:.3g} N m ({limit}; "
                    f"on its own it turns the joint {turn[k]:.3g} rad in one {dt * 1e3:g} ms step): bound the "
                    "commands (drive limits, the bus map's command range)")
        return (f"{problem} at moderate torques (largest {np.max(np.abs(applied)):.3g} N m): the integration "
                f"({self.plant.plan.describe()}) lost the state: reduce dt, add substeps or use imex_midpoint")

    def latch(self, cycle: int, cause: str) -> dict:
        """The divergence event (kept: the run's first divergence)."""
        if self.event is None:
            self.event = {"event": "diverged", "cycle": cycle, "t": float(self.kept_t), "detail": cause}
        return self.event
