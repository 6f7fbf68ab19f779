"""`hil fit`: the model's parameters fitted to recorded runs, and how far to trust them.

Method. Each recording is replayed through the offline plant (hil.replay.plant_replay: the
logged drive torques and brakes, the same kernels, integrator plan and sensor models as the
real-time loop) with the candidate parameters; the residual of a channel is measured minus
simulated over the recording's window, divided by the measured channel's standard deviation
there and by the square root of its sample count, times the channel's weight, so that the sum of
squares is the weighted sum of the channels' squared normalised rms residuals (NRMSE). Bounded
least squares (scipy.optimize.least_squares, the dogleg method with rectangular trust regions:
bounds as active constraints, so that a stage that ends a parameter on a bound does not pin the
next stage there, as the reflective method's scaling would) works on the parameters mapped to
[0, 1] over their bounds, the Jacobian by forward differences: of 1e-4 of the range
for a link's parameters (the vibration is smooth in them, and its phase over many periods needs
the fine step), of 1 % for the others, in which a replay's residual is smooth only at that scale
(the joints' stick and slip, a brake's hold: a finer step sees their local slopes and the search
crawls). The columns' replays run side by side on local processes (hil.fit.workers).
The simulated channels are the sensor models' outputs without their noise and quantisation
(bias, misalignment, filter and saturation kept: the preset's ``lsb_*`` keys are set to 0 for the
fit's replays): a rounded output is flat under the small parameter steps of the Jacobian, and
rounding, like the noise, is what the residual keeps at the optimum.

Stages. A replay's residual is rough in the parameters far from the optimum (a stick-slip brake,
a decay's phase over many periods), and a link's stiffness and a payload both move the modes. So
the search goes in stages, one budget of replays for all: (1) a modal pre-fit of the parameters
that move the locked arm's modes (_moves_modes: the links', a payload's, an inertia's); (2) the
rigid parameters (all but the links' beam parameters: payload, friction, inertia, delay) on the
joints' channels (encoders, joint angles and rates, where the fit has any), the links held at
(1)'s values; (3) all together on all channels; (4) again, each channel weighed by the inverse of
its NRMSE after (3) (FitProblem.balanced: maximum likelihood for channels of different noise
levels, so that one no parameter explains, a gyro's bias drift, does not drown the others). The modal pre-fit:
on each training recording's brake stop (hil.fit.log_modes: every brake closed and holding) the
modes are identified from the fitted channels (hil.fit.modal_id), each paired with the model's
nearest locked mode at that pose, and the parameters moved (bounded least squares again, smooth
here: no replay, a linearisation per evaluation) until the model's frequencies and damping
ratios match the identified ones, with a weak pull (PRIOR) to the preset's values for parameters
the modes do not see. Without a brake stop the fit starts from the preset.

Trust. At the optimum, with s^2 = the residual's sum of squares over (samples - parameters), times
its correlation time in samples (a residual that is a slow wave, not white noise, has fewer
independent samples than rows: correlation_time), and J the Jacobian, the covariance
s^2 (J^T J)^-1 gives each parameter's standard error and 95 %
interval (+-1.96 standard errors) and the correlation matrix; a pair correlated beyond
CORRELATED (hil.fit.trust) is flagged: the recordings cannot tell those parameters apart. A singular J^T J leaves
the errors infinite and flags the parameters it cannot see.

Verdict. The validation recordings (not fitted to) are replayed with the fitted values; the fit
passes when every channel of every one of them has an NRMSE at most the fit file's max_nrmse.
"""
from __future__ import annotations

import copy
import importlib.util
import math
import time
from dataclasses import dataclass, field

import numpy as np

from config_schema import UserError
from hil.fit.fit_file import DELAY_PATH, ChannelSpec, FitSpec, RecordingSpec
from hil.fit.log_modes import braked_window, held_rows, locked_modes_at
from hil.fit.modal_id import identify_modes
from hil.fit.prescribed import prescribed
from hil.fit.trust import trust
from hil.fit.workers import ReplayWorkers
from hil.model.assembly import assemble
from hil.dynamics.plant import Plant
from hil.logs.recordings import on_grid
from hil.logs.runlog import read_run
from hil.model.config import load_model_from_string
from hil.replay.plant_replay import motor_currents, replay

