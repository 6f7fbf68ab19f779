"""Kernel benchmarks: ELLA forward dynamics and 1 ms step, the rigid limit against
Pinocchio, the scaling of the O(n) articulated-body algorithm against the dense
composite-body oracle, ``hil simulate`` of ELLA from the shell, the energy of the undamped arm
under each integrator plan, and every shipped preset's default plan beside RK4's.

Run ``python -m tools.bench_kernel [--quick] [--json] [--sections ella,pinocchio,scaling,simulate,energy,plans]``
or ``hil bench kernel ...``.

Timing method (every number is the median over repeats of a per-call time, in us, with the
fastest and slowest repeat as its spread):

* the clock is ``time.thread_time_ns``, the CPU time of the benchmarking thread: on a shared
  machine wall time also counts whatever else runs, CPU time only this work;
* kernel: n calls inside a small ``@njit(cache=True)`` loop defined here, timed around the
  whole loop and divided by n, so the cost of calling numba from Python is excluded;
* Python: the same call made n times from a Python ``for`` loop, the way the
  real-time loop (Plant.step) and Pinocchio's ``pin.aba`` are called; this is the
  like-for-like comparison with Pinocchio;
* simulate: ``python -m hil simulate CONFIG --duration 10`` in a child process, wall time
  from start to exit (interpreter, imports, numba's start-up and cache loads included);
* energy: not a timing; the arm made undamped, released at random joint rates, 10 s under each plan
  (hil.dynamics.energy_error): max |E - E(0)| and the drift, over the largest kinetic energy;
* plans: per shipped preset its default plan and RK4 at its stable substeps (the friction resolved), each
  with its worst modal frequency error (hil.dynamics.integrator_plan), its joint angle error over the
  2 s probe motion against a converged solution (hil.dynamics.motion_error), its evaluations per step and
  its outer step timed inside numba as the kernel rows are.

Everything is compiled (or loaded from the numba cache, which hil.jit_cache keys on the
kernel sources) and run once before timing.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

from hil.model import spec as md
from hil.model.assembly import assemble, make_work
from hil.model.config import load_model
from hil.kernels.aba import forward_dynamics
from hil.kernels.integrate import advance
from hil.kernels.oracle import forward_dynamics_dense
from hil.kernels.screw_dae import forward_dynamics as dae_forward_dynamics
from hil.dynamics.energy_error import energy_error
from hil.dynamics.integrator_plan import EVALUATIONS, judge, plan_integrator
from hil.dynamics.plant import METHODS, Plant
from hil.model.presets import resolve, shipped

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "configs" / "ella.toml"
SECTIONS = ("ella", "pinocchio", "scaling", "simulate", "energy", "plans")
# goals: ELLA's forward dynamics and 1 ms step (us), ours against pin.aba (time ratios), hil simulate (s)
GOALS_US = {"aba_kernel": 2.5, "aba_python": 4.0, "step_kernel": 12.0, "step_python": 12.0}
PIN_GOALS = {"ratio_kernel": 1.0, "ratio_python": 1.5}
SIMULATE_GOAL_S = 0.5
ENERGY_GOAL = 1e-6        # undamped arm with gravity, 10 s at 1 kHz, relative to the largest kinetic energy
ENERGY_PLANS = (("fitted_midpoint", 2), ("fitted_midpoint", 8), ("imex_midpoint", 2), ("imex_midpoint", 8),
                ("rk4", 1), ("rk4", 3), ("rk4", 4))
PIN_JOINTS = (3, 7, 30)
PIN_JOINTS_QUICK = (3, 7)
SCALING_LINKS = (1, 2, 4, 8, 16, 32, 64)
SCALING_LINKS_QUICK = (1, 2, 4, 8)
AGREE_TOL = 1e-9          # |ours - pinocchio| <= AGREE_TOL * max |pinocchio|


# ----------------------------------------------------------------------------- timing loops
@njit(cache=True)
def aba_loop(mi, mf, w, t, pos, vel, tau, acc, n):
    ok = True
    for _ in range(n):
        if not forward_dynamics(mi, mf, w, t, pos, vel, tau, pos, vel, 0.0, 0.0, acc):
            ok = False
    return ok


@njit(cache=True)
def dense_loop(mi, mf, w, t, pos, vel, tau, acc, n):
    ok = True
    for _ in range(n):
        if not forward_dynamics_dense(mi, mf, w, t, pos, vel, tau, pos, vel, 0.0, 0.0, acc):
            ok = False
    return ok


@njit(cache=True)
def step_loop(mi, mf, w, t, pos, vel, tau, dt, nsub, method, n):
    ok = True
    for i in range(n):
        if not advance(mi, mf, w, t + i * dt, pos, vel, tau, dt, nsub, method):
            ok = False
    return ok


class Timer:
    """Median per-call time of a batch callable run(n) -> ok, over `repeats` batches of about
    `target_s` seconds each."""

    def __init__(self, repeats: int, target_s: float):
        self.repeats = repeats
        self.target_ns = target_s * 1e9

    def __call__(self, run, reset=None, max_n: int = 10**7) -> dict:
        ok = True
        n, dt = 1, 0
        while True:                       # calibrate the batch size
            if reset is not None:
                reset()
            t0 = time.thread_time_ns()
            ok &= bool(run(n))
            dt = time.thread_time_ns() - t0
            if dt >= 0.05 * self.target_ns or n >= max_n:
                break
            n = min(max_n, n * 8)
        n = int(min(max_n, max(1, n * self.target_ns / max(dt, 1))))
        per_call = []
        enabled = gc.isenabled()
        gc.disable()
        try:
            for _ in range(self.repeats):
                if reset is not None:
                    reset()
                t0 = time.thread_time_ns()
                ok &= bool(run(n))
                per_call.append((time.thread_time_ns() - t0) / n)
        finally:
            if enabled:
                gc.enable()
        return {"us": statistics.median(per_call) / 1e3, "min_us": min(per_call) / 1e3,
                "max_us": max(per_call) / 1e3, "calls": n, "repeats": self.repeats, "ok": ok}


def _py_loop(f, *args):
    def run(n):
        ok = True
        for _ in range(n):
            if f(*args) is False:         # our kernels return False on failure; pin.aba an array
                ok = False
        return ok
    return run


# ----------------------------------------------------------------------------- host
def host_info() -> dict:
    cpu = None
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware", "cpu model") and value.strip():
                    cpu = value.strip()
                    break
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    import numba
    try:
        import pinocchio
        pin_version = pinocchio.__version__
    except ImportError:
        pin_version = None
    coretype = os.environ.get("OPENBLAS_CORETYPE")
    return {"cpu": cpu or platform.processor() or platform.machine(), "machine": platform.machine(),
            "cores": os.cpu_count(), "usable_cores": usable, "python": platform.python_version(),
            "numpy": np.__version__, "numba": numba.__version__, "pinocchio": pin_version,
            "openblas_coretype_set": coretype is not None, "openblas_coretype": coretype}


# ----------------------------------------------------------------------------- section 1
def bench_ella(timer: Timer, config: Path) -> dict:
    """ELLA's forward dynamics, its 1 ms step with RK4 and one substep (the goal's row) and with the
    integrator plan (auto: the fitted midpoint), inside numba and from Python."""
    t0 = time.perf_counter()
    plant = Plant(load_model(str(config)))
    (mi, mf, w), lay, plan = (plant.km.mi, plant.km.mf, plant.work.w), plant.layout, plant.plan
    pos0, vel0 = plant.pos.copy(), plant.vel.copy()
    tau = plant.tau
    acc = np.zeros(lay.nq)
    pos, vel = pos0.copy(), vel0.copy()
    aba_loop(mi, mf, w, 0.0, pos, vel, tau, acc, 1)
    steps = {"step": (METHODS["rk4"], 1)}
    if (plan.method, plan.substeps) != ("rk4", 1):
        steps["plan_step"] = (METHODS[plan.method], plan.substeps)
    for method, nsub in steps.values():
        step_loop(mi, mf, w, 0.0, pos, vel, tau, plan.dt_s, nsub, method, 1)
    warmup_s = time.perf_counter() - t0

    timings = {"aba_kernel": timer(lambda n: aba_loop(mi, mf, w, 0.0, pos0, vel0, tau, acc, n)),
               "aba_python": timer(_py_loop(forward_dynamics, mi, mf, w, 0.0, pos0, vel0, tau, pos0, vel0, 0.0, 0.0,
                                            acc))}

    def reset():                          # every batch steps on from the initial state
        pos[:] = pos0
        vel[:] = vel0

    def step_py(method, nsub):
        def run(n):
            ok = True
            for i in range(n):
                ok &= advance(mi, mf, w, i * plan.dt_s, pos, vel, tau, plan.dt_s, nsub, method)
            return ok
        return run

    max_steps = 5000                      # at most 5 s of simulated motion per batch
    for key, (method, nsub) in steps.items():
        timings[f"{key}_kernel"] = timer(lambda n: step_loop(mi, mf, w, 0.0, pos, vel, tau, plan.dt_s, nsub, method,
                                                             n), reset=reset, max_n=max_steps)
        timings[f"{key}_python"] = timer(step_py(method, nsub), reset=reset, max_n=max_steps)
    return {
        "config": str(config), "model": plant.asm.model.name, "nq": lay.nq, "n_joints": lay.n_joints,
        "n_modes": lay.n_eta, "n_motors": lay.n_motors, "warmup_s": warmup_s,
        "plan": {"describe": plan.describe(), "method": plan.method, "substeps": plan.substeps, "dt_s": plan.dt_s,
                 "f_max_hz": plan.f_max_hz},
        "aba_us": {"kernel": timings["aba_kernel"]["us"], "python": timings["aba_python"]["us"]},
        "step_us": {"kernel": timings["step_kernel"]["us"], "python": timings["step_python"]["us"]},
        "timings": timings,
        "goals_us": dict(GOALS_US),
        "pass": {key: t["us"] <= GOALS_US[key] for key, t in timings.items() if key in GOALS_US},
        "ok": all(t["ok"] for t in timings.values()),
    }


# ----------------------------------------------------------------------------- section 2
def _chains():
    """tests/chains.py (random chains and their Pinocchio twins), imported from the checkout."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import chains
    return chains


