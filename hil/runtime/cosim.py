"""A user's FMU co-simulated inside the loop (``hil run --fmu PART.fmu --connect ...``): a gripper, a
conveyor, a load or motor model, one communication step of the loop's period per cycle, through fmpy.

Connections (``--connect``, comma-separated ``SOURCE=TARGET``; the FMU is named by its file's stem, PART):

* an FMU output to a plant input: ``PART.<output>=joint.<joint>.load_N_m`` (an external torque on the
  joint's drive coordinate, link side, added to the drive's: hil.devices.drives ``load``) or
  ``PART.<output>=station.<station>.<component>``, component ``fx_N``, ``fy_N``, ``fz_N``, ``mx_N_m``,
  ``my_N_m`` or ``mz_N_m`` (a wrench at the station, world axes, moment about the station's point:
  Plant.station_loads, hil.kernels.station_loads; logged as ``f_ext_<station>_<mx .. fz>``);
* a plant output to an FMU input: ``joint.<joint>.q_rad`` / ``.qd_rad_s`` / ``.tau_N_m`` (the delivered
  torque), ``station.<station>.x_m`` / ``y_m`` / ``z_m`` / ``vx_m_s`` / ``vy_m_s`` / ``vz_m_s`` (world
  position and velocity; ``tip.x_m`` ... is ``station.tip.x_m`` ...) or ``t_s``, ``=PART.<input>``.

Every name is checked before the run, one line with the nearest one: the FMU's variables and the
connections' form when the part is read (FmuPart), the arm's joints and stations when it is bound
(bind). The stations a connection reads (source_stations) are sampled by the plant's step with the
sensors' (RuntimeOptions.sampled_stations), so the FMU reads them at the new instant.

Order in a cycle (Emulator.step_once): the loads the FMU gave last cycle are applied (apply) and the plant
steps with them (the cycle's row logs them); then the FMU gets the plant's state at the new instant, does
its step [t - dt, t] and gives the loads for the next cycle (the one-step delay of any co-simulation with
a fixed communication step).
A step that fails (fmi2Error, fmi2Discard) or an output that is not finite fails the run with the
FMU's name, the time and the reason. The cost of the FMU's step per cycle (set, doStep, get) goes to
the run summary (``"fmu"``).

FMI 2.0 co-simulation FMUs (fmpy's FMU2Slave); the FMU's step must be able to take the loop's period.
"""
from __future__ import annotations

import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from config_schema import UserError, suggest

JOINT_SOURCES = ("q_rad", "qd_rad_s", "tau_N_m")                          # joint.<joint>.<key>
STATION_SOURCES = ("x_m", "y_m", "z_m", "vx_m_s", "vy_m_s", "vz_m_s")     # station.<station>.<key>, world axes
STATION_FIELDS = (0, 1, 2, 12, 13, 14)     # where they sit in a sampled station's row (SensorSuite.station_out)
STATION_TARGETS = ("mx_N_m", "my_N_m", "mz_N_m", "fx_N", "fy_N", "fz_N")  # Plant.station_loads' columns
MAX_CONNECTIONS = 64
FMI2_FATAL = 4                                    # fmi2Status: the instance may not be called again



@dataclass
class CostStats:
    """The FMU's step cost per cycle, in ns (a reservoir of the last cycles for the percentiles)."""
    values: list[int] = field(default_factory=list)
    cycles: int = 0
    largest: int = 0

    def add(self, ns: int) -> None:
        self.cycles += 1
        self.largest = max(self.largest, ns)
        if len(self.values) < 100_000:
            self.values.append(ns)

    def summary(self) -> dict:
        v = np.array(self.values or [0]) * 1e-3
        return {"cycles": self.cycles, "p50_us": float(np.percentile(v, 50)), "p99_us": float(np.percentile(v, 99)),
                "max_us": self.largest * 1e-3}


