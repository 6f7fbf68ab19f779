"""Seed 000's PD experiment on ELLA (Sec. 7, Figs. 6-15), reproduced offline.

The arm is configs/ella_seed000_experiment.toml (seed 000's r = 1 clamped-free basis, link 2
starting deformed). The controller is the PD law of eq. 83,

    tau = diag(kp1, kp2, kp2) (theta_d - theta) + diag(kd1, kd2, kd2) (omega_d - omega),

theta = (theta_y1, theta_z1, theta_z2) = (shoulder_pitch, base_yaw, elbow), to the set-points
theta_y1 = -0.4928, theta_z1 = 0.6922, theta_z2 = 0.4270 rad, run in-process through
``hil.dynamics.simulate`` (``tau = controller(t, measured)``) with seed 000's forward Euler at
1 ms and with the preset's default integrator, both on the screw-theoretic DAE kernel.

Assumed, because seed 000 does not publish them (docs/validation.md):

* gains: kp1 = kp2 = 4000 N m/rad puts the lowest mode of the PD-held arm at the set-points at
  2.04 Hz, the fundamental that seed 000's 13 Hz component and its 6.27 ratio imply
  (13 / 6.27 = 2.07 Hz); kd1 = kd2 = 60 N m s/rad: a derivative gain sampled at 1 kHz and held
  over the step is unstable above 2 J / dt, J the joint's apparent inertia with the links' modes
  free (the elbow's 0.146 kg m^2: 291 N m s/rad), and 60 keeps kd dt / J <= 0.41;
* trajectory: seed 000 uses an unpublished optimisation-based trajectory; here a quintic
  (minimum-jerk) rest-to-rest path from the start pose to the set-points in 2 s, omega_d its
  derivative; 8 s simulated.

``python -m tools.seed000_experiment --out DIR`` writes the run logs (msgpack,
hil.logs.runlog), the figures (PNG, needs matplotlib: ``pip install .[viz]``) and
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
from hil.logs.run_writers import open_writer
from hil.model.assembly import Assembled, assemble
from hil.model.config import load_model
from hil.kernels import oracle
from hil.model.kernel_arrays import make_work
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
SETTLE_S = 0.5              # the settled spectrum starts this long after the manoeuvre
RELEASE_S = 1.0             # the release spectrum: the first second (link 2's deformation rings out)
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
    Mk = plant.work.dae_Mk
    nx = [6 + int(n) for n in plant.km.nm[: plant.layout.n_joints]]
    return float(min(np.linalg.eigvalsh(Mk[k, :n, :n])[0] for k, n in enumerate(nx)))


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
    M = np.zeros((len(pos), len(pos)))
    oracle.mass_matrix_at(km.mi, km.mf, make_work(km).w, 0.0, pos, np.zeros_like(pos), M)
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


def analyse(asm: Assembled, header: dict, rows: np.ndarray) -> dict:
    """The experiment's key numbers and the series the figures plot."""
    c = header["columns"]
    t = rows[:, 0]
    pos = states(asm, header, rows)
    disp = tip_displacement(asm, pos)
    settled = t >= MOVE_TIME_S + SETTLE_S
    f, amp = spectrum(t[settled], disp[settled]) if settled.sum() > 8 else (np.zeros(1), np.zeros((1, 3)))
    peaks = spectral_peaks(f, amp) if settled.sum() > 8 else []
    modes_hz, zeta = settled_modes(asm, pos[-1])
    early = t <= RELEASE_S
    release = spectral_peaks(*spectrum(t[early], disp[early]), count=6, floor=1e-3)
    start = asm.pos0.copy()
    start[asm.layout.n_joints:] = 0.0
    wrench = {j: rows[:, [c.index(f"w_{j}_{a}") for a in ("mx", "my", "mz", "fx", "fy", "fz")]]
              for j in asm.layout.joint_names}
    out = {
        "integrator": header["plan"], "diverged_s": header["diverged_s"], "simulated_s": float(t[-1]),
        "final_joint_error_rad": {j: SETPOINTS_RAD[j] - float(rows[-1, c.index(f"q_{j}")]) for j in JOINTS},
        "peak_torque_N_m": {j: float(np.max(np.abs(rows[:, c.index(f"tau_{j}")]))) for j in JOINTS},
        "peak_moment_N_m": {j: float(np.max(np.linalg.norm(w[:, :3], axis=1))) for j, w in wrench.items()},
        "peak_force_N": {j: float(np.max(np.linalg.norm(w[:, 3:], axis=1))) for j, w in wrench.items()},
        "initial_displacement_m": disp[0].tolist(),
        "endpoint_peaks_hz": [p[0] for p in peaks], "endpoint_peak_amplitudes_m": [p[1] for p in peaks],
        "linearised_hz": modes_hz.tolist(), "linearised_damping": zeta.tolist(),
        "release_peaks_hz": [p[0] for p in release], "release_linearised_hz": settled_modes(asm, start)[0].tolist(),
    }
    series = {"t": t, "pos": pos, "disp": disp, "f": f, "amp": amp, "wrench": wrench, "rows": rows, "columns": c}
    return {"numbers": out, "series": series}