JOINT_CHANNELS = ("enc_", "abs_", "vel_", "index_", "q_", "qd_")     # the rigid stage's channels, where given
MIN_SEGMENT_ROWS = 10 # the shortest multiple-shooting segment, in steps
PRIOR = 1e-3          # the modal pre-fit's pull to the preset's values, per unit of the normalised parameter
MIN_MODE_SHARE = 0.05 # identified modes carrying less of the response are not matched in the pre-fit
ELASTIC_STEP = 1e-4   # forward-difference steps, as a fraction of a parameter's range (module docstring)
RIGID_STEP = 1e-2
NRMSE_FLOOR = 1e-3    # the least noise level balanced() assumes for a channel
MODE_STEP = 1e-2      # a parameter moves the modes when this step of its range moves one by MODE_SEEN
MODE_SEEN = 1e-6


class BudgetSpent(Exception):
    """The search reached the fit file's max_evaluations."""


@dataclass
class Recording:
    spec: RecordingSpec
    header: dict
    rows: np.ndarray
    window: np.ndarray                    # boolean mask of the rows in the window
    masks: dict[str, np.ndarray]          # channel -> the rows it is matched on (its window within the recording's)
    measured: dict[str, np.ndarray]       # channel -> its recorded values on those rows
    scale: dict[str, float]               # channel -> their standard deviation


def load_recording(spec: RecordingSpec, channels: list[ChannelSpec], joints: list[str], plan: dict,
                   shooting: bool = False, inputs: list[str] | None = None) -> Recording:
    """A recording on the plant's grid (hil.logs.recordings) with its window and channels checked; `plan`:
    the integrator a recording that names none is replayed with (a run log names its own);
    `shooting`: the joint angles are needed, and rates (differentiated from the angles if absent);
    `inputs`: the columns the replay steps from (default the drive torques tau_<joint>)."""
    names = [c.name for c in channels]
    inputs = inputs or [f"tau_{j}" for j in joints]
    wanted = inputs + [c for c in names if c not in inputs]
    wanted += [f"q_{j}" for j in joints if shooting and f"q_{j}" not in wanted]
    optional = [f"{kind}_{j}" for kind in ("q", "qd", "brake") for j in joints if f"{kind}_{j}" not in wanted]
    columns, rows, resampled = on_grid(spec.file, wanted, spec.columns, plan["dt_s"], optional, spec.time)
    for j in joints:
        if shooting and f"qd_{j}" not in columns:
            columns.append(f"qd_{j}")
            rows = np.column_stack([rows, np.gradient(rows[:, columns.index(f"q_{j}")], plan["dt_s"])])
            resampled[f"qd_{j}"] = f"differentiated from q_{j} (central differences)"
    logged = read_run(spec.file)[0] if spec.file.suffix.lower() == ".msgpack" else {}
    header = {"columns": [*columns, "cycle"], "integrator": logged.get("integrator") or plan["identity"],
              "formulation": logged.get("formulation") or "aba", "resampled": resampled}
    rows = np.column_stack([rows, np.arange(1, len(rows) + 1, dtype=float)])
    t = rows[:, 0]
    name = spec.file.name
    window = (t >= spec.window_s[0]) & (t <= spec.window_s[1])
    if window.sum() < 10:
        raise UserError(f"{name}: window_s {spec.window_s[0]:g} .. {spec.window_s[1]:g} s holds {int(window.sum())} "
                        f"rows (the recording spans {t[0]:g} .. {t[-1]:g} s); at least 10 are needed")
    masks, measured, scale = {}, {}, {}
    for c in channels:
        masks[c.name] = window & (t >= c.window_s[0]) & (t <= c.window_s[1])
        if masks[c.name].sum() < 10:
            raise UserError(f"{name}: channel {c.name}'s window_s {c.window_s[0]:g} .. {c.window_s[1]:g} s holds "
                            f"{int(masks[c.name].sum())} rows of the recording's window; at least 10 are needed")
        v = rows[masks[c.name], header["columns"].index(c.name)]
        measured[c.name], scale[c.name] = v, float(np.std(v)) or 1.0
    return Recording(spec, header, rows, window, masks, measured, scale)


