"""Tests of the load-time modal precomputation (hil.model.modal)."""
from __future__ import annotations

import numpy as np
import pytest

from hil.model.modal import (
    AXIAL, BENDING_Y, BENDING_Z, TORSION, ModalError, beam_modes, bending_frequency_hz,
    clamped_free_roots, clamped_mass_bending_roots, torsion_roots,
)
from hil.model.spec import Beam

# seed 003 cantilever (aluminium, L = 8 m)
SEED3 = dict(length_m=8.0, E_Pa=6.8952e10, G_Pa=2.6e10, rho_kg_m3=2.7667e3, area_m2=7.2968e-5,
             Iy_m4=8.2189e-9, Iz_m4=8.2189e-9, torsion_constant_m4=2 * 8.2189e-9)

# seed 001 link 3: 1.8 m steel tube, rho A = 5.550 kg/m, EI = 38038 N m^2, tip body M, J
SEED1_E, SEED1_RHO = 2.0e11, 7850.0
SEED1 = dict(length_m=1.8, E_Pa=SEED1_E, G_Pa=7.7e10, rho_kg_m3=SEED1_RHO, area_m2=5.550 / SEED1_RHO,
             Iy_m4=38038.0 / SEED1_E, Iz_m4=38038.0 / SEED1_E, torsion_constant_m4=2 * 38038.0 / SEED1_E)
SEED1_TIP_MASS = 3.56
SEED1_TIP_J = np.diag([0.02, 0.07212, 0.07212])


def generalized_frequencies_hz(K: np.ndarray, M: np.ndarray) -> np.ndarray:
    """Sorted sqrt(eig(K, M)) / 2 pi via a Cholesky reduction (numpy only)."""
    C_inv = np.linalg.inv(np.linalg.cholesky(M))
    return np.sqrt(np.linalg.eigvalsh(C_inv @ K @ C_inv.T)) / (2.0 * np.pi)


def all_kinds_beam(params: dict, n: int = 4, **kw) -> Beam:
    return Beam(**params, n_bending_y=n, n_bending_z=n, n_torsion=n, n_axial=n, rotary_inertia=False, **kw)


# ---------------------------------------------------------------- 1. clamped-free


def test_clamped_free_roots_and_seed3_first_frequency():
    lam = clamped_free_roots(4)
    np.testing.assert_allclose(lam, [1.875104069, 4.694091133, 7.854757438, 10.99554073], rtol=1e-9)
    np.testing.assert_allclose(np.cos(lam) * np.cosh(lam), -1.0, rtol=1e-9)
    EI, rho_A = SEED3["E_Pa"] * SEED3["Iz_m4"], SEED3["rho_kg_m3"] * SEED3["area_m2"]
    f1 = bending_frequency_hz(lam[0], SEED3["length_m"], EI, rho_A)
    assert f1 == pytest.approx(0.4633, abs=5e-5)          # seed 003 prints 0.464
    modes = beam_modes(all_kinds_beam(SEED3, n=1))
    assert modes.analytic_frequency_hz[0] == pytest.approx(f1, rel=1e-12)


def test_clamped_free_eigenfrequencies_match_closed_form():
    f_default = generalized_frequencies_hz(*_k_and_m(beam_modes(all_kinds_beam(SEED3))))
    modes = beam_modes(all_kinds_beam(SEED3, quadrature_points=24))
    f_eig = generalized_frequencies_hz(modes.K, modes.modal_mass())
    f_ref = np.sort(modes.analytic_frequency_hz)
    np.testing.assert_allclose(f_default, f_ref, rtol=1e-7)   # default mass quadrature, 2n + 6 points
    np.testing.assert_allclose(f_eig, f_ref, rtol=1e-10)   # the Galerkin basis is exact
    assert f_eig[0] == pytest.approx(0.4633, abs=5e-5)
    L, G, J, rho = SEED3["length_m"], SEED3["G_Pa"], SEED3["torsion_constant_m4"], SEED3["rho_kg_m3"]
    f_torsion = (2 * np.arange(1, 5) - 1) / (4 * L) * np.sqrt(G * J / (rho * 2 * SEED3["Iy_m4"]))
    f_axial = (2 * np.arange(1, 5) - 1) / (4 * L) * np.sqrt(SEED3["E_Pa"] / rho)
    np.testing.assert_allclose(modes.analytic_frequency_hz[modes.kinds == TORSION], f_torsion, rtol=1e-12)
    np.testing.assert_allclose(modes.analytic_frequency_hz[modes.kinds == AXIAL], f_axial, rtol=1e-12)


