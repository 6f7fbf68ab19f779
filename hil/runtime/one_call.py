"""The compute of every emulator cycle as one compiled call (hil.kernels.emulator_cycle): the received
command frames, the command watchdog, the safe-state command, drives and brakes, plant step, sensors,
status word and sensor frames. Python moves the frames' bytes into a preallocated buffer (the id
lookup stays a dict get), draws the sensor noise, and after the call keeps the counts the call's
verdicts imply: the reader's accepted, rejected by kind, ignored, lost and resynchronised frames, the
command ages, the writer's saturated and refused messages.

Where the cycle needs Python the call returns, Python does what it must and makes the call again
from ENTRY_SUPERVISED (past the frames and the watchdog), so that each stage has one implementation:

- the watchdog trips or clears (SUPERVISE): Supervisor.supervise logs it, keeps the pose to hold and
  closes or opens the brakes;
- the plant step fails (STEP_FAILED): the state goes back to the last good one, the divergence is
  named and the safe state latches (``_recover``);
- signal faults change the measured channels, or a CANopen node decides which frames go out
  (SENSED): the fault engine acts on the channels and Emulator.encode builds the frames.

A CANopen map's frames go through its nodes in Python (firmware_bridge.canopen.network.DriveNodes)
before the call, which then takes no frames; the nodes' safe joints are the call's ``node_safe``.
A stall fault busy-waits in the compute phase, just before the call.
"""
from __future__ import annotations

import time

import numpy as np

from firmware_bridge.wire.messages import StatusFlag
from hil.dynamics.plant import SimulationError
from hil.kernels.cycle import DEFLECTED, Guard, PlantStep
from hil.kernels.emulator_cycle import (DONE, ENTRY_FRAMES, ENTRY_SUPERVISED, N_V, SAFE_DAMPING, SAFE_HOLD,
                                        SAFE_ZERO_TORQUE, SENSED, STEP_FAILED, SUPERVISE, V_EFFICIENCY, V_GEAR, V_KE,
                                        V_KT, V_RESISTANCE, V_SUPPLY, V_VOLTAGE, CycleIn, FrameBuffer, SafeState,
                                        emulator_cycle)
from hil.kernels.frame_codec import CNT_LOST, CNT_RESYNCS, OK, OK_LOST
from hil.kernels.jit import bound_call
from hil.model.spec import INTERFACE_VOLTAGE
from hil.runtime.command_frames import OTHER_DIRECTION, REJECTIONS
from hil.runtime.divergence import CHECK_EVERY
from hil.runtime.stages import Stage
from hil.runtime.wire_plan import WirePlan

__all__ = ["DONE", "SENSED", "STEP_FAILED", "SUPERVISE", "OneCall"]

_RUNNING, _COMMAND_REJECTED, _TORQUE_LIMITED, _FAULT_ACTIVE = map(int, (
    StatusFlag.RUNNING, StatusFlag.COMMAND_REJECTED, StatusFlag.TORQUE_LIMITED, StatusFlag.FAULT_ACTIVE))
_new_tuple = tuple.__new__      # a CycleIn from a tuple of its fields: 0.35 us less than CycleIn(...)
_SAFE_MODES = {"zero_torque": SAFE_ZERO_TORQUE, "hold": SAFE_HOLD, "brake": SAFE_DAMPING}


def _conversions(drives) -> np.ndarray:
    """Per joint, what DriveBank.command_for_torque needs of a voltage drive (zeros elsewhere)."""
    conv = np.zeros((len(drives.specs), N_V))
    for k, spec in enumerate(drives.specs):
        if spec.interface == INTERFACE_VOLTAGE:
            conv[k, [V_VOLTAGE, V_RESISTANCE, V_GEAR, V_EFFICIENCY, V_KT, V_KE, V_SUPPLY]] = (
                1.0, spec.resistance_ohm, drives.gear[k], spec.gear_efficiency, spec.torque_constant_N_m_A,
                spec.back_emf_V_s_rad, spec.supply_V)
    return conv