def bench_pinocchio(timer: Timer, joints) -> dict:
    try:
        import pinocchio as pin
    except ImportError:
        return {"available": False, "note": "pinocchio is not installed (pip install pin)"}
    chains = _chains()
    rows = []
    for n in joints:
        rng = np.random.default_rng(100 + n)
        model = chains.random_rigid_chain(rng, n)
        asm = assemble(model)
        mi, mf, w = asm.km.mi, asm.km.mf, make_work(asm.km).w
        q = asm.pos0.copy()
        v = rng.normal(size=n)
        tau = rng.normal(size=n) * 3
        acc = np.zeros(asm.layout.nq)
        pm = chains.pinocchio_model(model)
        data = pm.createData()
        ok = bool(forward_dynamics(mi, mf, w, 0.0, q, v, tau, q, v, 0.0, 0.0, acc))
        ref = np.array(pin.aba(pm, data, q, v, tau))
        diff = float(np.max(np.abs(acc - ref)))
        scale = float(np.max(np.abs(ref)))
        ours_k = timer(lambda k: aba_loop(mi, mf, w, 0.0, q, v, tau, acc, k))
        ours_p = timer(_py_loop(forward_dynamics, mi, mf, w, 0.0, q, v, tau, q, v, 0.0, 0.0, acc))
        theirs = timer(_py_loop(pin.aba, pm, data, q, v, tau))
        ratios = {"ratio_kernel": ours_k["us"] / theirs["us"], "ratio_python": ours_p["us"] / theirs["us"]}
        rows.append({"joints": n, "nq": asm.layout.nq, "ours_kernel_us": ours_k["us"], "ours_python_us": ours_p["us"],
                     "pinocchio_us": theirs["us"], **ratios,
                     "pass": {key: r <= PIN_GOALS[key] for key, r in ratios.items()},
                     "timings": {"ours_kernel": ours_k, "ours_python": ours_p, "pinocchio": theirs},
                     "max_abs_diff": diff,
                     "max_rel_diff": diff / scale if scale > 0 else diff,
                     "agree": bool(ok and diff <= AGREE_TOL * scale), "ok": bool(ok and ours_k["ok"] and ours_p["ok"])})
    return {"available": True, "version": pin.__version__, "tolerance_rel": AGREE_TOL, "goals": dict(PIN_GOALS),
            "chains": rows, "all_agree": all(r["agree"] for r in rows)}


