"""The plant's two forward-dynamics formulations behind one call, chosen by type when a kernel compiles.

The integrators (hil.kernels.integrate, hil.kernels.fitted_midpoint) take a `plant` record and call
accelerations(plant, ...); the record's type picks the formulation, so each integrator is written once and
numba compiles it once per formulation a run uses, without a run-time switch (which would compile both
formulations into every integrator):

* AbaPlant(mi, mf, w): the articulated-body recursion (hil.kernels.aba);
* DaePlant(mi, mf, w, dm, dw): the screw-theoretic DAE (hil.kernels.screw_dae) with its named views
  (dm, dw = hil.kernels.screw_dae_arrays.views(mi, mf, w)).

Both share the kernel model (mi, mf) and the work array w: the state vectors, the stage vectors and the
fitted blocks lie at the same offsets in either.
"""
from collections import namedtuple

from numba.extending import overload

from .aba import forward_dynamics_blocks
from .screw_dae import solve

AbaPlant = namedtuple("AbaPlant", "mi mf w")
DaePlant = namedtuple("DaePlant", "mi mf w dm dw")


def accelerations(plant, t, pos, vel, tau, el_pos, el_vel, implicit, acc):
    """Generalized accelerations acc of the state (pos, vel) at time t with the drive torques tau, the
    elastic forces and joint friction at (el_pos, el_vel), the implicit operator implicit = (cK, cD,
    fitted) (hil.kernels.aba.forward_dynamics_blocks); False on a singular inertia. Compiled code only:
    the overload below is inlined into the calling kernel."""
    raise TypeError("formulation.accelerations runs inside compiled kernels only")


@overload(accelerations, inline="always")
def _accelerations(plant, t, pos, vel, tau, el_pos, el_vel, implicit, acc):
    if getattr(plant, "instance_class", None) is DaePlant:
        def dae(plant, t, pos, vel, tau, el_pos, el_vel, implicit, acc):
            cK, cD, fitted = implicit
            return solve(plant.dm, plant.dw, t, pos, vel, tau, el_pos, el_vel, cK, cD, fitted, acc)
        return dae

    def aba(plant, t, pos, vel, tau, el_pos, el_vel, implicit, acc):
        return forward_dynamics_blocks(plant.mi, plant.mf, plant.w, t, pos, vel, tau, el_pos, el_vel, implicit, acc)
    return aba
