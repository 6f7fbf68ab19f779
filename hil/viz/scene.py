"""The arm's shape from logged coordinates: deformed link centre lines, attachments, IMU frames.

A run log holds the joint angles ``q_<joint>`` and the modal coordinates ``eta_<body>_<mode>``
per row; ``ArmScene`` turns one row into world geometry with the model's own kinematics: each
body's world pose from the joint recursion (``hil.kernels.poses``), and along each flexible link
the deformed neutral axis r(x) = (x, 0, 0) + Gamma(x) eta + e_x eta^T S(x) eta / 2 (the mode
shapes and foreshortening of ``hil.model.modal.BeamModes.at``) at stations spread over the
beam, so a bent link is drawn bent. A rigid body is drawn from its joint to each child joint.
Logs without modal columns (older ``hil run`` logs) give the undeformed shape.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hil.kernels.poses import body_poses, station_frame, station_trajectory
from hil.model.assembly import Assembled, assemble, make_work, rpy_matrix
from hil.model.config import load_model_from_string
from hil.model.sensor_specs import IMU, default_sensors
from config_schema import UserError

__all__ = ["ArmScene", "SceneFrame", "model_of_log"]


def model_of_log(header: dict[str, Any]) -> Assembled:
    """The assembled arm model a run log was made with (its header's preset text)."""
    text = header.get("config_text")
    if text is None:
        path = header.get("config")
        if not path:
            raise UserError("the run log names no arm preset (header without config and config_text)")
        with open(path, encoding="utf-8") as f:
            text = f.read()
    return assemble(load_model_from_string(text, str(header.get("config", "<run log>"))))


@dataclass
class SceneFrame:
    """World geometry of the arm at one instant (m; rotations as 3x3 matrices)."""

    t: float
    centre_lines: dict[str, np.ndarray] = field(default_factory=dict)     # body -> (n, 3) points
    attachments: dict[str, tuple[np.ndarray, float]] = field(default_factory=dict)   # name -> (position, mass)
    imu_frames: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # name -> (position, R)


class ArmScene:
    """Geometry of an arm model at logged coordinates (see the module docstring)."""

    def __init__(self, asm: Assembled, points_per_link: int = 24):
        self.asm = asm
        self.km = asm.km
        self.layout = lay = asm.layout
        self.work = make_work(self.km)
        self._vel = np.zeros(lay.nq)
        self._pos = asm.pos0.copy()
        self._frame = np.zeros(12)
        fore = asm.model.foreshortening
        self._lines = [self._line_nodes(k, points_per_link, fore) for k in range(len(lay.body_names))]
        self._attachments = [(b_index, a, *self._local_point(b_index, a.station_m, a.offset_m, fore))
                             for b_index, body in enumerate(asm.model.bodies) for a in body.attachments]
        sensors = asm.model.sensors or default_sensors(asm.model)
        self._imus = [(s.name, lay.station_names.index(s.station), rpy_matrix(np.asarray(s.rpy_rad, float)))
                      for s in sensors if s.kind == IMU]

    # ------------------------------------------------------------------ geometry tables
    def _local_point(self, k: int, x: float, offset, fore: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(p0, Gamma, S) of a point rigidly attached to body k's cross-section at x (body axes)."""
        modes = self.asm.modes[k]
        p0 = np.array([x, 0.0, 0.0]) + np.asarray(offset, float)
        if modes is None:
            return p0, np.zeros((3, 0)), np.zeros((0, 0))
        gamma, _, s = modes.at(x, offset)
        return p0, gamma, s if fore else np.zeros_like(s)

    def _line_nodes(self, k: int, n: int, fore: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Stations of body k's centre line: along a beam, or from the joint to each child joint."""
        body = self.asm.model.bodies[k]
        if body.beam is not None:
            xs = np.linspace(0.0, body.beam.length_m, n)
            pts = [self._local_point(k, x, np.zeros(3), fore) for x in xs]
        else:
            children = [c for c, b in enumerate(self.asm.model.bodies) if b.parent == body.name]
            ends = [np.asarray(self.km.st_p0[c], float) for c in children] or [np.zeros(3)]
            pts = [(np.zeros(3), np.zeros((3, 0)), np.zeros((0, 0)))]
            pts += [(e, np.zeros((3, 0)), np.zeros((0, 0))) for e in ends]
        p0 = np.array([p[0] for p in pts])
        nm = int(self.km.nm[k])
        return p0, np.array([p[1] for p in pts]).reshape(len(pts), 3, nm), \
            np.array([p[2] for p in pts]).reshape(len(pts), nm, nm)

    # ------------------------------------------------------------------ log rows -> coordinates
    def coordinates(self, columns: list[str], rows: np.ndarray) -> tuple[np.ndarray, bool]:
        """(pos rows (n, nq), whether the log had modal coordinates): joint angles and modal
        coordinates from the columns; rotors of elastic joints at their link angle (they do not
        move the links); absent modal columns give the undeformed links."""
        lay = self.layout
        index = {c: i for i, c in enumerate(columns)}
        pos = np.zeros((len(rows), lay.nq))
        for k, j in enumerate(lay.joint_names):
            pos[:, k] = rows[:, index[f"q_{j}"]]
            if lay.motor_of_joint[k] >= 0:
                pos[:, lay.motor_index(k)] = pos[:, k]
        names = [f"eta_{b}_{m}" for b, labels in zip(lay.body_names, lay.mode_labels) for m in labels]
        have = all(n in index for n in names)
        if have:
            for i, n in enumerate(names):
                pos[:, lay.n_joints + i] = rows[:, index[n]]
        return pos, have

    @property
    def imu_names(self) -> list[str]:
        return [name for name, *_ in self._imus]

    # ------------------------------------------------------------------ geometry
    def frame(self, t: float, pos: np.ndarray) -> SceneFrame:
        """World geometry at coordinates pos (one row of ``coordinates``)."""
        self._pos[:] = pos
        body_poses(self.km.mi, self.km.mf, self.work.w, t, self._pos, self._vel)
        out = SceneFrame(t)
        for k, name in enumerate(self.layout.body_names):
            p0, G, S = self._lines[k]
            out.centre_lines[name] = self._to_world(k, p0, G, S)
        for k, a, p0, G, S in self._attachments:
            out.attachments[a.name] = (self._to_world(k, p0[None], G[None], S[None])[0], a.mass_kg)
        for name, s, R_mount in self._imus:
            station_frame(self.km.mi, self.km.mf, self.work.w, s, self._frame)
            out.imu_frames[name] = (self._frame[:3].copy(), self._frame[3:].reshape(3, 3) @ R_mount)
        return out

    def _to_world(self, k: int, p0: np.ndarray, G: np.ndarray, S: np.ndarray) -> np.ndarray:
        local = p0.copy()
        if G.shape[2]:
            eta = self.work.pos[self.layout.n_joints + self.layout.mode_offsets[k]:][:G.shape[2]]
            local += G @ eta
            local[:, 0] += 0.5 * np.einsum("a,nab,b->n", eta, S, eta)
        return self.work.pw[k] + local @ self.work.Rw[k].T

    def station_positions(self, name: str, t: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """World position (n, 3) of a named station at every row of pos (times t)."""
        s = np.array([self.layout.station_names.index(name)], np.int64)
        out = np.zeros((len(pos), 1, 12))
        station_trajectory(self.km.mi, self.km.mf, self.work.w, np.ascontiguousarray(t, float), np.ascontiguousarray(pos),
                           self._vel, s, out)
        return out[:, 0, :3]

    def rigid(self, pos: np.ndarray) -> np.ndarray:
        """The same coordinates with the modal ones zeroed (the undeformed arm at the same joints)."""
        out = pos.copy()
        out[:, self.layout.n_joints:self.layout.n_joints + self.layout.n_eta] = 0.0
        return out
