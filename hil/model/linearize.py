"""Small-motion analysis: component-mode and whole-arm frequencies, integrator substeps."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from hil.model.assembly import Assembled, make_work
from hil.kernels.outputs import evaluate
from hil.kernels import oracle
from hil.kernels.layout import JOINT_PRESCRIBED, JP_BACKLASH, JP_COUL_VS, JP_STRIBECK

RK4_STABILITY = 2.0 * math.sqrt(2.0)   # |omega h| limit of classical RK4 on the imaginary axis
RK4_REAL_STABILITY = 2.785             # |lambda h| limit of classical RK4 on the real axis (a damper)
MIDPOINT_STABILITY = 2.0               # explicit midpoint predictor, damped joint springs


def _generalized_eig(K: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Eigenvalues lambda of K x = lambda M x (M SPD), ascending."""
    L = np.linalg.cholesky(M)
    Li = np.linalg.inv(L)
    A = Li @ K @ Li.T
    return np.sort(np.linalg.eigvals(0.5 * (A + A.T)).real)


def _hz(lam: np.ndarray) -> np.ndarray:
    """Frequencies in Hz of eigenvalues omega^2; an unstable (negative) one is reported negative."""
    return np.sign(lam) * np.sqrt(np.abs(lam)) / (2.0 * np.pi)


def component_frequencies_hz(asm: Assembled) -> dict[str, np.ndarray]:
    """Per flexible body: the clamped component-mode frequencies of the body with everything it
    carries itself (beam material and attachments), its joint locked, children removed."""
    km = asm.km
    out = {}
    for k, name in enumerate(asm.layout.body_names):
        n = int(km.nm[k])
        if n == 0:
            continue
        a, b = km.node_off[k], km.node_off[k + 1]
        M = sum(km.nd_m[j] * km.nd_G[j, :, :n].T @ km.nd_G[j, :, :n] for j in range(a, b))
        M = M + km.LJL[k, :n, :n]
        out[name] = _hz(_generalized_eig(km.Kmod[k, :n, :n], M))
    return out


def static_forces(asm: Assembled, pos: np.ndarray, w=None) -> np.ndarray:
    """Generalized forces h(q) at rest with zero drive torque: gravity, elastic and spring forces
    (seed 002 eq. 4.2 with zero rates and accelerations, M qdd = tau - h). h[joint] is the drive
    torque that holds the arm still at pos; h[modes] = 0 is the static deflection."""
    km = asm.km
    w = make_work(km) if w is None else w
    h = np.zeros(asm.layout.nq)
    oracle.rest_forces(km.mi, km.mf, w.w, pos, np.zeros(asm.layout.nq), h)
    return h


def stiffness_and_mass(asm: Assembled, pos: np.ndarray, eps: float = 1e-7) -> tuple[np.ndarray, np.ndarray]:
    """Mass matrix and tangent stiffness d(h)/dq at zero velocity and zero drive torque.

    h collects elastic, spring and gravity forces (seed 002 eq. 4.2 at rest);
    the stiffness is a central difference, so gravity stiffening/softening is included.
    """
    km = asm.km
    w = make_work(km)
    nq = asm.layout.nq
    K = np.zeros((nq, nq))
    for i in range(nq):
        dp = np.zeros(nq)
        dp[i] = eps
        K[:, i] = (static_forces(asm, pos + dp, w) - static_forces(asm, pos - dp, w)) / (2 * eps)
    return 0.5 * (K + K.T), mass_matrix_at(asm, pos, w)


def mass_matrix_at(asm: Assembled, pos: np.ndarray, w=None) -> np.ndarray:
    """The generalized mass matrix at pos (all coordinates: joints, modes, rotors)."""
    km = asm.km
    w = make_work(km) if w is None else w
    nq = asm.layout.nq
    M = np.zeros((nq, nq))
    oracle.mass_matrix_at(km.mi, km.mf, w.w, 0.0, pos, np.zeros(nq), M)
    return M


