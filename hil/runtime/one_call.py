"""The emulator's cycle on its common path as one compiled call (hil.kernels.emulator_cycle): the
received command frames, the command watchdog, the safe-state command, drives, plant step, sensors,
status word and sensor frames. Python moves the frames' bytes into a preallocated buffer (the id
lookup stays a dict get), draws the sensor noise (the generator's numbers, as before), and after the
call keeps the counts the call's verdicts imply: the reader's accepted, rejected by kind, ignored,
lost and resynchronised frames, the command ages, the writer's saturated and refused messages.

The common path: no CANopen protocol, the ABA formulation (FusedCycle.applies: no holding brake
engaged), no brake closed by the safe state, no signal fault changing the measured channels, no
stall fault, no divergence. Everything else takes the separate stages of Emulator.step_once, which
remain the reference; so does a cycle whose watchdog trips or clears (SUPERVISE: the call stops
after taking the frames in, Python supervises and steps) and one whose plant step fails
(STEP_FAILED: Python computes the step again and recovers, as after FusedCycle.step).
"""
from __future__ import annotations

import inspect
import time

import numpy as np

from firmware_bridge.wire.codec_table import DEC_LENGTH
from firmware_bridge.wire.messages import StatusFlag
from hil.kernels.emulator_cycle import (DONE, N_V, SAFE_DAMPING, SAFE_HOLD, SAFE_ZERO_TORQUE, STEP_FAILED, SUPERVISE,
                                        V_EFFICIENCY, V_GEAR, V_KE, V_KT, V_RESISTANCE, V_SUPPLY, V_VOLTAGE,
                                        emulator_cycle)
from hil.kernels.frame_codec import CNT_LOST, CNT_RESYNCS, OK, OK_LOST
from hil.kernels.jit import bound_call
from hil.model.spec import INTERFACE_VOLTAGE
from hil.runtime.command_frames import OTHER_DIRECTION, REJECTIONS, CompiledCommandInput
from hil.runtime.divergence import CHECK_EVERY
from hil.runtime.sensor_frames import CompiledSensorFrames
from hil.runtime.stages import Stage

TAKE_IN = -1        # the outcome of a cycle the call does not apply to: every stage in Python

_RUNNING, _COMMAND_REJECTED, _TORQUE_LIMITED, _FAULT_ACTIVE = map(int, (
    StatusFlag.RUNNING, StatusFlag.COMMAND_REJECTED, StatusFlag.TORQUE_LIMITED, StatusFlag.FAULT_ACTIVE))