class OneCall:
    """Binds an emulator's arrays to the call once; ``run(frames, t0, clk)`` runs a cycle's compute
    (module docstring) and leaves: ``sent`` the sensor frames to send, ``status`` the status word,
    ``fresh`` whether a valid command arrived, ``cmd_age_us`` as CommandAge.cycle_start gives it,
    ``t1`` and ``t2`` the compute's start and end (ns). The plan's decoder and encoder are the call's;
    where it says so (``python_frames``) the frames go through Emulator.take_frame (a CANopen map's
    nodes, a decoder of its own) before the call."""

    def __init__(self, emu, plan: WirePlan):
        self.emu, self.python_frames = emu, plan.python_frames
        self.command_frames, self.sensor_frames = plan.decoder, plan.encoder
        self._reader = plan.decoder.commands.reader
        self._lookup = plan.decoder.lookup
        self._width = plan.decoder.width      # the longest command payload
        self._taken: list = []
        self._records()
        self._allocate(2 * emu.opt.receive_frames)      # the cycle's frames and those read just before sending
        self.fresh, self.cmd_age_us, self.status, self.t1, self.t2 = False, float("nan"), 0, 0, 0
        self.sent: list = []

    def _records(self) -> None:
        """The call's records that stay the same arrays all run (hil.kernels.emulator_cycle), bound once."""
        emu = self.emu
        p, opt, sup, guard = emu.plant, emu.opt, emu.supervisor, emu.divergence
        node_safe = emu.protocol.safe if emu.protocol is not None else np.zeros(len(sup.tau), bool)
        sp = np.array([_SAFE_MODES[opt.safe_state], *map(float, opt.hold_gains), opt.brake_damping_N_m_s_rad])
        self.safe_state = SafeState(float(sup.watchdog.timeout_s), sp, sup.hold_tau, sup.hold_q, sup.braked, node_safe,
                                    _conversions(emu.drives), sup.tau)
        mi, mf, w = p.kernel_args
        self.plant_step = PlantStep(mi, mf, w, p.tau, p.dt, p.method, p.dae, p.out_index, p.station_out)
        self.guard = Guard(p.layout.n_joints, np.ascontiguousarray(guard.reach), *guard.kept())

    def _allocate(self, capacity: int) -> None:
        """Frame buffers for `capacity` frames a cycle (grown when a cycle brings more); the call bound
        to its records (compiled or loaded from the cache now, before real time)."""
        self.capacity = capacity
        frames = np.zeros((capacity, self._width), np.uint8)
        self._bytes = memoryview(frames).cast("B")
        arrays = np.zeros(capacity, np.int64), np.zeros(capacity, np.int64), np.zeros(capacity, np.int64)
        self.buffer = FrameBuffer(frames, *arrays)
        # Python reads and writes their items through memoryviews (a third of numpy's time per item)
        self._msg_items, self._len_items, self._verdict_items = map(memoryview, arrays)
        emu = self.emu
        self._head = (self.buffer, self.command_frames.decoder, self.safe_state, emu.drives.arrays, self.plant_step)
        self._tail = (self.guard, emu.sensors.tables, self.sensor_frames.encoder)
        self._state: tuple = ()
        self._call = bound_call(emulator_cycle, (self._cycle_in(ENTRY_FRAMES, 0, False, False), *self._arguments()))

    def _arguments(self) -> tuple:
        """The call's arguments after its CycleIn, kept while the plant's state arrays stay the same
        (Plant.reset replaces them)."""
        p = self.emu.plant
        state = self._state
        if not state or state[0] is not p.pos or state[1] is not p.vel:
            self._state = (p.pos, p.vel)
            self._args = (*self._head, p.pos, p.vel, *self._tail)
        return self._args

    def _cycle_in(self, entry: int, n_frames: int, held_fresh: bool, rejected: bool, check: bool = False) -> CycleIn:
        """This cycle's CycleIn, from the emulator's state now."""
        emu = self.emu
        p, sup = emu.plant, emu.supervisor
        wd = sup.watchdog
        faults = emu.faults
        status = _RUNNING | (_FAULT_ACTIVE if faults.any_active or sup.diverged else 0) | (
            _COMMAND_REJECTED if rejected else 0)
        return _new_tuple(CycleIn, (entry, n_frames, p.t, held_fresh, wd.last_valid_s, wd.tripped, sup.diverged,
                                    emu.drives.braking, p.plan.substeps, check, emu.sensors.step_count + 1, status,
                                    sup.announced, emu.protocol is None and faults.signals_idle, emu.cycle))

    def run(self, frames: list, t0: int, clk) -> None:
        """The cycle's compute with the received `frames` (module docstring); `clk` a StageClock or None."""
        emu = self.emu
        n, rejected, fresh = self._take_in(frames)
        p, s, sup, cycle = emu.plant, emu.sensors, emu.supervisor, emu.cycle
        t = p.t
        check = cycle % CHECK_EVERY == 0
        c = self._cycle_in(ENTRY_FRAMES, n, fresh, rejected, check)
        emu.divergence.kept_t = t           # with the position and velocity the call keeps
        s.rng.standard_normal(out=s.noise)     # drawn once per plant step
        clk and clk.mark(Stage.SUPERVISE, through=Stage.PLANT)
        self.t1 = time.monotonic_ns()
        emu.faults.stall()
        outcome, status, detail = self._call(c, *self._arguments())
        if n:
            fresh, rejected = self._count(n, fresh, rejected)
        sup.rejected_now = rejected
        self.fresh, self.cmd_age_us = fresh, emu.age.cycle_start(t0)
        if outcome == SUPERVISE:            # the watchdog trips or clears
            sup.supervise(fresh, cycle, emu.logger)
            outcome, status, detail = self._again(check)
        elif fresh:                         # Watchdog.check without a trip or clear
            sup.watchdog.last_valid_s = t
        p.t += p.dt
        if outcome == STEP_FAILED:
            outcome, status, detail = self._recover(detail)
        self._finish(outcome, status, detail, clk)

    def _take_in(self, frames: list) -> tuple[int, bool, bool]:
        """The frames into the call's buffer (or through Emulator.take_frame, now); returns (frames in the
        buffer, a frame rejected, a valid command taken: by the nodes or while the loop waited)."""
        emu = self.emu
        fresh = emu.take_held()
        if self.python_frames:
            before = self._reader.rejected_total
            for frame in frames:
                fresh |= emu.take_frame(frame)
            if emu.protocol is not None:
                emu.supervisor.supervise_nodes()
            return 0, self._reader.rejected_total > before, fresh
        if len(frames) > self.capacity:
            self._allocate(len(frames))
        reader, taken = self._reader, self._taken
        taken.clear()
        rejected = False
        n, width, buf, msgs, lens = 0, self._width, self._bytes, self._msg_items, self._len_items
        for frame in frames:
            m = self._lookup.get((frame.arbitration_id, frame.is_extended_id))
            if m is None:
                reader.reject("unknown_id")
                rejected = True
            elif m == OTHER_DIRECTION:
                reader.ignored += 1
            else:
                data = frame.data
                size = len(data)
                if size <= width:           # longer: no command's length (the call rejects it unread)
                    buf[n * width:n * width + size] = data
                msgs[n], lens[n] = m, size
                taken.append(frame)
                n += 1
        return n, rejected, fresh

    def _again(self, check: bool) -> tuple[int, int, int]:
        """The call made again from ENTRY_SUPERVISED, on the supervisor's state now."""
        c = self._cycle_in(ENTRY_SUPERVISED, 0, False, self.emu.supervisor.rejected_now, check)
        return self._call(c, *self._arguments())

    def _recover(self, verdict: int) -> tuple[int, int, int]:
        """A failed plant step: the state goes back to the last good one, the divergence is named and
        latched (the safe state to the run's end, FAULT_ACTIVE announced) and the cycle is computed
        again in the safe state, without the deflection check (hil.runtime.divergence)."""
        emu = self.emu
        p, guard, sup = emu.plant, emu.divergence, emu.supervisor
        problem = guard.deflection_problem(emu.cycle) if verdict == DEFLECTED else p.step_failure()
        guard.restore()
        event = guard.latch(emu.cycle, guard.cause(emu.commands.tau, emu.drives.tau, p.layout.joint_names, problem))
        if sup.latch_divergence() and emu.logger is not None:
            emu.logger.event(event)
        sup.update_brakes()
        outcome, status, detail = self._again(check=False)
        p.t += p.dt
        if outcome == STEP_FAILED:
            raise SimulationError(f"{p.step_failure()}, also in the safe state after {problem}")
        return outcome, status, detail

    def _finish(self, outcome: int, status: int, saturated: int, clk) -> None:
        """After the step: the counts, the signal faults and the frames to send."""
        emu = self.emu
        s, sup = emu.sensors, emu.supervisor
        s.step_count += 1
        emu.drives.torque_limited = limited = bool(status & _TORQUE_LIMITED)
        if limited:
            sup.limited_cycles += 1
        if outcome == SENSED or emu.faults.watching:    # (watching: crossing triggers read the channels)
            emu.faults.apply_signals(s.measured, s.truth)
        self.t2 = time.monotonic_ns()
        clk and clk.mark(Stage.SENSORS, through=Stage.ENCODE)
        self.status = status
        self.sent = (emu.encode(status & sup.announced, emu.cycle + 1) if outcome == SENSED
                     else self.sensor_frames.wrap(saturated))

    def _count(self, n: int, fresh: bool, rejected: bool) -> tuple[bool, bool]:
        """The reader's counts and the command ages for the call's verdicts on the n frames taken in;
        returns (fresh, rejected) with theirs."""
        reader, emu = self._reader, self.emu
        counted = False
        verdicts = self._verdict_items
        for k in range(n):
            verdict = verdicts[k]
            if verdict != OK and verdict < OK_LOST:
                reader.reject(REJECTIONS[verdict])
                rejected = True
                continue
            counted |= verdict != OK
            reader.accepted += 1
            stamp = self._taken[k].timestamp
            emu.commands.arrival_s = stamp
            emu.age.taken(int(stamp * 1e9) if stamp > 0 else time.monotonic_ns())
            fresh = True
        if counted:
            counts = self.command_frames.counts
            reader.counters.lost, reader.counters.resyncs = int(counts[CNT_LOST]), int(counts[CNT_RESYNCS])
        return fresh, rejected