def _k_and_m(modes):
    return modes.K, modes.modal_mass()


def test_ten_bending_modes_are_numerically_stable():
    beam = Beam(**SEED3, n_bending_y=10, n_bending_z=0, rotary_inertia=False, quadrature_points=40)
    modes = beam_modes(beam)
    M = modes.modal_mass()
    np.testing.assert_allclose(generalized_frequencies_hz(modes.K, M), modes.analytic_frequency_hz, rtol=1e-9)
    off = M / np.sqrt(np.outer(np.diag(M), np.diag(M))) - np.eye(10)
    assert np.abs(off).max() < 1e-10
    shapes = np.array([modes.at(x)[0][1] for x in np.linspace(0.0, SEED3["length_m"], 401)])
    assert np.all(np.isfinite(shapes)) and np.abs(shapes).max() < 1.01   # |phi| <= |phi(L)| = 1


# ---------------------------------------------------------------- 2. clamped-mass (seed 001)


def test_clamped_mass_roots_seed1():
    rho_A_L = 5.550 * 1.8
    lam = clamped_mass_bending_roots(3, SEED1_TIP_MASS / rho_A_L, 0.07212 / (rho_A_L * 1.8 ** 2))
    # Verified below by an independent finite-element model. Seed 001 quotes 4.0446 and
    # 6.6540 (9.10, 66.53, 180.1 Hz): its inputs were rounded, 180.1 Hz is 0.10 % high.
    np.testing.assert_allclose(lam, [1.49566, 4.04408, 6.65143], atol=1e-5)
    np.testing.assert_allclose(lam, [1.4957, 4.0446, 6.6540], rtol=5e-4)
    f = bending_frequency_hz(lam, 1.8, 38038.0, 5.550)
    np.testing.assert_allclose(f, [9.10, 66.53, 180.1], rtol=1.5e-3)
    np.testing.assert_allclose(f[:2], [9.10, 66.53], rtol=1e-3)


def test_clamped_mass_roots_reduce_to_clamped_free():
    np.testing.assert_array_equal(clamped_mass_bending_roots(6, 0.0, 0.0), clamped_free_roots(6))
    np.testing.assert_array_equal(torsion_roots(5, np.inf), (2 * np.arange(1, 6) - 1) * np.pi / 2)
    lam = torsion_roots(5, 0.7)
    np.testing.assert_allclose(lam * np.tan(lam), 0.7, rtol=1e-10)
    free = beam_modes(all_kinds_beam(SEED1, n=3))
    massless = beam_modes(all_kinds_beam(SEED1, n=3, family="clamped_mass"))
    np.testing.assert_array_equal(free.K, massless.K)
    np.testing.assert_array_equal(free.at(1.3)[0], massless.at(1.3)[0])


