"""Offline simulation engine behind ``hil simulate``: torque input tables, output rows, the loop.

Output columns (``run_columns``), per row at time t:

    t                          time [s]
    q_<joint>, qd_<joint>      joint angle [rad] and rate [rad/s]
    tau_<joint>                drive torque [N m] applied from t on (torque joints, held over the
                               step); for a prescribed joint the link torque the joint exerts
    eta_<body>_<mode label>    modal coordinates of each flexible body
    theta_<joint>, thetad_<joint>  motor angle and rate referred to the link side (elastic joints only)
    tip_x, tip_y, tip_z        world position of the station named "tip" [m]
    energy                     kinetic + gravity potential + elastic energy [J]
    w_<joint>_mx .. _fz        with wrenches=True: the joint's interaction wrench (Plant.wrenches) [N m, N]

The drive torques come from a torque table (``TorqueTable``) or from an in-process controller
(``ControllerSource``: ``tau = controller(t, measured)``, loaded by ``load_controller``).
"""
from __future__ import annotations

import importlib
import math
import sys
import time
from dataclasses import dataclass
from typing import Callable, TextIO

import numpy as np

from hil.model.assembly import Layout
from hil.kernels.outputs import energy, station_state
from hil.model.spec import DRIVE_PRESCRIBED
from hil.dynamics.offline import OfflineStepper
from hil.dynamics.plant import Plant, wrench_columns
from hil.dynamics.torque_table import InputError, TorqueTable
from hil.logs.runlog import RunWriter
from config_schema import UserError

__all__ = ["InputError", "TorqueTable", "TorqueSource", "Controller", "ControllerSource", "load_controller",
           "Progress", "Summary", "RowBuilder", "run_columns", "steps_for", "simulate"]

TIP = "tip"
PROGRESS_DELAY_S = 2.0     # show the bar only for runs still going after this wall time
PROGRESS_REDRAW_S = 0.1

TorqueSource = Callable[[float, np.ndarray], None]   # fills the drive torques at time t in place
Controller = Callable[[float, np.ndarray], np.ndarray]   # tau = controller(t, measured)


# ----------------------------------------------------------------------------- columns
def run_columns(layout: Layout, wrenches: bool = False) -> list[str]:
    """Column names of an output row, in order (see the module docstring)."""
    joints = layout.joint_names
    cols = ["t"] + [f"q_{j}" for j in joints] + [f"qd_{j}" for j in joints] + [f"tau_{j}" for j in joints]
    for body, labels in zip(layout.body_names, layout.mode_labels):
        cols += [f"eta_{body}_{label}" for label in labels]
    motors = [j for j, m in zip(joints, layout.motor_of_joint) if m >= 0]
    cols += [f"theta_{j}" for j in motors] + [f"thetad_{j}" for j in motors]
    return cols + ["tip_x", "tip_y", "tip_z", "energy"] + (wrench_columns(joints) if wrenches else [])


class RowBuilder:
    """Fills one preallocated output row from the plant state (columns as ``run_columns``)."""

    def __init__(self, plant: Plant, wrenches: bool = False):
        lay = plant.layout
        self.plant = plant
        self.columns = run_columns(lay, wrenches)
        self.row = np.zeros(len(self.columns))
        nj, ne = lay.n_joints, lay.n_eta
        pos, vel = plant.pos, plant.vel   # updated in place by the plant
        sources = [pos[:nj], vel[:nj], plant.tau[:nj], pos[nj:nj + ne], pos[nj + ne:], vel[nj + ne:]]
        self._copies = []
        start = 1
        for src in sources:
            self._copies.append((slice(start, start + src.size), src))
            start += src.size
        self.eta_slice = self._copies[3][0]
        self._tau_start = 1 + 2 * nj
        self._prescribed = [k for k, b in enumerate(plant.asm.model.bodies) if b.joint.drive == DRIVE_PRESCRIBED]
        self._tip = lay.station_names.index(TIP)
        self._st = np.zeros(24)
        self._energy = np.zeros(3)
        self._wrenches = plant.wrenches[: lay.n_joints].reshape(-1) if wrenches else None   # a view
        self._end = len(self.columns) - (0 if self._wrenches is None else self._wrenches.size)

    def fill(self) -> np.ndarray:
        """The row at the plant's current state and held torque (returns the shared buffer)."""
        p, row = self.plant, self.row
        p.evaluate()
        row[0] = p.t
        for dst, src in self._copies:
            row[dst] = src
        for k in self._prescribed:
            row[self._tau_start + k] = p.joint_torques[k]
        station_state(p.km.mi, p.km.mf, p.work.w, self._tip, self._st)
        e = self._end
        row[e - 4:e - 1] = self._st[0:3]
        energy(p.km.mi, p.km.mf, p.work.w, self._energy)   # the state evaluate() prepared
        row[e - 1] = self._energy.sum()
        if self._wrenches is not None:
            row[e:] = self._wrenches
        return row


