"""A user's FMU co-simulated inside the loop (``hil run --fmu PART.fmu --connect ...``): a gripper, a
conveyor, a load or motor model, one communication step of the loop's period per cycle, through fmpy.

Connections (``--connect``, comma-separated ``SOURCE=TARGET``; the FMU is named by its file's stem,
PART): an FMU output to a plant input, ``PART.<output>=joint.<joint>.load_N_m`` (an external torque on
the joint's drive coordinate, link side, added to the drive's: hil.devices.drives ``load``), or a
plant output to an FMU input, ``joint.<joint>.q_rad`` / ``.qd_rad_s`` / ``.tau_N_m`` (the delivered
torque) / ``tip.x_m`` / ``tip.y_m`` / ``tip.z_m`` / ``t_s`` ``=PART.<input>``. Every name is checked
before the run (one line with the nearest one).

Order in a cycle (Emulator.step_once): the plant steps with the loads the FMU gave last cycle; then
the FMU gets the plant's state at the new instant, does its step [t - dt, t] and gives the loads
for the next cycle (the one-step delay of any co-simulation with a fixed communication step).
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

PLANT_SOURCES = ("q_rad", "qd_rad_s", "tau_N_m")       # joint.<joint>.<key>
TIP_SOURCES = ("x_m", "y_m", "z_m")
MAX_CONNECTIONS = 64


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
    """One co-simulated FMU (module docstring)."""

    def __init__(self, path: str | Path, connect: str, joints: list[str], dt: float):
        try:
            from fmpy import extract, read_model_description
            from fmpy.fmi2 import FMU2Slave
        except ImportError:
            raise UserError("--fmu needs fmpy: pip install 'ella-hil[fmu]'") from None
        self.path, self.name, self.dt, self.joints = Path(path), Path(path).stem, dt, joints
        try:
            md = read_model_description(str(self.path))
        except Exception as exc:         # noqa: BLE001 - fmpy raises many kinds for a broken file
            raise UserError(f"--fmu {path}: not an FMU fmpy reads ({exc})") from None
        if md.fmiVersion != "2.0" or md.coSimulation is None:
            raise UserError(f"--fmu {path}: an FMI 2.0 co-simulation FMU is needed; this is FMI {md.fmiVersion}"
                            + ("" if md.coSimulation else " without co-simulation"))
        self.variables = {v.name: v for v in md.modelVariables}
        self.inputs: list[tuple[str, int, int]] = []     # (plant source kind, index, value reference)
        self.outputs: list[tuple[str, int, int]] = []    # (FMU output name, joint index, value reference)
        pairs = _pairs(connect)
        for source, target in pairs:
            self._connect(source, target)
        self.connections = [f"{source}={target}" for source, target in pairs]
        self.unzipped = extract(str(self.path))
        self.slave = FMU2Slave(guid=md.guid, unzipDirectory=self.unzipped,
                               modelIdentifier=md.coSimulation.modelIdentifier, instanceName=self.name)
        self.in_refs = [vr for _, _, vr in self.inputs]
        self.out_refs = [vr for _, _, vr in self.outputs]
        self.in_values = np.zeros(len(self.inputs))
        self.cost = CostStats()
        self.failure: str | None = None
        self.started = False

    def _connect(self, source: str, target: str) -> None:
        part = self.name + "."
        if source.startswith(part):
            name = source[len(part):]
            ref = self._variable(name, "output", source)
            j = self._joint_target(target)
            if any(k == j for _, k, _ in self.outputs):
                raise UserError(f"--connect {source}={target}: {target} has a source already")
            self.outputs.append((name, j, ref))
        elif target.startswith(part):
            self.inputs.append((*self._plant_source(source), self._variable(target[len(part):], "input", target)))
        else:
            raise UserError(f"--connect {source}={target}: one side must be the FMU's ({self.name}.<variable>)")

    def _variable(self, name: str, causality: str, where: str) -> int:
        v = self.variables.get(name)
        known = [n for n, w in self.variables.items() if w.causality == causality]
        if v is None or v.causality != causality or v.type != "Real":
            raise UserError(f"--connect: {where}: {self.name} has no Real {causality} {name!r}{suggest(name, known)}; "
                            f"its {causality}s: {', '.join(known) or 'none'}")
        return v.valueReference

    def _joint_target(self, target: str) -> int:
        parts = target.split(".")
        if len(parts) != 3 or parts[0] != "joint" or parts[2] != "load_N_m" or parts[1] not in self.joints:
            raise UserError(f"--connect ...={target}: expected joint.<joint>.load_N_m with a joint of the arm "
                            f"({', '.join(self.joints)})" + suggest(parts[1] if len(parts) == 3 else target, self.joints))
        return self.joints.index(parts[1])

    def _plant_source(self, source: str) -> tuple[str, int]:
        parts = source.split(".")
        if source == "t_s":
            return "t", 0
        if len(parts) == 2 and parts[0] == "tip" and parts[1] in TIP_SOURCES:
            return "tip", TIP_SOURCES.index(parts[1])
        if len(parts) == 3 and parts[0] == "joint" and parts[1] in self.joints and parts[2] in PLANT_SOURCES:
            return parts[2], self.joints.index(parts[1])
        raise UserError(f"--connect {source}=...: expected joint.<joint>.q_rad, .qd_rad_s or .tau_N_m, tip.x_m, "
                        f"tip.y_m, tip.z_m or t_s (joints: {', '.join(self.joints)})")

    def start(self, t0: float) -> None:
        """Instantiate and initialise the FMU at the run's start time."""
        try:
            self.slave.instantiate(loggingOn=False)
            self.slave.setupExperiment(startTime=t0)
            self.slave.enterInitializationMode()
            self.slave.exitInitializationMode()
        except Exception as exc:         # noqa: BLE001 - an FMU that fails to start fails the run, named
            raise UserError(f"FMU {self.name}: failed to start: {exc}") from None
        self.started = True

    def step(self, t: float, plant, drives, tip: np.ndarray) -> bool:
        """The FMU's step ending at the plant's time `t`; its outputs to the drives' loads. False (and
        `failure` set) when the FMU fails or gives a non-finite output."""
        t0 = time.perf_counter_ns()
        for k, (kind, i, _) in enumerate(self.inputs):
            self.in_values[k] = (t if kind == "t" else tip[i] if kind == "tip" else plant.pos[i] if kind == "q_rad"
                                 else plant.vel[i] if kind == "qd_rad_s" else drives.tau[i])
        try:
            if self.in_refs:
                self.slave.setReal(self.in_refs, self.in_values.tolist())
            self.slave.doStep(currentCommunicationPoint=t - self.dt, communicationStepSize=self.dt)
            values = self.slave.getReal(self.out_refs) if self.out_refs else []
        except Exception as exc:         # noqa: BLE001 - fmpy's FMICallException and what an FMU raises
            self.failure = f"FMU {self.name} failed its step to t = {t:.3f} s: {exc}"
            return False
        for (name, j, _), value in zip(self.outputs, values):
            if not math.isfinite(value):
                self.failure = f"FMU {self.name} gave {name} = {value} at t = {t:.3f} s"
                return False
            drives.load[j] = value
        self.cost.add(time.perf_counter_ns() - t0)
        return True

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
