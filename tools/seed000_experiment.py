"""Seed 000's PD experiment on ELLA (Sec. 7, Figs. 6-15), reproduced offline.

The arm is configs/ella_seed000_experiment.toml (seed 000's r = 1 clamped-free basis, link 2
starting deformed). The controller is the PD law of eq. 83,

    tau = diag(kp1, kp2, kp2) (theta_d - theta) + diag(kd1, kd2, kd2) (omega_d - omega),

theta = (theta_y1, theta_z1, theta_z2) = (shoulder_pitch, base_yaw, elbow), to the set-points
theta_y1 = -0.4928, theta_z1 = 0.6922, theta_z2 = 0.4270 rad, run in-process through
``hil.dynamics.simulate`` (``tau = controller(t, measured)``) with seed 000's forward Euler at
1 ms and with the preset's default integrator, both on the screw-theoretic DAE kernel.

Assumed, because seed 000 does not publish them (README "Seed 000's PD experiment"):

* gains: kp1 = kp2 = 4000 N m/rad puts the lowest mode of the PD-held arm at the set-points at
  2.1 Hz, the fundamental that seed 000's 13 Hz component and its 6.27 ratio imply
  (13 / 6.27 = 2.07 Hz); kd = 2 zeta sqrt(kp J) with zeta = 0.7 and J the rigid-arm inertia of
  the pitch joint (kd1 = 320 N m s/rad) and of the yaw joint (kd2 = 300 N m s/rad) at the
  set-points;
* trajectory: seed 000 uses an unpublished optimisation-based trajectory; here a quintic
  (minimum-jerk) rest-to-rest path from the start pose to the set-points in 2 s, omega_d its
  derivative; 8 s simulated.

``python -m tools.seed000_experiment --out DIR`` writes the run logs (msgpack,
hil.logs.runlog), the figures (PNG, needs matplotlib: ``pip install .[plots]``) and
summary.json, and prints the key numbers. ``--solve-start`` prints the start pose and initial
modal coordinates the preset carries. ``hil simulate configs/ella_seed000_experiment.toml
--controller tools.seed000_experiment:controller --wrenches --duration 8 --out run.msgpack``
runs the same controller from the command line.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from hil.dynamics.plant import ForwardEulerWarning, Plant, SimulationError
from hil.dynamics.simulate import ControllerSource, run_columns, simulate
from hil.logs.runlog import open_writer, read_run
from hil.model.assembly import Assembled, assemble
from hil.model.config import load_model
from hil.kernels.aba import forward_kinematics, prepare
from hil.kernels.oracle import mass_matrix
from hil.model.assembly import make_work
from hil.model.linearize import servo_modes_hz, stiffness_and_mass

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "ella_seed000_experiment.toml"
JOINTS = ("shoulder_pitch", "base_yaw", "elbow")          # seed 000's theta_y1, theta_z1, theta_z2
SETPOINTS_RAD = {"shoulder_pitch": -0.4928, "base_yaw": 0.6922, "elbow": 0.4270}
DISPLACEMENT_M = np.array([-0.02, 0.0065, -0.0083])        # link 2's endpoint at t = 0, inertial frame
KP_N_M_RAD = {"shoulder_pitch": 4000.0, "base_yaw": 4000.0, "elbow": 4000.0}
KD_N_M_S_RAD = {"shoulder_pitch": 60.0, "base_yaw": 60.0, "elbow": 60.0}
MOVE_TIME_S = 2.0
DURATION_S = 8.0
SETTLE_S = 0.5              # the spectra start this long after the manoeuvre
SECOND_BENDING_RATIO = (4.6941 / 1.8751) ** 2    # seed 000 Sec. 7: 6.27


# ----------------------------------------------------------------------------- the controller
def quintic(q0: np.ndarray, q1: np.ndarray, T: float, t: float) -> tuple[np.ndarray, np.ndarray]:
    """Minimum-jerk rest-to-rest path from q0 to q1 in T: angle and rate at t (held after T)."""
    s = min(max(t / T, 0.0), 1.0)
    shape = s ** 3 * (10.0 - 15.0 * s + 6.0 * s * s)
    rate = 30.0 * s * s * (1.0 - s) ** 2 / T
    return q0 + (q1 - q0) * shape, (q1 - q0) * rate


class PdController:
    """Seed 000 eq. 83 along the quintic path: tau = kp (theta_d - theta) + kd (omega_d - omega),
    called as tau = controller(t, measured) with measured = [q_1..q_n, qd_1..qd_n]."""

    def __init__(self, joint_names: list[str], q_start: np.ndarray, setpoints: dict = SETPOINTS_RAD,
                 kp: dict = KP_N_M_RAD, kd: dict = KD_N_M_S_RAD, move_time_s: float = MOVE_TIME_S):
        self.n = len(joint_names)
        self.q_start = np.array(q_start[: self.n], float)
        self.q_goal = np.array([setpoints.get(j, q) for j, q in zip(joint_names, self.q_start)])
        self.kp = np.array([kp.get(j, 0.0) for j in joint_names])
        self.kd = np.array([kd.get(j, 0.0) for j in joint_names])
        self.move_time_s = move_time_s
        self.tau = np.zeros(self.n)

    def desired(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        return quintic(self.q_start, self.q_goal, self.move_time_s, t)

    def __call__(self, t: float, measured: np.ndarray) -> np.ndarray:
        qd_, wd_ = self.desired(t)
        self.tau[:] = self.kp * (qd_ - measured[: self.n]) + self.kd * (wd_ - measured[self.n:])
        return self.tau


def controller(plant: Plant) -> PdController:
    """The experiment's controller for `hil simulate --controller tools.seed000_experiment:controller`."""
    return PdController(plant.layout.joint_names, plant.asm.pos0)