# ----------------------------------------------------------------------------- torque input
class ControllerSource:
    """A TorqueSource from an in-process controller ``tau = controller(t, measured)``.

    ``measured`` is [q_1 .. q_n, qd_1 .. qd_n]: the joint angles [rad] and rates [rad/s] at t,
    ideal (no sensor model), in a buffer reused every step (copy what you keep). The controller
    returns the drive torque [N m] of each joint (n numbers); a Python function, a callable object or
    a numba-compiled function all work. It is called at the start of each step and its torque held
    over the step, as the real-time loop holds a firmware's command.
    """

    def __init__(self, controller: Controller, plant: Plant):
        self.controller = controller
        self.n = plant.layout.n_joints
        self.measured = np.zeros(2 * self.n)
        self._q, self._qd = plant.pos[: self.n], plant.vel[: self.n]

    def __call__(self, t: float, out: np.ndarray) -> None:
        self.measured[: self.n] = self._q
        self.measured[self.n:] = self._qd
        try:
            tau = np.asarray(self.controller(t, self.measured), dtype=float)
        except Exception as exc:        # the user's code: its failure in one line, naming it
            raise InputError(f"controller {self.controller!r} at t = {t:.6g} s raised {type(exc).__name__}: "
                             f"{exc}") from None
        if tau.shape != (self.n,) or not np.all(np.isfinite(tau)):
            raise InputError(f"controller {self.controller!r} at t = {t:.6g} s returned {tau!r}: expected "
                             f"{self.n} finite drive torques in N m")
        out[:] = tau


def load_controller(spec: str, plant: Plant) -> Controller:
    """The controller of ``module:factory``: ``factory(plant)`` returns ``tau = controller(t, measured)``
    (ControllerSource); the module is imported from the Python path (the current directory included)."""
    module_name, sep, factory_name = spec.partition(":")
    if not (sep and module_name and factory_name):
        raise InputError(f"--controller {spec!r}: expected MODULE:FACTORY, e.g. tools.seed000_experiment:controller")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"--controller {spec!r}: cannot import {module_name!r} ({exc})") from None
    factory = getattr(module, factory_name, None)
    if not callable(factory):
        raise InputError(f"--controller {spec!r}: {module_name} has no callable {factory_name!r}")
    try:
        controller = factory(plant)
    except Exception as exc:            # the user's code: its failure in one line, naming it
        raise InputError(f"--controller {spec!r}: {factory_name}(plant) raised {type(exc).__name__}: {exc}") from None
    if not callable(controller):
        raise InputError(f"--controller {spec!r}: {factory_name}(plant) returned {controller!r}, not a callable "
                         "tau = controller(t, measured)")
    return controller


# ----------------------------------------------------------------------------- progress
class Progress:
    """Plain-text progress bar on a stream, drawn only once a run has lasted PROGRESS_DELAY_S."""

    def __init__(self, stream: TextIO | None = None, width: int = 30, delay_s: float = PROGRESS_DELAY_S):
        self.stream = sys.stderr if stream is None else stream
        self.width = width
        self._start = time.monotonic()
        self._next = self._start + delay_s
        self._drawn = False

    def __call__(self, step: int, total: int) -> None:
        now = time.monotonic()
        if step < total and now < self._next:
            return
        if step >= total and not self._drawn:
            return
        self._next = now + PROGRESS_REDRAW_S
        frac = step / total if total else 1.0
        fill = int(round(frac * self.width))
        elapsed = now - self._start
        eta = elapsed * (1 - frac) / frac if frac > 0 else math.inf
        self.stream.write(f"\r[{'#' * fill}{'.' * (self.width - fill)}] {frac * 100:5.1f}%  "
                          f"{elapsed:6.1f} s elapsed, {eta:6.1f} s left")
        if step >= total:
            self.stream.write("\n")
        self.stream.flush()
        self._drawn = True


