"""The arm with its devices, stepped offline one command at a time: the preset's drives between the
commands and the plant, its sensors after it, in the real-time loop's order (hil.runtime.loop:
drives.update, plant.step, sensors.sample) and from its start (the preset's initial pose at rest in
the static deflection, Plant.equilibrium_eta; the sensors sampled once there).

``hil simulate --devices`` and the exported FMU (``hil fmu export``, hil.fmu) both step a DeviceArm:
one behaviour, so that the FMU's outputs are hil simulate's numbers.

Outputs (``columns``), after each step: t; q_<joint>, qd_<joint>; tau_<joint> the torque the drives
delivered over the step (link side, N m); tip_x, tip_y, tip_z (the station "tip", m); every sensor
channel as measured (encoder counts, IMU, currents: hil.devices.sensors) and its ideal value
``<channel>_true``.
"""
from __future__ import annotations

import numpy as np

from hil.devices.drives import DriveBank
from hil.devices.sensors import SensorSuite
from hil.dynamics.plant import Plant
from hil.model.spec import Model

TIP = "tip"


class DeviceArm:
    """The plant, its drive bank and its sensor suite (module docstring)."""

    def __init__(self, model: Model, method: str | None = None, substeps: int | None = None,
                 formulation: str = "aba"):
        self.plant = plant = Plant(model, method, substeps, formulation)
        plant.equilibrium_eta()
        self.drives = DriveBank(plant)
        self.sensors = SensorSuite(plant, current_source=self.drives.current)
        self.joints = plant.layout.joint_names
        self.tip = TIP in self.sensors.station_names      # the suite samples the tip first (its output stations)
        channels = self.sensors.channel_names
        self.columns = (["t"] + [f"q_{j}" for j in self.joints] + [f"qd_{j}" for j in self.joints]
                        + [f"tau_{j}" for j in self.joints] + (["tip_x", "tip_y", "tip_z"] if self.tip else [])
                        + list(channels) + [f"{c}_true" for c in channels])
        self.row = np.zeros(len(self.columns))
        self._fill()

    @property
    def dt(self) -> float:
        return self.plant.dt

    def step(self, command: np.ndarray) -> np.ndarray:
        """One step with the drive commands `command` (N m per joint, held over the step): the row after it."""
        self.plant.step(self.drives.update(command))
        self.sensors.sample()
        return self._fill()

    def _fill(self) -> np.ndarray:
        nj, r, plant = len(self.joints), self.row, self.plant
        r[0] = plant.t
        r[1:1 + nj] = plant.pos[:nj]
        r[1 + nj:1 + 2 * nj] = plant.vel[:nj]
        r[1 + 2 * nj:1 + 3 * nj] = self.drives.tau
        k = 1 + 3 * nj
        if self.tip:
            r[k:k + 3] = self.sensors.station_out[0][:3]
            k += 3
        n = len(self.sensors.channel_names)
        r[k:k + n] = self.sensors.measured
        r[k + n:k + 2 * n] = self.sensors.truth
        return r


def simulate_arm(arm: DeviceArm, duration_s: float, commands, every: int, sink) -> int:
    """Step `arm` for `duration_s` with the drive commands `commands(t, out)` fills at each step's start (a
    hil.dynamics.torque_table.TorqueTable; None: zero), its rows at steps 0, every, ... to `sink`
    (a run writer, or None); the number of steps."""
    from hil.dynamics.simulate import steps_for

    n = steps_for(duration_s, arm.dt)
    command = np.zeros(len(arm.joints))
    if sink is not None:
        sink.write(arm.row)
    for k in range(1, n + 1):
        if commands is not None:
            commands(arm.plant.t, command)
        row = arm.step(command)
        if sink is not None and k % every == 0:
            sink.write(row)
    return n