def fe_cantilever_with_tip_hz(n_el: int = 60) -> np.ndarray:
    """Independent Hermite finite-element model of the seed 001 link with its tip body."""
    L, EI, rho_A, M, J = 1.8, 38038.0, 5.550, SEED1_TIP_MASS, 0.07212
    h = L / n_el
    k = EI / h ** 3 * np.array([[12, 6 * h, -12, 6 * h], [6 * h, 4 * h * h, -6 * h, 2 * h * h],
                                [-12, -6 * h, 12, -6 * h], [6 * h, 2 * h * h, -6 * h, 4 * h * h]])
    m = rho_A * h / 420 * np.array([[156, 22 * h, 54, -13 * h], [22 * h, 4 * h * h, 13 * h, -3 * h * h],
                                    [54, 13 * h, 156, -22 * h], [-13 * h, -3 * h * h, -22 * h, 4 * h * h]])
    K, Mm = np.zeros((2 * n_el + 2,) * 2), np.zeros((2 * n_el + 2,) * 2)
    for e in range(n_el):
        K[2 * e:2 * e + 4, 2 * e:2 * e + 4] += k
        Mm[2 * e:2 * e + 4, 2 * e:2 * e + 4] += m
    Mm[-2, -2] += M
    Mm[-1, -1] += J
    return generalized_frequencies_hz(K[2:, 2:], Mm[2:, 2:])[:3]


def test_clamped_mass_eigenfrequencies_and_orthogonality_seed1():
    modes = beam_modes(all_kinds_beam(SEED1, n=3, family="clamped_mass"), SEED1_TIP_MASS, SEED1_TIP_J)
    M = modes.modal_mass(SEED1_TIP_MASS, SEED1_TIP_J)
    f_eig = generalized_frequencies_hz(modes.K, M)
    np.testing.assert_allclose(f_eig, np.sort(modes.analytic_frequency_hz), rtol=1e-9)
    f_bend = modes.analytic_frequency_hz[modes.kinds == BENDING_Y]
    np.testing.assert_allclose(f_bend, [9.09705, 66.5086, 179.915], rtol=1e-5)
    np.testing.assert_allclose(f_bend, fe_cantilever_with_tip_hz(), rtol=1e-5)
    np.testing.assert_allclose(f_bend, [9.10, 66.53, 180.1], rtol=1.5e-3)   # seed 001 printout
    off = M / np.sqrt(np.outer(np.diag(M), np.diag(M))) - np.eye(modes.nm)
    assert np.abs(off).max() < 1e-10                                      # tip body included
    K_off = modes.K - np.diag(np.diag(modes.K))
    assert np.abs(K_off).max() < 1e-10 * np.abs(modes.K).max()
    without_tip = modes.modal_mass()
    assert np.abs(without_tip - np.diag(np.diag(without_tip))).max() > 1e-3 * without_tip.max()


def test_a_frequency_scale_moves_its_mode_alone_by_that_factor():
    """S K S with S = diag(s): on the clamped-mass beam (K and the modal mass diagonal) each mode's
    eigenfrequency is s_i times the one without, the others untouched; the reference frequencies follow."""
    from dataclasses import replace

    beam = all_kinds_beam(SEED1, n=3, family="clamped_mass")
    plain = beam_modes(beam, SEED1_TIP_MASS, SEED1_TIP_J)
    s = np.ones(plain.nm)
    s[[0, 4]] = 1.1, 0.93
    scaled = beam_modes(replace(beam, frequency_scale=s), SEED1_TIP_MASS, SEED1_TIP_J)
    M = plain.modal_mass(SEED1_TIP_MASS, SEED1_TIP_J)
    f0 = np.sqrt(np.diag(plain.K) / np.diag(M)) / (2 * np.pi)
    f1 = np.sqrt(np.diag(scaled.K) / np.diag(M)) / (2 * np.pi)
    np.testing.assert_allclose(f1, s * f0, rtol=1e-12)
    np.testing.assert_allclose(np.sort(generalized_frequencies_hz(scaled.K, M)), np.sort(s * plain.analytic_frequency_hz),
                               rtol=1e-9)
    np.testing.assert_allclose(scaled.analytic_frequency_hz, s * plain.analytic_frequency_hz, rtol=1e-15)
    with pytest.raises(ModalError, match="frequency_scale"):
        beam_modes(replace(beam, frequency_scale=np.ones(plain.nm - 1)))


# ---------------------------------------------------------------- 3. foreshortening (seed 003)