def clamped_free_peaks(tip_mass_kg: float = 0.0, duration_s: float = 2.0, dt: float = 1e-4) -> list[float]:
    """The two endpoint spectral peaks [Hz] of link 2 alone, clamped (its joint held), undamped,
    without gravity, bending in its z plane with two clamped-free shapes, released from a
    deflection in both shapes: a uniform cantilever rings at the first two clamped-free
    frequencies, the second (4.6941 / 1.8751)^2 = 6.27 times the first (seed 000 Sec. 7); a tip
    mass moves them apart."""
    m = copy.deepcopy(load_model(CONFIG))
    link2 = m.bodies[-1]
    link2.parent = "base"
    link2.joint.station_m = 0.0
    link2.joint.q0_rad = 0.0
    link2.joint.drive = "prescribed"
    beam = link2.beam
    beam.n_bending_y, beam.n_bending_z, beam.rotary_inertia = 0, 2, False
    beam.damping_ratio = np.zeros(2)
    link2.attachments = [a for a in link2.attachments if tip_mass_kg > 0]
    for a in link2.attachments:
        a.mass_kg = tip_mass_kg
    m.bodies = [link2]
    m.stations = [s for s in m.stations if s.body == "link2"]
    m.initial_eta = {"link2": np.array([2e-3, 4e-4])}
    m.gravity_m_s2 = np.zeros(3)
    m.integrator.dt_s = dt
    plant = Plant(m, method="rk4", substeps=1)
    n = int(round(duration_s / dt))
    t, z = np.zeros(n), np.zeros(n)
    for i in range(n):
        t[i], z[i] = plant.t, plant.pos[1] + plant.pos[2]          # tip value of the unit-tip shapes
        plant.step()
    f, amp = spectrum(t, z[:, None])
    return sorted(p[0] for p in spectral_peaks(f, amp, count=2, floor=0.05))


