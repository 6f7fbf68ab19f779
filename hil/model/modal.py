"""Load-time modal precomputation for an Euler-Bernoulli beam (numpy only, no numba).

The beam lies along the body x axis, clamped at x = 0, free (or carrying a rigid tip
body) at x = L. Mode kinds appear in this order inside a body's mode vector:

* ``bending_y``: deflection v along +y (bending in the x-y plane, stiffness E*Iz),
* ``bending_z``: deflection w along +z (bending in the x-z plane, stiffness E*Iy),
* ``torsion``:   twist psi about +x (stiffness G*J, J = ``torsion_constant_m4``),
* ``axial``:     stretch u along +x (stiffness E*A).

Every shape is normalised to a tip value of 1 at x = L (1 m tip deflection, 1 rad tip
twist, 1 m tip stretch), so modal coordinates are physical tip amplitudes.

Kinematics of the cross-section at x for modal coordinates eta (nm,):

* translation ``Gamma(x) @ eta``: bending_y column [0, phi, 0], bending_z [0, 0, phi],
  axial [u, 0, 0], torsion 0;
* small rotation ``Lambda(x) @ eta``: bending_y [0, 0, +phi'], bending_z [0, -phi', 0],
  torsion [psi, 0, 0], axial 0;
* foreshortening (geometric stiffening, seed 003 "high-order coupling"): the axial
  position shifts by ``0.5 * eta @ S(x) @ eta`` with
  ``S[a, b] = -int_0^x phi_a' phi_b' ds`` for a, b in the same bending plane, else 0;
* curvature ``kappa(x) @ eta`` = [psi', -w'', +v''] and axial strain u'.

Mode families: ``clamped_free`` (closed-form cantilever modes), ``clamped_mass`` (tip
rigid body of mass M and inertia J_tip about the tip point, seed 001) and ``user``
(tabulated shapes, interpolated by a cubic spline).

scipy is deliberately not imported: it may be absent on the real-time target.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from hil.model.spec import MODE_FAMILIES, MODE_KINDS, Beam
from config_schema import UserError

BENDING_Y, BENDING_Z, TORSION, AXIAL = range(4)

_SCAN_STEP = 0.01          # root bracketing grid in lam = beta L
_GAUSS_PER_PIECE = 4       # exact for the degree-6 products of cubic spline pieces
_END_TOL = 1e-9            # relative tolerance on tabulated end points and phi(0)


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


def _bending_characteristic(lam, mu: float, j: float) -> np.ndarray:
    """Bending characteristic function with tip mass and rotary inertia, divided by cosh(lam).

    Undivided: 1 + cos cosh + mu lam (cos sinh - sin cosh) - j lam^3 (cosh sin + sinh cos)
    + mu j lam^4 (1 - cos cosh). It follows from EI w''(L) = +J omega^2 w'(L) and
    EI w'''(L) = -M omega^2 w(L) (stationary Lagrangian; the tip body resists both the
    slope and the deflection). Dividing by cosh keeps it O(lam^4) for large lam.
    """
    lam = np.asarray(lam, dtype=float)
    e = np.exp(-lam)
    sech = 2.0 * e / (1.0 + e * e)
    tanh = np.tanh(lam)
    c, s = np.cos(lam), np.sin(lam)
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
        root = _bisect(lambda x: float(_bending_characteristic(x, mu, j)), grid[i], grid[i + 1])
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


def _wave_frequency_hz(lam: np.ndarray, L: float, stiffness: float, inertia: float) -> np.ndarray:
    """Torsion/axial frequency lam / (2 pi L) sqrt(stiffness / inertia per length) [Hz]."""
    return lam / (2.0 * np.pi * L) * np.sqrt(stiffness / inertia)


# --------------------------------------------------------------------------- shapes


class _ExpTrigShapes:
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
        return _gauss(self.n_gauss, 0.0, b)


class _SplineShapes:
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
        rules = [_gauss(_GAUSS_PER_PIECE, lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]
        if not rules:
            return np.zeros(0), np.zeros(0)
        return np.concatenate([r[0] for r in rules]), np.concatenate([r[1] for r in rules])


@functools.lru_cache(maxsize=None)
def _legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """n-point Gauss-Legendre nodes and weights on [-1, 1] (computed once per n: every assembly asks)."""
    t, w = np.polynomial.legendre.leggauss(n)
    t.flags.writeable = w.flags.writeable = False
    return t, w


def _gauss(n: int, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
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


def _bending_shapes(lam: np.ndarray, mu: float, j: float, L: float, n_gauss: int) -> _ExpTrigShapes:
    """Bending shapes for roots ``lam``, normalised to phi(L) = 1 (clamped-free if mu = j = 0)."""
    if mu == 0.0 and j == 0.0:
        coef = np.array([_clamped_free_coef(x) for x in lam]).reshape(-1, 4)
    else:
        coef = np.array([_clamped_mass_coef(x, mu, j) for x in lam]).reshape(-1, 4)
    shapes = _ExpTrigShapes(lam, coef, L, n_gauss)
    _normalise_tip(shapes, L, "bending")
    return shapes


def _sine_shapes(lam: np.ndarray, L: float, n_gauss: int) -> _ExpTrigShapes:
    """Torsion/axial shapes sin(lam x / L) / sin(lam)."""
    coef = np.zeros((len(lam), 4))
    coef[:, 3] = 1.0 / np.sin(lam)
    return _ExpTrigShapes(lam, coef, L, n_gauss)


def _normalise_tip(shapes: _ExpTrigShapes, L: float, what: str) -> None:
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


def _user_shapes(kind: str, x: np.ndarray, values: np.ndarray, n: int, L: float) -> _SplineShapes:
    """Validate one tabulated kind and build its tip-normalised cubic spline shapes."""
    x = np.asarray(x, dtype=float)
    y = np.atleast_2d(np.asarray(values, dtype=float))
    if x.ndim != 1 or len(x) < 2 or y.shape[1] != len(x):
        raise ModalError(f"user shapes '{kind}': need x (p >= 2,) and values (n, p); got {x.shape}, {y.shape}")
    if y.shape[0] != n:
        raise ModalError(f"user shapes '{kind}': {y.shape[0]} shapes given, beam has n_{kind} = {n}")
    if np.any(np.diff(x) <= 0.0) or abs(x[0]) > _END_TOL * L or abs(x[-1] - L) > _END_TOL * L:
        raise ModalError(f"user shapes '{kind}': x must increase strictly from 0 to L = {L}")
    if not np.all(np.isfinite(y)):
        raise ModalError(f"user shapes '{kind}': values must be finite")
    peak = np.abs(y).max(axis=1)
    if np.any(np.abs(y[:, 0]) > _END_TOL * peak):
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
    return _SplineShapes(knots, poly)


# --------------------------------------------------------------------------- result


@dataclass
class BeamModes:
    """Modal data of one beam: shapes, stiffness, quadrature and reference frequencies.

    ``K`` is block diagonal by kind: E*Iz int phi''phi'' (bending_y), E*Iy int phi''phi''
    (bending_z), G*J int psi'psi' (torsion), E*A int u'u' (axial). ``x_q``, ``w_q`` are
    the Gauss-Legendre nodes/weights on [0, L] at which the beam material is lumped.
    ``analytic_frequency_hz`` is the closed-form frequency of each mode for its family
    (``user`` modes: the clamped-mass formula with the tip data given, i.e. clamped-free
    without tip data), an independent reference for eig(K, modal_mass(...)).
    """

    beam: Beam
    nm: int
    labels: list[str]
    kinds: np.ndarray
    K: np.ndarray
    x_q: np.ndarray
    w_q: np.ndarray
    analytic_frequency_hz: np.ndarray
    _sets: list = field(repr=False, default_factory=list)   # [(kind code, shapes, mode slice)]

    def _check_x(self, x: float) -> float:
        L = self.beam.length_m
        if not -1e-12 * L <= x <= L * (1.0 + 1e-12):
            raise ModalError(f"station x = {x} m is outside the beam [0, {L}] m")
        return min(max(float(x), 0.0), L)

    def at(self, x: float, offset=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gamma (3, nm), Lambda (3, nm) and foreshortening S (nm, nm) at station x.

        With ``offset`` c (body axes) the point rigidly attached to the cross-section at x
        gets Gamma_c = Gamma + Lambda x c column by column; Lambda and S are unchanged.
        S (seed 003 foreshortening) is -int_0^x phi_a' phi_b' ds within one bending plane.
        """
        x = self._check_x(x)
        gamma = np.zeros((3, self.nm))
        lam = np.zeros((3, self.nm))
        S = np.zeros((self.nm, self.nm))
        for code, shapes, sl in self._sets:
            phi = shapes.d(x, 0)[:, 0]
            if code == TORSION:
                lam[0, sl] = phi
                continue
            if code == AXIAL:
                gamma[0, sl] = phi
                continue
            dphi = shapes.d(x, 1)[:, 0]
            if code == BENDING_Y:
                gamma[1, sl], lam[2, sl] = phi, dphi
            else:
                gamma[2, sl], lam[1, sl] = phi, -dphi
            pts, wts = shapes.rule(x)
            d1 = shapes.d(pts, 1)
            S[sl, sl] = -(d1 * wts) @ d1.T
        if offset is not None:
            c = np.asarray(offset, dtype=float).reshape(3)
            gamma = gamma + np.cross(lam.T, c).T
        return gamma, lam, S

    def curvature(self, x: float) -> tuple[np.ndarray, np.ndarray]:
        """Curvature kappa (3, nm) = [psi', -w'', +v''] per column, and axial strain u' (nm,)."""
        x = self._check_x(x)
        kappa = np.zeros((3, self.nm))
        strain = np.zeros(self.nm)
        for code, shapes, sl in self._sets:
            if code == TORSION:
                kappa[0, sl] = shapes.d(x, 1)[:, 0]
            elif code == AXIAL:
                strain[sl] = shapes.d(x, 1)[:, 0]
            elif code == BENDING_Y:
                kappa[2, sl] = shapes.d(x, 2)[:, 0]
            else:
                kappa[1, sl] = -shapes.d(x, 2)[:, 0]
        return kappa, strain

    def mass_nodes(self) -> dict:
        """Beam material lumped at the quadrature points.

        Keys: "m" (n,) = rho A w_q; "p0" (n, 3) = (x_q, 0, 0); "J" (n, 3, 3) =
        rho w_q diag(Ip, Iy, Iz); "Gamma" (n, 3, nm); "Lambda" (n, 3, nm); "S" (n, nm, nm).
        With ``beam.rotary_inertia`` False the bending rotary inertia (Iy, Iz) is dropped
        but the torsional inertia rho Ip is kept: it is the only mass of torsion modes.
        """
        b = self.beam
        n = len(self.x_q)
        Iy, Iz = (b.Iy_m4, b.Iz_m4) if b.rotary_inertia else (0.0, 0.0)
        at = [self.at(x) for x in self.x_q]
        p0 = np.zeros((n, 3))
        p0[:, 0] = self.x_q
        return {
            "m": b.rho_kg_m3 * b.area_m2 * self.w_q,
            "p0": p0,
            "J": b.rho_kg_m3 * self.w_q[:, None, None] * np.diag([_polar_moment(b), Iy, Iz])[None],
            "Gamma": np.array([a[0] for a in at]).reshape(n, 3, self.nm),
            "Lambda": np.array([a[1] for a in at]).reshape(n, 3, self.nm),
            "S": np.array([a[2] for a in at]).reshape(n, self.nm, self.nm),
        }

    def modal_mass(self, tip_mass=0.0, tip_inertia=None) -> np.ndarray:
        """M_ff = sum over nodes of m Gamma^T Gamma + Lambda^T J Lambda, plus a tip body at x = L.

        The tip body (mass ``tip_mass``, inertia ``tip_inertia`` about the tip point) is
        taken with its centre of mass at the tip point; for frequency checks.
        """
        J_tip = _tip_inertia(tip_mass, tip_inertia)
        nodes = self.mass_nodes()
        G, Lm = nodes["Gamma"], nodes["Lambda"]
        M = np.einsum("n,nai,naj->ij", nodes["m"], G, G) + np.einsum("nai,nab,nbj->ij", Lm, nodes["J"], Lm)
        G_tip, L_tip, _ = self.at(self.beam.length_m)
        return M + tip_mass * G_tip.T @ G_tip + L_tip.T @ J_tip @ L_tip


# --------------------------------------------------------------------------- assembly


def _polar_moment(beam: Beam) -> float:
    """Polar moment for torsional inertia: ``polar_moment_m4`` or Iy + Iz."""
    return beam.Iy_m4 + beam.Iz_m4 if beam.polar_moment_m4 is None else beam.polar_moment_m4


def _tip_inertia(tip_mass: float, tip_inertia) -> np.ndarray:
    """Validated 3x3 tip inertia (zeros if None)."""
    if not (np.isfinite(tip_mass) and tip_mass >= 0.0):
        raise ModalError(f"tip mass must be finite and >= 0, got {tip_mass}")
    J = np.zeros((3, 3)) if tip_inertia is None else np.asarray(tip_inertia, dtype=float)
    if J.shape != (3, 3) or not np.all(np.isfinite(J)) or np.any(np.diag(J) < 0.0) \
            or not np.allclose(J, J.T, rtol=1e-9, atol=1e-12 * max(1.0, np.abs(J).max())):
        raise ModalError("tip inertia must be a finite symmetric 3x3 matrix with diagonal >= 0")
    return J


def _validate_user_shapes(beam: Beam, counts: dict[str, int]) -> None:
    """Every kind with modes has tabulated shapes; no unknown kinds; counts match."""
    given = beam.user_shapes or {}
    unknown = sorted(set(given) - set(MODE_KINDS))
    if unknown:
        raise ModalError(f"user shapes: unknown kinds {unknown}, expected some of {MODE_KINDS}")
    for kind, n in counts.items():
        if n and kind not in given:
            raise ModalError(f"user shapes: beam has n_{kind} = {n} but no '{kind}' shapes")
        if kind in given and len(given[kind]) != 2:
            raise ModalError(f"user shapes '{kind}': expected a pair (x_m, values)")
        if kind in given and np.atleast_2d(np.asarray(given[kind][1])).shape[0] != n:
            raise ModalError(f"user shapes '{kind}': shape count does not match n_{kind} = {n}")


def _validate_beam(beam: Beam) -> dict[str, int]:
    """Check the beam data; return the mode count per kind."""
    if beam.family not in MODE_FAMILIES:
        raise ModalError(f"unknown mode family '{beam.family}', expected one of {MODE_FAMILIES}")
    counts = {kind: getattr(beam, f"n_{kind}") for kind in MODE_KINDS}
    for kind, n in counts.items():
        if int(n) != n or n < 0:
            raise ModalError(f"n_{kind} must be a non-negative integer, got {n}")
    if sum(counts.values()) == 0:
        raise ModalError("beam has no modes (use a body without a beam for a rigid link)")
    required = {"length_m": beam.length_m, "E_Pa": beam.E_Pa, "rho_kg_m3": beam.rho_kg_m3,
                "area_m2": beam.area_m2}
    if counts["bending_y"]:
        required["Iz_m4"] = beam.Iz_m4
    if counts["bending_z"]:
        required["Iy_m4"] = beam.Iy_m4
    if counts["torsion"]:
        required.update(G_Pa=beam.G_Pa, torsion_constant_m4=beam.torsion_constant_m4,
                        polar_moment_m4=_polar_moment(beam))
    for name, value in required.items():
        if not (np.isfinite(value) and value > 0.0):
            raise ModalError(f"beam {name} must be > 0, got {value}")
    for name in ("G_Pa", "Iy_m4", "Iz_m4", "torsion_constant_m4", "polar_moment_m4"):
        value = getattr(beam, name)
        if value is not None and value < 0.0:
            raise ModalError(f"beam {name} must be >= 0, got {value}")
    if beam.quadrature_points < 0:
        raise ModalError(f"quadrature_points must be >= 0, got {beam.quadrature_points}")
    if beam.family == "user":
        _validate_user_shapes(beam, counts)
    return counts


def _bending_tip(beam: Beam, tip_mass: float, J_rot: float) -> tuple[float, float]:
    """Dimensionless tip mass and rotary inertia (mu, j) = (M / rho A L, J / rho A L^3)."""
    rho_A_L = beam.rho_kg_m3 * beam.area_m2 * beam.length_m
    return tip_mass / rho_A_L, J_rot / (rho_A_L * beam.length_m ** 2)


def _wave_ratio(distributed: float, tip: float) -> float:
    """lam tan lam = ratio of beam to tip inertia (inf without a tip body)."""
    return np.inf if tip == 0.0 else distributed / tip


def _kind_reference(code: int, n: int, beam: Beam, tip_mass: float,
                    J_tip: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[float, float] | None]:
    """Roots lam, closed-form frequencies [Hz] and, for bending, (mu, j) of ``n`` modes of one kind."""
    b = beam
    L, rho_A = b.length_m, b.rho_kg_m3 * b.area_m2
    if code in (BENDING_Y, BENDING_Z):
        EI, J_rot = (b.E_Pa * b.Iz_m4, J_tip[2, 2]) if code == BENDING_Y else (b.E_Pa * b.Iy_m4, J_tip[1, 1])
        tip = _bending_tip(b, tip_mass, J_rot)
        lam = clamped_mass_bending_roots(n, *tip)
        return lam, bending_frequency_hz(lam, L, EI, rho_A), tip
    if code == TORSION:
        rho_Ip = b.rho_kg_m3 * _polar_moment(b)
        lam = torsion_roots(n, _wave_ratio(rho_Ip * L, J_tip[0, 0]))
        return lam, _wave_frequency_hz(lam, L, b.G_Pa * b.torsion_constant_m4, rho_Ip), None
    lam = torsion_roots(n, _wave_ratio(rho_A * L, tip_mass))
    return lam, _wave_frequency_hz(lam, L, b.E_Pa * b.area_m2, rho_A), None


def _stiffness(code: int, beam: Beam) -> float:
    """E Iz, E Iy, G J or E A for the mode kind ``code``."""
    b = beam
    return (b.E_Pa * b.Iz_m4, b.E_Pa * b.Iy_m4, b.G_Pa * b.torsion_constant_m4, b.E_Pa * b.area_m2)[code]


def beam_modes(beam: Beam, tip_mass_kg: float = 0.0, tip_inertia_kg_m2: np.ndarray | None = None) -> BeamModes:
    """Precompute the modes of ``beam`` (family ``beam.family``) for the dynamics assembly.

    ``tip_mass_kg`` / ``tip_inertia_kg_m2`` (3x3 about the tip point x = L, body axes)
    describe the rigid body carried at the tip: they shape the ``clamped_mass`` modes
    (seed 001; bending_y uses J[2, 2], bending_z J[1, 1], torsion J[0, 0], axial M) and
    the reference frequencies of ``clamped_mass`` and ``user`` beams; ``clamped_free``
    ignores them. Raises ModalError on inconsistent input.
    """
    counts = _validate_beam(beam)
    J_tip = _tip_inertia(tip_mass_kg, tip_inertia_kg_m2)
    if beam.family == "clamped_free":
        tip_mass_kg, J_tip = 0.0, np.zeros((3, 3))
    L = beam.length_m
    # 2n + 6 Gauss points integrate the mass products of n modes to ~1e-8 relative (10 for n = 2)
    default_q = max(8, 6 + 2 * max(counts.values()))
    nq = beam.quadrature_points if beam.quadrature_points > 0 else default_q
    n_gauss = max(nq, 16 + 4 * max(counts.values()))   # for the stiffness and foreshortening integrals
    sets, labels, freqs = [], [], []
    start = 0
    for code, kind in enumerate(MODE_KINDS):
        n = counts[kind]
        if n == 0:
            continue
        lam, f_hz, tip = _kind_reference(code, n, beam, tip_mass_kg, J_tip)
        if beam.family == "user":
            shapes = _user_shapes(kind, *beam.user_shapes[kind], n, L)
        elif code in (BENDING_Y, BENDING_Z):
            shapes = _bending_shapes(lam, *tip, L, n_gauss)
        else:
            shapes = _sine_shapes(lam, L, n_gauss)
        sets.append((code, shapes, slice(start, start + n)))
        labels += [f"{kind}_{i + 1}" for i in range(n)]
        freqs.append(f_hz)
        start += n
    K = np.zeros((start, start))
    for code, shapes, sl in sets:
        order = 2 if code in (BENDING_Y, BENDING_Z) else 1
        pts, wts = shapes.rule(L)
        dk = shapes.d(pts, order)
        K[sl, sl] = _stiffness(code, beam) * (dk * wts) @ dk.T
    kinds = np.concatenate([np.full(sl.stop - sl.start, code, dtype=np.int64) for code, _, sl in sets])
    x_q, w_q = _gauss(nq, 0.0, L)
    return BeamModes(beam=beam, nm=start, labels=labels, kinds=kinds, K=K, x_q=x_q, w_q=w_q,
                     analytic_frequency_hz=np.concatenate(freqs), _sets=sets)