def test_foreshortening_matrix():
    modes = beam_modes(Beam(**SEED3, n_bending_y=1, n_bending_z=2, n_axial=1, n_torsion=1))
    L = SEED3["length_m"]
    x = np.linspace(0.0, L, 20001)
    b = 1.875104069 / L
    sigma = (np.cosh(b * L) + np.cos(b * L)) / (np.sinh(b * L) + np.sin(b * L))
    tip = np.cosh(b * L) - np.cos(b * L) - sigma * (np.sinh(b * L) - np.sin(b * L))
    dphi = b * (np.sinh(b * x) + np.sin(b * x) - sigma * (np.cosh(b * x) - np.cos(b * x))) / tip
    reference = -np.trapezoid(dphi ** 2, x)
    _, _, S = modes.at(L)
    assert S[0, 0] == pytest.approx(reference, rel=1e-7)
    assert S[1, 1] == pytest.approx(reference, rel=1e-7)                  # same mode in the x-z plane
    np.testing.assert_array_equal(S, S.T)
    assert np.linalg.eigvalsh(S).max() < 1e-12 * np.abs(S).max()
    assert np.all(S[0, 1:] == 0.0) and np.all(S[3:, :] == 0.0)           # no cross-plane / torsion / axial
    assert np.abs(modes.at(0.0)[2]).max() == 0.0
    half = modes.at(0.5 * L)[2]
    assert half[0, 0] == pytest.approx(-np.trapezoid(dphi[x <= 0.5 * L] ** 2, x[x <= 0.5 * L]), rel=1e-6)
    nodes = modes.mass_nodes()
    np.testing.assert_allclose(nodes["S"][-1], modes.at(modes.x_q[-1])[2], rtol=1e-14)


# ---------------------------------------------------------------- 4. shape conventions


@pytest.mark.parametrize("family", ["clamped_free", "clamped_mass"])
def test_shape_sign_conventions(family):
    modes = beam_modes(all_kinds_beam(SEED1, n=3, family=family), SEED1_TIP_MASS, SEED1_TIP_J)
    L, h = SEED1["length_m"], 1e-5
    by, bz, tor, ax = (modes.kinds == k for k in (BENDING_Y, BENDING_Z, TORSION, AXIAL))
    G_L, Lam_L, _ = modes.at(L)
    np.testing.assert_allclose(G_L[1, by], 1.0, rtol=1e-12)
    np.testing.assert_allclose(G_L[2, bz], 1.0, rtol=1e-12)
    np.testing.assert_allclose(G_L[0, ax], 1.0, rtol=1e-12)
    np.testing.assert_allclose(Lam_L[0, tor], 1.0, rtol=1e-12)
    for x in (0.3, 1.1, 1.7):
        G, Lam, _ = modes.at(x)
        dG = (modes.at(x + h)[0] - modes.at(x - h)[0]) / (2 * h)
        dLam = (modes.at(x + h)[1] - modes.at(x - h)[1]) / (2 * h)
        kappa, strain = modes.curvature(x)
        np.testing.assert_allclose(Lam[2, by], dG[1, by], rtol=1e-7)      # +v'
        np.testing.assert_allclose(Lam[1, bz], -dG[2, bz], rtol=1e-7)     # -w'
        np.testing.assert_allclose(kappa, dLam, rtol=1e-6, atol=1e-9)     # [psi', -w'', +v'']
        np.testing.assert_allclose(strain[ax], dG[0, ax], rtol=1e-7)      # u'
        assert np.all(G[:, tor] == 0.0) and np.all(Lam[:, ax] == 0.0) and np.all(strain[~ax] == 0.0)
        c = np.array([0.01, -0.02, 0.03])
        G_c, Lam_c, S_c = modes.at(x, offset=c)
        np.testing.assert_allclose(G_c, G + np.cross(Lam.T, c).T, rtol=1e-14)
        np.testing.assert_array_equal(Lam_c, Lam)
    G0, Lam0, _ = modes.at(0.0)
    assert np.abs(G0).max() < 1e-12 and np.abs(Lam0[1:]).max() < 1e-9    # clamped