class FmuPart:
    """One co-simulated FMU (module docstring): read, its connections' form checked; bound to the arm by
    bind; started by start."""

    def __init__(self, path: str | Path, connect: str):
        try:
            from fmpy import read_model_description
        except ImportError:
            raise UserError("--fmu needs fmpy: pip install 'ella-hil[fmu]'") from None
        self.path, self.name = Path(path), Path(path).stem
        try:
            self.md = read_model_description(str(self.path))
        except Exception as exc:         # noqa: BLE001 - fmpy raises many kinds for a broken file
            raise UserError(f"--fmu {path}: not an FMU fmpy reads ({exc})") from None
        if self.md.fmiVersion != "2.0" or self.md.coSimulation is None:
            raise UserError(f"--fmu {path}: an FMI 2.0 co-simulation FMU is needed; this is FMI {self.md.fmiVersion}"
                            + ("" if self.md.coSimulation else " without co-simulation"))
        self.variables = {v.name: v for v in self.md.modelVariables}
        pairs = _pairs(connect)
        self.connections = [f"{source}={target}" for source, target in pairs]
        self.reads: list[tuple[str, str, str, int]] = []     # (source, kind, joint or station, value reference)
        self.writes: list[tuple[str, str, str, str, int]] = []   # (target, kind, joint or station, output, ref)
        for source, target in pairs:
            self._classify(source, target)
        self.source_stations = list(dict.fromkeys(n for _, kind, n, _ in self.reads if kind in STATION_SOURCES))
        self.loaded_stations: list[int] = []
        self.cost = CostStats()
        self.failure: str | None = None
        self.started = False
        self.unzipped: str | None = None

    def _classify(self, source: str, target: str) -> None:
        part = self.name + "."
        if source.startswith(part):
            output = source[len(part):]
            ref = self._variable(output, "output", source)
            if any(t == target for t, *_ in self.writes):
                raise UserError(f"--connect {source}={target}: {target} has a source already")
            self.writes.append((target, *_target_form(target), output, ref))
        elif target.startswith(part):
            self.reads.append((source, *_source_form(source), self._variable(target[len(part):], "input", target)))
        else:
            raise UserError(f"--connect {source}={target}: one side must be the FMU's ({self.name}.<variable>)")

    def _variable(self, name: str, causality: str, where: str) -> int:
        v = self.variables.get(name)
        known = [n for n, w in self.variables.items() if w.causality == causality]
        if v is None or v.causality != causality or v.type != "Real":
            raise UserError(f"--connect: {where}: {self.name} has no Real {causality} {name!r}{suggest(name, known)}; "
                            f"its {causality}s: {', '.join(known) or 'none'}")
        return v.valueReference

    def bind(self, joints: list[str], stations: list[str], sampled: list[str], dt: float) -> None:
        """Resolve the connections against the arm: its joints, its stations, the stations its step samples
        (the order of SensorSuite.station_out's rows; every source station among them) and the loop's period."""
        self.dt = dt
        self.inputs: list[tuple[str, int, int]] = []       # (kind, joint or sampled row, value reference)
        for source, kind, name, ref in self.reads:
            if kind in STATION_SOURCES:
                _known(source, name, stations, "station")
                index = sampled.index(name)
            else:
                index = 0 if kind == "t" else _known(source, name, joints, "joint")
            self.inputs.append((kind, index, ref))
        self.outputs: list[tuple[str, int, int, int]] = []  # (output, joint or station, component or -1, ref)
        for target, kind, name, output, ref in self.writes:
            if kind == "load_N_m":
                self.outputs.append((output, _known(target, name, joints, "joint"), -1, ref))
            else:
                self.outputs.append((output, _known(target, name, stations, "station"), STATION_TARGETS.index(kind),
                                     ref))
        self.loaded_stations = list(dict.fromkeys(s for _, s, c, _ in self.outputs if c >= 0))
        self.in_refs = [ref for *_, ref in self.inputs]
        self.out_refs = [ref for *_, ref in self.outputs]
        self.in_values = np.zeros(len(self.inputs))
        self.out_values = np.zeros(len(self.outputs))

    def start(self, t0: float) -> None:
        """Unpack, instantiate and initialise the FMU at the run's start time (after bind)."""
        from fmpy import extract
        from fmpy.fmi2 import FMU2Slave

        self.unzipped = extract(str(self.path))
        self.slave = FMU2Slave(guid=self.md.guid, unzipDirectory=self.unzipped,
                               modelIdentifier=self.md.coSimulation.modelIdentifier, instanceName=self.name)
        try:
            self.slave.instantiate(loggingOn=False)
            self.slave.setupExperiment(startTime=t0)
            self.slave.enterInitializationMode()
            self.slave.exitInitializationMode()
        except Exception as exc:         # noqa: BLE001 - an FMU that fails to start fails the run, named
            raise UserError(f"FMU {self.name}: failed to start: {exc}") from None
        self.started = True

    def step(self, t: float, plant, drives, sampled: np.ndarray) -> bool:
        """The FMU's step ending at the plant's time `t` (`sampled`: the sampled stations' world kinematics,
        SensorSuite.station_out), its outputs kept for the next cycle (apply). False (and `failure` set) when
        the FMU fails or gives a non-finite output."""
        t0 = time.perf_counter_ns()
        for k, (kind, i, _) in enumerate(self.inputs):
            self.in_values[k] = (t if kind == "t" else plant.pos[i] if kind == "q_rad" else plant.vel[i]
                                 if kind == "qd_rad_s" else drives.tau[i] if kind == "tau_N_m"
                                 else sampled[i, STATION_FIELDS[STATION_SOURCES.index(kind)]])
        try:
            if self.in_refs:
                self.slave.setReal(self.in_refs, self.in_values.tolist())
            self.slave.doStep(currentCommunicationPoint=t - self.dt, communicationStepSize=self.dt)
            values = self.slave.getReal(self.out_refs) if self.out_refs else []
        except Exception as exc:         # noqa: BLE001 - fmpy's FMICallException and what an FMU raises
            self.failure = f"FMU {self.name} failed its step to t = {t:.3f} s: {exc}"
            self.started = getattr(exc, "status", None) != FMI2_FATAL     # no call after fmi2Fatal, not even close's
            return False
        for k, ((output, _, _, _), value) in enumerate(zip(self.outputs, values)):
            if not math.isfinite(value):
                self.failure = f"FMU {self.name} gave {output} = {value} at t = {t:.3f} s"
                return False
            self.out_values[k] = value
        self.cost.add(time.perf_counter_ns() - t0)
        return True

    def apply(self, plant, drives) -> None:
        """The outputs of the last step to the drives' loads and the plant's station loads, for the cycle's
        plant step (so a cycle's row logs the loads that acted over its step)."""
        for (_, i, c, _), value in zip(self.outputs, self.out_values):
            if c < 0:
                drives.load[i] = value
            else:
                plant.station_loads[i, c] = value

    def summary(self) -> dict:
        return {"name": self.name, "file": str(self.path), "connections": self.connections, "step": self.cost.summary()}

    def close(self) -> None:
        """End the FMU's instance and remove its unpacked files."""
        if self.started:
            try:
                self.slave.terminate()
                self.slave.freeInstance()
            except Exception:            # noqa: BLE001 - closing after a failed step: nothing more to save
                pass
            self.started = False
        if self.unzipped is not None:
            shutil.rmtree(self.unzipped, ignore_errors=True)


