"""How well a plan keeps the energy of an undamped arm: the maximum deviation and the secular drift.

The case (docs/model.md "Energy"): the arm's model with every dissipation removed (joint friction, Spong
damping, modal damping), gravity kept, released from its initial pose with the links undeformed at
seeded random joint rates (rotors following their links), stepped without drive torque. Sampled after
every step:

* max deviation: max |E(t) - E(0)| over the run,
* drift: mean E over the last second minus mean E over the first (the bounded swing a symmetric
  scheme shows averages out of both means; what remains is the energy gained or lost for good),
* slope drift: the least-squares slope of E(t) times the duration,

each relative to the largest kinetic energy along the run (the energy actually exchanged; the
gravity potential has an arbitrary zero).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from hil.dynamics.trial_run import TrialRun
from hil.model import spec as md
from hil.model.assembly import assemble

HORIZON_S = 10.0        # the run the energy target is stated over
RELEASE_SEED = 11       # the joint rates of the release (numpy default_rng)


@dataclass
class EnergyError:
    plan: str                 # IntegratorPlan.describe() of the run
    max_deviation: float      # max |E(t) - E(0)| / max kinetic energy
    drift: float              # (mean E over the last second - mean E over the first) / max kinetic energy
    slope_drift: float        # least-squares slope of E(t) times the duration / max kinetic energy
    kinetic_max_J: float
    duration_s: float

    def describe(self) -> str:
        return (f"{self.plan}: over {self.duration_s:g} s max |E - E(0)| {self.max_deviation:.2e}, drift "
                f"{self.drift:+.2e} (fitted slope {self.slope_drift:+.2e}) of the largest kinetic energy "
                f"{self.kinetic_max_J:.1f} J")


def undamped(model: md.Model, gravity: bool = True) -> md.Model:
    """A copy of `model` without joint friction, Spong damping and modal damping (and gravity if not `gravity`)."""
    model = copy.deepcopy(model)
    for b in model.bodies:
        b.joint.viscous_N_m_s_rad = 0.0
        b.joint.coulomb_N_m = 0.0
        if b.joint.elasticity is not None:
            b.joint.elasticity.damping_N_m_s_rad = 0.0
        if b.beam is not None:
            b.beam.damping_ratio = np.zeros(b.beam.n_modes)
    if not gravity:
        model.gravity_m_s2 = np.zeros(3)
    return model


def release(plant, rng: np.random.Generator, eta_scale: float = 0.0) -> None:
    """Random joint rates (rotors follow their links), the links undeformed or (eta_scale) slightly deformed:
    a plant's (pos, vel, km, layout) set in place."""
    lay = plant.layout
    nj = lay.n_joints
    plant.vel[:nj] = rng.normal(size=nj)
    plant.vel[nj:] = 0.0
    plant.pos[nj:nj + lay.n_eta] += rng.normal(size=lay.n_eta) * eta_scale
    for k in range(nj):
        if plant.km.mot[k] >= 0:
            plant.pos[lay.motor_index(k)] = plant.pos[k]
            plant.vel[lay.motor_index(k)] = plant.vel[k]


def judge(total: np.ndarray, kinetic: np.ndarray, dt: float, plan: str = "") -> EnergyError:
    """The measures of the module docstring from an energy history sampled every dt."""
    k_max = float(kinetic.max())
    t = np.arange(total.size) * dt
    duration = float(t[-1])
    if not np.all(np.isfinite(total)):
        return EnergyError(plan, math.inf, math.inf, math.inf, k_max, duration)
    window = min(1.0, duration / 2)
    first, last = total[t < window].mean(), total[t > duration - window].mean()
    slope = np.polyfit(t, total, 1)[0]
    return EnergyError(plan, float(np.abs(total - total[0]).max() / k_max), float((last - first) / k_max),
                       float(slope * duration / k_max), k_max, duration)


def history(run: TrialRun, duration: float) -> tuple[np.ndarray, np.ndarray]:
    """(total, kinetic) energy after every outer step of `run` over `duration`, the initial state first;
    a run that diverges is judged an infinite error from there on."""
    n = int(round(duration / run.dt))
    total, kinetic = np.empty(n + 1), np.empty(n + 1)
    for i in range(n + 1):
        if i and not run.step():
            total[i:], kinetic[i:] = np.inf, kinetic[:i].max()
            break
        total[i], kinetic[i] = run.energy()
    return total, kinetic


def energy_error(model: md.Model, method: str, substeps: int, duration: float = HORIZON_S,
                 seed: int = RELEASE_SEED) -> EnergyError:
    """The module docstring's measures for `model` made undamped, stepped with `method` x `substeps`."""
    run = TrialRun(assemble(undamped(model)), method, substeps)
    release(run, np.random.default_rng(seed))
    total, kinetic = history(run, duration)
    h = run.dt / substeps
    return judge(total, kinetic, run.dt, f"{method}, {substeps} substep(s) of {h * 1e6:.1f} us per "
                                         f"{run.dt * 1e3:g} ms step")