def free_coordinates(asm: Assembled) -> np.ndarray:
    """Indices of the coordinates that move under forces: torque-driven joints, modes, rotors."""
    lay, km = asm.layout, asm.km
    return np.array([i for i in range(lay.nq) if i >= lay.n_joints or km.drive[i] != JOINT_PRESCRIBED], np.int64)


@dataclass
class ArmFrequencies:
    locked_hz: np.ndarray     # joints (and prescribed joints) locked, rotors locked
    free_hz: np.ndarray       # torque-driven joints free (zero-stiffness rigid-body modes show as ~0)


def arm_frequencies_hz(asm: Assembled, pos: np.ndarray | None = None) -> ArmFrequencies:
    """Whole-arm frequencies linearised at pos (default: the initial state)."""
    pos = asm.pos0 if pos is None else pos
    K, M = stiffness_and_mass(asm, pos)
    lay = asm.layout
    km = asm.km
    modal = list(range(lay.n_joints, lay.n_joints + lay.n_eta))
    free = [k for k in range(lay.n_joints) if km.drive[k] != JOINT_PRESCRIBED] + modal
    free += [lay.motor_index(k) for k in range(lay.n_joints) if km.mot[k] >= 0]
    locked = _hz(_generalized_eig(K[np.ix_(modal, modal)], M[np.ix_(modal, modal)])) if modal else np.zeros(0)
    freed = _hz(_generalized_eig(K[np.ix_(free, free)], M[np.ix_(free, free)])) if free else np.zeros(0)
    return ArmFrequencies(locked, freed)


def spring_frequencies_hz(asm: Assembled) -> np.ndarray:
    """Highest frequency of each Spong joint: the rotor B against the link-side articulated
    inertia D (modes free, the high-frequency limit), sqrt(k (1/B + 1/D))."""
    km = asm.km
    if not np.any(km.mot >= 0):
        return np.zeros(0)
    w = make_work(km)
    nq = asm.layout.nq
    evaluate(km.mi, km.mf, w.w, 0.0, asm.pos0.copy(), np.zeros(nq), np.zeros(asm.layout.n_joints), np.zeros(nq))
    return np.array([math.sqrt(km.kspring[k] * (1 / km.mot_inertia[k] + 1 / w.D[k])) / (2 * math.pi)
                     for k in range(asm.layout.n_joints) if km.mot[k] >= 0])


def motor_inertias(km, layout, pos: np.ndarray, t: float = 0.0) -> np.ndarray:
    """Per joint, the inertia a torque on its motor coordinate meets at pos (kernel model km, its layout):
    1 / (M^-1)_kk over the free coordinates (the links' modes free: the fast response an explicitly held
    torque meets), the rotor inertia n^2 J_r of a Spong joint, M_kk of a prescribed joint."""
    nj, nq = layout.n_joints, layout.nq
    M = np.zeros((nq, nq))
    oracle.mass_matrix_at(km.mi, km.mf, make_work(km).w, t, pos, np.zeros(nq), M)
    free = np.array([i for i in range(nq) if i >= nj or km.drive[i] != JOINT_PRESCRIBED], np.int64)
    inv_diag = np.zeros(nq)
    if free.size:
        inv_diag[free] = np.diag(np.linalg.inv(M[np.ix_(free, free)]))
    out = np.zeros(nj)
    for k in range(nj):
        if km.mot[k] >= 0:
            out[k] = km.mot_inertia[k]
        elif km.drive[k] == JOINT_PRESCRIBED:
            out[k] = M[k, k]
        else:
            out[k] = 1.0 / inv_diag[k]
    return out


def friction_rates(asm: Assembled) -> np.ndarray:
    """Per joint, the rate [1/s] at which its friction damps the motor coordinate at rest: the slope
    c + (F_c + F_st) / v_s over the inertia a torque there meets (motor_inertias); 0 for a prescribed
    joint. An explicit integrator must resolve it (hil.kernels.joints: the midpoint schemes take the
    friction implicitly)."""
    km = asm.km
    slope = km.viscous + (km.coulomb + km.jpar[:, JP_STRIBECK]) / km.jpar[:, JP_COUL_VS]
    rates = slope / motor_inertias(km, asm.layout, asm.pos0)
    return np.where(km.drive[: asm.layout.n_joints] == JOINT_PRESCRIBED, 0.0, rates)


