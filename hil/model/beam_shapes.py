"""Beam theory behind the modal precomputation: characteristic roots and mode shapes (numpy only).

Roots of the clamped-free, clamped-with-tip-body (seed 001) and torsion/axial characteristic
equations; shapes in a cancellation-free exponential-trigonometric basis, or cubic splines
through user-tabulated values; Gauss-Legendre rules exact for products of those shapes.
``hil.model.modal`` assembles them into a beam's modal data.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

from config_schema import UserError

_SCAN_STEP = 0.01          # root bracketing grid in lam = beta L
_GAUSS_PER_PIECE = 4       # exact for the degree-6 products of cubic spline pieces
END_TOL = 1e-9             # relative tolerance on tabulated end points and phi(0)


class ModalError(UserError):
    """Inconsistent beam, tip or user-shape data, or a characteristic root not found."""


# --------------------------------------------------------------------------- roots


def _bisect(f: Callable[[float], float], a: float, b: float) -> float:
    """Root of scalar ``f`` in [a, b] (sign change assumed), bisected to adjacent floats."""
    fa = f(a)
    if fa == 0.0:
        return a
    while True:
        m = 0.5 * (a + b)
        if m <= a or m >= b:
            return m
        fm = f(m)
        if fm == 0.0:
            return m
        if (fm > 0.0) == (fa > 0.0):
            a, fa = m, fm
        else:
            b = m


def _bending_characteristic(lam, mu: float, j: float, xp=np) -> np.ndarray:
    """Bending characteristic function with tip mass and rotary inertia, divided by cosh(lam).

    Undivided: 1 + cos cosh + mu lam (cos sinh - sin cosh) - j lam^3 (cosh sin + sinh cos)
    + mu j lam^4 (1 - cos cosh). It follows from EI w''(L) = +J omega^2 w'(L) and
    EI w'''(L) = -M omega^2 w(L) (stationary Lagrangian; the tip body resists both the
    slope and the deflection). Dividing by cosh keeps it O(lam^4) for large lam. ``xp``: numpy for
    arrays, math for one float (the bisection's many calls).
    """
    e = xp.exp(-lam)
    sech = 2.0 * e / (1.0 + e * e)
    tanh = xp.tanh(lam)
    c, s = xp.cos(lam), xp.sin(lam)
    return (sech + c + mu * lam * (c * tanh - s) - j * lam ** 3 * (s + tanh * c)
            + mu * j * lam ** 4 * (sech - c))


def clamped_mass_bending_roots(n: int, mu: float, j: float) -> np.ndarray:
    """First ``n`` roots lam = beta L of the bending characteristic equation with a tip body.

    ``mu = M / (rho A L)``, ``j = J / (rho A L^3)`` (seed 001). A tip body only adds mass,
    so each root lies below the matching clamped-free root (< (n - 1/2) pi + 1): the
    function is sampled on a fine grid up to there and every sign change is bisected.
    """
    if n < 0 or mu < 0.0 or j < 0.0 or not np.isfinite(mu + j):
        raise ModalError(f"bending roots need n >= 0, finite mu >= 0, j >= 0 (got {n}, {mu}, {j})")
    if n == 0:
        return np.zeros(0)
    grid = np.arange(_SCAN_STEP, (n - 0.5) * np.pi + 1.0 + _SCAN_STEP, _SCAN_STEP)
    g = _bending_characteristic(grid, mu, j)
    sign = np.sign(g)
    brackets = np.nonzero(sign[:-1] * sign[1:] <= 0.0)[0]
    roots: list[float] = []
    for i in brackets:   # a root exactly on a grid point closes two brackets: keep it once
        root = _bisect(lambda x: _bending_characteristic(x, mu, j, math), float(grid[i]), float(grid[i + 1]))
        if not roots or root > roots[-1] + 0.5 * _SCAN_STEP:
            roots.append(root)
    if len(roots) < n:
        raise ModalError(f"found only {len(roots)} of {n} bending roots for mu={mu}, j={j}")
    return np.array(roots[:n])


def clamped_free_roots(n: int) -> np.ndarray:
    """First ``n`` roots beta_n L of 1 + cos cosh = 0 (1.8751, 4.6941, 7.8548, ...)."""
    return clamped_mass_bending_roots(n, 0.0, 0.0)


def torsion_roots(n: int, ratio: float) -> np.ndarray:
    """First ``n`` roots of lam tan(lam) = ratio (torsion or axial modes with a tip body).

    ``ratio`` is rho Ip L / J_t (torsion) or rho A L / M (axial); ``inf`` (no tip body)
    gives the clamped-free roots (2k - 1) pi / 2 exactly. Root k lies in
    ((k - 1) pi, (k - 1/2) pi], where cos(lam) - (lam / ratio) sin(lam) changes sign.
    """
    if n < 0 or not ratio > 0.0:
        raise ModalError(f"torsion/axial roots need n >= 0 and ratio > 0 (got {n}, {ratio})")
    k = np.arange(1, n + 1)
    if np.isinf(ratio):
        return (2 * k - 1) * np.pi / 2.0
    inv = 1.0 / ratio
    return np.array([_bisect(lambda x: np.cos(x) - inv * x * np.sin(x),
                             (i - 1) * np.pi, (i - 0.5) * np.pi) for i in k])


def bending_frequency_hz(beta_L, L: float, EI: float, rho_A: float) -> np.ndarray:
    """Euler-Bernoulli bending frequency beta_L^2 / (2 pi L^2) sqrt(EI / rho A) [Hz]."""
    return np.asarray(beta_L, dtype=float) ** 2 / (2.0 * np.pi * L ** 2) * np.sqrt(EI / rho_A)


def wave_frequency_hz(lam: np.ndarray, L: float, stiffness: float, inertia: float) -> np.ndarray:
    """Torsion/axial frequency lam / (2 pi L) sqrt(stiffness / inertia per length) [Hz]."""
    return lam / (2.0 * np.pi * L) * np.sqrt(stiffness / inertia)


# --------------------------------------------------------------------------- shapes


class ExpTrigShapes:
    """Shapes c0 e^{beta (x - L)} + c1 e^{-beta x} + c2 cos(beta x) + c3 sin(beta x), one row per mode.

    Both exponentials are <= 1 on [0, L], so no cosh - sinh cancellation occurs at large
    beta x. Torsion and axial sines are the case c = (0, 0, 0, 1 / sin lam).
    """

    def __init__(self, lam: np.ndarray, coef: np.ndarray, L: float, n_gauss: int):
        self.n = len(lam)
        self.beta = np.asarray(lam, dtype=float) / L
        self.coef = coef
        self.L = L
        self.n_gauss = n_gauss

    def d(self, x, k: int) -> np.ndarray:
        """k-th x-derivative (k = 0..3) at points ``x``, shape (n_modes, len(x))."""
        x = np.atleast_1d(np.asarray(x, dtype=float))[None, :]
        b = self.beta[:, None]
        bx = b * x
        cos, sin = np.cos(bx), np.sin(bx)
        trig_c, trig_s = ((cos, sin), (-sin, cos), (-cos, -sin), (sin, -cos))[k]
        c = self.coef
        return b ** k * (c[:, 0:1] * np.exp(b * (x - self.L)) + (-1) ** k * c[:, 1:2] * np.exp(-bx)
                         + c[:, 2:3] * trig_c + c[:, 3:4] * trig_s)

    def rule(self, b: float) -> tuple[np.ndarray, np.ndarray]:
        """Gauss-Legendre points and weights on [0, b] for products of these shapes."""
        return gauss_rule(self.n_gauss, 0.0, b)


class SplineShapes:
    """Piecewise cubic shapes a + b t + c t^2 + d t^3 (t = x - knot), one row per mode."""

    def __init__(self, knots: np.ndarray, poly: np.ndarray):
        self.n = poly.shape[0]
        self.knots = knots
        self.poly = poly            # (n_modes, n_pieces, 4)

    def d(self, x, k: int) -> np.ndarray:
        """k-th x-derivative (k = 0..3) at points ``x``, shape (n_modes, len(x))."""
        x = np.atleast_1d(np.asarray(x, dtype=float))
        piece = np.clip(np.searchsorted(self.knots, x, side="right") - 1, 0, len(self.knots) - 2)
        t = x - self.knots[piece]
        p = self.poly[:, piece, :]
        powers = np.stack([t ** 0, t, t ** 2, t ** 3])
        factors = np.array([[1, 1, 1, 1], [0, 1, 2, 3], [0, 0, 2, 6], [0, 0, 0, 6]])[k]
        out = np.zeros((self.n, len(x)))
        for i in range(k, 4):
            out += factors[i] * p[:, :, i] * powers[i - k]
        return out

    def rule(self, b: float) -> tuple[np.ndarray, np.ndarray]:
        """Composite Gauss on [0, b] split at the knots (exact for products of pieces)."""
        edges = np.append(self.knots[self.knots < b], b)
        rules = [gauss_rule(_GAUSS_PER_PIECE, lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]
        if not rules:
            return np.zeros(0), np.zeros(0)
        return np.concatenate([r[0] for r in rules]), np.concatenate([r[1] for r in rules])


@functools.lru_cache(maxsize=None)
def _legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """n-point Gauss-Legendre nodes and weights on [-1, 1] (computed once per n: every assembly asks)."""
    t, w = np.polynomial.legendre.leggauss(n)
    t.flags.writeable = w.flags.writeable = False
    return t, w


def gauss_rule(n: int, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """n-point Gauss-Legendre rule on [a, b]."""
    t, w = _legendre(n)
    return a + 0.5 * (b - a) * (t + 1.0), 0.5 * (b - a) * w


def _clamped_free_coef(lam: float) -> np.ndarray:
    """cosh - cos - sigma (sinh - sin) in the exponential basis, sigma = (cosh + cos)/(sinh + sin).

    With E = e^{-lam}: sigma = (1 + E^2 + 2 cos E) / (1 - E^2 + 2 sin E) and the e^{beta x}
    weight (1 - sigma)/2 e^{lam} = (sin - cos - E) / (1 - E^2 + 2 sin E), free of cancellation.
    """
    E, c, s = np.exp(-lam), np.cos(lam), np.sin(lam)
    den = 1.0 - E * E + 2.0 * s * E
    sigma = (1.0 + E * E + 2.0 * c * E) / den
    return np.array([(s - c - E) / den, 0.5 * (1.0 + sigma), -1.0, sigma])


def _clamped_mass_coef(lam: float, mu: float, j: float) -> np.ndarray:
    """Null vector of the boundary conditions in the exponential basis (seed 001 tip body).

    Rows, derivatives divided by beta^k: w(0) = 0, w'(0) = 0 and, at x = L,
    w'' - j lam^3 w' = 0 (EI w'' = +J omega^2 w') and w''' + mu lam w = 0
    (EI w''' = -M omega^2 w). Rows are scaled to unit max norm before the SVD.
    """
    E, c, s = np.exp(-lam), np.cos(lam), np.sin(lam)
    w0 = np.array([1.0, E, c, s])
    w1 = np.array([1.0, -E, -s, c])
    w2 = np.array([1.0, E, -c, -s])
    w3 = np.array([1.0, -E, s, -c])
    rows = np.array([[E, 1.0, 1.0, 0.0], [E, -1.0, 0.0, 1.0],
                     w2 - j * lam ** 3 * w1, w3 + mu * lam * w0])
    rows /= np.abs(rows).max(axis=1, keepdims=True)
    return np.linalg.svd(rows)[2][-1]


def bending_shapes(lam: np.ndarray, mu: float, j: float, L: float, n_gauss: int) -> ExpTrigShapes:
    """Bending shapes for roots ``lam``, normalised to phi(L) = 1 (clamped-free if mu = j = 0)."""
    if mu == 0.0 and j == 0.0:
        coef = np.array([_clamped_free_coef(x) for x in lam]).reshape(-1, 4)
    else:
        coef = np.array([_clamped_mass_coef(x, mu, j) for x in lam]).reshape(-1, 4)
    shapes = ExpTrigShapes(lam, coef, L, n_gauss)
    _normalise_tip(shapes, L, "bending")
    return shapes


def sine_shapes(lam: np.ndarray, L: float, n_gauss: int) -> ExpTrigShapes:
    """Torsion/axial shapes sin(lam x / L) / sin(lam)."""
    coef = np.zeros((len(lam), 4))
    coef[:, 3] = 1.0 / np.sin(lam)
    return ExpTrigShapes(lam, coef, L, n_gauss)


def _normalise_tip(shapes: ExpTrigShapes, L: float, what: str) -> None:
    """Scale each shape to a tip value of 1; refuse shapes with (almost) no tip motion."""
    grid = np.linspace(0.0, L, 201)
    tip = shapes.d(L, 0)[:, 0]
    peak = np.abs(shapes.d(grid, 0)).max(axis=1)
    if np.any(np.abs(tip) < 1e-8 * peak):
        raise ModalError(f"a {what} mode has no tip motion and cannot be tip-normalised")
    shapes.coef = shapes.coef / tip[:, None]


# --------------------------------------------------------------------------- user shapes


def _spline_second_derivatives(x: np.ndarray, y: np.ndarray, zero_slope_start: bool) -> np.ndarray:
    """Knot second derivatives of cubic splines through rows of ``y``, natural at x[-1].

    At x[0] either the slope is zero (bending: clamped) or the spline is natural
    (torsion/axial: the field equation gives psi''(0) proportional to psi(0) = 0).
    """
    p = len(x)
    h = np.diff(x)
    A = np.zeros((p, p))
    rhs = np.zeros((p, y.shape[0]))
    slope = np.diff(y, axis=1) / h
    for i in range(1, p - 1):
        A[i, i - 1:i + 2] = h[i - 1], 2.0 * (h[i - 1] + h[i]), h[i]
        rhs[i] = 6.0 * (slope[:, i] - slope[:, i - 1])
    if zero_slope_start:
        A[0, :2] = 2.0 * h[0], h[0]
        rhs[0] = 6.0 * slope[:, 0]
    else:
        A[0, 0] = 1.0
    A[-1, -1] = 1.0
    return np.linalg.solve(A, rhs).T


def user_shapes(kind: str, x: np.ndarray, values: np.ndarray, n: int, L: float) -> SplineShapes:
    """Validate one tabulated kind and build its tip-normalised cubic spline shapes."""
    x = np.asarray(x, dtype=float)
    y = np.atleast_2d(np.asarray(values, dtype=float))
    if x.ndim != 1 or len(x) < 2 or y.shape[1] != len(x):
        raise ModalError(f"user shapes '{kind}': need x (p >= 2,) and values (n, p); got {x.shape}, {y.shape}")
    if y.shape[0] != n:
        raise ModalError(f"user shapes '{kind}': {y.shape[0]} shapes given, beam has n_{kind} = {n}")
    if np.any(np.diff(x) <= 0.0) or abs(x[0]) > END_TOL * L or abs(x[-1] - L) > END_TOL * L:
        raise ModalError(f"user shapes '{kind}': x must increase strictly from 0 to L = {L}")
    if not np.all(np.isfinite(y)):
        raise ModalError(f"user shapes '{kind}': values must be finite")
    peak = np.abs(y).max(axis=1)
    if np.any(np.abs(y[:, 0]) > END_TOL * peak):
        raise ModalError(f"user shapes '{kind}': phi(0) must be 0 at the clamp")
    if np.any(np.abs(y[:, -1]) < 1e-8 * peak):
        raise ModalError(f"user shapes '{kind}': a shape has zero tip value, cannot normalise")
    knots = x.copy()
    knots[0], knots[-1] = 0.0, L
    y = y / y[:, -1:]
    y[:, 0] = 0.0
    m2 = _spline_second_derivatives(knots, y, kind.startswith("bending"))
    h = np.diff(knots)
    poly = np.stack([y[:, :-1],
                     np.diff(y, axis=1) / h - h * (2.0 * m2[:, :-1] + m2[:, 1:]) / 6.0,
                     0.5 * m2[:, :-1],
                     np.diff(m2, axis=1) / (6.0 * h)], axis=-1)
    return SplineShapes(knots, poly)


# --------------------------------------------------------------------------- result
