"""Replay: the plant re-simulated from a run log's inputs, as fast as it computes, and compared
with the logged states.

Which logged command reproduces the plant: the drives sit between the firmware's command and
the plant. ``tau_cmd_<joint>`` is the command as received; in the safe state (watchdog trip, a
stopped CANopen drive) the emulator applies other torques than that, and the drive model
(current loop, limits, back-EMF, torque-constant faults) turns a command into torque with its
own state. ``tau_<joint>`` is what the drives delivered: exactly the torque the plant step
received. So the replay steps the plant with ``tau`` and reproduces the other things that act
on the plant's state: the holding brakes (``brake_<joint>``: a closed brake stops and holds its
joint), through a drive bank of ideal torque drives (output = input, bit for bit) with the preset's
brakes, and the wrenches a co-simulated FMU applied at stations (``f_ext_<station>_mx .. _fz``). The plant starts as ``hil run`` starts it: the preset's initial joint
angles at rest in the static deflection (``Plant.equilibrium_eta``).

A lab records the motor currents more often than the torques: ``drive_input = "current"`` steps
the plant with the torque the measured currents make, tau = n Kt (i_measured - b) / (1 + e)
eta^sign(i qd) (motor_torques: n the gear ratio, Kt the motor's torque constant, eta the gear
efficiency, the load driving the motor when i qd < 0; b and e the bias and scale error of the
joint's current sensor, whose filter and quantisation are not undone), so that the fit sees the
torque constant and the current sensors' bias and scale.

A lockstep log replays bit for bit. So does any complete log of a fault-free plant, realtime or
not: timing decides which command arrived in which cycle, and the log records the torque that
resulted. A realtime log may not replay exactly when (1) its logger dropped rows (the log
writer fell behind: ``log_dropped`` in the summary): the torques of the missing cycles are lost
and the replay diverges from the first gap; (2) a plant fault changed the model during the run
(payload, friction scale, stiffness loss): the replay keeps the nominal model.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from hil.devices.drives import DriveBank
from hil.devices.sensors import SensorSuite
from hil.dynamics.plant import Plant, station_load_columns
from hil.model.sensor_specs import CurrentSpec, channel_names
from hil.model.spec import DRIVE_PRESCRIBED, DriveSpec
from hil.viz.scene import model_of_log
from config_schema import UserError

__all__ = ["ReplayResult", "replay", "replay_columns"]

TIP = "tip"
DRIVE_INPUTS = ("torque", "current")


@dataclass
class ReplayResult:
    columns: list[str]                 # t, q_, qd_, eta_, tip_ (those the log has)
    rows: np.ndarray                   # the replayed values, one row per logged row
    deviation: dict[str, float] = field(default_factory=dict)   # column -> max |replayed - logged|
    first_deviation_t: float | None = None     # earliest time any compared column differs
    wall_s: float = 0.0
    missing_rows: int = 0              # cycles absent from the log (dropped rows: their torques are lost)
    plan: dict | None = None           # the logged integrator plan checked (logged_plant; None: the log names none)

    @property
    def bit_identical(self) -> bool:
        return all(v == 0.0 for v in self.deviation.values())

    @property
    def largest(self) -> tuple[str, float]:
        name = max(self.deviation, key=self.deviation.get)
        return name, self.deviation[name]


def replay_columns(plant: Plant) -> list[str]:
    lay = plant.layout
    return (["t"] + [f"q_{j}" for j in lay.joint_names] + [f"qd_{j}" for j in lay.joint_names]
            + [f"eta_{b}_{m}" for b, labels in zip(lay.body_names, lay.mode_labels) for m in labels]
            + ["tip_x", "tip_y", "tip_z"])


def _passthrough_drives(plant: Plant) -> DriveBank:
    """Ideal torque drives (tau = command) with the preset's holding brakes."""
    specs = []
    for body in plant.asm.model.bodies:
        m = body.joint.motor or DriveSpec()
        specs.append(replace(DriveSpec(), brake_torque_N_m=m.brake_torque_N_m, brake_kinetic_N_m=m.brake_kinetic_N_m,
                             brake_smoothing_rad_s=m.brake_smoothing_rad_s))
    return DriveBank(plant, specs)