# ----------------------------------------------------------------------------- section 3
def uniform_flexible_chain(n: int) -> md.Model:
    """n identical steel links (0.5 m, 2 bending modes per plane, 1 % damping) in series,
    joint axes alternating z and y, each carrying a 0.5 kg tip mass."""
    bodies = []
    for i in range(n):
        joint = md.Joint(f"j{i}", axis=np.array([0.0, 0.0, 1.0]) if i % 2 == 0 else np.array([0.0, 1.0, 0.0]),
                         station_m=0.0 if i == 0 else 0.5, q0_rad=0.1 * (i % 3), rotor_inertia_kg_m2=1e-4,
                         gear_ratio=50.0, viscous_N_m_s_rad=0.1)
        beam = md.Beam(length_m=0.5, E_Pa=2.1e11, G_Pa=8.1e10, rho_kg_m3=7800.0, area_m2=2e-4, Iy_m4=1e-8,
                       Iz_m4=1.7e-8, torsion_constant_m4=2e-8, n_bending_y=2, n_bending_z=2,
                       damping_ratio=np.full(4, 0.01))
        tip = md.Attachment("tip_mass", 0.5, 0.5, np.zeros(3), np.eye(3) * 1e-4)
        bodies.append(md.Body(f"link{i}", md.BASE if i == 0 else f"link{i - 1}", joint, beam=beam, attachments=[tip]))
    return md.Model(f"uniform_{n}", bodies, gravity_m_s2=np.array([0.0, 0.0, -9.81]))


