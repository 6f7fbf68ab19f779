"""The compute of every emulator cycle in one call (hil.runtime.one_call binds and calls it): the
received command frames (frame_codec.take_command on each), the command watchdog's verdict, the
safe-state command for the joints in the safe state, the drives and their brakes, the plant step
with its stations (either formulation), the links' deflection check and the sensors
(cycle.drive_step_sense), the status word and the sensor frames due (frame_codec.encode_frames).

The call returns to its caller where the cycle needs Python, which then goes on with the same call:
the watchdog trips or clears (SUPERVISE: an event to log, the pose to hold, brakes to close or
open; the call is made again from ENTRY_SUPERVISED, past the frames and the watchdog), the plant
step fails (STEP_FAILED: the state goes back, the safe state latches, the call is made again from
ENTRY_SUPERVISED), or the sensor frames are not to be encoded here (`encode` False: signal faults
change the measured channels first, or a CANopen node decides which frames go out; SENSED).
"""
from firmware_bridge.wire.messages import StatusFlag

from .cycle import OK as STEP_OK, drive_step_sense
from .frame_codec import OK, OK_LOST, encode_frames, take_command
from .jit import kernel

DONE, SUPERVISE, STEP_FAILED, SENSED = range(4)     # the outcomes
ENTRY_FRAMES, ENTRY_SUPERVISED = range(2)           # where the call begins
SAFE_ZERO_TORQUE, SAFE_HOLD, SAFE_DAMPING = range(3)
SP_MODE, SP_KP, SP_KD, SP_DAMPING = range(4)    # the safe state's parameters: mode, hold gains, damping
# per joint, the conversion of a torque into a voltage drive's duty (DriveBank.command_for_torque)
V_VOLTAGE, V_RESISTANCE, V_GEAR, V_EFFICIENCY, V_KT, V_KE, V_SUPPLY = range(7)
N_V = 7
_TIMEOUT, _REJECTED, _LIMITED = int(StatusFlag.COMMAND_TIMEOUT), int(StatusFlag.COMMAND_REJECTED), \
    int(StatusFlag.TORQUE_LIMITED)


@kernel
def take_frames(frames, frame_msg, frame_len, n_frames, verdicts, msg, sig, sigf, crc8, crc16, f32, u32, decoded,
                ctr, state, counts, stored, slots, command):
    """Frames k < n_frames (payload frames[k, :frame_len[k]] of message frame_msg[k]) through
    take_command in order, its verdict to verdicts[k]; returns (any taken, any rejected)."""
    taken, rejected = False, False
    for k in range(n_frames):
        v = take_command(msg, sig, sigf, frame_msg[k], frames[k], frame_len[k], crc8, crc16, f32, u32, decoded,
                         ctr, state, counts, stored, slots, command)
        verdicts[k] = v
        if v == OK or v >= OK_LOST:
            taken = True
        else:
            rejected = True
    return taken, rejected


@kernel
def safe_command(sp, hold_tau, hold_q, braked, conv, pos, vel, vidx, out):
    """The drives' commands in the safe state (hil.runtime.supervisor), each converted as
    DriveBank.command_for_torque does: zero torque; hold: hold_tau + kp (hold_q - q) - kd qd;
    damping: 0 at a braked joint, else -c qd; a voltage drive's duty for that torque at its motor
    speed."""
    mode = sp[SP_MODE]
    for k in range(out.shape[0]):
        if mode == SAFE_ZERO_TORQUE:
            tau = 0.0
        elif mode == SAFE_HOLD:
            tau = hold_tau[k] + sp[SP_KP] * (hold_q[k] - pos[k]) - sp[SP_KD] * vel[k]
        else:
            tau = 0.0 if braked[k] else (-sp[SP_DAMPING]) * vel[k]
        if conv[k, V_VOLTAGE] != 0.0:
            n = conv[k, V_GEAR]
            volts = (conv[k, V_RESISTANCE] * tau / (n * conv[k, V_EFFICIENCY] * conv[k, V_KT])
                     + conv[k, V_KE] * n * vel[vidx[k]])
            tau = volts / conv[k, V_SUPPLY]
            if -1.0 > tau:          # Python's max(x, -1.0), then min(x, 1.0): NaN passes
                tau = -1.0
            if 1.0 < tau:
                tau = 1.0
        out[k] = tau


