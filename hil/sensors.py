"""What the firmware measures: motor-side incremental encoders and IMUs on the links.

Computed from the plant state at the sample instant, in each sensor's own frame.
Ideal (noise-free) readings; the encoder is quantised and wraps like the real counter.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .plant import Plant

STATION_FIELDS = 24   # layout of kernels.outputs.station_state


@dataclass
class EncoderSpec:
    lines_per_rev: int = 4096        # optical lines per motor revolution
    quadrature: int = 4              # x4 decoding
    counter_bits: int = 32           # signed counter width; wraps modulo 2^bits

    @property
    def counts_per_rev(self) -> int:
        return self.lines_per_rev * self.quadrature


class SensorSuite:
    """Encoders on every joint's motor and IMUs at named stations.

    sample_after_step() is called once per cycle right after the plant step; the
    station kinematics come from the same kernel call (Plant.step_and_sample).
    """

    def __init__(self, plant: Plant, imu_stations: tuple[str, ...] = ("tip",), encoder: EncoderSpec | None = None):
        self.plant = plant
        self.encoder = encoder or EncoderSpec()
        lay = plant.layout
        self.imu_stations = tuple(imu_stations)
        self.station_index = np.array([lay.station_names.index(s) for s in self.imu_stations], np.int64)
        self.station_out = np.zeros((len(self.station_index), STATION_FIELDS))
        self.gear = np.array([b.joint.gear_ratio for b in plant.asm.model.bodies])
        self.motor_index = np.array([lay.motor_index(k) if lay.motor_of_joint[k] >= 0 else k
                                     for k in range(lay.n_joints)], np.int64)
        self.counts = np.zeros(lay.n_joints, np.int64)
        self.velocity_counts = np.zeros(lay.n_joints)      # motor-shaft counts/s (CiA 402 velocity actual)
        self.imu = np.zeros((len(self.station_index), 6))   # specific force (3), angular rate (3), sensor axes
        self._half = 1 << (self.encoder.counter_bits - 1)
        self._mod = 1 << self.encoder.counter_bits

    def step(self, tau: np.ndarray) -> None:
        """Advance the plant one step with tau and sample every sensor at the new instant."""
        self.plant.step_and_sample(tau, self.station_index, self.station_out)
        self._encoders()
        self._imus()

    def motor_angles(self) -> np.ndarray:
        """True motor-shaft angles [rad]: n q, or n phi for a Spong joint (phi, the rotor
        coordinate, is stored referred to the link side)."""
        return self.gear * self.plant.pos[self.motor_index]

    def motor_velocity_counts(self) -> np.ndarray:
        """Motor-shaft speeds in encoder counts/s at the last sample: n qd (or n phi_dot of a Spong
        joint) times counts_per_rev / (2 pi); computed on request (only maps with vel_<joint> need it)."""
        np.multiply(self.gear * (self.encoder.counts_per_rev / (2 * np.pi)), self.plant.vel[self.motor_index],
                    out=self.velocity_counts)
        return self.velocity_counts

    def _encoders(self) -> None:
        raw = np.floor(self.motor_angles() * (self.encoder.counts_per_rev / (2 * np.pi))).astype(np.int64)
        self.counts[:] = (raw + self._half) % self._mod - self._half

    def _imus(self) -> None:
        for i, o in enumerate(self.station_out):
            R = o[3:12].reshape(3, 3)
            self.imu[i, 0:3] = R.T @ o[18:21]
            self.imu[i, 3:6] = R.T @ o[15:18]