# ----------------------------------------------------------------------------- the start pose
def tip_displacement(asm: Assembled, pos: np.ndarray) -> np.ndarray:
    """Elastic displacement of the tip at each state of pos (one per row): its world position
    minus that of the undeformed arm at the same joint angles (seed 000's r_xi at the endpoint,
    inertial frame)."""
    plant = _kinematics_plant(asm)
    pos = np.atleast_2d(pos)
    out = np.zeros((len(pos), 3))
    for i, p in enumerate(pos):
        rigid = p.copy()
        rigid[asm.layout.n_joints:] = 0.0
        out[i] = _tip(plant, p) - _tip(plant, rigid)
    return out if len(out) > 1 else out[0]


def _kinematics_plant(asm: Assembled) -> Plant:
    return Plant(asm, method="rk4", substeps=1)


def _tip(plant: Plant, pos: np.ndarray) -> np.ndarray:
    plant.pos[:] = pos
    plant.vel[:] = 0.0
    plant.evaluate()
    return plant.station("tip")["position"]


def solve_start(model_path: Path = CONFIG, displacement: np.ndarray = DISPLACEMENT_M) -> dict:
    """The elbow angle and link 2's first bending coordinates (yaw = pitch = 0) whose endpoint
    displacement equals `displacement` (Newton iterations on the exact kinematics)."""
    asm = assemble(load_model(model_path))
    lay = asm.layout
    k2 = lay.body_names.index("link2")
    idx = [lay.joint_names.index("elbow"), lay.eta_index(k2, 0), lay.eta_index(k2, 1)]
    plant = _kinematics_plant(asm)
    phi = np.arctan2(-displacement[0], displacement[1])          # link 2 (body x) across the displacement
    x = np.array([phi, displacement @ [-np.sin(phi), np.cos(phi), 0.0], displacement[2]])   # unit tip shapes

    def residual(x):
        pos = np.zeros(lay.nq)
        pos[idx] = x
        rigid = pos.copy()
        rigid[lay.n_joints:] = 0.0
        return _tip(plant, pos) - _tip(plant, rigid) - displacement

    for _ in range(30):
        f = residual(x)
        if np.max(np.abs(f)) < 1e-13:
            break
        J = np.column_stack([(residual(x + e) - residual(x - e)) / 2e-7 for e in np.eye(3) * 1e-7])
        x -= np.linalg.solve(J, f)
    return {"elbow_q0_rad": float(x[0]), "link2_eta": [float(x[1]), float(x[2])],
            "residual_m": float(np.max(np.abs(residual(x))))}