@dataclass
class FitResult:
    values: dict[str, float]
    start: dict[str, float]
    modal_start: dict[str, float]                       # after the modal pre-fit
    modes_matched: list[dict]
    stderr: dict[str, float]
    correlation: list[list[float]]
    unidentifiable: list[list[str]]
    training_nrmse: dict[str, dict[str, float]]        # recording -> channel -> NRMSE
    validation_nrmse: dict[str, dict[str, float]]
    start_nrmse: dict[str, dict[str, float]]
    evaluations: int
    wall_s: float
    converged: bool
    message: str
    passed: bool
    failing: list[str] = field(default_factory=list)  # "recording: channel NRMSE x > max"


class FitProblem:
    """The residual of a fit file's training recordings as a function of the parameters in [0, 1]."""

    def __init__(self, spec: FitSpec):
        self.spec = spec
        self.channels = [c.name for c in spec.channels]
        self.weights = {c.name: c.weight for c in spec.channels}
        nominal = Plant(load_model_from_string(spec.preset.with_overrides({}, spec.source, validate=False), spec.source))
        plan = {"dt_s": nominal.dt, "identity": {**nominal.plan_identity(), "fitted_blocks_sha256": ""}}
        shooting = spec.shooting_s is not None
        self.joints = nominal.layout.joint_names
        inputs = {"torque": None, "current": None}
        if any(r.input == "current" for r in spec.recordings):
            inputs["current"] = motor_currents(nominal)[0]
        self.recordings = [load_recording(r, list(spec.channels), self.joints, plan, shooting or spec.prescribe_joints,
                                          inputs[r.input]) for r in spec.recordings]
        self.restart_every = None if not shooting else max(MIN_SEGMENT_ROWS, round(spec.shooting_s / nominal.dt))
        self.lower = np.array([p.lower for p in spec.parameters])
        self.upper = np.array([p.upper for p in spec.parameters])
        self.smooth = copy.copy(spec.preset)
        self.smooth.data = _without_quantisation(copy.deepcopy(spec.preset.data))
        self.evaluations = 0
        self._last: tuple[bytes, np.ndarray] = (b"", np.zeros(0))      # the latest residual (the Jacobian's base)
        self.best: tuple[float, np.ndarray] = (math.inf, np.zeros(0))   # the lowest cost so far and its point
        self.active = list(self.channels)                                # the channels the residual takes
        self.balance = {c: 1.0 for c in self.channels}                   # per channel: 1 / its noise level (balanced())
        self.budget: int | None = None                                  # replays the search may reach
        self.steps = np.array([ELASTIC_STEP if elastic(p.path) else RIGID_STEP for p in spec.parameters])
        self.workers: ReplayWorkers | None = None                      # where residuals(points) runs them

    def values(self, u: np.ndarray) -> dict[str, float]:
        x = self.lower + np.clip(u, 0.0, 1.0) * (self.upper - self.lower)
        return {p.path: float(v) for p, v in zip(self.spec.parameters, x)}

    def unit(self, values: dict[str, float]) -> np.ndarray:
        return (np.array([values[p.path] for p in self.spec.parameters]) - self.lower) / (self.upper - self.lower)

    def model_text(self, values: dict[str, float]) -> str:
        return self.spec.preset.with_overrides(_model_values(values), self.spec.source, validate=False)

    def _smooth_model(self, values: dict[str, float]):
        """The candidate arm with its sensors' quantisation off (module docstring)."""
        return load_model_from_string(self.smooth.with_overrides(_model_values(values), self.spec.source,
                                                                 validate=False), self.spec.source)

    def simulated(self, rec: Recording, values: dict[str, float]) -> dict[str, np.ndarray]:
        if self.budget is not None and self.evaluations >= self.budget:
            raise BudgetSpent
        self.evaluations += 1
        model = self._smooth_model(values)
        if self.spec.prescribe_joints:
            columns = rec.header["columns"]
            model = prescribed(model, rec.rows[:, columns.index("t")],
                               {j: rec.rows[:, columns.index(f"q_{j}")] for j in self.joints}, self.spec.prescribe_knot_s)
        result = replay(rec.header, rec.rows, model, tuple(self.channels), self.restart_every,
                        values.get(DELAY_PATH, 0.0), rec.spec.input)
        return {c: result.rows[rec.masks[c], result.columns.index(c)] for c in self.channels}

    def model_asm(self, values: dict[str, float]):
        """The candidate arm, assembled (for its linearised modes)."""
        return assemble(self._smooth_model(values))

    def nrmse(self, rec: Recording, values: dict[str, float]) -> dict[str, float]:
        sim = self.simulated(rec, values)
        return {c: float(np.sqrt(np.mean((rec.measured[c] - sim[c]) ** 2)) / rec.scale[c]) for c in self.channels}

    def use_channels(self, channels: list[str]) -> None:
        """Let the residual take these channels from now on (its cache and best point start afresh)."""
        self.active = list(channels)
        self._last, self.best = (b"", np.zeros(0)), (math.inf, np.zeros(0))

    def residual(self, u: np.ndarray) -> np.ndarray:
        key = np.asarray(u, float).tobytes()
        if key != self._last[0]:
            f = self.raw_residual(u)
            self._last = (key, f)
            if float(f @ f) < self.best[0]:
                self.best = (float(f @ f), np.array(u, float))
        return self._last[1]

    def residuals(self, points: list[np.ndarray]) -> list[np.ndarray]:
        """The residual at each point (a Jacobian's columns), on the workers if there are any."""
        spent = self.evaluations + len(points) * len(self.training)
        if self.budget is not None and spent > self.budget:
            raise BudgetSpent
        out = self.workers.residuals(points) if self.workers else [self.raw_residual(u) for u in points]
        self.evaluations = spent
        for u, f in zip(points, out):
            if float(f @ f) < self.best[0]:
                self.best = (float(f @ f), np.array(u, float))
        return out

    def raw_residual(self, u: np.ndarray) -> np.ndarray:
        """The residual at `u`, replayed afresh (no cache, no best point kept)."""
        values = self.values(u)
        parts = []
        for rec in self.training:
            sim = self.simulated(rec, values)
            for c in self.active:
                r = (rec.measured[c] - sim[c]) / rec.scale[c] * self.weights[c] * self.balance[c] / math.sqrt(len(sim[c]))
                parts.append(np.where(np.isfinite(r), r, 1e6))     # a diverged replay: a large residual
        return np.concatenate(parts)

    def balanced(self, f: np.ndarray) -> None:
        """Weigh each active channel by the inverse of its NRMSE in the residual `f` (at least NRMSE_FLOOR),
        averaged over the training recordings (module docstring)."""
        sizes = [int(rec.masks[c].sum()) for rec in self.training for c in self.active]
        parts = np.split(f, np.cumsum(sizes)[:-1])
        level = {c: [] for c in self.active}
        for k, part in enumerate(parts):
            c = self.active[k % len(self.active)]
            level[c].append(float(np.sqrt(part @ part)) / (self.weights[c] * self.balance[c]))
        for c, values in level.items():
            self.balance[c] = 1.0 / max(float(np.mean(values)), NRMSE_FLOOR)
        self.use_channels(self.active)

    @property
    def training(self) -> list[Recording]:
        return [r for r in self.recordings if r.spec.role == "training"]

    @property
    def validation(self) -> list[Recording]:
        return [r for r in self.recordings if r.spec.role == "validation"]


