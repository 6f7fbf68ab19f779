"""A plan tried on its own copy of a model's arrays: the production step kernel of a method and substep
count stepped from a given state, for the measured judgements of a plan (hil.dynamics.energy_error,
hil.dynamics.motion_error). Nothing of the caller's plant is touched."""
from __future__ import annotations

import numpy as np

from hil.kernels.aba import forward_kinematics, prepare
from hil.kernels.integrate import advance
from hil.kernels.layout import METHOD_EULER, METHOD_FITTED, METHOD_IMEX, METHOD_RK4
from hil.kernels.outputs import energy
from hil.model import midpoint_fit
from hil.model.assembly import Assembled, make_work

METHOD_CODES = {"rk4": METHOD_RK4, "imex_midpoint": METHOD_IMEX, "euler": METHOD_EULER,
                "fitted_midpoint": METHOD_FITTED}


class TrialRun:
    """`asm` (its arrays copied) stepped with `method` x `substeps` per outer step of the model's dt,
    from its initial state (pos, vel may be set before stepping), the drive torques in ``tau``."""

    def __init__(self, asm: Assembled, method: str, substeps: int):
        self.asm = asm
        self.km = asm.km.copy()
        self.layout = asm.layout
        self.dt, self.substeps, self.code = asm.model.integrator.dt_s, substeps, METHOD_CODES[method]
        if method == "fitted_midpoint":
            self.km.fitted[:] = midpoint_fit.fit(asm, asm.pos0, self.dt / substeps).blocks
        self.w = make_work(self.km).w
        self.pos, self.vel = asm.pos0.copy(), asm.vel0.copy()
        self.tau = np.zeros(max(self.layout.n_joints, 1))
        self.t = 0.0
        self._e = np.zeros(3)

    def step(self) -> bool:
        """One outer step with the torques held; False on a non-finite state or singular inertia."""
        km = self.km
        ok = advance(km.mi, km.mf, self.w, self.t, self.pos, self.vel, self.tau, self.dt, self.substeps, self.code)
        self.t += self.dt
        return bool(ok)

    def energy(self) -> tuple[float, float]:
        """(total, kinetic) energy in J at the current state."""
        km = self.km
        prepare(km.mi, km.mf, self.w, self.t, self.pos, self.vel)
        forward_kinematics(km.mi, km.mf, self.w)
        energy(km.mi, km.mf, self.w, self._e)
        return float(self._e.sum()), float(self._e[0])