@dataclass(frozen=True)
class StepFrequencies:
    """What the integrator's substeps must resolve: the highest whole-arm frequency ``max_hz`` and the
    highest frequency the IMEX scheme treats explicitly ``explicit_hz`` (the joint springs), in Hz, and
    the stiffest joint friction's rate at rest ``friction_rate_s`` [1/s] (explicit methods only)."""

    max_hz: float
    explicit_hz: float
    friction_rate_s: float = 0.0

    def substeps(self, method: str, dt: float, safety: float) -> int:
        """Substeps per outer step of dt for ``method`` (substeps_for)."""
        return substeps_for(method, self.max_hz, self.explicit_hz, dt, safety, self.friction_rate_s)


def step_frequencies_hz(asm: Assembled) -> StepFrequencies:
    """The frequencies the substep plan resolves, at the initial state: the one rule for the plant's
    plan (hil.dynamics.plant.plan_integrator) and for a fault that changes the model (a payload
    change). A spring inside its backlash dead band looks free at the initial state, but in contact
    it rings at its spring frequency: with backlash on any joint the highest frequency is at least
    the highest spring frequency."""
    freqs = arm_frequencies_hz(asm)
    f_max = float(max(np.max(np.abs(freqs.free_hz), initial=0.0), np.max(np.abs(freqs.locked_hz), initial=0.0)))
    f_explicit = float(max(spring_frequencies_hz(asm).max(initial=0.0), 0.0))
    if np.any(asm.km.jpar[:, JP_BACKLASH] > 0):
        f_max = max(f_max, f_explicit)
    return StepFrequencies(f_max, f_explicit, float(friction_rates(asm).max(initial=0.0)))


def substeps_for(method: str, f_max_hz: float, f_explicit_hz: float, dt: float, safety: float,
                 friction_rate_s: float = 0.0) -> int:
    """Substeps per outer step: RK4 keeps omega_max h and the joint friction's rate times h within safety x
    its stability bounds; the midpoint schemes (IMEX, fitted) only need the explicitly treated
    (joint-spring) dynamics resolved (their friction is implicit); Euler as RK4."""
    if method in ("imex_midpoint", "fitted_midpoint"):
        return max(1, math.ceil(2 * math.pi * f_explicit_hz * dt / (safety * MIDPOINT_STABILITY)))
    oscillation = 2 * math.pi * f_max_hz * dt / (safety * RK4_STABILITY)
    damping = friction_rate_s * dt / (safety * RK4_REAL_STABILITY)
    return max(1, math.ceil(max(oscillation, damping)))