def _model_values(values: dict[str, float]) -> dict[str, float]:
    """The values of model paths (not the recordings' delay)."""
    return {k: v for k, v in values.items() if k != DELAY_PATH}


def start_value(spec: FitSpec, path: str) -> float:
    """Where a parameter's search starts: the preset's value; a recording's delay at 0 s (as logged)."""
    return 0.0 if path == DELAY_PATH else float(spec.preset.value(path))


def _without_quantisation(data: dict) -> dict:
    """`data` (a parsed preset) with every sensor's quantisation step lsb_<unit> set to 0."""
    def zero(table: dict) -> None:
        for key, value in table.items():
            if key.startswith("lsb_"):
                table[key] = 0.0
            elif isinstance(value, dict):
                zero(value)
    for sensor in data.get("sensor", []):
        zero(sensor)
    return data


def elastic(path: str) -> bool:
    """Whether a parameter path is a flexible link's (its beam's material, section, damping)."""
    return ".beam." in path


def modal_start(problem: FitProblem, start: dict[str, float]) -> tuple[dict[str, float], list[dict]]:
    """The modal pre-fit's values (module docstring) and, per training recording, the modes it matched:
    only the parameters that move the locked modes move (_moves_modes), the others keep their values in `start`."""
    from scipy.optimize import least_squares

    targets = []          # (joint angles, identified modes, indices of the paired model modes)
    for rec in problem.training:
        columns = rec.header["columns"]
        joints = [c[2:] for c in columns if c.startswith("q_")]
        held = held_rows(columns, rec.rows, joints) & rec.window
        t = rec.rows[:, columns.index("t")]
        window = braked_window(t, held)
        if window is None:
            continue
        sel = (t >= window[0]) & (t <= window[1])
        seen = [c for c in problem.channels if rec.masks[c][sel].all()]     # the channels matched over the stop
        if not seen:
            continue
        try:
            found = identify_modes(rec.rows[sel][:, [columns.index(c) for c in seen]],
                                   float(np.median(np.diff(t[sel]))))
        except UserError:
            continue
        found = [m for m in found if m.share >= MIN_MODE_SHARE]
        pose = rec.rows[sel][:, [columns.index(f"q_{j}") for j in joints]].mean(axis=0)
        f0, _ = locked_modes_at(problem.model_asm(start), pose)
        pairs = {}
        for m in found:
            k = int(np.argmin(np.abs(np.log(f0 / m.frequency_hz))))
            pairs.setdefault(k, m)                     # one identified mode per model mode
        if pairs:
            targets.append((pose, list(pairs.values()), list(pairs.keys()), rec.spec.file.name))
    u0 = problem.unit(start)
    free = _moves_modes(problem, u0, [pose for pose, *_ in targets])
    if not targets or not free.any():
        return start, []

    def residual(v: np.ndarray) -> np.ndarray:
        u = u0.copy()
        u[free] = v
        asm = problem.model_asm(problem.values(u))
        parts = [PRIOR * (v - u0[free])]
        for pose, found, keys, _ in targets:
            f, zeta = locked_modes_at(asm, pose)
            parts.append(np.array([np.log(f[k] / m.frequency_hz) for k, m in zip(keys, found)]))
            parts.append(np.array([(zeta[k] - m.damping_ratio) / m.damping_ratio for k, m in zip(keys, found)]))
        return np.concatenate(parts)

    u = u0.copy()
    u[free] = least_squares(residual, u0[free], bounds=(0.0, 1.0), diff_step=1e-4).x
    matched = [{"recording": name, "identified": [m.as_dict() for m in found], "model_mode": keys}
               for _, found, keys, name in targets]
    return problem.values(u), matched


