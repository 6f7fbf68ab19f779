"""Modal frequencies and damping ratios identified from measured free vibrations: the eigensystem
realisation algorithm (ERA) on the measured channels, with a stabilisation diagram.

A free decay of a linear system sampled every dt is y_k = C A^k x_0: its block Hankel matrix

    H = [y_0 y_1 ... y_{c-1}; y_1 y_2 ... y_c; ...; y_{r-1} ... y_{r+c-2}]   (r block rows of m channels)

has rank n (the system's order) and factors as an observability matrix times states, so the
leading n left singular vectors U_n span the observability matrix O = [C; C A; ...; C A^{r-1}],
whose shift invariance gives A (least squares on U_n's block rows 2..r against 1..r-1). The
eigenvalues z of A are the discrete poles; s = ln(z) / dt the continuous ones, with damped
frequency Im(s) / 2 pi and damping ratio -Re(s) / |s| (Juang and Pappa 1985; see References).

Noise raises the Hankel matrix's rank: poles that belong to the structure come back at the same
frequency and damping whatever order is fitted, noise poles do not. A pole is kept when it is
found at each of STABLE_ORDERS consecutive orders up to the largest within FREQUENCY_STABLE and
DAMPING_STABLE, and when its modal contribution (the least-squares fit of every kept pole's
complex exponential to the data) carries at least `min_share` of the response's energy.
Channels are centred and scaled to unit variance first, so that rates [rad/s], accelerations
[m/s^2] and strains weigh alike.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from config_schema import UserError

FREQUENCY_STABLE = 0.005      # relative change of a pole's frequency between orders
DAMPING_STABLE = 0.2          # relative change of its damping ratio between orders
STABLE_ORDERS = 4             # orders a pole must persist over (each step of 2)
MAX_ORDER = 200               # the largest model order a user may ask for
MIN_SAMPLES = 200             # the shortest window, in samples


@dataclass
class IdentifiedMode:
    frequency_hz: float       # damped natural frequency
    damping_ratio: float
    share: float              # fraction of the window's (normalised) response energy the mode carries

    def as_dict(self) -> dict:
        return asdict(self)


def _poles(U: np.ndarray, m: int, n: int, dt: float) -> np.ndarray:
    """Continuous poles (upper half plane) of the order-n realisation from U's leading columns."""
    Un = U[:, :n]
    A = np.linalg.lstsq(Un[:-m], Un[m:], rcond=None)[0]
    z = np.linalg.eigvals(A).astype(complex)
    z = z[(np.abs(z) > 0) & (z.imag > 0)]
    return np.log(z) / dt


def _stable(s: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """For each pole of s, whether previous has one at the same frequency and damping."""
    if len(previous) == 0:
        return np.zeros(len(s), bool)
    f, zeta = np.abs(s), -s.real / np.abs(s)
    fp, zp = np.abs(previous), -previous.real / np.abs(previous)
    near_f = np.abs(f[:, None] / fp[None, :] - 1.0) < FREQUENCY_STABLE
    near_z = np.abs(zeta[:, None] - zp[None, :]) <= DAMPING_STABLE * np.maximum(np.abs(zeta[:, None]), 1e-4)
    return np.any(near_f & near_z, axis=1)


def _shares(y: np.ndarray, s: np.ndarray, dt: float) -> np.ndarray:
    """Energy share of each pole's (and its conjugate's) least-squares contribution to y."""
    k = np.arange(len(y))[:, None]
    z = np.exp(s * dt)
    V = np.hstack([z[None, :] ** k, np.conj(z)[None, :] ** k])          # N x 2p
    amplitudes = np.linalg.lstsq(V, y.astype(complex), rcond=None)[0]     # 2p x m
    p = len(s)
    total = float(np.sum(y ** 2))
    out = np.empty(p)
    for i in range(p):
        part = V[:, [i, p + i]] @ amplitudes[[i, p + i]]
        out[i] = float(np.sum(np.abs(part.real) ** 2)) / total
    return out


def identify_modes(y: np.ndarray, dt: float, order: int = 40, min_hz: float = 0.5, max_hz: float | None = None,
                   min_share: float = 0.005, block_rows: int | None = None) -> list[IdentifiedMode]:
    """The modes of the free response y (samples x channels, every dt s): ascending in frequency.

    `order`: the largest model order fitted (twice the most modes sought, noise included);
    `min_hz`/`max_hz`: the band searched (default up to 0.8 of the Nyquist frequency);
    `min_share`: the least energy share of a mode reported. UserError for a window too short,
    non-finite samples or channels without variation."""
    y = np.asarray(y, float)
    if y.ndim == 1:
        y = y[:, None]
    n_samples, _ = y.shape
    if not 2 <= order <= MAX_ORDER or order % 2:
        raise UserError(f"model order {order}: expected an even number from 2 to {MAX_ORDER}")
    if n_samples < MIN_SAMPLES:
        raise UserError(f"{n_samples} samples: modal identification needs at least {MIN_SAMPLES} in its window")
    if not np.all(np.isfinite(y)):
        raise UserError("the window holds NaN or infinite samples; choose a window without them")
    y = y - y.mean(axis=0)
    spread = y.std(axis=0)
    if not np.any(spread > 0):
        raise UserError("every channel is constant over the window: nothing vibrates")
    y = y[:, spread > 0] / spread[spread > 0]
    m = y.shape[1]
    rows = block_rows or int(min(n_samples // 3, max(-(-order // m) + 2, 2000 // m)))
    if rows * m <= order or n_samples - rows < order:
        raise UserError(f"{n_samples} samples of {m} channel(s) are too few for model order {order}")
    cols = n_samples - rows + 1
    H = np.concatenate([y[i:i + cols].T for i in range(rows)], axis=0)
    U = np.linalg.svd(H, full_matrices=False)[0]
    nyquist = 0.5 / dt
    top = 0.8 * nyquist if max_hz is None else min(max_hz, 0.8 * nyquist)
    history = [_poles(U, m, n, dt) for n in range(max(2, order - 2 * STABLE_ORDERS), order + 1, 2)]
    s = history[-1]
    keep = np.ones(len(s), bool)
    for previous in history[-2::-1][:STABLE_ORDERS]:
        keep &= _stable(s, previous)
    f, zeta = s.imag / (2 * np.pi), -s.real / np.abs(s)
    keep &= (f >= min_hz) & (f <= top) & (zeta > 0) & (zeta < 0.5)
    s = s[keep]
    if len(s) == 0:
        return []
    shares = _shares(y, s, dt)
    modes = [IdentifiedMode(float(si.imag / (2 * np.pi)), float(-si.real / abs(si)), float(sh))
             for si, sh in zip(s, shares) if sh >= min_share]
    return sorted(modes, key=lambda md: md.frequency_hz)
