"""How far to trust a fit's values: standard errors, 95 % intervals and correlations from the
Jacobian at the optimum (hil.fit.fit's module docstring, "Trust")."""
from __future__ import annotations

import math

import numpy as np

CORRELATED = 0.95     # a pair correlated beyond this is flagged: the recordings cannot tell them apart


def trust(J: np.ndarray, f: np.ndarray, span: np.ndarray, names: list[str]) -> tuple:
    """Standard errors (parameter units), correlation matrix and unidentifiable pairs (hil.fit.fit: Trust)."""
    n, p = J.shape
    s2 = float(f @ f) / max(n - p, 1) * correlation_time(f)
    JtJ = J.T @ J
    try:
        cov_u = s2 * np.linalg.inv(JtJ) if np.linalg.cond(JtJ) < 1e14 else None
    except np.linalg.LinAlgError:
        cov_u = None
    if cov_u is None:
        blind = [names[i] for i in range(p) if not np.any(J[:, i])] or names
        return {n_: math.inf for n_ in names}, np.full((p, p), np.nan), [[b] for b in blind]
    se = np.sqrt(np.clip(np.diag(cov_u), 0.0, None)) * span
    d = np.sqrt(np.clip(np.diag(cov_u), 1e-300, None))
    corr = cov_u / np.outer(d, d)
    pairs = [[names[i], names[j]] for i in range(p) for j in range(i + 1, p) if abs(corr[i, j]) > CORRELATED]
    return dict(zip(names, se.tolist())), corr, pairs


def correlation_time(f: np.ndarray) -> float:
    """How many samples of the residual count as one independent one: 1 + 2 sum of its autocorrelation
    over the lags up to the first that is not positive (Geyer's initial positive sequence), at least 1."""
    x = f - f.mean()
    m = 1 << int(2 * len(x) - 1).bit_length()
    acf = np.fft.irfft(np.abs(np.fft.rfft(x, m)) ** 2, m)[:len(x)]
    if not acf[0] > 0:
        return 1.0
    rho = acf[1:] / acf[0]
    stop = np.flatnonzero(rho <= 0.0)
    return max(1.0, 1.0 + 2.0 * float(rho[:stop[0] if stop.size else len(rho)].sum()))