def logged_plant(header: dict[str, Any], model=None) -> tuple[Plant, dict | None]:
    """The plant of a run log with the integrator plan the run used (header "integrator":
    Plant.plan_identity; a log without it: the preset's plan), and the check of that plan: the logged
    identity, the one this version makes with it (``replayed``) and the fields where they differ (a fitted
    block made by another planning code, BLAS or machine: the replay then need not be bit-identical).
    `model`: another arm in the log's place (a fit's candidate), integrated with the logged plan's
    method and substeps."""
    logged = header.get("integrator")
    formulation = header.get("formulation") or "aba"
    model = model_of_log(header) if model is None else model
    if not isinstance(logged, dict) or "fitted_blocks_sha256" not in logged:
        return Plant(model, formulation=formulation), None
    plant = Plant(model, logged.get("method"), logged.get("substeps"), logged.get("formulation", formulation))
    made = plant.plan_identity()
    differences = sorted(k for k in set(made) | set(logged) if made.get(k) != logged.get(k))
    return plant, {"logged": logged, "replayed": made, "differences": differences}


def replay(header: dict[str, Any], rows: np.ndarray, model=None, channels: tuple[str, ...] = (),
           restart_every: int | None = None, command_delay_s: float = 0.0, drive_input: str = "torque") -> ReplayResult:
    """Re-simulate the plant of a run log from its drive torques and brakes (module docstring).
    `model`: another arm in the logged one's place; `channels`: sensor channels whose outputs
    follow the plant's columns, as the sensor models make them (bias, misalignment, filter,
    quantisation, saturation) without their noise (no normal is ever drawn: the noise and the bias
    random walk stay zero). `restart_every` N rows: multiple shooting, every N-th row the joint
    angles and rates restart from the log's ``q_<joint>``, ``qd_<joint>`` (the elastic state goes
    on), so that a wrong rigid model drifts for one segment only. `command_delay_s`: the drive
    torques act this much later than logged (a transport delay between command and measurement;
    a fraction of a step interpolated linearly between rows, the first row's torque before it);
    the brakes as logged. `drive_input`: the drive torques logged (``tau_<joint>``) or made from the
    measured motor currents ("current", module docstring)."""
    cols = header["columns"]
    index = {c: i for i, c in enumerate(cols)}
    if "cycle" not in index:
        raise UserError("replay needs a run log of hil run (one row per cycle, with a cycle column); "
                         "this log has none (hil simulate output?)")
    plant, plan = logged_plant(header, model)
    plant.equilibrium_eta()
    lay = plant.layout
    currents = motor_currents(plant) if drive_input == "current" else None
    inputs = [f"tau_{j}" for j in lay.joint_names] if currents is None else currents[0]
    missing = [c for c in inputs if c not in index]
    if missing:
        what = "drive torque" if currents is None else "motor current"
        raise UserError(f"the run log has no {what} columns {', '.join(missing)}: nothing to replay from")
    drives = _passthrough_drives(plant)
    tau = delayed(rows[:, [index[c] for c in inputs]], command_delay_s / plant.dt)
    restart = _restarts(index, rows, lay, restart_every)
    imposed = [b.joint.drive == DRIVE_PRESCRIBED for b in plant.asm.model.bodies]     # no brake to close on these
    brake_cols = [None if held else index.get(f"brake_{j}") for j, held in zip(lay.joint_names, imposed)]
    brakes = np.column_stack([rows[:, i] >= 1 if i is not None else np.zeros(len(rows), bool) for i in brake_cols]) \
        if lay.n_joints else np.zeros((len(rows), 0), bool)
    switched = np.any(np.diff(brakes, axis=0, prepend=drives.brake_engaged[None, :]), axis=1)   # rows a brake changes on
    loaded, wrenches = _station_loads(index, rows, lay.station_names)
    sensors = SensorSuite(plant, noise=False) if channels else None      # its stations: the tip first, then the IMUs'
    sensed = [sensors.channel(c) for c in channels] if sensors else []
    tip = sensors.station_out[0] if sensors else plant.output_stations(np.array([lay.station_names.index(TIP)]))[0]
    out_cols = replay_columns(plant) + list(channels)
    out = np.zeros((len(rows), len(out_cols)))
    base = len(out_cols) - len(channels)
    nj, ne = lay.n_joints, lay.n_eta
    t0 = time.perf_counter()
    for i in range(len(rows)):
        if restart is not None and i and i % restart_every == 0:
            plant.pos[:nj], plant.vel[:nj] = restart[0][i - 1], restart[1][i - 1]
        if switched[i]:
            for k in np.flatnonzero(brakes[i] != drives.brake_engaged):
                drives.set_brake(int(k), bool(brakes[i, k]))
        if loaded.size:
            plant.station_loads[loaded] = wrenches[i]
        plant.step(drives.update(tau[i] if currents is None else motor_torques(tau[i], plant.vel[:nj], currents[1])))
        r = out[i]
        r[0] = plant.t
        r[1:1 + nj] = plant.pos[:nj]
        r[1 + nj:1 + 2 * nj] = plant.vel[:nj]
        r[1 + 2 * nj:1 + 2 * nj + ne] = plant.pos[nj:nj + ne]
        r[base - 3:base] = tip[:3]
        if sensors is not None:
            sensors.sample()
            r[base:] = sensors.measured[sensed]
    wall = time.perf_counter() - t0
    result = _compared(out_cols, out, cols, rows, wall)
    result.plan = plan
    cycles = rows[:, index["cycle"]]
    result.missing_rows = int(cycles[-1] - len(rows)) if len(rows) else 0    # cycles count from 1
    return result


