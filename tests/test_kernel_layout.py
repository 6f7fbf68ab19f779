"""The flat kernel arrays (hil.kernels.layout): every named block has its own place, the header
slots point at it, Python's named views write where the kernels read, and the kernels compile
without reference counting (so they cannot allocate)."""
from __future__ import annotations

import numpy as np
import pytest
from numba.core.errors import TypingError

from hil.dynamics.plant import Plant
from hil.kernels import layout
from hil.kernels.aba import forward_dynamics, forward_dynamics_blocks
from hil.kernels.jit import kernel
from hil.model.assembly import KernelModel, assemble, make_work
from hil.model.config import load_model

from chains import random_flexible_chain, random_state


@pytest.fixture(scope="module")
def asm():
    return assemble(random_flexible_chain(np.random.default_rng(3), 4, elastic_joint=True, prescribed=True))


def test_blocks_tile_their_arrays_and_the_header_points_at_them(asm):
    km, work = asm.km, make_work(asm.km)
    arrays = {"mi": km.mi, "mf": km.mf, "w": work.w}
    for name, (array, at, shape) in km.where.items():
        assert km.mi[layout.slot(name)] == at, name
        view = (work if array == "w" else km).view(name)
        assert view.shape == shape and np.shares_memory(view, arrays[array]), name
        assert view.flags.c_contiguous and view.ctypes.data == arrays[array][at:].ctypes.data, name
    for array, blocks in layout.block_tables():
        spans = sorted((km.where[name][1], int(np.prod(km.where[name][2], dtype=np.int64))) for name, _ in blocks)
        start = layout.N_HEADER if array == "mi" else 0
        for at, n in spans:                  # each block begins where the previous one ends
            assert at == start, (array, at, start)
            start += n
        assert start == len(arrays[array])
    assert list(km.dims) == list(km.sizes)


def test_the_model_blocks_hold_what_assembly_computed(asm):
    km = asm.km
    assert km.parent.tolist() == [-1, 0, 1, 2]
    assert km.node_off[-1] == km.sizes.nnode == len(km.nd_m)
    np.testing.assert_array_equal(km.Jsum[1], km.nd_J[km.node_off[1]:km.node_off[2]].sum(axis=0))
    np.testing.assert_allclose(km.mG[0], np.einsum("j,jia->ia", km.nd_m[:km.node_off[1]], km.nd_G[:km.node_off[1]]))
    np.testing.assert_allclose(np.linalg.norm(km.axis, axis=1), 1.0)


def test_a_write_through_a_named_view_reaches_the_kernel(asm):
    km, w = asm.km, make_work(asm.km).w
    rng = np.random.default_rng(4)
    pos, vel = random_state(rng, asm.layout.nq, asm.layout.n_joints, asm.pos0)
    tau = rng.normal(size=asm.layout.n_joints)
    acc = [np.zeros(asm.layout.nq) for _ in range(2)]
    assert forward_dynamics(km.mi, km.mf, w, 0.0, pos, vel, tau, pos, vel, 0.0, 0.0, acc[0])
    nominal = km.viscous[0]
    km.viscous[0] = nominal + 5.0                  # joint 0 is torque-driven and stiff
    try:
        assert forward_dynamics(km.mi, km.mf, w, 0.0, pos, vel, tau, pos, vel, 0.0, 0.0, acc[1])
    finally:
        km.viscous[0] = nominal
    assert km.mf[km.mi[layout.MF_VISCOUS]] == nominal
    assert not np.allclose(acc[0], acc[1])


def test_the_fitted_blocks_reach_the_modal_mass_of_their_body(asm):
    """forward_dynamics_blocks adds the model block fitted[FIT_C] to each body's modal mass: with
    C = cK K (and the dampers' cD, which also takes the joint friction implicitly) it equals the implicit
    added mass cK K + cD D, and without the flag it is not added."""
    km, w = asm.km, make_work(asm.km).w
    rng = np.random.default_rng(5)
    pos, vel = random_state(rng, asm.layout.nq, asm.layout.n_joints, asm.pos0)
    tau = rng.normal(size=asm.layout.n_joints)
    cK, cD = 2.5e-5, 5e-3
    acc = [np.zeros(asm.layout.nq) for _ in range(3)]
    km.fitted[layout.FIT_C] = cK * km.Kmod
    try:
        assert forward_dynamics(km.mi, km.mf, w, 0.0, pos, vel, tau, pos, vel, cK, cD, acc[0])
        assert forward_dynamics_blocks(km.mi, km.mf, w, 0.0, pos, vel, tau, pos, vel, (0.0, cD, True), acc[1])
        assert forward_dynamics_blocks(km.mi, km.mf, w, 0.0, pos, vel, tau, pos, vel, (0.0, cD, False), acc[2])
    finally:
        km.fitted[:] = 0.0
    np.testing.assert_allclose(acc[1], acc[0], rtol=0, atol=1e-12 * np.max(np.abs(acc[0])))
    assert np.max(np.abs(acc[2] - acc[0])) > 1e-6 * np.max(np.abs(acc[0]))


def test_a_block_of_the_wrong_shape_is_refused(asm):
    km = asm.km
    blocks = km.arrays()
    blocks["Kmod"] = np.zeros((km.sizes.nb, km.sizes.NM + 1, km.sizes.NM))
    with pytest.raises(ValueError, match="kernel array Kmod"):
        KernelModel(km.sizes, blocks)
    with pytest.raises(KeyError, match="no kernel array 'nonsense'"):
        km.view("nonsense")


def test_kernels_compile_without_reference_counting_so_cannot_allocate():
    @kernel
    def allocates(n):
        return np.zeros(n).sum()

    @kernel
    def sums(a):
        s = 0.0
        for i in range(a.shape[0]):
            s += a[layout.at(i)]
        return s

    assert sums(np.arange(4.0)) == 6.0
    with pytest.raises(TypingError, match="Only accept returning of array passed into the function"):
        allocates(3)             # np.zeros needs numba's reference-counted allocation


def test_plant_state_and_named_work_views_agree():
    plant = Plant(load_model("configs/ella.toml"))
    plant.pos[1] = 0.3
    plant.evaluate()
    np.testing.assert_array_equal(plant.work.pos, plant.pos)
    assert plant.wrenches is plant.work.fj or np.shares_memory(plant.wrenches, plant.work.w)
    assert np.all(np.isfinite(plant.work.Rw[:3]))
