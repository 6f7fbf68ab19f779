"""Kinematics and gravity of the firmware's nominal rigid arm (firmware_bridge.reference.nominal).

Frames, for joints k = 0 .. n-1 of a serial chain from the base (world = base frame):

    joint frame   R_j[k] = R_l[k-1] P_k,          o[k] = o[k-1] + R_l[k-1] offset_k
    link frame    R_l[k] = R_j[k] Rot(a_k, q_k)   (right hand about the unit axis a_k)
    world axis    u[k]   = R_j[k] a_k
    centre of mass c[k]  = o[k] + R_l[k] com_k

with R_l[-1] = I, o[-1] = 0 and P_k = Rz(yaw) Ry(pitch) Rx(roll) of the joint's rpy_rad.

Gravity feed-forward (composite bodies): the links k .. n-1 beyond joint k weigh M_k = sum m_i
and have the first moment h_k = sum m_i c[i]; gravity g exerts on them the moment
(h_k - M_k o[k]) x g about the joint's origin. The drive torque that holds the arm still at q
cancels its component along the axis:

    tau_k = -u[k] . ((h_k - M_k o[k]) x g)

(positive torque turns q_k positively; M_k and h_k accumulate from the tip inwards, O(n)). This
is the gravity term g(q) of M(q) qdd + C(q, qd) qd + g(q) = tau of the rigid chain.
"""
from __future__ import annotations

import math

import numpy as np

from firmware_bridge.reference.nominal import NominalArm

def rpy_matrix(rpy: np.ndarray) -> np.ndarray:
    """R = Rz(yaw) Ry(pitch) Rx(roll), fixed-axis roll-pitch-yaw."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def _cross_matrix(a: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -a[2], a[1]], [a[2], 0.0, -a[0]], [-a[1], a[0], 0.0]])


class RigidChain:
    """The firmware's rigid arm: frames at joint angles q, the gravity torques that hold it, and the
    IMU's orientation for the vibration suppression. The chain is short and walked every cycle, so
    the frames are worked out in Python floats (3-tuples, 3x3 tuples of rows): numpy's per-call cost
    on 3-vectors is most of the work at this size."""

    def __init__(self, arm: NominalArm):
        joints = arm.joints
        self.n = len(joints)
        self.axes = [_vector(j.axis) for j in joints]
        self.placements = [_matrix(rpy_matrix(j.rpy_rad)) for j in joints]
        self.offsets = [_vector(j.offset_m) for j in joints]
        self.mass = [float(j.link.mass_kg) for j in joints]
        self.com = [_vector(j.link.com_m) for j in joints]
        self.gravity = _vector(arm.gravity_m_s2)
        self._K = [_matrix(_cross_matrix(np.asarray(a))) for a in self.axes]   # Rodrigues: Rot = I + s K + (1 - c) K^2
        self._K2 = [_matmul(K, K) for K in self._K]
        self.imu_link = arm.link_index(arm.imu.link)
        self.imu_mount = rpy_matrix(arm.imu.rpy_rad)

    def frames(self, q) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Joint origins o (n, 3), world joint axes u (n, 3) and link rotations R_l (n, 3, 3) at q."""
        origins, axes, links = self._frames(q)
        return np.array(origins), np.array(axes), np.array(links)

    def _frames(self, q) -> tuple[list, list, list]:
        origins, axes, links = [], [], []
        R, o = _IDENTITY_ROWS, (0.0, 0.0, 0.0)
        for k in range(self.n):
            o = _add(o, _apply(R, self.offsets[k]))
            Rj = _matmul(R, self.placements[k])
            s, c = math.sin(q[k]), math.cos(q[k])
            R = _matmul(Rj, _rodrigues(self._K[k], self._K2[k], s, 1.0 - c))
            origins.append(o)
            axes.append(_apply(Rj, self.axes[k]))
            links.append(R)
        return origins, axes, links

    def gravity_torque(self, q) -> np.ndarray:
        """Drive torques [N m, link side] that hold the rigid arm still at q against gravity."""
        origins, axes, links = self._frames(q)
        tau = [0.0] * self.n
        beyond_mass, beyond_moment = 0.0, (0.0, 0.0, 0.0)        # M_k, h_k, from the tip inwards
        for k in range(self.n - 1, -1, -1):
            m = self.mass[k]
            centre = _add(origins[k], _apply(links[k], self.com[k]))
            beyond_mass += m
            beyond_moment = _add(beyond_moment, (m * centre[0], m * centre[1], m * centre[2]))
            o = origins[k]
            lever = (beyond_moment[0] - beyond_mass * o[0], beyond_moment[1] - beyond_mass * o[1],
                     beyond_moment[2] - beyond_mass * o[2])
            tau[k] = _dot(axes[k], _cross(self.gravity, lever))        # u . (g x r) = -u . (r x g)
        return np.array(tau)

    def imu_rotation_and_axes(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World rotation of the IMU's axes and the world joint axes (columns) at q; the axes of
        joints beyond the IMU's link are zero (they do not move it)."""
        _, axes, links = self.frames(q)
        axes_w = axes.T.copy()
        axes_w[:, self.imu_link + 1:] = 0.0
        return links[self.imu_link] @ self.imu_mount, axes_w


_IDENTITY_ROWS = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))


def _vector(v) -> tuple:
    return tuple(float(x) for x in v)


def _matrix(m) -> tuple:
    return tuple(_vector(row) for row in m)


def _add(a: tuple, b: tuple) -> tuple:
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def _dot(a: tuple, b: tuple) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a: tuple, b: tuple) -> tuple:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _apply(R: tuple, v: tuple) -> tuple:
    (a, b, c), (d, e, f), (g, h, i) = R
    x, y, z = v
    return (a * x + b * y + c * z, d * x + e * y + f * z, g * x + h * y + i * z)


def _rodrigues(K: tuple, K2: tuple, s: float, v: float) -> tuple:
    """I + s K + v K^2."""
    (a, b, c), (d, e, f), (g, h, i) = K
    (A, B, C), (D, E, F), (G, H, I) = K2
    return ((1.0 + s * a + v * A, s * b + v * B, s * c + v * C), (s * d + v * D, 1.0 + s * e + v * E, s * f + v * F),
            (s * g + v * G, s * h + v * H, 1.0 + s * i + v * I))


def _matmul(A: tuple, B: tuple) -> tuple:
    (a, b, c), (d, e, f), (g, h, i) = A
    (p, q, r), (s, t, u), (v, w, x) = B
    return ((a * p + b * s + c * v, a * q + b * t + c * w, a * r + b * u + c * x),
            (d * p + e * s + f * v, d * q + e * t + f * w, d * r + e * u + f * x),
            (g * p + h * s + i * v, g * q + h * t + i * w, g * r + h * u + i * x))
