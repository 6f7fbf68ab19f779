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

_IDENTITY = np.eye(3)


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
    IMU's orientation for the vibration suppression."""

    def __init__(self, arm: NominalArm):
        joints = arm.joints
        self.n = len(joints)
        self.axes = np.array([j.axis for j in joints])
        self.placements = np.array([rpy_matrix(j.rpy_rad) for j in joints])
        self.offsets = np.array([j.offset_m for j in joints])
        self.mass = np.array([j.link.mass_kg for j in joints])
        self.com = np.array([j.link.com_m for j in joints])
        self._gravity_cross = _cross_matrix(np.asarray(arm.gravity_m_s2, float))     # G r = g x r
        self._K = np.array([_cross_matrix(a) for a in self.axes])      # Rodrigues: Rot = I + s K + (1 - c) K^2
        self._K2 = self._K @ self._K
        self.imu_link = arm.link_index(arm.imu.link)
        self.imu_mount = rpy_matrix(arm.imu.rpy_rad)

    def frames(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Joint origins o (n, 3), world joint axes u (n, 3) and link rotations R_l (n, 3, 3) at q."""
        origins = np.empty((self.n, 3))
        axes = np.empty((self.n, 3))
        links = np.empty((self.n, 3, 3))
        R, o = _IDENTITY, np.zeros(3)
        for k in range(self.n):
            o = o + R @ self.offsets[k]
            Rj = R @ self.placements[k]
            s, c = math.sin(q[k]), math.cos(q[k])
            R = Rj @ (_IDENTITY + s * self._K[k] + (1.0 - c) * self._K2[k])
            origins[k], axes[k], links[k] = o, Rj @ self.axes[k], R
        return origins, axes, links

    def gravity_torque(self, q: np.ndarray) -> np.ndarray:
        """Drive torques [N m, link side] that hold the rigid arm still at q against gravity."""
        origins, axes, links = self.frames(q)
        centres = origins + np.einsum("kij,kj->ki", links, self.com)
        beyond_mass = np.cumsum(self.mass[::-1])[::-1]                                   # M_k
        beyond_moment = np.cumsum((self.mass[:, None] * centres)[::-1], axis=0)[::-1]    # h_k
        lever = beyond_moment - beyond_mass[:, None] * origins
        return np.einsum("ki,ki->k", axes, lever @ self._gravity_cross.T)     # u . (g x r) = -u . (r x g)

    def imu_rotation_and_axes(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World rotation of the IMU's axes and the world joint axes (columns) at q; the axes of
        joints beyond the IMU's link are zero (they do not move it)."""
        _, axes, links = self.frames(q)
        axes_w = axes.T.copy()
        axes_w[:, self.imu_link + 1:] = 0.0
        return links[self.imu_link] @ self.imu_mount, axes_w
