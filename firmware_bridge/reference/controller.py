"""The reference firmware's control law, free of any I/O.

Joint PID on the motor encoders (collocated, so passive against the link modes),
following smooth (quintic) trajectories to the set-points, with an optional
vibration-suppression term from the IMU at the tip.

Vibration suppression: the gyro measures the tip frame's absolute angular rate.
Subtracting the rate of the rigid arm (the joint rates from the encoders through the
nominal arm's rigid kinematics, firmware_bridge.reference.rigid_chain) leaves the links'
elastic rate w_e. Its projection on the joint axes, low-pass filtered below the first
torsion and second bending modes (second order, `vs_cutoff_hz`), is fed back as
tau_vs = -k_vs J_w^T w_e: the joints push against the tip's elastic swing, which damps
the first bending modes that the stiff collocated PID leaves to structural damping.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from firmware_bridge.reference.rigid_chain import RigidChain

# seed 000, Sec. 7: final set-points of theta_z1 (yaw), theta_y1 (pitch), theta_z2 (elbow) [rad]
ELLA_SETPOINTS = {"base_yaw": 0.6922, "shoulder_pitch": -0.4928, "elbow": 0.4270}


def quintic(t: float, T: float) -> tuple[float, float]:
    """Rest-to-rest blend s(t) in [0, 1] and its rate, minimum-jerk over [0, T]."""
    if t <= 0.0:
        return 0.0, 0.0
    if t >= T:
        return 1.0, 0.0
    x = t / T
    return x ** 3 * (10 - 15 * x + 6 * x * x), 30 * x * x * (1 - x) ** 2 / T


@dataclass
class ControllerGains:
    kp: np.ndarray
    kd: np.ndarray
    ki: np.ndarray
    integral_limit_N_m: float = 200.0
    vs_gain_N_m_s_rad: float = 100.0     # k_vs of the vibration suppression
    vs_cutoff_hz: float = 8.0
    rate_filter_hz: float = 80.0         # low-pass of the encoder-difference joint rates
    torque_limit_N_m: np.ndarray = field(default_factory=lambda: np.full(3, 250.0))


class ReferenceController:
    """Joint PID to set-points; call update() once per cycle with the latest encoder counts."""

    def __init__(self, gear: np.ndarray, counts_per_rev: np.ndarray | int, q0: np.ndarray, goal: np.ndarray,
                 move_time_s: float, gains: ControllerGains, dt: float, start_s: float = 0.2,
                 geometry: RigidChain | None = None):
        """`counts_per_rev` at the motor shaft (per joint or one for all); `geometry` (the rigid arm's
        kinematics) switches the IMU vibration suppression on (update() then needs the gyro)."""
        self.gear = np.asarray(gear, float)
        self.rad_per_count = 2 * np.pi / (counts_per_rev * self.gear)
        self.q0 = np.asarray(q0, float).copy()
        self.origin = self.q0.copy()             # where the trajectory to the goal starts (replan)
        self.goal = np.asarray(goal, float)
        self.T = move_time_s
        self.start = start_s
        self.g = gains
        self.dt = dt
        self.alpha = 1 - np.exp(-2 * np.pi * gains.rate_filter_hz * dt)
        self.geometry = geometry
        self.vs_alpha = 1 - np.exp(-2 * np.pi * gains.vs_cutoff_hz * dt)
        self.vs_state = np.zeros((2, len(q0)))
        self.q = self.q0.copy()
        self.qd = np.zeros_like(self.q0)
        self.integral = np.zeros_like(self.q0)
        self._last_counts: np.ndarray | None = None

    def joint_angles(self, counts: np.ndarray) -> np.ndarray:
        """Joint angles from the wrapping 32-bit motor counters, unwrapped and referred to q0 at the
        first sample (an incremental encoder knows no absolute zero)."""
        counts = np.asarray(counts, np.int64)
        if self._last_counts is None:
            self._last_counts = counts.copy()
            self._unwrapped = np.zeros(len(counts), np.int64)
        self._unwrapped += (counts - self._last_counts + 2 ** 31) % 2 ** 32 - 2 ** 31
        self._last_counts = counts.copy()
        return self.q0 + self._unwrapped * self.rad_per_count

    def reference(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        s, sd = quintic(t - self.start, self.T)
        return self.origin + s * (self.goal - self.origin), sd * (self.goal - self.origin)

    def replan(self, t: float, q: np.ndarray) -> None:
        """The trajectory to the goal restarted at time t from the pose q."""
        self.origin = np.asarray(q, float).copy()
        self.start = t

    def update(self, t: float, counts: np.ndarray, feedforward=None, gyro: np.ndarray | None = None,
               engaged: bool = True) -> np.ndarray:
        """Drive torques [N m, link side] from the encoder counts; `feedforward(q)` (e.g. the
        gravity torque of the nominal rigid arm) is added before the torque limit; `gyro` (IMU angular
        rate in its frame [rad/s]) feeds the vibration suppression when it is on.

        `engaged` False: the drives do not apply the commands (their status reports a command timeout).
        The integrator then holds its value and the trajectory restarts from the measured pose every
        cycle, so that re-engaging is bumpless: no wound-up integral, no jump to where the old
        trajectory has got to meanwhile."""
        q = self.joint_angles(counts)
        self.qd += self.alpha * ((q - self.q) / self.dt - self.qd)
        self.q = q
        if not engaged:
            self.replan(t, q)
        q_ref, qd_ref = self.reference(t)
        e = q_ref - q
        if engaged:
            self.integral = np.clip(self.integral + self.g.ki * e * self.dt, -self.g.integral_limit_N_m,
                                    self.g.integral_limit_N_m)
        tau = self.g.kp * e + self.g.kd * (qd_ref - self.qd) + self.integral
        if feedforward is not None:
            tau = tau + feedforward(q)
        if self.geometry is not None and gyro is not None:
            tau = tau - self.g.vs_gain_N_m_s_rad * self._filtered_elastic_rate(q, gyro)
        return np.clip(tau, -self.g.torque_limit_N_m, self.g.torque_limit_N_m)

    def _filtered_elastic_rate(self, q: np.ndarray, gyro: np.ndarray) -> np.ndarray:
        """Elastic angular rate of the tip projected on the joint axes, second-order low-passed."""
        R, axes_w = self.geometry.imu_rotation_and_axes(q)
        w_e = axes_w.T @ (R @ gyro - axes_w @ self.qd)
        self.vs_state[0] += self.vs_alpha * (w_e - self.vs_state[0])
        self.vs_state[1] += self.vs_alpha * (self.vs_state[0] - self.vs_state[1])
        return self.vs_state[1]