_SAFE_MODES = {"zero_torque": SAFE_ZERO_TORQUE, "hold": SAFE_HOLD, "brake": SAFE_DAMPING}
# the positions of the call's arguments that change from cycle to cycle
_ARG = {name: i for i, name in enumerate(inspect.signature(emulator_cycle.py_func).parameters)}
(_N_FRAMES, _T, _HELD, _LAST_VALID, _TRIPPED, _POS, _VEL, _NSUB, _STEP, _STATUS, _ANNOUNCED, _CYCLE) = (
    _ARG[n] for n in ("n_frames", "t", "held_fresh", "last_valid_s", "tripped", "pos", "vel", "nsub", "step", "status",
                      "announced", "cycle"))


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
    """Binds an emulator's arrays to the call once; ``applies(frames)`` says whether this cycle is on
    the common path, ``run(frames, t0, clk)`` runs it and returns the outcome (DONE: the frames to
    send in ``sent``, the status in ``status``); ``fresh`` and ``cmd_age_us`` as Emulator._decode
    and CommandAge.cycle_start give them, ``t1`` and ``t2`` the compute's start and end (ns)."""

    def __init__(self, emu, command_frames: CompiledCommandInput, sensor_frames: CompiledSensorFrames):
        self.emu = emu
        self.command_frames, self.sensor_frames = command_frames, sensor_frames
        self.capacity = 2 * emu.opt.receive_frames      # the cycle's frames and those read just before sending
        self._reader = command_frames.commands.reader
        self._lookup = command_frames.lookup
        self._width = int(command_frames.msg[:, DEC_LENGTH].max())      # the longest command payload
        self._frames = np.zeros((self.capacity, self._width), np.uint8)
        self._bytes = memoryview(self._frames).cast("B")
        self._frame_msg = np.zeros(self.capacity, np.int64)
        self._frame_len = np.zeros(self.capacity, np.int64)
        self._verdicts = np.zeros(self.capacity, np.int64)
        # Python reads and writes their items through memoryviews (a third of numpy's time per item)
        self._msg_items, self._len_items, self._verdict_items = map(memoryview, (
            self._frame_msg, self._frame_len, self._verdicts))
        self._taken: list = []
        fused, p, opt, sup = emu.fused, emu.plant, emu.opt, emu.supervisor
        self.fused = fused
        sp = np.array([_SAFE_MODES[opt.safe_state], *map(float, opt.hold_gains), opt.brake_damping_N_m_s_rad])
        crc8, crc16, f32, u32, decoded, ctr, state, counts, stored, slots, command = command_frames.tables
        enc = sensor_frames
        bound = dict(
            frames=self._frames, frame_msg=self._frame_msg, frame_len=self._frame_len, n_frames=0,
            verdicts=self._verdicts, msg=command_frames.msg, sig=command_frames.sig, sigf=command_frames.sigf,
            crc8=crc8, crc16=crc16, f32=f32, u32=u32, decoded=decoded, ctr=ctr, ctr_state=state, counts=counts,
            stored=stored, slots=slots, command=command, t=p.t, held_fresh=False, last_valid_s=0.0, tripped=False,
            timeout_s=float(sup.watchdog.timeout_s), sp=sp, hold_tau=sup.hold_tau, hold_q=sup.hold_q,
            braked=sup.braked, conv=_conversions(emu.drives), safe=sup.tau,
            **dict(zip(("par", "vidx", "kt_scale", "dout", "limited"), fused.drive_args)),
            **dict(zip(("mi", "mf", "w"), p.kernel_args)), pos=p.pos, vel=p.vel, tau=p.tau, dt=p.dt,
            nsub=p.plan.substeps, method=p.method, **dict(zip(("stations", "out"), fused.stations)),
            check_every=CHECK_EVERY,
            **dict(zip(("eta0", "reach", "kept_pos", "kept_vel"), fused.guard_args)), step=0,
            **dict(zip(("fj", "current", "z", "ich", "fch", "sf", "si", "gi", "gm", "lin_idx", "lin_coef", "jaxis",
                        "truth", "sampled", "measured"), fused.sense_args)),
            status=0, announced=0, emsg=enc.msg, esig=enc.sig, esigf=enc.sigf, cycle=0, counters=enc.counters,
            payload=enc.payload, result=enc.result)
        self._args = [bound[name] for name in _ARG]
        self._call = bound_call(emulator_cycle, tuple(self._args))
        self.fresh, self.cmd_age_us, self.status, self.t1, self.t2 = False, float("nan"), 0, 0, 0
        self.sent: list = []

    def applies(self, frames: list) -> bool:
        """This cycle is on the common path (module docstring)."""
        emu = self.emu
        faults = emu.faults
        return (len(frames) <= self.capacity and self.fused.applies and not emu.supervisor.diverged
                and not emu.supervisor.any_brake_closed
                and not faults.stall_ns and faults.signals_idle)

    def run(self, frames: list, t0: int, clk) -> int:
        """The cycle's compute with the received `frames` (module docstring); `clk` a StageClock or None."""
        emu = self.emu
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
        p, s, sup, cycle = emu.plant, emu.sensors, emu.supervisor, emu.cycle
        wd = sup.watchdog
        t = p.t
        a = self._args
        a[_N_FRAMES], a[_T], a[_HELD], a[_LAST_VALID], a[_TRIPPED] = n, t, emu.held_fresh, wd.last_valid_s, wd.tripped
        a[_POS], a[_VEL], a[_NSUB], a[_STEP] = p.pos, p.vel, p.plan.substeps, s.step_count + 1
        a[_STATUS] = _RUNNING | (_FAULT_ACTIVE if emu.faults.any_active else 0) | (_COMMAND_REJECTED if rejected
                                                                                else 0)
        a[_ANNOUNCED], a[_CYCLE] = sup.announced, cycle
        fresh, emu.held_fresh = emu.held_fresh, False
        self.fused.guard.kept_t = t
        s.rng.standard_normal(out=s.noise)     # drawn once per plant step (the fallback then draws no more)
        clk and clk.mark(Stage.SUPERVISE, through=Stage.PLANT)
        self.t1 = time.monotonic_ns()
        outcome, status, saturated = self._call(*a)
        clk and clk.mark(Stage.SENSORS, through=Stage.ENCODE)
        if n:
            fresh, rejected = self._count(n, fresh, rejected)
        sup.rejected_now = rejected
        self.fresh, self.cmd_age_us = fresh, emu.age.cycle_start(t0)
        if outcome == SUPERVISE:
            return outcome
        if fresh:                           # Watchdog.check without a trip or clear (those: SUPERVISE)
            wd.last_valid_s = t
        emu.drives.torque_limited = limited = bool(status & _TORQUE_LIMITED)
        p.t += p.dt
        if outcome == STEP_FAILED:
            self.fused.guard.restore()
            return outcome
        s.step_count += 1
        if limited:
            sup.limited_cycles += 1
        if emu.faults.watching:             # crossing triggers read the channels (nothing changes them)
            emu.faults.apply_signals(s.measured, s.truth)
        emu.cycle = cycle + 1
        self.t2 = time.monotonic_ns()
        self.status = status
        self.sent = self.sensor_frames.wrap(saturated)
        return DONE

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