def servo_modes_hz(asm: Assembled, pos: np.ndarray, kp: np.ndarray, kd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whole-arm modes linearised at rest at pos with every joint held by a PD law
    tau = -kp dq - kd dq_dot (stiffnesses [N m/rad] and dampings [N m s/rad] per joint), the
    modal damping and joint viscous friction included: damped frequencies [Hz] and damping
    ratios of the oscillatory modes, ascending in frequency. Arms with Spong joints or
    prescribed joints are not covered."""
    km = asm.km
    lay = asm.layout
    if lay.n_motors or np.any(km.drive[: lay.n_joints] == JOINT_PRESCRIBED):
        raise ValueError("servo_modes_hz: expected stiff, torque-driven joints only")
    K, M = stiffness_and_mass(asm, pos)
    nj, nq = lay.n_joints, lay.nq
    K[:nj, :nj] += np.diag(np.asarray(kp, float))
    C = np.zeros((nq, nq))
    C[:nj, :nj] = np.diag(np.asarray(kd, float) + km.viscous[:nj])
    for k in range(nj):
        a, n = nj + lay.mode_offsets[k], int(km.nm[k])
        C[a:a + n, a:a + n] = km.Dmod[k, :n, :n]
    return _damped_modes(K, M, C)


def locked_modes_hz(asm: Assembled, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Whole-arm modes linearised at rest at pos with every joint locked (held by its brake): damped
    frequencies [Hz] and damping ratios (from the modal damping) of the oscillatory modes,
    ascending in frequency."""
    K, M = stiffness_and_mass(asm, pos)
    lay, km = asm.layout, asm.km
    nj = lay.n_joints
    modal = np.arange(nj, nj + lay.n_eta)
    C = np.zeros((lay.nq, lay.nq))
    for k in range(nj):
        a, n = nj + lay.mode_offsets[k], int(km.nm[k])
        C[a:a + n, a:a + n] = km.Dmod[k, :n, :n]
    cut = np.ix_(modal, modal)
    return _damped_modes(K[cut], M[cut], C[cut])


def _damped_modes(K: np.ndarray, M: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Damped frequencies [Hz] and damping ratios of M x'' + C x' + K x = 0, ascending."""
    n = len(M)
    Minv = np.linalg.inv(M)
    A = np.block([[np.zeros((n, n)), np.eye(n)], [-Minv @ K, -Minv @ C]])
    lam = np.linalg.eigvals(A)
    lam = lam[lam.imag > 1e-9]
    lam = lam[np.argsort(lam.imag)]
    return lam.imag / (2.0 * np.pi), -lam.real / np.abs(lam)


def rest_state(asm: Assembled, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The arm at rest in its static equilibrium under gravity at the joint angles of pos, and the drive
    torques that hold it there.

    The modal coordinates take the static deflection (Newton iterations on h_modes = 0 with the
    joints held; at rest the modal rows depend neither on the drive torques nor on the rotors).
    Each joint's holding torque is then its static load h_k, gravity through the deformed arm.
    A Spong joint carries that load in its spring: the rotor stands at the link angle plus the
    deflection h_k / k, plus half the backlash in the loaded direction, and its drive holds the
    rotor with the spring torque h_k."""
    key = (asm.km.mi.tobytes(), asm.km.mf.tobytes(), np.asarray(pos, float).tobytes())
    found = _rest_states.get(key)
    if found is None:
        found = _rest_state(asm, pos)
        _rest_states.clear()        # the latest only: the plant and its plan's judge ask in turn
        _rest_states[key] = found
    return found[0].copy(), found[1].copy()


_rest_states: dict[tuple[bytes, bytes, bytes], tuple[np.ndarray, np.ndarray]] = {}


def _rest_state(asm: Assembled, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lay, km = asm.layout, asm.km
    nj = lay.n_joints
    pos = np.array(pos, float)
    modes = np.arange(nj, nj + lay.n_eta)
    rotors = [k for k in range(nj) if lay.motor_of_joint[k] >= 0]
    for k in rotors:     # springs relaxed, so that h_k below is the joint's whole load
        pos[lay.motor_index(k)] = pos[k]
    for _ in range(20):
        if modes.size == 0:
            break
        K, _ = stiffness_and_mass(asm, pos)
        d = -np.linalg.solve(K[np.ix_(modes, modes)], static_forces(asm, pos)[modes])
        pos[modes] += d
        if np.max(np.abs(d)) < 1e-13 + 1e-10 * np.max(np.abs(pos[modes])):
            break
    hold = static_forces(asm, pos)[:nj].copy()    # h = C + g - tau at tau = 0; rest needs tau = h
    for k in rotors:
        pos[lay.motor_index(k)] = pos[k] + spring_deflection(hold[k], float(km.kspring[k]),
                                                             float(km.jpar[k, JP_BACKLASH]))
    return pos, hold


def spring_deflection(torque: float, stiffness: float, backlash: float) -> float:
    """Rotor minus link angle [rad] at which a Spong spring (with a dead band of total width
    `backlash`) transmits `torque` [N m]; 0 for no torque (the middle of the band)."""
    if torque == 0.0:
        return 0.0
    return torque / stiffness + math.copysign(0.5 * backlash, torque)