# ----------------------------------------------------------------------------- figures
def figures(asm: Assembled, runs: dict, spd: tuple, out: Path) -> list[Path]:
    """The Fig. 6-15 analogues of seed 000 (and the inertia operator's smallest eigenvalue) as PNGs."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lay = asm.layout
    written = []

    def save(fig, name):
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    def panels(n, title, rows=1):
        fig, axes = plt.subplots(rows, n, figsize=(4.2 * n, 3.2 * rows), squeeze=False)
        fig.suptitle(title)
        return fig, axes.ravel()

    first = next(iter(runs.values()))["series"]
    ctrl = PdController(lay.joint_names, asm.pos0)
    desired = np.array([ctrl.desired(ti)[0] for ti in first["t"]])
    fig, ax = panels(3, "Fig. 6: joint angles under the PD law of eq. 83")
    for i, j in enumerate(JOINTS):
        k = lay.joint_names.index(j)
        for label, r in runs.items():
            ax[i].plot(r["series"]["t"], r["series"]["pos"][:, k], label=label)
        ax[i].plot(first["t"], desired[:, k], "k--", lw=0.8, label="desired")
        ax[i].set(title=j, xlabel="t [s]", ylabel="rad")
    ax[0].legend(fontsize=7)
    save(fig, "fig06_joint_angles.png")

    c = first["columns"]
    fig, ax = panels(3, "Fig. 7: endpoint position (inertial frame)")
    for i, a in enumerate("xyz"):
        for label, r in runs.items():
            ax[i].plot(r["series"]["t"], r["series"]["rows"][:, c.index(f"tip_{a}")], label=label)
        ax[i].set(title=f"{a}_E", xlabel="t [s]", ylabel="m")
    ax[0].legend(fontsize=7)
    save(fig, "fig07_endpoint_position.png")

    fig, ax = panels(3, "Fig. 8: endpoint elastic displacement (inertial frame)")
    for i, a in enumerate("xyz"):
        for label, r in runs.items():
            ax[i].plot(r["series"]["t"], r["series"]["disp"][:, i] * 1e3, label=label)
        ax[i].set(title=f"{a}_xiE", xlabel="t [s]", ylabel="mm")
    ax[0].legend(fontsize=7)
    save(fig, "fig08_endpoint_deformation.png")

    fig, ax = panels(3, f"Fig. 9: amplitude spectra of the endpoint displacement after t = {MOVE_TIME_S + SETTLE_S:g} s")
    lin = next(iter(runs.values()))["numbers"]["linearised_hz"]
    for i, a in enumerate("xyz"):
        for label, r in runs.items():
            ax[i].semilogy(r["series"]["f"], r["series"]["amp"][:, i] * 1e3 + 1e-9, label=label)
        for fl in lin:
            ax[i].axvline(fl, color="grey", lw=0.6, ls=":")
        ax[i].set(title=f"{a}_xiE", xlabel="f [Hz] (dotted: linearised PD-held arm)", ylabel="mm", xlim=(0, 40),
                  ylim=(1e-5, None))
    ax[0].legend(fontsize=7)
    save(fig, "fig09_spectra.png")

    x_t = first["t"][:: max(1, len(first["t"]) // 400)]
    pos_t = first["pos"][:: max(1, len(first["t"]) // 400)]
    fig, ax = panels(2, "Figs. 10-11: displacement fields along the links (default integrator)", rows=2)
    for row, body in enumerate(("link1", "link2")):
        k = lay.body_names.index(body)
        modes = asm.modes[k]
        xs = np.linspace(0.0, modes.beam.length_m, 24)
        shapes = np.array([modes.at(x)[0] for x in xs])                  # (x, 3, nm)
        eta = pos_t[:, lay.eta_index(k, 0):lay.eta_index(k, 0) + modes.nm]
        field = np.einsum("xim,tm->itx", shapes, eta)
        for col, (i, a) in enumerate(((1, "y"), (2, "z"))):
            im = ax[2 * row + col].pcolormesh(xs, x_t, field[i] * 1e3, shading="auto", cmap="RdBu_r")
            fig.colorbar(im, ax=ax[2 * row + col], label="mm")
            ax[2 * row + col].set(title=f"r_xi{a} of {body}", xlabel="xi [m]", ylabel="t [s]")
    save(fig, "fig10_11_displacement_fields.png")

    etas = [n for n in c if n.startswith("eta_")]
    fig, ax = panels(len(etas), "Fig. 12: modal coordinates")
    for i, n in enumerate(etas):
        for label, r in runs.items():
            ax[i].plot(r["series"]["t"], r["series"]["rows"][:, c.index(n)] * 1e3, label=label)
        ax[i].set(title=n[4:], xlabel="t [s]", ylabel="mm (tip value)")
    ax[0].legend(fontsize=7)
    save(fig, "fig12_modal_coordinates.png")

    fig, ax = panels(3, "Fig. 13: PD joint torques")
    for i, j in enumerate(JOINTS):
        for label, r in runs.items():
            ax[i].plot(r["series"]["t"], r["series"]["rows"][:, c.index(f"tau_{j}")], label=label)
        ax[i].set(title=j, xlabel="t [s]", ylabel="N m")
    ax[0].legend(fontsize=7)
    save(fig, "fig13_torques.png")

    for name, joint, what in (("fig14_base_joint_wrench.png", "shoulder_pitch", "Fig. 14: base joint (link 1)"),
                              ("fig15_connecting_joint_wrench.png", "elbow", "Fig. 15: connecting joint (link 2)")):
        fig, ax = panels(3, f"{what}: interaction wrench on the child, child frame", rows=2)
        for i, a in enumerate(("fx", "fy", "fz", "mx", "my", "mz")):
            col = ("mx", "my", "mz", "fx", "fy", "fz").index(a)
            for label, r in runs.items():
                ax[i].plot(r["series"]["t"], r["series"]["wrench"][joint][:, col], label=label)
            ax[i].set(title=f"{a[0].upper()}_{a[1]}", xlabel="t [s]", ylabel="N" if a[0] == "f" else "N m")
        ax[0].legend(fontsize=7)
        save(fig, name)

    t_spd, links, system = spd
    fig, ax = panels(1, "Inertia operators along the run: smallest eigenvalue")
    ax[0].plot(t_spd, links, label="links' inertia operators (eq. 78)")
    ax[0].plot(t_spd, system, label="joint-and-modal mass matrix")
    ax[0].set(xlabel="t [s]", yscale="log")
    ax[0].legend(fontsize=7)
    save(fig, "spd_eigenvalues.png")
    return written


# ----------------------------------------------------------------------------- command line
def main(argv: list[str] | None = None) -> int:
    parts = __doc__.split("\n\n")
    p = argparse.ArgumentParser(prog="python -m tools.seed000_experiment", description=parts[0],
                                epilog="\n\n".join(parts[1:]), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "out" / "seed000", help="output folder (default out/seed000)")
    p.add_argument("--duration", type=float, default=DURATION_S, help="simulated time in s")
    p.add_argument("--formulation", choices=("aba", "screw-dae"), default="screw-dae")
    p.add_argument("--no-figures", action="store_true", help="logs and numbers only")
    p.add_argument("--solve-start", action="store_true", help="print the start pose the preset carries and exit")
    args = p.parse_args(argv)
    if args.solve_start:
        print(json.dumps(solve_start(), indent=1))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    asm = assemble(load_model(CONFIG))
    runs = {}
    for label, method in (("forward Euler 1 ms", "euler"), ("default integrator", "auto")):
        header, rows = run(method, args.out / f"{method}.msgpack", args.duration, args.formulation)
        runs[label] = analyse(asm, header, rows)
    default = runs["default integrator"]["series"]
    every = max(1, int(round(0.02 / (default["t"][1] - default["t"][0]))))
    links, system = spd_over_run(asm, default["pos"][::every])
    summary = {label: r["numbers"] for label, r in runs.items()}
    summary["inertia_spd"] = {"links_min": float(links.min()), "mass_matrix_min": float(system.min()),
                              "samples": int(len(links))}
    summary["forward_euler_growth"] = {"ella": forward_euler_growth(load_model(ROOT / "configs" / "ella.toml")),
                                       "experiment": forward_euler_growth(load_model(CONFIG))}
    summary["gains"] = {"kp_N_m_rad": KP_N_M_RAD, "kd_N_m_s_rad": KD_N_M_S_RAD, "move_time_s": MOVE_TIME_S}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=float))
    if not args.no_figures:
        try:
            written = figures(asm, runs, (default["t"][::every], links, system), args.out)
            print(f"figures: {len(written)} PNGs in {args.out}")
        except ImportError:
            print("figures skipped: matplotlib is not installed (pip install .[viz])", file=sys.stderr)
    print(format_summary(summary))
    return 0


def format_summary(s: dict) -> str:
    lines = []
    for label in ("forward Euler 1 ms", "default integrator"):
        r = s[label]
        lines.append(f"{label} ({r['integrator']})" + (f": DIVERGED at {r['diverged_s']:.3f} s" if r["diverged_s"]
                                                        else f", {r['simulated_s']:g} s"))
        lines.append("  final joint errors [rad]: " + ", ".join(f"{j} {v:+.5f}" for j, v in r["final_joint_error_rad"].items()))
        lines.append("  endpoint spectral peaks [Hz]: " + ", ".join(f"{f:.2f}" for f in r["endpoint_peaks_hz"]))
        lines.append(f"  release (t <= {RELEASE_S:g} s) peaks [Hz]: " + ", ".join(f"{f:.2f}" for f in r["release_peaks_hz"])
                     + "; linearised at the start pose: " + ", ".join(f"{f:.2f}" for f in r["release_linearised_hz"]))
        lines.append("  linearised PD-held arm at the end [Hz]: " + ", ".join(f"{f:.2f} (zeta {z:.3f})" for f, z in
                                                                 zip(r["linearised_hz"], r["linearised_damping"])))
        lines.append("  peak torque [N m]: " + ", ".join(f"{j} {v:.1f}" for j, v in r["peak_torque_N_m"].items()))
        lines.append("  peak wrench |moment| [N m] / |force| [N]: " + ", ".join(
            f"{j} {r['peak_moment_N_m'][j]:.1f} / {r['peak_force_N'][j]:.1f}" for j in r["peak_moment_N_m"]))
    spd = s["inertia_spd"]
    lines.append(f"inertia operators: smallest eigenvalue over {spd['samples']} samples {spd['links_min']:.4g} (links), "
                 f"{spd['mass_matrix_min']:.4g} (joint-and-modal mass matrix)")
    for name, rows in s["forward_euler_growth"].items():
        lines.append(f"forward Euler at 1 ms, undamped modes of {name}: " + ", ".join(
            f"{r['f_hz']:.1f} Hz x{r['growth_per_step']:.6f}" for r in rows) + " per step")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