def _moves_modes(problem: FitProblem, u0: np.ndarray, poses: list[np.ndarray]) -> np.ndarray:
    """Per parameter: whether a step of MODE_STEP of its range moves a locked mode at one of the poses
    (a link's stiffness and damping, an inertia; not a joint's friction, a sensor's bias)."""
    if not poses:
        return np.zeros(len(u0), bool)
    base = problem.model_asm(problem.values(u0))
    before = [np.concatenate(locked_modes_at(base, pose)) for pose in poses]
    moves = np.zeros(len(u0), bool)
    for i in range(len(u0)):
        u = u0.copy()
        u[i] += MODE_STEP if u[i] + MODE_STEP <= 1.0 else -MODE_STEP
        asm = problem.model_asm(problem.values(u))
        moves[i] = any(np.max(np.abs(np.concatenate(locked_modes_at(asm, pose)) / b - 1.0)) > MODE_SEEN
                       for pose, b in zip(poses, before))
    return moves


def _search(problem: FitProblem, u0: np.ndarray, free: np.ndarray) -> tuple[np.ndarray, bool, str]:
    """Bounded least squares over the parameters marked `free` (the others held at u0)."""
    from scipy.optimize import least_squares

    def point(v: np.ndarray) -> np.ndarray:
        u = u0.copy()
        u[free] = v
        return u

    fit = least_squares(lambda v: problem.residual(point(v)), u0[free],
                        jac=lambda v: _jacobian(problem, point(v), problem.residual(point(v)), free),
                        bounds=(0.0, 1.0), method="dogbox", x_scale=1.0, xtol=1e-8, ftol=1e-8, gtol=1e-8)
    return point(fit.x), bool(fit.success), str(fit.message)


