"""A load that fails its step from 0.2 s on (the FMU-import tests' failing FMU)."""
from spring_load import SpringLoad


class FailingLoad(SpringLoad):
    description = "the spring and damper, failing its step from 0.2 s on"

    def step_holds(self, t):
        return t < 0.2
