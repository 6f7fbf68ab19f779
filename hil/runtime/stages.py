"""Where a cycle's time goes: a timestamp at each stage boundary of Emulator.step_once.

The stages, in the cycle's order: ``faults_begin`` (the fault engine's cycle start: triggers,
plant and drive faults), ``receive`` (frames off the link, through its fault layer), ``decode``
(the command frames into torques), ``supervise`` (watchdog, safe state, brakes), ``drives``
(command -> link-side torque), ``plant`` (the step with its substeps and the sensors' stations),
``sensors`` (the sensor models), ``faults`` (signal faults on the measured channels), ``encode``
(status and the sensor frames), ``send`` (onto the link) and ``log`` (the row to the log writer).
The cycle's compute is one compiled call (hil.runtime.one_call), so its stages are grouped thus:
``decode`` is Python filling the frame buffer and the call's arguments and drawing the sensor
noise, ``plant`` the call (decode through encode, with what Python does where the call returns to
it: a watchdog trip or clear, a divergence), ``encode`` Python's counts after it, signal faults and
the Frames; supervise, drives, sensors and faults take no time of their own.
"""
from __future__ import annotations

from enum import IntEnum
from time import perf_counter_ns

import numpy as np


class Stage(IntEnum):
    """The stages in the cycle's order (module docstring); END marks the cycle's end."""

    FAULTS_BEGIN = 0
    RECEIVE = 1
    DECODE = 2
    SUPERVISE = 3
    DRIVES = 4
    PLANT = 5
    SENSORS = 6
    FAULTS = 7
    ENCODE = 8
    SEND = 9
    LOG = 10
    END = 11


STAGES = tuple(stage.name.lower() for stage in Stage if stage is not Stage.END)


class StageClock:
    """Per cycle, the perf_counter_ns() at the start of each stage and at the cycle's end, in a
    ring of `capacity` cycles (preallocated). mark() stores into a list, the row goes into the ring
    after the cycle's end: a numpy store per mark would add a quarter of a microsecond to each stage."""

    def __init__(self, capacity: int):
        self.ns = np.zeros((capacity, len(STAGES) + 1), np.int64)
        self.count = 0
        self._marks = [0] * (len(STAGES) + 1)

    def mark(self, stage: Stage, through: Stage | None = None) -> None:
        """The time now as the start of `stage` (Stage.END: the cycle's end, which closes the row);
        `through`: also of the stages up to that one (stages fused into the one before them)."""
        now = perf_counter_ns()
        marks = self._marks
        marks[stage] = now
        if through is not None:
            marks[stage + 1:through + 1] = [now] * (through - stage)
        elif stage == Stage.END:
            self.ns[self.count % len(self.ns)] = marks
            self.count += 1

    def durations_us(self, skip: int = 0) -> dict[str, np.ndarray]:
        """Each stage's duration [us] per retained cycle, the first `skip` recorded cycles left out;
        "compute" the stages from decode through encode (the cycle without the link's I/O, the fault
        engine's cycle start and the log), "cycle" the whole cycle."""
        n = min(self.count, len(self.ns))
        rows = self.ns[:n] if self.count <= len(self.ns) else np.roll(self.ns, -(self.count % len(self.ns)), axis=0)
        rows = rows[skip:]
        d = np.diff(rows, axis=1) * 1e-3
        out = {name: d[:, i] for i, name in enumerate(STAGES)}
        out["compute"] = (rows[:, STAGES.index("send")] - rows[:, STAGES.index("decode")]) * 1e-3
        out["cycle"] = (rows[:, -1] - rows[:, 0]) * 1e-3
        return out
