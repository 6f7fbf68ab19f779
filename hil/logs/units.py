"""Units and descriptions of run log columns, from the column names of the shared log schema.

The names say what a column holds (docs/model.md "Sensors", ``hil.runtime.loop``): ``q_<joint>`` a joint
angle, ``imu_ax`` (or ``<imu>_ax``) a specific force, ``enc_<joint>`` encoder counts, and so on;
``<channel>_true`` is a channel's ground truth. Exporters (MDF4, Parquet metadata, MCAP) and the
report label their signals with these.
"""
from __future__ import annotations

import re

from firmware_bridge.wire.messages import StatusFlag

__all__ = ["describe", "STATUS_BITS", "BRAKE_STATES"]

STATUS_BITS = {int(flag): flag.name for flag in StatusFlag}     # bits of the ``status`` column
BRAKE_STATES = {0: "open", 1: "closed", 2: "holding"}

_WRENCH = {"mx": ("N m", "moment about x"), "my": ("N m", "moment about y"), "mz": ("N m", "moment about z"),
           "fx": ("N", "force along x"), "fy": ("N", "force along y"), "fz": ("N", "force along z")}
_IMU_AXES = {"ax": ("m/s^2", "specific force along x"), "ay": ("m/s^2", "specific force along y"),
             "az": ("m/s^2", "specific force along z"), "gx": ("rad/s", "angular rate about x"),
             "gy": ("rad/s", "angular rate about y"), "gz": ("rad/s", "angular rate about z")}

# (pattern, unit, description with {0} the first group)
_RULES: list[tuple[str, str, str]] = [
    (r"cycle", "", "cycle number"),
    (r"t", "s", "simulated time"),
    (r"status", "", "status bits: " + ", ".join(f"{bit} {name}" for bit, name in STATUS_BITS.items())),
    (r"tau_cmd_(.+)", "N m", "drive command of joint {0} as received (link side; a voltage drive's duty in [-1, 1])"),
    (r"tau_(.+)", "N m", "link-side drive torque of joint {0} applied over the step"),
    (r"qd_(.+)", "rad/s", "joint rate of {0}"),
    (r"q_(.+)", "rad", "joint angle of {0}"),
    (r"theta_(.+)", "rad", "motor angle of elastic joint {0}, link side"),
    (r"thetad_(.+)", "rad/s", "motor rate of elastic joint {0}, link side"),
    (r"eta_(.+)", "", "modal coordinate {0} (tip amplitude of the mode: m for bending and axial, rad for torsion)"),
    (r"brake_(.+)", "", "holding brake of joint {0}: 0 open, 1 closed, 2 holding"),
    (r"tip_([xyz])", "m", "tip position, world {0}"),
    (r"lateness_us", "us", "wake-up lateness of the cycle"),
    (r"compute_us", "us", "compute time of the cycle (drives, plant step, sensors)"),
    (r"io_us", "us", "I/O time of the cycle (receive, decode, encode, send)"),
    (r"cmd_age_us", "us", "age of the command the plant used: time since the sensor frame it answers was sent"),
    (r"energy", "J", "kinetic + gravity potential + elastic energy"),
    (r"enc_(.+)", "counts", "incremental encoder count of {0}"),
    (r"index_(.+)", "counts", "encoder count latched at the last index mark of {0}"),
    (r"vel_(.+)", "counts/s", "encoder shaft speed of {0}"),
    (r"abs_(.+)", "counts", "absolute encoder reading of {0}"),
    (r"cur_(.+)", "A", "motor current of {0}"),
    (r"torque_(.+)", "N m", "joint torque sensor of {0}"),
    (r"strain_(.+)", "", "strain gauge {0} (strain, dimensionless)"),
]


def describe(column: str) -> tuple[str, str]:
    """(unit, description) of a run log column; ("", "") for an unknown name."""
    base, truth = (column[:-5], True) if column.endswith("_true") else (column, False)
    unit, text = _describe_base(base)
    if truth and text:
        text += " (ground truth)"
    return unit, text


def _describe_base(column: str) -> tuple[str, str]:
    m = re.fullmatch(r"w_(.+)_(mx|my|mz|fx|fy|fz)", column)
    if m:
        unit, what = _WRENCH[m.group(2)]
        return unit, f"joint interaction wrench of {m.group(1)}: {what}"
    m = re.fullmatch(r"(.+)_(ax|ay|az|gx|gy|gz)", column)
    if m:
        unit, what = _IMU_AXES[m.group(2)]
        return unit, f"IMU {m.group(1)}: {what} (sensor frame)"
    for pattern, unit, text in _RULES:
        m = re.fullmatch(pattern, column)
        if m:
            return unit, text.format(*m.groups())
    return "", ""
