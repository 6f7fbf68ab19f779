"""A load whose step raises from 0.2 s on: pythonfmu answers fmi2Fatal (the FMU-import tests' third failing FMU)."""
from spring_load import SpringLoad


class RaisingLoad(SpringLoad):
    description = "the spring and damper, raising in its step from 0.2 s on"

    def do_step(self, current_time, step_size):
        if current_time + step_size >= 0.2:
            raise RuntimeError("the load model broke")
        return super().do_step(current_time, step_size)
