"""The arm with its joints following a recording: for a fit of the links' parameters that the
rigid model's errors must not spoil (a payload, friction or inertia that is off drifts an
open-loop replay's joint angles, and the links' vibration with them).

Every joint becomes a prescribed one (drive = "prescribed", hil.model.spec) whose angle is the
recording's ``q_<joint>`` joined by the kernels' cubic spline (angle, rate and acceleration
continuous): the links are shaken as the real arm's joints shook them, whatever the rigid model
says. The knots are every row by default: a brake's stop is over in a few milliseconds, and a
coarser spline smears the jolt that sets the links ringing (on the synthetic real arm, knots every
5 or 10 ms put the fitted damping 50 % off). A quantised encoder angle, though, twice
differentiated at the row spacing, shakes the links with its rounding steps (2.4e-6 rad over
1 ms squared is 2.4 rad/s^2): for such a recording, `knot_s` spaces the knots (the fit file's
``prescribe_knot_s``). The joints' motors, springs and friction drop out (the motion is imposed).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from hil.model.spec import DRIVE_PRESCRIBED, PROFILE_TABLE, Model, Profile


def prescribed(model: Model, t: np.ndarray, q: dict[str, np.ndarray], knot_s: float | None = None) -> Model:
    """`model` with each joint named in `q` (joint name -> its angles at the times `t`, s) following them,
    through knots every `knot_s` (default: every row)."""
    step = 1 if knot_s is None else max(1, int(round(knot_s / float(np.median(np.diff(t))))))
    knots = np.unique(np.append(np.arange(0, len(t), step), len(t) - 1))
    bodies = []
    for body in model.bodies:
        angles = q.get(body.joint.name)
        if angles is not None:
            joint = replace(body.joint, drive=DRIVE_PRESCRIBED, motor=None, elasticity=None,
                            q0_rad=float(angles[0]), qd0_rad_s=0.0,
                            profile=Profile(kind=PROFILE_TABLE, t_s=t[knots].copy(), q_rad=angles[knots].copy()))
            body = replace(body, joint=joint)
        bodies.append(body)
    return replace(model, bodies=bodies)
