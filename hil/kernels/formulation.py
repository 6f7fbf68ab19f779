"""The forward dynamics of the plant's formulation, chosen by a flag the integrators pass down: the
articulated-body algorithm (hil.kernels.aba) or seed 000's screw-theoretic DAE (hil.kernels.screw_dae),
so that each integrator is written once for both (hil.kernels.integrate, hil.kernels.fitted_midpoint)."""

from .jit import kernel
from .aba import forward_dynamics_blocks
from .screw_dae import solve
from .screw_dae_arrays import views


@kernel
def evaluate(dae, mi, mf, w, t, pos, vel, tau, el_pos, el_vel, implicit, acc):
    """Generalized accelerations acc of the state (pos, vel) at time t (hil.kernels.aba.forward_dynamics:
    drive torques tau, elastic forces and friction at (el_pos, el_vel), implicit = (cK, cD, fitted)),
    with the screw DAE when `dae`, else the articulated-body algorithm. False on a singular inertia
    or block."""
    if dae:
        cK, cD, fitted = implicit
        dm, dw = views(mi, mf, w)
        return solve(dm, dw, t, pos, vel, tau, el_pos, el_vel, cK, cD, fitted, acc)
    return forward_dynamics_blocks(mi, mf, w, t, pos, vel, tau, el_pos, el_vel, implicit, acc)