# ----------------------------------------------------------------------------- runs
def run(method: str, out: Path | None, duration_s: float = DURATION_S, formulation: str = "screw-dae",
        model_path: Path = CONFIG, every: int = 1) -> tuple[dict, np.ndarray]:
    """One run of the experiment: (header, rows) of its run log (written to `out` if given)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ForwardEulerWarning)
        plant = Plant(load_model(model_path), method=method, formulation=formulation)
    source = ControllerSource(controller(plant), plant)
    header = {"columns": run_columns(plant.layout, wrenches=True), "config": str(model_path),
              "model": plant.asm.model.name, "dt_s": plant.dt, "every": every, "formulation": formulation,
              "integrator": {"method": plant.plan.method, "substeps": plant.plan.substeps},
              "controller": "tools.seed000_experiment:controller", "kp_N_m_rad": KP_N_M_RAD,
              "kd_N_m_s_rad": KD_N_M_S_RAD, "move_time_s": MOVE_TIME_S}
    sink = _MemorySink(open_writer(out, header) if out is not None else None)
    header["plan"] = plant.plan.describe()
    header["diverged_s"] = None
    try:
        simulate(plant, duration_s, source, every, sink, wrenches=True)
    except SimulationError:
        header["diverged_s"] = plant.t          # the log ends at the last finite state
    finally:
        sink.close()
    return header, np.array(sink.rows)


class _MemorySink:
    """Keeps the rows in memory and passes them on to a run-log writer."""

    def __init__(self, writer):
        self.writer = writer
        self.rows: list[np.ndarray] = []

    def write(self, row: np.ndarray) -> None:
        self.rows.append(row.copy())
        if self.writer is not None:
            self.writer.write(row)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


# ----------------------------------------------------------------------------- analysis
def states(asm: Assembled, header: dict, rows: np.ndarray) -> np.ndarray:
    """Generalized coordinates (joints, modes) of every row of a run log."""
    c, lay = header["columns"], asm.layout
    pos = np.zeros((len(rows), lay.nq))
    pos[:, :lay.n_joints] = rows[:, [c.index(f"q_{j}") for j in lay.joint_names]]
    etas = [name for name in c if name.startswith("eta_")]
    pos[:, lay.n_joints:lay.n_joints + len(etas)] = rows[:, [c.index(name) for name in etas]]
    return pos


def spectrum(t: np.ndarray, x: np.ndarray, pad: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """One-sided amplitude spectrum of each column of x (Hann window, zero-padded pad-fold,
    mean removed): frequencies [Hz] and amplitudes (units of x)."""
    x = np.atleast_2d(x.T).T
    x = x - x.mean(axis=0)
    win = np.hanning(len(x))
    amp = np.abs(np.fft.rfft(x * win[:, None], pad * len(x), axis=0)) * 2.0 / win.sum()
    return np.fft.rfftfreq(pad * len(x), t[1] - t[0]), amp


def spectral_peaks(f: np.ndarray, amp: np.ndarray, count: int = 4, floor: float = 0.01) -> list[tuple[float, float]]:
    """The `count` largest local maxima of the summed power (above `floor` of the largest), as
    (frequency [Hz], amplitude), largest first; the frequency refined by a parabola through the
    three bins around each maximum."""
    p = np.sqrt((amp ** 2).sum(axis=1))
    i = np.nonzero((p[1:-1] > p[:-2]) & (p[1:-1] >= p[2:]) & (p[1:-1] > floor * p.max()))[0] + 1
    peaks = []
    for k in i[np.argsort(p[i])[::-1][:count]]:
        a, b, c = np.log(p[k - 1:k + 2])
        shift = 0.5 * (a - c) / (a - 2 * b + c)
        peaks.append((float(f[k] + shift * (f[1] - f[0])), float(p[k])))
    return peaks


def settled_modes(asm: Assembled, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Damped frequencies [Hz] and damping ratios of the PD-held arm linearised at pos (at rest)."""
    lay = asm.layout
    return servo_modes_hz(asm, pos, [KP_N_M_RAD[j] for j in lay.joint_names],
                          [KD_N_M_S_RAD[j] for j in lay.joint_names])


def inertia_spd_margin(plant: Plant) -> float:
    """Smallest eigenvalue of the inertia operators of the links at the plant's current state
    (seed 000 eq. 78: per link the rigid, coupling and modal blocks, eqs. 10, 11, 64, 65), from
    the DAE kernel's last evaluation; positive when every operator is positive definite."""
    plant.evaluate()
    w = plant.dae_work
    nx = [6 + int(n) for n in plant.km.nm[: plant.layout.n_joints]]
    return float(min(np.linalg.eigvalsh(w.Mk[k, :n, :n])[0] for k, n in enumerate(nx)))


