"""A load that gives NaN from 0.2 s on (the FMU-import tests' second failing FMU)."""
from spring_load import SpringLoad


class NanLoad(SpringLoad):
    description = "the spring and damper, its load NaN from 0.2 s on"

    def do_step(self, current_time, step_size):
        super().do_step(current_time, step_size)
        if current_time + step_size >= 0.2:
            self.load = float("nan")
        return True
