"""A co-simulation spring for the FMU-import tests (built with pythonfmu): a vertical spring and damper from a
station to an anchor where the station was at the FMU's first step, preloaded downwards:
fz = -k (z - z_anchor) - c vz - preload [N], from the station's height z [m] and vertical rate vz [m/s]."""
from pythonfmu import Fmi2Causality, Fmi2Slave, Fmi2Variability, Real


class StationSpring(Fmi2Slave):
    author = "ELLA HIL tests"
    description = "vertical spring and damper at a station: fz = -k (z - z_anchor) - c vz - preload"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.z, self.vz, self.fz = 0.0, 0.0, 0.0
        self.k, self.c, self.preload = 2000.0, 30.0, 20.0
        self.anchor = None
        for name in ("z", "vz"):
            self.register_variable(Real(name, causality=Fmi2Causality.input))
        for name in ("k", "c", "preload"):
            self.register_variable(Real(name, causality=Fmi2Causality.parameter, variability=Fmi2Variability.fixed))
        self.register_variable(Real("fz", causality=Fmi2Causality.output))

    def do_step(self, current_time, step_size):
        if self.anchor is None:
            self.anchor = self.z
        self.fz = -self.k * (self.z - self.anchor) - self.c * self.vz - self.preload
        return True
