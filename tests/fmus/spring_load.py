"""A co-simulation load for the FMU-import tests (built with pythonfmu): a torsion spring and damper on a
joint, load = -k (q - q0) - c qd [N m], from the joint angle q [rad] and rate qd [rad/s] it reads."""
from pythonfmu import Fmi2Causality, Fmi2Slave, Fmi2Variability, Real


class SpringLoad(Fmi2Slave):
    author = "ELLA HIL tests"
    description = "torsion spring and damper: load = -k (q - q0) - c qd"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.q, self.qd, self.load = 0.0, 0.0, 0.0
        self.k, self.c, self.q0 = 50.0, 2.0, 0.0
        for name in ("q", "qd"):
            self.register_variable(Real(name, causality=Fmi2Causality.input))
        for name in ("k", "c", "q0"):
            self.register_variable(Real(name, causality=Fmi2Causality.parameter, variability=Fmi2Variability.fixed))
        self.register_variable(Real("load", causality=Fmi2Causality.output))

    def do_step(self, current_time, step_size):
        self.load = -self.k * (self.q - self.q0) - self.c * self.qd
        return self.step_holds(current_time + step_size)

    def step_holds(self, t):
        return True