def _pairs(connect: str) -> list[tuple[str, str]]:
    items = [c.strip() for c in connect.split(",") if c.strip()]
    if not items or len(items) > MAX_CONNECTIONS:
        raise UserError(f"--connect {connect!r}: expected 1 to {MAX_CONNECTIONS} SOURCE=TARGET pairs, comma-separated")
    out = []
    for item in items:
        sides = [s.strip() for s in item.split("=")]
        if len(sides) != 2 or not all(sides):
            raise UserError(f"--connect {item!r}: expected SOURCE=TARGET")
        out.append((sides[0], sides[1]))
    return out


def _source_form(source: str) -> tuple[str, str]:
    """(kind, name) of a plant output: ("t", ""), (a JOINT_SOURCES key, joint) or (a STATION_SOURCES key,
    station)."""
    parts = source.split(".")
    if source == "t_s":
        return "t", ""
    if len(parts) == 2 and parts[0] == "tip" and parts[1] in STATION_SOURCES:
        return parts[1], "tip"
    if len(parts) == 3 and parts[0] == "joint" and parts[2] in JOINT_SOURCES:
        return parts[2], parts[1]
    if len(parts) == 3 and parts[0] == "station" and parts[2] in STATION_SOURCES:
        return parts[2], parts[1]
    raise UserError(f"--connect {source}=...: expected joint.<joint>.q_rad, .qd_rad_s or .tau_N_m, "
                    f"station.<station>.{', .'.join(STATION_SOURCES)} (tip.<key>: station.tip.<key>) or t_s")


def _target_form(target: str) -> tuple[str, str]:
    """(kind, name) of a plant input: ("load_N_m", joint) or (a STATION_TARGETS key, station)."""
    parts = target.split(".")
    if len(parts) == 3 and parts[0] == "joint" and parts[2] == "load_N_m":
        return parts[2], parts[1]
    if len(parts) == 3 and parts[0] == "station" and parts[2] in STATION_TARGETS:
        return parts[2], parts[1]
    raise UserError(f"--connect ...={target}: expected joint.<joint>.load_N_m or station.<station>."
                    f"{', .'.join(STATION_TARGETS)} (world axes)")


def _known(where: str, name: str, names: list[str], what: str) -> int:
    """names.index(name), or a one-line UserError naming the connection and the nearest name."""
    if name not in names:
        raise UserError(f"--connect {where}: no {what} {name!r} on the arm{suggest(name, names)}; "
                        f"its {what}s: {', '.join(names)}")
    return names.index(name)