def _station_loads(index: dict[str, int], rows: np.ndarray, stations: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The stations with logged wrenches (f_ext_<station>_mx .. _fz: hil.runtime.cycle_record) and their wrench
    per row (rows x stations x 6)."""
    loaded = [s for s, name in enumerate(stations) if f"f_ext_{name}_mx" in index]
    cols = [index[c] for s in loaded for c in station_load_columns(stations[s])]
    return np.array(loaded, np.int64), rows[:, cols].reshape(len(rows), len(loaded), 6)


def motor_currents(plant: Plant) -> tuple[list[str], np.ndarray]:
    """The current channels of the joints and, per joint, the rows (n Kt, eta, bias b, 1 + scale error e)
    of motor_torques."""
    model = plant.asm.model
    sensors = {s.joint: (s, names[0]) for s, names in zip(model.sensors, channel_names(model.sensors))
               if isinstance(s, CurrentSpec)}
    names, rows = [], []
    for body in model.bodies:
        j, motor = body.joint.name, body.joint.motor
        if j not in sensors or motor is None or not motor.torque_constant_N_m_A > 0:
            raise UserError(f"{model.source}: drive_input = \"current\" needs a current sensor and a motor with "
                            f"torque_constant_N_m_A on every joint; joint {j!r} has "
                            + ("no current sensor" if j not in sensors else "no torque constant"))
        spec, name = sensors[j]
        names.append(name)
        rows.append((body.joint.gear_ratio * motor.torque_constant_N_m_A, motor.gear_efficiency,
                     float(spec.chain.bias), 1.0 + float(spec.chain.scale_error)))
    return names, np.array(rows, float).reshape(-1, 4)


def motor_torques(measured: np.ndarray, qd: np.ndarray, motors: np.ndarray) -> np.ndarray:
    """The link-side torques of the measured motor currents at joint rates `qd` (module docstring)."""
    current = (measured - motors[:, 2]) / motors[:, 3]
    return motors[:, 0] * current * motors[:, 1] ** np.sign(current * qd)


def delayed(values: np.ndarray, rows: float) -> np.ndarray:
    """`values` (one row per step) `rows` steps later, linearly interpolated, the first row held before."""
    if rows == 0.0:
        return values
    if not (np.isfinite(rows) and 0.0 <= rows < len(values)):
        raise UserError(f"a command delay of {rows:g} steps: expected 0 up to the recording's length")
    k = np.arange(len(values)) - rows
    lo = np.floor(k).astype(int)
    frac = (k - lo)[:, None]
    return (1.0 - frac) * values[np.clip(lo, 0, None)] + frac * values[np.clip(lo + 1, 0, None)]


def _restarts(index: dict[str, int], rows: np.ndarray, lay, every: int | None):
    """The logged joint angles and rates multiple shooting restarts from (None without restarts)."""
    if every is None:
        return None
    if every < 1:
        raise UserError(f"restart every {every} rows: expected at least 1")
    if lay.n_motors:
        raise UserError("multiple shooting restarts stiff joints only; this arm has elastic (Spong) joints")
    names = [f"{kind}_{j}" for kind in ("q", "qd") for j in lay.joint_names]
    missing = [n for n in names if n not in index]
    if missing:
        raise UserError(f"multiple shooting needs the joint angles and rates; the log has no {missing[0]}")
    nj = lay.n_joints
    values = rows[:, [index[n] for n in names]]
    return values[:, :nj], values[:, nj:]


def _compared(out_cols: list[str], out: np.ndarray, cols: list[str], rows: np.ndarray, wall: float) -> ReplayResult:
    index = {c: i for i, c in enumerate(cols)}
    result = ReplayResult(out_cols, out, wall_s=wall)
    t = out[:, 0]
    first = np.inf
    for j, name in enumerate(out_cols[1:], start=1):
        if name not in index:
            continue
        d = np.abs(out[:, j] - rows[:, index[name]])
        d[np.isnan(d)] = np.inf
        result.deviation[name] = float(d.max(initial=0.0))
        hit = np.flatnonzero(d > 0)
        if hit.size:
            first = min(first, float(t[hit[0]]))
    result.first_deviation_t = None if first == np.inf else first
    return result