def _jacobian(problem: FitProblem, u: np.ndarray, f0: np.ndarray, free: np.ndarray | None = None) -> np.ndarray:
    """The columns of the parameters marked `free` (default all): forward differences (module docstring), stepping
    inwards at an upper bound, the columns' replays side by side on the problem's workers."""
    columns = np.flatnonzero(np.ones(len(u), bool) if free is None else free)
    step = problem.steps[columns]
    steps = np.where(u[columns] + step <= 1.0, step, -step)
    points = [u + h * np.eye(len(u))[i] for i, h in zip(columns, steps)]
    return np.column_stack([(f - f0) / h for f, h in zip(problem.residuals(points), steps)])


def run_fit(spec: FitSpec) -> tuple[FitResult, FitProblem]:
    """Fit the parameters of `spec` to its training recordings and judge them on its validation ones."""
    if importlib.util.find_spec("scipy") is None:
        raise UserError("hil fit needs scipy: pip install 'ella-hil[fit]'")
    problem = FitProblem(spec)
    names = [p.path for p in spec.parameters]
    start = {n: start_value(spec, n) for n in names}
    for p in spec.parameters:
        if not p.lower <= start[p.path] <= p.upper:
            where = "(the recordings as logged)" if p.path == DELAY_PATH else f"in {spec.model}"
            raise UserError(f"{spec.source}: {p.path} = {start[p.path]:g} {p.unit} {where} lies outside "
                            f"its bounds {p.lower:g} .. {p.upper:g} {p.unit}")
    with ReplayWorkers(problem, spec.jobs) as problem.workers:
        result = _fit(problem, start)
    problem.workers = None
    return result, problem


def _fit(problem: FitProblem, start: dict[str, float]) -> FitResult:
    """The staged search from `start` (module docstring), the trust in its result and the verdict."""
    spec, names = problem.spec, [p.path for p in problem.spec.parameters]
    t0 = time.perf_counter()
    start_nrmse = {r.spec.file.name: problem.nrmse(r, start) for r in problem.training}
    problem.budget = problem.evaluations + spec.max_evaluations
    rigid = np.array([not elastic(n) for n in names])
    modal, matched = start, []
    try:
        modal, matched = modal_start(problem, start)
        u = problem.unit(modal)
        if rigid.any() and not rigid.all():      # then the rigid parameters, the links held at the modes' values,
            joints = [c for c in problem.channels if c.startswith(JOINT_CHANNELS)]
            problem.use_channels(joints or problem.channels)       # on the joints' channels if there are any
            u = _search(problem, u, rigid)[0]
            problem.use_channels(problem.channels)
        u = _search(problem, u, np.ones(len(names), bool))[0]
        problem.balanced(problem.residual(u))                 # then each channel weighed by its noise level
        u, converged, message = _search(problem, u, np.ones(len(names), bool))
    except BudgetSpent:
        u, converged = problem.best[1], False
        message = f"stopped after max_evaluations = {spec.max_evaluations} plant replays, at the best point found"
    problem.budget = None                      # the trust and the verdict below are not part of the search
    values = problem.values(u)
    f = problem.residual(u)
    J = _jacobian(problem, u, f)
    stderr, corr, pairs = trust(J, f, problem.upper - problem.lower, names)
    training = {r.spec.file.name: problem.nrmse(r, values) for r in problem.training}
    validation = {r.spec.file.name: problem.nrmse(r, values) for r in problem.validation}
    failing = [f"{rec}: {c} NRMSE {v:.3g} > {spec.max_nrmse:g}" for rec, chans in validation.items()
               for c, v in chans.items() if not v <= spec.max_nrmse]
    return FitResult(values, start, modal, matched, stderr, np.nan_to_num(corr, nan=0.0).tolist(), pairs, training,
                     validation, start_nrmse, problem.evaluations, time.perf_counter() - t0, converged, message,
                     not failing, failing)
