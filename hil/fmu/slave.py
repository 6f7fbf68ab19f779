"""The co-simulation slave of an exported FMU (hil.fmu.export): an arm preset with its drives and sensors
(hil.devices.arm.DeviceArm), stepped one communication step of the preset's dt at a time.

Variables: inputs ``tau_cmd_<joint>`` (the drive torque commands, N m, link side, held over the step);
outputs the DeviceArm's columns but t (joint angles and rates, delivered torques, the tip, every
sensor channel as measured and ideal); parameters, fixed (set before the initialisation ends), the
model paths of PARAMETERS the preset has (payload masses, the links' stiffness and modal damping,
the joints' friction and rotor inertia), each under its path as a name. The arm is built when the
initialisation ends, with the parameters set then; a step of another size than the preset's dt, a
non-finite input or a plant that diverges ends the step with an error logged (fmi2Error), never a
wrong number.

The preset travels in the FMU (``resources/preset.toml``); the package does not: the FMU runs in a
Python (3.11 or later) that has it installed, as pythonfmu's FMUs do (``needsExecutionTool``).
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from pythonfmu import DefaultExperiment, Fmi2Causality, Fmi2Slave, Fmi2Variability, Real
from pythonfmu.enums import Fmi2Status

from config_schema import ConfigError

from hil.campaign.overrides import Preset
from hil.devices.arm import DeviceArm
from hil.model.config import load_model_from_string

PRESET_FILE = "preset.toml"
# the fit-worthy values an FMU exposes, as model path patterns (<body>: every body that has the key)
PARAMETERS = ("body.<body>.attachment.payload.mass_kg", "body.<body>.beam.E_Pa", "body.<body>.beam.damping_ratio",
              "body.<body>.joint.viscous_N_m_s_rad", "body.<body>.joint.coulomb_N_m",
              "body.<body>.joint.rotor_inertia_kg_m2")
STEP_TOLERANCE = 1e-9          # a communication step within this fraction of dt is dt


def parameter_paths(preset: Preset) -> list[str]:
    """The paths of PARAMETERS this preset sets (a scalar value), in the order of its bodies."""
    bodies = [b["name"] for b in preset.data.get("body", [])]
    out = []
    for pattern in PARAMETERS:
        for body in bodies:
            path = pattern.replace("<body>", body)
            try:
                value = preset.value(path)
            except (KeyError, ValueError):
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append(path)
    return out


class ArmSlave(Fmi2Slave):
    """The FMU's slave; an export subclasses it once under the FMU's model identifier."""

    author = "ELLA HIL"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.preset = Preset(str(Path(self.resources) / PRESET_FILE))
        self.description = (f"{self.preset.data['model']['name']}: the arm with its drives and sensors; needs a "
                            "Python >= 3.11 with the ella-hil package (a tool-coupled FMU)")
        self.values = {p: float(self.preset.value(p)) for p in parameter_paths(self.preset)}
        self.arm = self._build()
        self.default_experiment = DefaultExperiment(start_time=0.0, step_size=self.arm.dt)
        self.command = np.zeros(len(self.arm.joints))
        for k, joint in enumerate(self.arm.joints):
            self.register_variable(Real(f"tau_cmd_{joint}", causality=Fmi2Causality.input,
                                        description=f"drive torque command of {joint} [N m]",
                                        getter=lambda k=k: float(self.command[k]),
                                        setter=lambda v, k=k: self.command.__setitem__(k, v)))
        for i, column in enumerate(self.arm.columns[1:], start=1):
            self.register_variable(Real(column, causality=Fmi2Causality.output, getter=lambda i=i: float(self.arm.row[i])))
        for path in self.values:
            self.register_variable(Real(path, causality=Fmi2Causality.parameter, variability=Fmi2Variability.fixed,
                                        description=f"{path} (model path, SI unit in its name)",
                                        getter=lambda p=path: self.values[p],
                                        setter=lambda v, p=path: self.values.__setitem__(p, v)),
                                   nested=False)

    def _build(self) -> DeviceArm:
        text = self.preset.with_overrides(self.values, f"FMU parameters of {self.preset.path}")
        return DeviceArm(load_model_from_string(text, self.preset.path))

    def exit_initialization_mode(self):
        try:
            self.arm = self._build()
        except ConfigError as exc:               # a parameter the preset reader refuses: its one line
            self.log(str(exc), Fmi2Status.error)
            raise

    def do_step(self, current_time: float, step_size: float) -> bool:
        dt = self.arm.dt
        if abs(step_size - dt) > STEP_TOLERANCE * dt:
            self.log(f"communication step {step_size:g} s: this FMU steps its preset's dt = {dt:g} s only",
                     Fmi2Status.error)
            return False
        if not all(math.isfinite(v) for v in self.command):
            self.log(f"non-finite drive command {self.command.tolist()} at t = {current_time:g} s", Fmi2Status.error)
            return False
        row = self.arm.step(self.command)
        if not np.isfinite(row).all():
            self.log(f"the plant diverged in the step from t = {current_time:g} s", Fmi2Status.error)
            return False
        return True
