"""The arm's scene and signals as Foxglove messages: what the MCAP export and the live view send.

Topics (Foxglove Studio opens them with its 3D and Plot panels):

* ``/arm/scene`` (foxglove.SceneUpdate, protobuf): one entity ``arm`` in frame ``world`` with a
  line strip per body (the deformed centre line, ``hil.viz.scene``), a sphere per attachment
  (motor housings, payload; diameter from the mass) and, per IMU, three arrows along its axes
  (x red, y green, z blue);
* ``/arm/imu_<name>`` (foxglove.FrameTransform): the IMU frame in ``world``, for the Transforms
  panel;
* ``/signals/<group>`` (JSON, one message per log row): the log's columns grouped by kind
  (``joints``, ``drives``, ``sensors``, ``tip``, ``modes``, ``timing``, ``status``, ...), each a map
  column -> value, described in the channel's JSON schema with unit and description;
* ``/events`` (JSON): the run log's events as logged.

Log times are the simulated time in ns from the run start (t = 0 at 0 ns).
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

import numpy as np

from hil.logs.units import describe
from hil.viz.scene import SceneFrame

__all__ = ["scene_update", "imu_transforms", "signal_groups", "group_schema", "SCENE_TOPIC", "EVENT_TOPIC"]

SCENE_TOPIC = "/arm/scene"
EVENT_TOPIC = "/events"
# a run log event (hil.logs.runlog): its kind and time, with the fields its kind adds
EVENT_SCHEMA = {"type": "object", "properties": {"event": {"type": "string", "description": "the event's kind"},
                                                 "t": {"type": "number", "description": "emulator time [s]"}},
                "required": ["event", "t"]}
_COLORS = [(0.15, 0.45, 0.85), (0.9, 0.45, 0.1), (0.2, 0.65, 0.3), (0.75, 0.2, 0.6), (0.5, 0.5, 0.5)]
_AXES = [(1.0, 0.0, 0.0), (0.0, 0.8, 0.0), (0.0, 0.3, 1.0)]
_GROUPS = [("joints", r"(q|qd|theta|thetad)_.+"), ("drives", r"(tau_cmd|tau|cur|brake)_.+"),
           ("modes", r"eta_.+"), ("tip", r"tip_[xyz]"), ("wrenches", r"w_.+"),
           ("timing", r"(lateness|compute|io|cmd_age)_us"), ("status", r"(cycle|status)")]


def ns(t_s: float) -> int:
    return int(round(t_s * 1e9))


def _quaternion(R: np.ndarray):
    """Unit quaternion (x, y, z, w) of a rotation matrix (Shepperd's method)."""
    from foxglove.messages import Quaternion
    tr = R[0, 0] + R[1, 1] + R[2, 2]
    if tr > 0:
        s = 2.0 * math.sqrt(tr + 1.0)
        w, x, y, z = 0.25 * s, (R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s
    else:
        i = int(np.argmax(np.diag(R)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(1.0 + R[i, i] - R[j, j] - R[k, k])
        q = [0.0, 0.0, 0.0]
        q[i] = 0.25 * s
        q[j] = (R[j, i] + R[i, j]) / s
        q[k] = (R[k, i] + R[i, k]) / s
        w = (R[k, j] - R[j, k]) / s
        x, y, z = q
    return Quaternion(x=float(x), y=float(y), z=float(z), w=float(w))


def _pose(p: np.ndarray, R: np.ndarray):
    from foxglove.messages import Pose, Vector3
    return Pose(position=Vector3(x=float(p[0]), y=float(p[1]), z=float(p[2])), orientation=_quaternion(R))


def _arrow_rotation(R: np.ndarray, axis: int) -> np.ndarray:
    """A rotation whose x axis (Foxglove's arrow direction) is column `axis` of R."""
    return R[:, [axis, (axis + 1) % 3, (axis + 2) % 3]]


def scene_update(frame: SceneFrame, arrow_m: float = 0.12):
    """A foxglove.SceneUpdate of one SceneFrame (module docstring)."""
    from foxglove.messages import (ArrowPrimitive, Color, LinePrimitive, LinePrimitiveLineType, Point3,
                                   SceneEntity, SceneUpdate, SpherePrimitive, Timestamp, Vector3)
    eye = np.eye(3)
    lines = []
    for i, points in enumerate(frame.centre_lines.values()):
        r, g, b = _COLORS[i % len(_COLORS)]
        lines.append(LinePrimitive(type=LinePrimitiveLineType.LineStrip, pose=_pose(np.zeros(3), eye),
                                   thickness=0.02, points=[Point3(x=float(p[0]), y=float(p[1]), z=float(p[2]))
                                                           for p in points], color=Color(r=r, g=g, b=b, a=1.0)))
    spheres = []
    for position, mass in frame.attachments.values():
        d = 0.05 * max(mass, 0.05) ** (1.0 / 3.0)
        spheres.append(SpherePrimitive(pose=_pose(position, eye), size=Vector3(x=d, y=d, z=d),
                                       color=Color(r=0.3, g=0.3, b=0.3, a=0.9)))
    arrows = []
    for position, R in frame.imu_frames.values():
        for axis, (r, g, b) in enumerate(_AXES):
            arrows.append(ArrowPrimitive(pose=_pose(position, _arrow_rotation(R, axis)), shaft_length=arrow_m,
                                         shaft_diameter=0.008, head_length=0.03, head_diameter=0.02,
                                         color=Color(r=r, g=g, b=b, a=1.0)))
    sec, nsec = divmod(ns(frame.t), 1_000_000_000)
    entity = SceneEntity(timestamp=Timestamp(sec=sec, nsec=nsec), frame_id="world", id="arm", lines=lines,
                         spheres=spheres, arrows=arrows)
    return SceneUpdate(entities=[entity])


def imu_transforms(frame: SceneFrame) -> dict[str, Any]:
    """IMU name -> foxglove.FrameTransform from ``world``."""
    from foxglove.messages import FrameTransform, Timestamp, Vector3
    sec, nsec = divmod(ns(frame.t), 1_000_000_000)
    out = {}
    for name, (p, R) in frame.imu_frames.items():
        out[name] = FrameTransform(timestamp=Timestamp(sec=sec, nsec=nsec), parent_frame_id="world",
                                   child_frame_id=name, translation=Vector3(x=float(p[0]), y=float(p[1]),
                                                                            z=float(p[2])),
                                   rotation=_quaternion(R))
    return out


def signal_groups(columns: list[str]) -> dict[str, list[int]]:
    """Topic group -> column indices (``t`` is the log time, not a signal); what no pattern takes
    is a sensor channel."""
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(columns):
        if c == "t":
            continue
        name = next((g for g, pattern in _GROUPS if re.fullmatch(pattern, c)), "sensors")
        groups.setdefault(name, []).append(i)
    return groups


def group_schema(columns: list[str], indices: list[int]) -> dict[str, Any]:
    """JSON schema of a signal group's messages, with each column's unit and description."""
    props = {}
    for i in indices:
        unit, text = describe(columns[i])
        props[columns[i]] = {"type": "number", "description": f"{text} [{unit}]" if unit else text}
    return {"type": "object", "properties": props}


def named_schema(name: str, schema: dict[str, Any]):
    """A JSON schema under a name a viewer shows (`hil.signals.joints`), not the SDK's generated one."""
    import foxglove
    return foxglove.Schema(name=name, encoding="jsonschema", data=json.dumps(schema).encode())