# ----------------------------------------------------------------------------- the loop
@dataclass
class Summary:
    steps: int
    rows: int                        # rows written to the sink
    sim_time_s: float
    wall_s: float
    tip_final_m: np.ndarray
    max_abs_eta: float
    max_abs_eta_column: str | None   # None for a rigid model
    plan: str                        # IntegratorPlan.describe()

    @property
    def real_time_factor(self) -> float:
        """Simulated time per wall time (> 1: faster than real time)."""
        return self.sim_time_s / self.wall_s if self.wall_s > 0 else math.inf

    def describe(self) -> str:
        x, y, z = self.tip_final_m
        eta = (f"{self.max_abs_eta:.4g} ({self.max_abs_eta_column})" if self.max_abs_eta_column
               else "- (no flexible bodies)")
        return (f"{self.steps} steps ({self.sim_time_s:g} s simulated; {self.plan}), {self.rows} rows written\n"
                f"wall time {self.wall_s:.3f} s, real-time factor {self.real_time_factor:.3g}\n"
                f"final tip position [m]: {x:.6g} {y:.6g} {z:.6g}\n"
                f"max |eta|: {eta}")


def steps_for(duration: float, dt: float) -> int:
    """Outer steps to cover duration (at least one)."""
    return max(1, math.ceil(duration / dt - 1e-9))


class _EtaPeak:
    """Largest |eta| seen so far and its column name (allocation-free update)."""

    def __init__(self, eta: np.ndarray, columns: list[str]):
        self.eta = eta
        self.columns = columns
        self._abs = np.zeros_like(eta)
        self.value = 0.0
        self.column: str | None = None

    def update(self) -> None:
        if self.eta.size == 0:
            return
        np.abs(self.eta, out=self._abs)
        i = int(self._abs.argmax())
        if self.column is None or self._abs[i] > self.value:
            self.value, self.column = float(self._abs[i]), self.columns[i]


def simulate(plant: Plant, duration: float, torque_source: TorqueSource | None = None, every: int = 1,
             sink: RunWriter | None = None, progress: Callable[[int, int], None] | None = None,
             wrenches: bool = False, stepper: OfflineStepper | None = None) -> Summary:
    """Run the plant from its current state for ``duration`` seconds as fast as possible.

    The drive torques are sampled from ``torque_source(t, out)`` at the start of each step and
    held over it (as in the real-time loop); without a source they are zero. With a ``stepper``
    (hil.dynamics.offline) the steps are its: with its linear input hold the plant sees its torque table
    at every stage's time; with its tolerance the substeps are error-controlled.
    Rows (see ``run_columns``) at steps 0, every, 2 every, ... go to ``sink``; ``progress(step, total)``
    is called every step; ``wrenches`` adds the joint wrench columns. Raises SimulationError if the
    state blows up.
    """
    if every < 1 or not duration > 0:
        raise UserError(f"duration = {duration}, every = {every}: expected duration > 0 s and every >= 1")
    lay = plant.layout
    builder = RowBuilder(plant, wrenches)
    tau = plant.tau[: lay.n_joints]
    peak = _EtaPeak(plant.pos[lay.n_joints: lay.n_joints + lay.n_eta], builder.columns[builder.eta_slice])
    n = steps_for(duration, plant.dt)
    t0 = time.perf_counter()
    for k in range(n + 1):
        if torque_source is not None:
            torque_source(plant.t, tau)
        if k % every == 0 and sink is not None:
            sink.write(builder.fill())
        peak.update()
        if progress is not None:
            progress(k, n)
        if k >= n:
            break
        if stepper is None:
            plant.step()
        else:
            stepper.step()
    wall = time.perf_counter() - t0
    plant.evaluate()
    plan = plant.plan.describe()
    if stepper is not None:
        plan += f"; input hold {'linear' if stepper.linear else 'zoh'}"
        if stepper.tol is not None:
            plan += "; " + stepper.stats.describe(stepper.tol)
    return Summary(steps=n, rows=n // every + 1 if sink is not None else 0, sim_time_s=n * plant.dt, wall_s=wall,
                   tip_final_m=plant.station(TIP)["position"], max_abs_eta=peak.value,
                   max_abs_eta_column=peak.column, plan=plan)
