"""The cycle's compute in one compiled call (hil.kernels.cycle.drive_step_sense): drives, plant step
with its output stations, the links' deflection check, sensor models; the same numbers as
DriveBank.update, Plant.step, DivergenceGuard.deflection_problem and SensorSuite.sample one after
the other, which remain the path where the call does not apply: while a holding brake is engaged
(the brake's stick/slip and the impulsive stop of a joint, DriveBank.update), for the screw-DAE
formulation, and to recover a step that diverged (rare; the step is then computed again there)."""
from __future__ import annotations

import numpy as np

from hil.devices.drives import DriveBank
from hil.devices.sensors import SensorSuite
from hil.dynamics.plant import Plant
from hil.kernels.cycle import OK, drive_step_sense
from hil.runtime.divergence import CHECK_EVERY, DivergenceGuard


class FusedCycle:
    """Binds the arrays of a plant, its drives and sensors once; ``step(command, cycle)`` runs one
    cycle's compute and returns OK or why the plant step failed (nothing sensed then)."""

    def __init__(self, plant: Plant, drives: DriveBank, sensors: SensorSuite, guard: DivergenceGuard):
        self.plant, self.drives, self.sensors = plant, drives, sensors
        nj = plant.layout.n_joints
        self.drive_args = (drives.par, drives.vidx, drives.kt_scale, drives.outputs, drives.limited)
        self.guard = guard
        self.enabled = True             # False: always the separate calls (the reference, for comparisons)
        self._reach = np.ascontiguousarray(guard.reach)
        self._eta0 = nj
        self.sense_args = sensors.tables[1:] + (sensors.measured,)     # fj ... sampled, then measured
        # the call's arguments that stay the same arrays all run, bound once (a payload fault changes the substeps)
        self.stations = (plant.out_index, plant.station_out)
        self.guard_args = (self._eta0, self._reach, *guard.kept())
        self._warm_up()

    def _warm_up(self) -> None:
        """Compile (or load from the cache) and run the call once before real time, on copies of
        every state it advances; the plant's work arrays are then solved again at its state."""
        p, s = self.plant, self.sensors
        par, vidx, kt, out, limited = self.drive_args
        fj, current, z, ich, fch, sf, si, gi, gm, lin_idx, lin_coef, axis, truth, sampled, measured = self.sense_args
        drive_step_sense(par, np.zeros(len(limited)), vidx, kt, out.copy(), limited.copy(), *p.kernel_args, p.t,
                         p.pos.copy(), p.vel.copy(), p.tau.copy(), p.dt, p.plan.substeps, p.method, p.out_index,
                         p.station_out.copy(), True, self._eta0, self._reach, p.pos.copy(), p.vel.copy(),
                         s.step_count + 1, fj, current, z, ich, fch, sf.copy(), si.copy(), gi, gm, lin_idx, lin_coef,
                         axis, truth.copy(), sampled.copy(), measured.copy())
        p.evaluate()

    @property
    def applies(self) -> bool:
        """Enabled, no brake engaged, the ABA formulation, output stations set (SensorSuite sets them)."""
        p = self.plant
        return (self.enabled and not self.drives.braking and not p.dae
                and p.out_index is not None)

    def step(self, command: np.ndarray, cycle: int, draw: bool = True) -> int:
        """One cycle with the drives' `command`; on OK the plant, drives and sensors have advanced as
        with the separate calls, otherwise the drives have and the plant is back before the step.
        `draw` False: the sensor noise of this step was drawn already (hil.runtime.one_call)."""
        p, s, d = self.plant, self.sensors, self.drives
        par, vidx, kt, out, limited = self.drive_args
        self.guard.kept_t = p.t          # with the position and velocity the call keeps
        if draw:
            s.rng.standard_normal(out=s.noise)
        verdict, d.torque_limited = drive_step_sense(
            par, command, vidx, kt, out, limited, *p.kernel_args, p.t, p.pos, p.vel, p.tau, p.dt, p.plan.substeps,
            p.method, *self.stations, cycle % CHECK_EVERY == 0, *self.guard_args, s.step_count + 1,
            *self.sense_args)
        p.t += p.dt
        if verdict == OK:
            s.step_count += 1
        else:
            self.guard.restore()
        return verdict
