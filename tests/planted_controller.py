"""A controller with a planted weakness, the subject of the falsification tests (`hil campaign search`): the PD
of tools.seed000_experiment, plus a bad cell of a gain schedule over the payload mass and link 1's stiffness.
Near 3.41 kg and 1.037 times the preset's Young's modulus its start-up pulses the base yaw joint with up to
PULSE_N_M for the first 20 ms, falling off as a Gaussian (0.35 kg, 0.03 of the stiffness): a bump a search
can climb, whose top alone crosses a limit a little below PULSE_N_M."""
from __future__ import annotations

import numpy as np

from tools.seed000_experiment import PdController

PULSE_N_M = 1.0
PAYLOAD_KG, PAYLOAD_WIDTH_KG = 3.41, 0.35
STIFFNESS, STIFFNESS_WIDTH = 1.037, 0.03
NOMINAL_E_PA = 2.1e11


def bump(payload_kg, stiffness):
    """The bad cell's weight at a payload [kg] and a stiffness factor (numbers or arrays): 1 at its centre."""
    return np.exp(-((payload_kg - PAYLOAD_KG) / PAYLOAD_WIDTH_KG) ** 2 - ((stiffness - STIFFNESS) / STIFFNESS_WIDTH) ** 2)


class PlantedPd(PdController):
    def __init__(self, plant, pulse_N_m: float):
        super().__init__(plant.layout.joint_names, plant.asm.pos0)
        self.pulse = pulse_N_m

    def __call__(self, t, measured):
        tau = super().__call__(t, measured)
        if t < 0.02:
            tau[0] += self.pulse
        return tau


def controller(plant) -> PlantedPd:
    bodies = {b.name: b for b in plant.asm.model.bodies}
    payload = next(a.mass_kg for a in bodies["link2"].attachments if a.name == "payload")
    return PlantedPd(plant, PULSE_N_M * float(bump(payload, bodies["link1"].beam.E_Pa / NOMINAL_E_PA)))