def test_mass_nodes_layout():
    modes = beam_modes(Beam(**SEED1, n_torsion=1, quadrature_points=20))
    nodes = modes.mass_nodes()
    assert nodes["m"].shape == (20,) and nodes["Gamma"].shape == (20, 3, 5) and nodes["S"].shape == (20, 5, 5)
    assert nodes["m"].sum() == pytest.approx(5.550 * 1.8, rel=1e-12)
    np.testing.assert_allclose(nodes["p0"][:, 0], modes.x_q)
    Ip = SEED1["Iy_m4"] + SEED1["Iz_m4"]
    np.testing.assert_allclose(nodes["J"].sum(axis=0), SEED1_RHO * 1.8 * np.diag([Ip, SEED1["Iy_m4"], SEED1["Iz_m4"]]))
    assert beam_modes(Beam(**SEED1)).x_q.shape == (10,)
    assert beam_modes(Beam(**SEED1, n_bending_y=3)).x_q.shape == (12,)


# ---------------------------------------------------------------- 5. user shapes


def test_user_shapes_reproduce_clamped_free_frequencies():
    reference = beam_modes(all_kinds_beam(SEED3, n=3))
    x = np.linspace(0.0, SEED3["length_m"], 241)
    table = np.array([np.concatenate(reference.at(xi)[:2]) for xi in x])   # (p, 6, nm)
    rows = {BENDING_Y: 1, BENDING_Z: 2, TORSION: 3, AXIAL: 0}
    shapes = {kind: (x, 2.5 * table[:, rows[code], reference.kinds == code].T)   # unnormalised
              for code, kind in enumerate(("bending_y", "bending_z", "torsion", "axial"))}
    user = beam_modes(all_kinds_beam(SEED3, n=3, family="user", user_shapes=shapes))
    f_user = generalized_frequencies_hz(user.K, user.modal_mass())
    np.testing.assert_allclose(f_user, np.sort(reference.analytic_frequency_hz), rtol=1e-3)
    np.testing.assert_allclose(f_user, np.sort(reference.analytic_frequency_hz), rtol=1e-6)  # 241 points
    np.testing.assert_allclose(user.analytic_frequency_hz, reference.analytic_frequency_hz, rtol=1e-12)
    np.testing.assert_allclose(user.at(SEED3["length_m"])[0], reference.at(SEED3["length_m"])[0], atol=1e-12)
    np.testing.assert_allclose(user.at(3.0)[2], reference.at(3.0)[2], rtol=1e-3, atol=1e-6)


# ---------------------------------------------------------------- input errors


@pytest.mark.parametrize("change, message", [
    (dict(E_Pa=-1.0), "E_Pa"),
    (dict(Iz_m4=0.0), "Iz_m4"),
    (dict(family="spline"), "family"),
    (dict(family="user"), "no 'bending_y' shapes"),
    (dict(family="user", n_bending_z=0,
          user_shapes={"bending_y": (np.linspace(0, 1.8, 9), np.ones((3, 9)))}), "count"),
    (dict(family="user", n_bending_z=0,
          user_shapes={"bending_y": (np.linspace(0, 1.8, 9), np.ones((2, 9)))}), "phi\\(0\\)"),
    (dict(n_bending_y=0, n_bending_z=0), "no modes"),
])
def test_inconsistent_input_raises(change, message):
    with pytest.raises(ModalError, match=message):
        beam_modes(Beam(**{**SEED1, **change}))


def test_bad_tip_and_station_raise():
    with pytest.raises(ModalError, match="tip mass"):
        beam_modes(Beam(**SEED1, family="clamped_mass"), -1.0)
    with pytest.raises(ModalError, match="tip inertia"):
        beam_modes(Beam(**SEED1, family="clamped_mass"), 1.0, np.ones((2, 2)))
    with pytest.raises(ModalError, match="outside"):
        beam_modes(Beam(**SEED1)).at(2.0)
    with pytest.raises(ModalError, match="ratio"):
        torsion_roots(2, -1.0)
