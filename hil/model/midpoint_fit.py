"""Blocks of the fitted implicit midpoint scheme (hil.kernels.fitted_midpoint) for one substep h.

Per flexible body k, B_k is a function of the body's modal stiffness K_k and its apparent modal mass
Mhat_k = [(M^-1)_kk]^-1 (the inverse of body k's block of the inverse mass matrix over the free
coordinates, at the plan's state): with K_k V = Mhat_k V diag(omega^2) and V^T Mhat_k V = I,

    B_k = V diag(beta(omega h)) V^T Mhat_k

Mhat_k is the mass the body's modes meet when the rest of the arm moves freely with them (rather than
held still, M_kk); a body's modes that do not couple with other bodies' modes are exact for the scheme.
K_k B_k is symmetric, as the articulated-body solve needs. Modes with omega h above THETA_FIT keep the
midpoint rule (B = I/4), as does every mode whose fit would break the linear stability condition
M + h^2 K (B - I/4) > 0 over all modal coordinates (checked with a margin, stiffest mode first).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hil.model.assembly import Assembled
from hil.model.linearize import free_coordinates, mass_matrix_at
from hil.kernels.layout import FIT_B, FIT_C, N_FIT

THETA_FIT = 2.0            # omega h up to which a mode's coefficient is fitted
STABILITY_MARGIN = 0.2     # smallest eigenvalue of (Mhat + h^2 K (B - I/4), Mhat) the fit keeps


def beta_fitted(theta: np.ndarray) -> np.ndarray:
    """beta(theta) = (theta^2/2 - 1 + cos theta) / (theta^2 (1 - cos theta)), with which the midpoint step
    of x'' = -omega^2 x has cos(omega_discrete h) = cos theta (below theta = 0.1, where the closed form
    cancels, its series 1/12 + theta^2/240 + theta^4/6048 + theta^6/172800)."""
    th = np.asarray(theta, float)
    t2 = th * th
    small = th < 0.1
    s = np.where(small, 1.0, th)
    closed = (0.5 * s * s - 1.0 + np.cos(s)) / (s * s * (1.0 - np.cos(s)))
    return np.where(small, 1.0 / 12.0 + t2 / 240.0 + t2 * t2 / 6048.0 + t2 ** 3 / 172800.0, closed)


@dataclass
class MidpointFit:
    blocks: np.ndarray         # (N_FIT, n_bodies, NM, NM): KernelModel.fitted
    theta: list[np.ndarray]    # per body: omega h of its apparent modes (ascending)
    fitted: list[np.ndarray]   # per body: which of them are fitted (the others keep B = 1/4)
    margin: float              # smallest eigenvalue of (Mhat + h^2 K (B - I/4), Mhat) over the modal coordinates


def fit(asm: Assembled, pos: np.ndarray, h: float, theta_fit: float = THETA_FIT) -> MidpointFit:
    """The scheme's blocks for substep h, the apparent masses taken at pos."""
    km = asm.km
    bases, omegas, Mhat_modes = apparent_bases(asm, pos)
    thetas = [om * h for om in omegas]
    fitted = [th < theta_fit for th in thetas]
    while True:
        blocks = np.zeros((N_FIT,) + km.Kmod.shape)
        for k, basis in enumerate(bases):
            if basis is not None:
                n = basis[0].shape[0]
                beta = np.where(fitted[k], beta_fitted(thetas[k]), 0.25)
                blocks[FIT_B, k, :n, :n] = basis[0] @ np.diag(beta) @ basis[1]
        implicit_blocks(km, blocks, h)
        margin = _stability_margin(asm, blocks, Mhat_modes, h)
        if margin >= STABILITY_MARGIN or not any(f.any() for f in fitted):
            return MidpointFit(blocks, thetas, fitted, margin)
        k, j = max(((k, j) for k, f in enumerate(fitted) for j in np.nonzero(f)[0]),
                   key=lambda kj: thetas[kj[0]][kj[1]])
        fitted[k][j] = False


def implicit_blocks(km, blocks: np.ndarray, h: float) -> None:
    """blocks[FIT_C] = h^2 K B per body from the kernel's current K (a stiffness fault scales it in
    place); K B is symmetric up to rounding, symmetrised here. (The damping's h/2 D the step adds itself.)"""
    for k in range(km.Kmod.shape[0]):
        n = int(km.nm[k])
        KB = km.Kmod[k, :n, :n] @ blocks[FIT_B, k, :n, :n]
        blocks[FIT_C, k, :n, :n] = 0.5 * h * h * (KB + KB.T)


def apparent_bases(asm: Assembled, pos: np.ndarray) -> tuple[list, list[np.ndarray], np.ndarray]:
    """Per body (V, V^T Mhat_k) of (K_k, Mhat_k) at pos (None for a rigid body) and its omegas, and the
    apparent mass of all modal coordinates together, [(M^-1)_mm]^-1 (joints and rotors free)."""
    km, lay = asm.km, asm.layout
    M = mass_matrix_at(asm, pos)
    free = free_coordinates(asm)
    Minv = np.zeros_like(M)
    Minv[np.ix_(free, free)] = np.linalg.inv(M[np.ix_(free, free)])
    bases, omegas = [], []
    for k in range(lay.n_joints):
        n = int(km.nm[k])
        if n == 0:
            bases.append(None)
            omegas.append(np.zeros(0))
            continue
        idx = lay.eta_index(k, 0) + np.arange(n)
        Mhat = np.linalg.inv(Minv[np.ix_(idx, idx)])
        lam, V = generalized_eigh(km.Kmod[k, :n, :n], Mhat)
        bases.append((V, V.T @ Mhat))
        omegas.append(np.sqrt(np.maximum(lam, 0.0)))
    modal = lay.n_joints + np.arange(lay.n_eta)
    Mhat_modes = np.linalg.inv(Minv[np.ix_(modal, modal)]) if modal.size else np.zeros((0, 0))
    return bases, omegas, Mhat_modes


def _stability_margin(asm: Assembled, blocks: np.ndarray, Mhat: np.ndarray, h: float) -> float:
    """Smallest eigenvalue of (Mhat + h^2 K (B - I/4), Mhat) over all modal coordinates."""
    if Mhat.size == 0:
        return 1.0
    km, lay = asm.km, asm.layout
    G = np.zeros_like(Mhat)
    for k in range(lay.n_joints):
        n = int(km.nm[k])
        i = lay.mode_offsets[k]
        G[i:i + n, i:i + n] = h * h * km.Kmod[k, :n, :n] @ (blocks[FIT_B, k, :n, :n] - 0.25 * np.eye(n))
    lam, _ = generalized_eigh(Mhat + 0.5 * (G + G.T), Mhat)
    return float(lam.min())


def generalized_eigh(K: np.ndarray, M: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs of K x = lambda M x (M SPD, K symmetric), ascending, M-orthonormal vectors."""
    L = np.linalg.cholesky(M)
    Li = np.linalg.inv(L)
    lam, W = np.linalg.eigh(Li @ K @ Li.T)
    return lam, Li.T @ W
