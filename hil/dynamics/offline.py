"""Offline stepping for ``hil simulate`` (hil.kernels.offline): a torque table as the plant sees it, at
every integrator stage's time (input hold ``linear``: the table's own linear interpolation, whatever its
resolution; ``zoh``: sampled at the step's start and held, as the real-time loop holds a command), and an
error-controlled substep count (``tol``: RK4's embedded error estimate).

Error control: every outer step is taken with n equal RK4 substeps (n shared out over the stretches between
a torque table's times inside the step: hil.kernels.offline.advance). When the largest scaled error
estimate err (hil.kernels.offline.advance: max |e_i| / (tol (1 + |y_i|)) over the substeps) exceeds 1
the step is repeated with n' = max(n + 1, ceil(n (err / 0.5)^(1/4))) substeps; an accepted step sets
the next step's n to ceil(n (err / 0.5)^(1/4)), at least half of n and at least the plan's substeps (its
stability bound). Rows stay on the outer step; the real-time loop keeps the plan and the zero-order hold.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hil.dynamics.integrator_plan import METHODS
from hil.dynamics.plant import Plant, SimulationError
from hil.dynamics.torque_table import TorqueTable
from hil.kernels import offline
from config_schema import UserError

INPUT_HOLDS = ("zoh", "linear")
MAX_SUBSTEPS = 4096
TARGET = 0.5             # the scaled error the substep count aims at


@dataclass
class StepStats:
    steps: int = 0
    substeps: int = 0            # over all accepted steps
    fewest: int = 0
    most: int = 0
    rejected: int = 0            # steps repeated with more substeps
    worst_error: float = 0.0     # largest accepted scaled error estimate (1 = tol)

    def describe(self, tol: float) -> str:
        mean = self.substeps / self.steps if self.steps else 0.0
        return (f"error-controlled RK4 (tol {tol:g}): {self.fewest} to {self.most} substeps per step, mean "
                f"{mean:.2f}, {self.rejected} steps repeated, largest error estimate {self.worst_error:.2f} x tol")


class OfflineStepper:
    """Steps `plant` from its time t to t + dt: the drive torque the plant's own ``tau`` (held, the torque
    at t) or, with the linear input hold, `table`'s at every stage's time."""

    def __init__(self, plant: Plant, input_hold: str = "zoh", tol: float | None = None,
                 table: TorqueTable | None = None):
        if input_hold not in INPUT_HOLDS:
            raise UserError(f"input hold {input_hold!r}: expected one of {', '.join(INPUT_HOLDS)}")
        if input_hold == "linear" and table is None:
            raise UserError("input hold linear interpolates a torque table; without one the torque is held "
                             "over the step (zoh)")
        if tol is not None and not (tol > 0 and plant.plan.method == "rk4"):
            raise UserError(f"tol = {tol!r} with {plant.plan.method}: error control needs tol > 0 and the "
                             "rk4 integrator (its embedded error estimate)")
        if plant.plan.method not in ("rk4", "imex_midpoint", "fitted_midpoint") or plant.dae:
            raise UserError(f"offline stepping supports rk4, imex_midpoint and fitted_midpoint with the "
                             f"articulated-body formulation, not {plant.plan.method} / {plant.formulation}")
        self.plant = plant
        self._method = METHODS[plant.plan.method]
        self.linear = input_hold == "linear"
        self.tol = tol
        nj = plant.tau.size
        self._table_t = table.t if self.linear else np.zeros(0)
        self._table_tau = np.ascontiguousarray(table.tau if self.linear else np.zeros((0, nj)))
        self._input = offline.TorqueInput(plant.tau, self._table_t, self._table_tau)
        self.substeps = plant.plan.substeps
        self.stats = StepStats()
        self._scratch = offline.make_scratch(plant.layout.nq, plant.tau.size)
        self._pos, self._vel = plant.pos.copy(), plant.vel.copy()

    def step(self) -> None:
        p = self.plant
        if self.tol is None:
            self._advance(p.plan.substeps)
        else:
            self._controlled()
        p.t += p.dt

    def _advance(self, n: int) -> float:
        p = self.plant
        ok = offline.advance(p.km.mi, p.km.mf, p.work.w, p.t, p.pos, p.vel, self._input, p.dt, n, self._method,
                             self.tol or 0.0, self._scratch)
        if not ok:
            raise SimulationError(f"t = {p.t + p.dt:.6f} s: non-finite state or singular inertia "
                                  f"({p.plan.method}, {n} substep(s) per {p.dt * 1e3:g} ms step)")
        return float(self._scratch[offline.OUT, 0])

    def _controlled(self) -> None:
        p, st = self.plant, self.stats
        np.copyto(self._pos, p.pos)
        np.copyto(self._vel, p.vel)
        n = self.substeps
        while True:
            err = self._advance(n)
            if err <= 1.0:
                break
            st.rejected += 1
            np.copyto(p.pos, self._pos)
            np.copyto(p.vel, self._vel)
            n = max(n + 1, math.ceil(n * (err / TARGET) ** 0.25))
            if n > MAX_SUBSTEPS:
                raise SimulationError(f"t = {p.t:.6f} s: the error estimate needs more than {MAX_SUBSTEPS} "
                                      f"substeps per step for tol = {self.tol:g}")
        taken = int(self._scratch[offline.OUT, 1])      # n, or more where the table's times split the step
        st.steps += 1
        st.substeps += taken
        st.fewest = taken if st.steps == 1 else min(st.fewest, taken)
        st.most = max(st.most, taken)
        st.worst_error = max(st.worst_error, err)
        grow = math.ceil(n * (max(err, 1e-12) / TARGET) ** 0.25)
        self.substeps = max(p.plan.substeps, (n + 1) // 2, min(grow, MAX_SUBSTEPS))