@kernel
def emulator_cycle(entry, frames, frame_msg, frame_len, n_frames, verdicts, msg, sig, sigf, crc8, crc16, f32, u32,
                   decoded, ctr, ctr_state, counts, stored, slots, command,
                   t, held_fresh, last_valid_s, tripped, diverged, timeout_s, sp, hold_tau, hold_q, braked, node_safe,
                   conv, safe,
                   par, vidx, kt_scale, dout, flags, braking, brakes,
                   mi, mf, w, pos, vel, tau, dt, nsub, method, dae, stations, out, check, eta0, reach, kept_pos,
                   kept_vel, step, fj, current, z, ich, fch, sf, si, gi, gm, lin_idx, lin_coef, jaxis, truth, sampled,
                   measured,
                   status, announced, encode, emsg, esig, esigf, cycle, counters, payload, result):
    """One cycle's compute (module docstring), cycle number `cycle`. From ENTRY_FRAMES the frames go
    through take_frames; a valid one (or `held_fresh`) refreshes the watchdog (Watchdog.check at
    plant time t); a verdict that changes it returns SUPERVISE before anything else. The drives then
    take `command`, or the safe-state command (safe_command, into `safe`) at the joints in the safe
    state: all while `tripped` or `diverged`, else those `node_safe` marks. drive_step_sense runs (its
    arguments from `par` on); a failed step returns STEP_FAILED (the drives have advanced). `status`
    has the bits Python knows (running, fault active, a rejection of its own or of the call before);
    the call adds the watchdog's, rejected and torque-limited bits and, with `encode`, encodes the
    frames due in the next cycle (cycle + 1) with status & announced. Returns (outcome, status,
    saturated messages)."""
    if entry == ENTRY_FRAMES:
        fresh, rejected = take_frames(frames, frame_msg, frame_len, n_frames, verdicts, msg, sig, sigf, crc8, crc16,
                                      f32, u32, decoded, ctr, ctr_state, counts, stored, slots, command)
        fresh |= held_fresh
        if fresh:
            if tripped:
                return SUPERVISE, status, 0
        elif not tripped and t - last_valid_s > timeout_s:
            return SUPERVISE, status, 0
        if rejected:
            status |= _REJECTED
    drive_command = command
    if safe_commands(command, tripped or diverged, node_safe, sp, hold_tau, hold_q, braked, conv, pos, vel, vidx,
                     safe):
        drive_command = safe
    if tripped:
        status |= _TIMEOUT
    verdict, any_limited = drive_step_sense(
        par, drive_command, vidx, kt_scale, dout, flags, braking, brakes, mi, mf, w, t, pos, vel, tau, dt, nsub,
        method, dae, stations, out, check, eta0, reach, kept_pos, kept_vel, step, fj, current, z, ich, fch, sf, si,
        gi, gm, lin_idx, lin_coef, jaxis, truth, sampled, measured)
    if any_limited:
        status |= _LIMITED
    if verdict != STEP_OK:
        return STEP_FAILED, status, 0
    if not encode:
        return SENSED, status, 0
    saturated = encode_frames(emsg, esig, esigf, measured, status & announced, cycle + 1, counters, crc8, crc16, f32,
                              u32, payload, result)
    return DONE, status, saturated


@kernel
def safe_commands(command, all_safe, node_safe, sp, hold_tau, hold_q, braked, conv, pos, vel, vidx, safe):
    """Whether the drives take `safe` instead of `command`: then `safe` holds the safe-state command
    (safe_command) at every joint while `all_safe`, else at the joints `node_safe` marks and
    `command` elsewhere."""
    any_node = False
    for k in range(node_safe.shape[0]):
        any_node |= node_safe[k]
    if not (all_safe or any_node):
        return False
    safe_command(sp, hold_tau, hold_q, braked, conv, pos, vel, vidx, safe)
    if not all_safe:
        for k in range(safe.shape[0]):
            if not node_safe[k]:
                safe[k] = command[k]
    return True
