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

Frequency scale (``frequency_scale``, one factor s_i per mode, default 1): the modal stiffness
becomes S K S, S = diag(s), so that a mode whose stiffness and mass are uncoupled from the others
(every closed-form family: K and the clamped modal mass are diagonal) vibrates at s_i times the
frequency its section gives: the modal frequencies set directly (a fit, ``hil fit``, matches
them to a recording one by one, where a material or section value moves them all together).
The reference frequencies scale with them.

Mode families: ``clamped_free`` (closed-form cantilever modes), ``clamped_mass`` (tip
rigid body of mass M and inertia J_tip about the tip point, seed 001) and ``user``
(tabulated shapes, interpolated by a cubic spline).

scipy is deliberately not imported: it may be absent on the real-time target.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hil.model.beam_shapes import (
    ModalError, bending_frequency_hz, bending_shapes,
    clamped_free_roots, clamped_mass_bending_roots, gauss_rule, sine_shapes, torsion_roots,
    user_shapes, wave_frequency_hz,
)
from hil.model.spec import MODE_FAMILIES, MODE_KINDS, Beam

__all__ = ["AXIAL", "BENDING_Y", "BENDING_Z", "TORSION", "BeamModes", "ModalError", "beam_modes",
           "bending_frequency_hz", "clamped_free_roots", "clamped_mass_bending_roots", "torsion_roots"]

BENDING_Y, BENDING_Z, TORSION, AXIAL = range(4)


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
        gamma, lam, S = (a[0] for a in self.at_stations([x]))
        if offset is not None:
            c = np.asarray(offset, dtype=float).reshape(3)
            gamma = gamma + np.cross(lam.T, c).T
        return gamma, lam, S

    def at_stations(self, xs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Gamma (n, 3, nm), Lambda (n, 3, nm) and S (n, nm, nm) at the n stations xs (as ``at``), each
        shape evaluated once at all of them: an assembly asks at every quadrature point."""
        xs = np.array([self._check_x(x) for x in xs], dtype=float)
        n = len(xs)
        gamma, lam, S = np.zeros((n, 3, self.nm)), np.zeros((n, 3, self.nm)), np.zeros((n, self.nm, self.nm))
        for code, shapes, sl in self._sets:
            phi = shapes.d(xs, 0).T
            if code == TORSION:
                lam[:, 0, sl] = phi
                continue
            if code == AXIAL:
                gamma[:, 0, sl] = phi
                continue
            dphi = shapes.d(xs, 1).T
            if code == BENDING_Y:
                gamma[:, 1, sl], lam[:, 2, sl] = phi, dphi
            else:
                gamma[:, 2, sl], lam[:, 1, sl] = phi, -dphi
            rules = [shapes.rule(x) for x in xs]
            d1 = shapes.d(np.concatenate([r[0] for r in rules]), 1)
            start = 0
            for j, (pts, wts) in enumerate(rules):
                part = d1[:, start:start + len(pts)]
                S[j, sl, sl] = -(part * wts) @ part.T
                start += len(pts)
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
        gamma, lam, S = self.at_stations(self.x_q)
        p0 = np.zeros((n, 3))
        p0[:, 0] = self.x_q
        return {
            "m": b.rho_kg_m3 * b.area_m2 * self.w_q,
            "p0": p0,
            "J": b.rho_kg_m3 * self.w_q[:, None, None] * np.diag([_polar_moment(b), Iy, Iz])[None],
            "Gamma": gamma,
            "Lambda": lam,
            "S": S,
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
    scale = np.asarray(beam.frequency_scale, float)
    if scale.size and (scale.shape != (sum(counts.values()),) or not np.all(np.isfinite(scale) & (scale > 0.0))):
        raise ModalError(f"frequency_scale must be empty or {sum(counts.values())} positive factors, got {scale}")
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
        return lam, wave_frequency_hz(lam, L, b.G_Pa * b.torsion_constant_m4, rho_Ip), None
    lam = torsion_roots(n, _wave_ratio(rho_A * L, tip_mass))
    return lam, wave_frequency_hz(lam, L, b.E_Pa * b.area_m2, rho_A), None


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
            shapes = user_shapes(kind, *beam.user_shapes[kind], n, L)
        elif code in (BENDING_Y, BENDING_Z):
            shapes = bending_shapes(lam, *tip, L, n_gauss)
        else:
            shapes = sine_shapes(lam, L, n_gauss)
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
    x_q, w_q = gauss_rule(nq, 0.0, L)
    s = beam.frequency_scale if np.size(beam.frequency_scale) else np.ones(start)
    return BeamModes(beam=beam, nm=start, labels=labels, kinds=kinds, K=s[:, None] * K * s[None, :], x_q=x_q, w_q=w_q,
                     analytic_frequency_hz=s * np.concatenate(freqs), _sets=sets)