def spd_over_run(asm: Assembled, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """inertia_spd_margin and the smallest eigenvalue of the joint-and-modal mass matrix at each
    state of pos (one per row)."""
    plant = Plant(asm, method="rk4", substeps=1, formulation="screw-dae")
    n = asm.layout.n_joints + asm.layout.n_eta
    links, system = np.zeros(len(pos)), np.zeros(len(pos))
    for i, p in enumerate(pos):
        plant.pos[:] = p
        plant.vel[:] = 0.0
        links[i] = inertia_spd_margin(plant)
        system[i] = np.linalg.eigvalsh(mass_matrix_at(asm, p)[:n, :n])[0]
    return links, system


def mass_matrix_at(asm: Assembled, pos: np.ndarray) -> np.ndarray:
    """Joint-and-modal mass matrix at pos (composite-body oracle, hil.kernels.oracle)."""
    km = asm.km
    w = make_work(km)
    prepare(km, w, 0.0, pos, np.zeros_like(pos))
    forward_kinematics(km, w)
    M = np.zeros((len(pos), len(pos)))
    mass_matrix(km, w, 0.0, 0.0, M)
    return M


def forward_euler_growth(model, dt: float = 1e-3, steps: int = 100, amplitude: float = 1e-7) -> list[dict]:
    """Growth per step of each undamped whole-arm mode under forward Euler at dt, measured: the
    arm without damping and gravity, joints held (prescribed at their start angles), started in
    one mode shape (locked-joint linearisation), stepped up to `steps` times (fewer while a fast
    mode grows, keeping the motion linear); growth = (E_n / E_0)^(1 / 2n) of the mode's energy. Beside it forward
    Euler's amplification sqrt(1 + (omega dt)^2) and seed 000's eq. 89 criterion dt <= 2 / omega."""
    m = copy.deepcopy(model)
    m.gravity_m_s2 = np.zeros(3)
    for b in m.bodies:
        b.joint.drive = "prescribed"
        b.joint.profile = None
        if b.beam is not None:
            b.beam.damping_ratio = np.zeros(b.beam.n_modes)
    m.integrator.dt_s = dt
    asm = assemble(m)
    lay = asm.layout
    modes = np.arange(lay.n_joints, lay.n_joints + lay.n_eta)
    rest = asm.pos0.copy()
    rest[modes] = 0.0
    K, M = stiffness_and_mass(asm, rest)
    Kf, Mf = K[np.ix_(modes, modes)], M[np.ix_(modes, modes)]
    Li = np.linalg.inv(np.linalg.cholesky(Mf))
    lam, V = np.linalg.eigh(Li @ Kf @ Li.T)
    Phi = Li.T @ V                              # M-orthonormal mode shapes, ascending
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ForwardEulerWarning)
        plant = Plant(asm, method="euler", substeps=1)
    rows = []
    # round-off excites every mode; keep the fastest-growing one below 1e-8 of the measured mode
    fastest = np.sqrt(1.0 + lam[-1] * dt * dt)
    steps = int(min(steps, np.log(1e8) / np.log(fastest)))
    for i in range(len(lam)):
        omega = float(np.sqrt(lam[i]))
        predicted = float(np.sqrt(1.0 + (omega * dt) ** 2))
        n = max(5, min(steps, int(np.log(1e3) / np.log(predicted))))
        plant.reset()
        plant.pos[modes] = amplitude * Phi[:, i] / np.max(np.abs(Phi[:, i]))

        def energy() -> float:              # of mode i alone: the others grow at their own rate
            y, yd = Phi[:, i] @ Mf @ plant.pos[modes], Phi[:, i] @ Mf @ plant.vel[modes]
            return 0.5 * (yd * yd + lam[i] * y * y)
        e0 = energy()
        for _ in range(n):
            plant.step()
        rows.append({"f_hz": omega / (2 * np.pi), "omega_dt": omega * dt,
                     "growth_per_step": float((energy() / e0) ** (0.5 / n)), "predicted": predicted,
                     "eq89_holds": omega * dt <= 2.0, "steps": n})
    return rows
