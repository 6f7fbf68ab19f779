"""The run log's row of one emulator cycle: its columns and how a cycle fills them.

Per cycle: cycle, t, status; the commanded and applied joint torques, joint angles and rates; the
modal coordinates (the links' shape); each brake's state (0 open, 1 closed, 2 holding); every sensor
channel as measured and its ground truth; the tip position; the cycle's lateness, compute and I/O
times and the command's age [us]; with ``log_wrenches`` the joint wrenches; the external wrench at each
station a co-simulated FMU loads (hil.runtime.cosim: f_ext_<station>_mx .. _fz, world axes). The fault engine's
injections and clearances go to the log as events after the row of their cycle.
"""
from __future__ import annotations

import numpy as np

from hil.devices.drives import DriveBank
from hil.devices.sensors import SensorSuite
from hil.dynamics.plant import Plant, station_load_columns, wrench_columns
from hil.faults.engine import FaultEngine


def cycle_columns(plant: Plant, channel_names: list[str], log_wrenches: bool, loaded: list[int] = ()) -> list[str]:
    """The run log's column names (module docstring); `loaded`: the indices of the loaded stations."""
    joints, lay = plant.layout.joint_names, plant.layout
    return (["cycle", "t", "status"] + [f"tau_cmd_{j}" for j in joints] + [f"tau_{j}" for j in joints]
            + [f"q_{j}" for j in joints] + [f"qd_{j}" for j in joints]
            + [f"eta_{body}_{mode}" for body, labels in zip(lay.body_names, lay.mode_labels) for mode in labels]
            + [f"brake_{j}" for j in joints]
            + [c for name in channel_names for c in (name, f"{name}_true")]
            + ["tip_x", "tip_y", "tip_z", "lateness_us", "compute_us", "io_us", "cmd_age_us"]
            + (wrench_columns(joints) if log_wrenches else [])
            + [c for s in loaded for c in station_load_columns(lay.station_names[s])])


class CycleRecord:
    """Fills a run logger's row per cycle from the plant, drives and sensors (views made once) and
    logs the fault engine's new events."""

    def __init__(self, plant: Plant, drives: DriveBank, sensors: SensorSuite, faults: FaultEngine,
                 log_wrenches: bool, loaded: list[int] = ()):
        self.plant, self.drives, self.sensors, self.faults = plant, drives, sensors, faults
        nj = plant.layout.n_joints
        self.columns = cycle_columns(plant, sensors.channel_names, log_wrenches, loaded)
        self._eta = plant.pos[nj:nj + plant.layout.n_eta]     # a view made once (the plant steps pos in place)
        self._wrench_row = plant.wrenches[:nj].reshape(-1) if log_wrenches else None   # a view
        self._loaded = np.array(loaded, np.int64)
        self._events_logged = 0

    def fill(self, r: np.ndarray, cycle: int, command: np.ndarray, tau: np.ndarray, status: int, lateness_ns: int,
             compute_ns: int, io_ns: int, cmd_age_us: float) -> np.ndarray:
        """Write the row of cycle `cycle` into `r` (one float per column); returns `r`."""
        nj = self.plant.layout.n_joints
        r[0], r[1], r[2] = cycle, self.plant.t, status
        i = 3
        for block in (command, tau, self.plant.q(), self.plant.vel[:nj], self._eta):
            r[i:i + len(block)] = block
            i += len(block)
        np.add(self.drives.brake_engaged, self.drives.brake_held, out=r[i:i + nj])
        i += nj
        sensors = self.sensors
        n = len(sensors.measured)          # each channel as measured, then its ground truth
        r[i:i + 2 * n:2] = sensors.measured
        r[i + 1:i + 2 * n:2] = sensors.truth
        i += 2 * n
        r[i:i + 3] = sensors.tip
        r[i + 3:i + 7] = lateness_ns * 1e-3, compute_ns * 1e-3, io_ns * 1e-3, cmd_age_us
        i += 7
        if self._wrench_row is not None:
            r[i:i + self._wrench_row.size] = self._wrench_row
            i += self._wrench_row.size
        if self._loaded.size:
            np.take(self.plant.station_loads, self._loaded, axis=0, out=r[i:].reshape(-1, 6))
        return r

    def put(self, logger, cycle: int, command: np.ndarray, tau: np.ndarray, status: int, lateness_ns: int,
            compute_ns: int, io_ns: int, cmd_age_us: float) -> np.ndarray:
        """The row of cycle `cycle` (`command` as received, `tau` as applied) to `logger`, then the new events;
        returns the row (to be read, not kept: the logger's buffer)."""
        r = self.fill(logger.row(), cycle, command, tau, status, lateness_ns, compute_ns, io_ns, cmd_age_us)
        logger.put(r)
        if len(self.faults.events) > self._events_logged:
            for e in self.faults.events_since(self._events_logged):
                logger.event({"event": e.action, "cycle": e.cycle, "t": e.t_s, "fault": e.fault,
                              "detail": e.description})
            self._events_logged = len(self.faults.events)
        return r