def _slope(x, y) -> float:
    return float(np.polyfit(np.log(np.asarray(x, float)), np.log(np.asarray(y, float)), 1)[0])


def bench_scaling(timer: Timer, links) -> dict:
    rows = []
    for n in links:
        asm = assemble(uniform_flexible_chain(n))
        km, lay = asm.km, asm.layout
        mi, mf, w = km.mi, km.mf, make_work(km).w
        rng = np.random.default_rng(n)
        pos = asm.pos0.copy()
        pos[: lay.n_joints] += rng.uniform(-0.5, 0.5, lay.n_joints)
        pos[lay.n_joints:] += rng.normal(size=lay.nq - lay.n_joints) * 1e-4
        vel = rng.normal(size=lay.nq) * 0.5
        vel[lay.n_joints:] *= 0.1
        tau = rng.normal(size=lay.n_joints)
        a1, a2 = np.zeros(lay.nq), np.zeros(lay.nq)
        ok = bool(aba_loop(mi, mf, w, 0.0, pos, vel, tau, a1, 1) and dense_loop(mi, mf, w, 0.0, pos, vel, tau, a2, 1))
        scale = float(np.max(np.abs(a2)))
        rel = float(np.max(np.abs(a1 - a2)) / scale) if scale > 0 else 0.0
        ta = timer(lambda k: aba_loop(mi, mf, w, 0.0, pos, vel, tau, a1, k))
        td = timer(lambda k: dense_loop(mi, mf, w, 0.0, pos, vel, tau, a2, k))
        rows.append({"links": n, "nq": lay.nq, "aba_us": ta["us"], "dense_us": td["us"],
                     "ratio_dense_over_aba": td["us"] / ta["us"], "max_rel_diff": rel,
                     "ok": bool(ok and ta["ok"] and td["ok"])})
    crossover = next((r["links"] for r in rows if r["aba_us"] < r["dense_us"]), None)
    upper = rows[len(rows) // 2:] if len(rows) >= 4 else rows
    fit = [r["links"] for r in upper]
    exponent = {"aba": _slope(fit, [r["aba_us"] for r in upper]) if len(upper) >= 2 else None,
                "dense": _slope(fit, [r["dense_us"] for r in upper]) if len(upper) >= 2 else None,
                "fit_links": fit}
    return {"modes_per_link": 4, "rows": rows, "crossover_links": crossover, "exponent": exponent}


# ----------------------------------------------------------------------------- section 4
@njit(cache=True)
def dae_loop(mi, mf, w, t, pos, vel, tau, acc, n):
    ok = True
    for _ in range(n):
        if not dae_forward_dynamics(mi, mf, w, t, pos, vel, tau, pos, vel, 0.0, 0.0, acc):
            ok = False
    return ok


def _per_link(links, us) -> float:
    """Least-squares slope of time over links: the cost of one added link [us]."""
    return float(np.polyfit(np.asarray(links, float), np.asarray(us, float), 1)[0])


def bench_screw_dae(timer: Timer, links, config: Path = DEFAULT_CONFIG) -> dict:
    """Seed 000's screw-theoretic DAE kernel (hil.kernels.screw_dae) against the ABA: one forward-dynamics
    evaluation of ELLA and of the uniform flexible chains of section 3, the cost per added link, and the
    agreement of their accelerations."""
    cases = [("ella", assemble(load_model(str(config))))] + [(n, assemble(uniform_flexible_chain(n))) for n in links]
    rows = []
    for name, asm in cases:
        km, lay = asm.km, asm.layout
        mi, mf, w = km.mi, km.mf, make_work(km).w
        rng = np.random.default_rng(7)
        pos = asm.pos0.copy()
        pos[: lay.n_joints] += rng.uniform(-0.5, 0.5, lay.n_joints)
        pos[lay.n_joints:] += rng.normal(size=lay.nq - lay.n_joints) * 1e-4
        vel = rng.normal(size=lay.nq) * 0.5
        vel[lay.n_joints:] *= 0.1
        tau = rng.normal(size=lay.n_joints)
        a1, a2 = np.zeros(lay.nq), np.zeros(lay.nq)
        ok = bool(aba_loop(mi, mf, w, 0.0, pos, vel, tau, a1, 1) and dae_loop(mi, mf, w, 0.0, pos, vel, tau, a2, 1))
        rel = float(np.max(np.abs(a1 - a2)) / np.max(np.abs(a1)))
        ta = timer(lambda k: aba_loop(mi, mf, w, 0.0, pos, vel, tau, a1, k))
        td = timer(lambda k: dae_loop(mi, mf, w, 0.0, pos, vel, tau, a2, k))
        tp = timer(_py_loop(dae_forward_dynamics, mi, mf, w, 0.0, pos, vel, tau, pos, vel, 0.0, 0.0, a2))
        rows.append({"links": name, "nq": lay.nq, "aba_us": ta["us"], "dae_us": td["us"], "dae_python_us": tp["us"],
                     "ratio_dae_over_aba": td["us"] / ta["us"], "max_rel_diff": rel,
                     "ok": bool(ok and ta["ok"] and td["ok"] and tp["ok"])})
    chain = [r for r in rows if r["links"] != "ella"]
    n = [r["links"] for r in chain]
    per_link = {"aba_us": _per_link(n, [r["aba_us"] for r in chain]) if len(n) >= 2 else None,
                "dae_us": _per_link(n, [r["dae_us"] for r in chain]) if len(n) >= 2 else None}
    return {"rows": rows, "per_link": per_link}


def format_screw_dae(s: dict | None) -> list[str]:
    if s is None:
        return []
    lines = ["", "4. seed 000's screw-theoretic DAE (hil.kernels.screw_dae) vs the ABA, one forward-dynamics "
                 "evaluation (kernel us; the DAE also from Python); chains as in section 3",
             f"  {'links':>5}{'nq':>6}{'ABA us':>11}{'DAE us':>11}{'DAE/ABA':>10}{'DAE Python us':>15}"
             f"{'max rel diff':>14}"]
    for r in s["rows"]:
        lines.append(f"  {r['links']:>5}{r['nq']:>6}{r['aba_us']:>11.2f}{r['dae_us']:>11.2f}"
                     f"{r['ratio_dae_over_aba']:>10.2f}{r['dae_python_us']:>15.2f}{r['max_rel_diff']:>14.1e}")
    p = s["per_link"]
    if p["aba_us"] is not None:
        lines.append(f"  cost per added link (least-squares slope): ABA {p['aba_us']:.2f} us, DAE {p['dae_us']:.2f} us")
    if not all(r["ok"] for r in s["rows"]):
        lines.append("  WARNING: a kernel call reported failure (singular block or inertia)")
    return lines


# ----------------------------------------------------------------------------- section 5
def bench_simulate(config: Path, duration_s: float, repeats: int) -> dict:
    """Wall time of ``python -m hil simulate CONFIG --duration D`` from start to exit, each run a child
    process (one untimed run first: it fills the caches a user's first run fills, the kernels in
    numba's and the emulator's modules' bytecode in __pycache__, the latter even where
    PYTHONDONTWRITEBYTECODE is set, where every start would otherwise compile the ~55 modules from
    source; the timed runs keep the environment as it is), its CPU time (user + system: what the
    wall time is on an idle machine) and the simulation loop's own wall time as the command reports it."""
    cmd = [sys.executable, "-m", "hil", "simulate", str(config), "--duration", f"{duration_s:g}"]
    first_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs = []
    for i in range(repeats + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600,
                             env=None if i else first_env)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        if out.returncode != 0:
            return {"command": " ".join(cmd[1:]), "error": (out.stderr.strip().splitlines() or ["?"])[-1]}
        loop = next(float(line.split()[2]) for line in out.stdout.splitlines() if line.startswith("wall time"))
        if i:
            runs.append({"wall_s": wall, "cpu_s": cpu, "loop_s": loop})
    walls = [r["wall_s"] for r in runs]
    cpus = [r["cpu_s"] for r in runs]
    return {"command": " ".join(cmd[1:]), "duration_s": duration_s, "runs": runs,
            "wall_s": statistics.median(walls), "min_s": min(walls), "max_s": max(walls),
            "cpu_s": statistics.median(cpus), "cpu_min_s": min(cpus), "cpu_max_s": max(cpus),
            "loop_s": statistics.median(r["loop_s"] for r in runs), "goal_s": SIMULATE_GOAL_S,
            "pass": statistics.median(walls) <= SIMULATE_GOAL_S}


def format_simulate(s: dict | None) -> list[str]:
    if s is None:
        return []
    lines = ["", "5. hil simulate from the shell (wall time, interpreter start-up, imports and numba's cache loads "
                 "included; kernels and bytecode cached by an untimed first run)"]
    if "error" in s:
        return lines + [f"  {s['command']}: failed: {s['error']}"]
    return lines + [f"  {s['command']}, {len(s['runs'])} runs:",
                    f"  wall {s['wall_s']:.2f} s [{s['min_s']:.2f}-{s['max_s']:.2f}], goal {s['goal_s']:g} s: "
                    f"{_pf(s['pass'])}; CPU {s['cpu_s']:.2f} s [{s['cpu_min_s']:.2f}-{s['cpu_max_s']:.2f}]; "
                    f"the simulation loop {s['loop_s']:.3f} s"]


# ----------------------------------------------------------------------------- section 6
def bench_energy(config: Path, duration_s: float, plans) -> dict:
    """hil.dynamics.energy_error of the arm under its own plan (auto or the config's), the plan auto takes
    with integrator.energy_tolerance = ENERGY_GOAL, and each of `plans`."""
    model = load_model(config)
    own = Plant(model).plan
    model.integrator.energy_tolerance = ENERGY_GOAL
    with_tolerance = Plant(model).plan
    model.integrator.energy_tolerance = 0.0
    rows = []
    for label, (method, n) in ([("the config's plan", (own.method, own.substeps)),
                                (f"energy_tolerance {ENERGY_GOAL:g}", (with_tolerance.method, with_tolerance.substeps))]
                               + [("", mn) for mn in plans]):
        e = energy_error(model, method, n, duration_s)
        rows.append({"label": label, "method": method, "substeps": n, "evaluations": EVALUATIONS[method] * n,
                     "max_deviation": e.max_deviation, "drift": e.drift, "slope_drift": e.slope_drift,
                     "kinetic_max_J": e.kinetic_max_J,
                     "pass_max": e.max_deviation <= ENERGY_GOAL, "pass_drift": abs(e.drift) <= ENERGY_GOAL})
    return {"config": str(config), "duration_s": duration_s, "goal": ENERGY_GOAL, "rows": rows}


def format_energy(s: dict | None) -> list[str]:
    if s is None:
        return []
    lines = ["", f"6. energy of the undamped arm with gravity, released at random joint rates, {s['duration_s']:g} s "
                 f"(hil.dynamics.energy_error); relative to the largest kinetic energy, goal {s['goal']:g}",
             f"  {'plan':<38}{'evaluations':>12}{'max |E - E(0)|':>16}{'':6}{'drift':>11}{'':6}"]
    for r in s["rows"]:
        plan = f"{r['method']} x{r['substeps']}" + (f" ({r['label']})" if r["label"] else "")
        lines.append(f"  {plan:<38}{r['evaluations']:>12}{r['max_deviation']:>16.1e}  {_pf(r['pass_max']):<4}"
                     f"{r['drift']:>+11.1e}  {_pf(r['pass_drift']):<4}")
    return lines


# ----------------------------------------------------------------------------- section 7
def bench_plans(timer: Timer, presets) -> dict:
    """Per preset: its default plan and RK4 at its stable substeps, judged (modes, motion) and timed."""
    rows = []
    for name in presets:
        asm = assemble(load_model(resolve("preset", name)))
        for label, plan in (("default", judge(asm, plan_integrator(asm))), ("rk4", judge(asm, plan_integrator(asm, "rk4")))):
            plant = Plant(asm.model, plan.method, plan.substeps)
            km, w = plant.km, plant.work.w
            pos, vel = plant.pos.copy(), plant.vel.copy()
            args = (km.mi, km.mf, w, 0.0, pos, vel, plant.tau, plant.dt, plan.substeps, METHODS[plan.method])

            def reset():
                pos[:], vel[:] = plant.pos, plant.vel
            t = timer(lambda n: step_loop(*args, n), reset)
            rows.append({"preset": name, "plan": label, "method": plan.method, "substeps": plan.substeps,
                         "dt_s": plan.dt_s, "evaluations": EVALUATIONS[plan.method] * plan.substeps,
                         "modal_error": plan.modal_error, "motion_error_rad": plan.motion["max_error_rad"],
                         "motion_probe_s": plan.motion["probe_s"], "accurate": plan.accurate, "step": t})
    return {"rows": rows}


def format_plans(s: dict | None) -> list[str]:
    if s is None:
        return []
    lines = ["", "7. every shipped preset's default plan beside RK4 at its stable substeps: worst modal frequency "
                 "error, joint angle error over the 2 s probe motion against a converged solution, cost",
             f"  {'preset':<26}{'plan':<30}{'evaluations':>12}{'modal error':>13}{'motion rad':>12}"
             f"{'step us (kernel)':>24}"]
    for r in s["rows"]:
        plan = f"{r['method']} x{r['substeps']}" + (" (default)" if r["plan"] == "default" else "")
        lines.append(f"  {r['preset']:<26}{plan:<30}{r['evaluations']:>12}{r['modal_error']:>13.1e}"
                     f"{r['motion_error_rad']:>12.1e}{_spread(r['step']):>24}")
    return lines


# ----------------------------------------------------------------------------- report
def _pf(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _spread(t: dict) -> str:
    """A timing as its median [fastest - slowest]."""
    return f"{t['us']:.2f} [{t['min_us']:.2f}-{t['max_us']:.2f}]"


def format_report(rep: dict) -> str:
    h = rep["host"]
    lines = ["host",
             f"  cpu        {h['cpu']} ({h['machine']}), {h['cores']} cores ({h['usable_cores']} usable)",
             f"  versions   Python {h['python']}, numpy {h['numpy']}, numba {h['numba']}, "
             f"pinocchio {h['pinocchio'] or 'not installed'}",
             "  OPENBLAS_CORETYPE  " + (f"set ({h['openblas_coretype']})" if h["openblas_coretype_set"] else "not set"),
             "",
             f"timing: time.thread_time_ns (CPU time), median [fastest - slowest] of {rep['timing']['repeats']} "
             f"repeats of the per-call time (batches of ~{rep['timing']['batch_s'] * 1e3:g} ms) after warm-up;",
             "  kernel = calls inside an @njit loop (no Python overhead); Python = the same call from a Python loop"]
    e = rep.get("ella")
    if e is not None:
        t = e["timings"]
        lines += ["", f"1. {e['model']} ({e['config']}): nq = {e['nq']} ({e['n_joints']} joints, {e['n_modes']} modes, "
                      f"{e['n_motors']} rotors); warm-up {e['warmup_s']:.1f} s",
                  f"  integrator plan: {e['plan']['describe']}",
                  f"  {'':<32}{'kernel us':>22}{'goal':>6}{'':>6}{'Python us':>22}{'goal':>6}"]
        plan = e["plan"]
        for key, label in (("aba", "forward dynamics (ABA)"), ("step", "1 ms step, RK4 x 1"),
                           ("plan_step", f"1 ms step, {plan['method']} x {plan['substeps']}")):
            if f"{key}_kernel" not in t:
                continue
            cells = [f"{_spread(t[f'{key}_{col}']):>22}" + (f"{e['goals_us'][f'{key}_{col}']:>6g}  "
                                                            f"{_pf(e['pass'][f'{key}_{col}']):<4}"
                                                            if f"{key}_{col}" in e["goals_us"] else f"{'':12}")
                     for col in ("kernel", "python")]
            lines.append(f"  {label:<32}" + "".join(cells))
        if not e["ok"]:
            lines.append("  WARNING: a kernel call reported failure (singular inertia or non-finite state)")

    p = rep.get("pinocchio")
    if p is not None:
        lines += ["", "2. rigid limit vs Pinocchio (random rigid chains, tests/chains.py; same q, v, tau)"]
        if not p["available"]:
            lines.append(f"  skipped: {p['note']}")
        else:
            g = p["goals"]
            lines += [f"  pinocchio {p['version']}: pin.aba called from Python; ratio = our time / Pinocchio's "
                      f"(< 1: ours faster), goals: kernel <= {g['ratio_kernel']:g}, Python <= {g['ratio_python']:g}; "
                      f"agree: max |diff| <= {p['tolerance_rel']:g} max |qdd|",
                      f"  {'joints':>6}{'ours kernel us':>22}{'ours Python us':>22}{'pin.aba us':>22}"
                      f"{'ratio kernel':>17}{'ratio Python':>17}{'max |diff|':>11}  agree"]
            for r in p["chains"]:
                t = r["timings"]
                lines.append(f"  {r['joints']:>6}{_spread(t['ours_kernel']):>22}{_spread(t['ours_python']):>22}"
                             f"{_spread(t['pinocchio']):>22}{r['ratio_kernel']:>11.2f} {_pf(r['pass']['ratio_kernel'])}"
                             f"{r['ratio_python']:>11.2f} {_pf(r['pass']['ratio_python'])}"
                             f"{r['max_abs_diff']:>11.1e}  {'yes' if r['agree'] else 'NO'}")
            lines.append(f"  accelerations agree: {'yes, all chains' if p['all_agree'] else 'NO'}")

    s = rep.get("scaling")
    if s is not None:
        lines += ["", f"3. scaling: chains of n uniform flexible links ({s['modes_per_link']} bending modes each, "
                      "nq = 5 n); kernel time per forward-dynamics evaluation",
                  f"  {'links':>5}{'nq':>6}{'ABA us':>11}{'dense us':>11}{'dense/ABA':>11}{'max rel diff':>14}"]
        for r in s["rows"]:
            lines.append(f"  {r['links']:>5}{r['nq']:>6}{r['aba_us']:>11.2f}{r['dense_us']:>11.2f}"
                         f"{r['ratio_dense_over_aba']:>11.2f}{r['max_rel_diff']:>14.1e}")
        x = s["crossover_links"]
        lines.append("  crossover: " + (f"ABA faster from n = {x} link(s)" if x is not None
                                        else "ABA not faster at any size measured"))
        ex = s["exponent"]
        if ex["aba"] is not None:
            lines.append(f"  fitted exponent t ~ n^k over n = {', '.join(map(str, ex['fit_links']))}: "
                         f"ABA k = {ex['aba']:.2f}, dense k = {ex['dense']:.2f}")
        if not all(r["ok"] for r in s["rows"]):
            lines.append("  WARNING: a kernel call reported failure (singular inertia)")
    lines += format_screw_dae(rep.get("screw_dae"))
    lines += format_simulate(rep.get("simulate"))
    lines += format_energy(rep.get("energy"))
    lines += format_plans(rep.get("plans"))
    lines += ["", f"total {rep['elapsed_s']:.1f} s"]
    return "\n".join(lines)


def _sections(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in SECTIONS]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a comma-separated subset of {','.join(SECTIONS)}")
    return names


def build_parser() -> argparse.ArgumentParser:
    parts = __doc__.split("\n\n")
    p = argparse.ArgumentParser(prog="hil bench kernel", description=parts[0],
                                epilog="\n\n".join(parts[2:]), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of tables")
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (for tests)")
    p.add_argument("--sections", type=_sections, default=list(SECTIONS), metavar="LIST",
                   help=f"comma-separated subset of {','.join(SECTIONS)} (default: all)")
    p.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="arm preset for section 1 (default: ELLA)")
    return p


def run(args: argparse.Namespace) -> dict:
    t0 = time.perf_counter()
    repeats, batch_s = (3, 0.005) if args.quick else (7, 0.05)
    timer = Timer(repeats, batch_s)
    rep = {"host": host_info(), "timing": {"timer": "time.thread_time_ns", "statistic": "median",
                                           "repeats": repeats, "batch_s": batch_s, "unit": "us per call",
                                           "quick": bool(args.quick)}}
    from numba.core import config
    rep["numba_cache_dir"] = config.CACHE_DIR
    if "ella" in args.sections:
        rep["ella"] = bench_ella(timer, args.config)
    if "pinocchio" in args.sections:
        rep["pinocchio"] = bench_pinocchio(timer, PIN_JOINTS_QUICK if args.quick else PIN_JOINTS)
    if "scaling" in args.sections:
        rep["scaling"] = bench_scaling(timer, SCALING_LINKS_QUICK if args.quick else SCALING_LINKS)
        rep["screw_dae"] = bench_screw_dae(timer, SCALING_LINKS_QUICK if args.quick else SCALING_LINKS, args.config)
    if "simulate" in args.sections:
        rep["simulate"] = bench_simulate(args.config, *((1.0, 1) if args.quick else (10.0, 5)))
    if "energy" in args.sections:
        rep["energy"] = bench_energy(args.config, *((1.0, ENERGY_PLANS[:1]) if args.quick else (10.0, ENERGY_PLANS)))
    if "plans" in args.sections:
        rep["plans"] = bench_plans(timer, ["ella"] if args.quick else shipped("preset"))
    rep["elapsed_s"] = time.perf_counter() - t0
    return rep


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "kernel":
        argv = argv[1:]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:             # --help or a usage error: return its status
        return int(exc.code or 0)
    rep = run(args)
    print(json.dumps(rep, indent=2) if args.json else format_report(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
