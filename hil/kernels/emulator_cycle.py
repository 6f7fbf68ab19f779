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
from collections import namedtuple

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

# What changes from cycle to cycle (built anew each call): where the call begins (ENTRY_*), the frames
# in the FrameBuffer, the plant time t [s], a valid command taken in while the loop waited, the
# watchdog's last valid command [s] and state, the divergence latch, any brake engaged, the substeps,
# whether to check the links' deflection, the plant step's number, the status bits Python knows and
# those announced, whether to encode the sensor frames here, and the cycle's number.
CycleIn = namedtuple("CycleIn", "entry n_frames t held_fresh last_valid_s tripped diverged braking nsub check step "
                                "status announced encode cycle")
# The received command frames: payload k in frames[k, :length[k]] of message msg[k] (the decoder's
# index), the decoder's verdict on it to verdicts[k].
FrameBuffer = namedtuple("FrameBuffer", "frames msg length verdicts")
# The supervisor's (hil.runtime.supervisor): the watchdog's timeout [s], the safe state's parameters
# (SP_*), the torques holding the start pose, the pose held, the joints whose brake the safe state
# closes, the joints of stopped CANopen drives, each voltage drive's conversion (V_*) and the safe
# commands computed.
SafeState = namedtuple("SafeState", "timeout_s sp hold_tau hold_q braked node_safe conv safe")


@kernel
def take_frames(buf, n_frames, dec):
    """Frames k < n_frames of the FrameBuffer `buf` through take_command on the Decoder `dec` in
    order, its verdict to buf.verdicts[k]; returns (any taken, any rejected)."""
    taken, rejected = False, False
    for k in range(n_frames):
        v = take_command(dec, buf.msg[k], buf.frames[k], buf.length[k])
        buf.verdicts[k] = v
        if v == OK or v >= OK_LOST:
            taken = True
        else:
            rejected = True
    return taken, rejected


@kernel
def safe_command(sup, pos, vel, vidx):
    """The drives' commands in the safe state into sup.safe (the SafeState above), each converted as
    DriveBank.command_for_torque does: zero torque; hold: hold_tau + kp (hold_q - q) - kd qd;
    damping: 0 at a braked joint, else -c qd; a voltage drive's duty for that torque at its motor
    speed."""
    sp, hold_tau, hold_q, braked, conv, out = sup.sp, sup.hold_tau, sup.hold_q, sup.braked, sup.conv, sup.safe
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
def safe_commands(sup, command, all_safe, pos, vel, vidx):
    """Whether the drives take sup.safe instead of `command`: then it holds the safe-state command
    (safe_command) at every joint while `all_safe`, else at the joints sup.node_safe marks and
    `command` elsewhere."""
    node_safe, safe = sup.node_safe, sup.safe
    any_node = False
    for k in range(node_safe.shape[0]):
        any_node |= node_safe[k]
    if not (all_safe or any_node):
        return False
    safe_command(sup, pos, vel, vidx)
    if not all_safe:
        for k in range(safe.shape[0]):
            if not node_safe[k]:
                safe[k] = command[k]
    return True


@kernel
def emulator_cycle(c, buf, dec, sup, drives, plant, pos, vel, guard, sensors, enc):
    """One cycle's compute (module docstring): `c` the CycleIn, `buf` the FrameBuffer, `dec` the
    command Decoder, `sup` the SafeState, `drives` the DriveArrays, `plant` the PlantStep with its
    state (pos, vel), `guard` the divergence Guard, `sensors` the SensorTables, `enc` the sensor
    frames' Encoder. From ENTRY_FRAMES the frames go through take_frames; a valid one (or
    c.held_fresh) refreshes the watchdog (Watchdog.check at plant time c.t); a verdict that changes
    it returns SUPERVISE before anything else. The drives then take the decoder's torques, or the
    safe-state command at the joints in the safe state: all while tripped or diverged, else those
    node_safe marks. drive_step_sense runs; a failed step returns STEP_FAILED and its verdict (the
    drives have advanced). c.status has the bits Python knows (running, fault active, a rejection
    of its own or of the call before); the call adds the watchdog's, rejected and torque-limited
    bits and, with c.encode, encodes the frames due in the next cycle (c.cycle + 1) with status &
    c.announced. Returns (outcome, status, saturated messages or the failed step's verdict)."""
    status = c.status
    if c.entry == ENTRY_FRAMES:
        fresh, rejected = take_frames(buf, c.n_frames, dec)
        fresh |= c.held_fresh
        if fresh:
            if c.tripped:
                return SUPERVISE, status, 0
        elif not c.tripped and c.t - c.last_valid_s > sup.timeout_s:
            return SUPERVISE, status, 0
        if rejected:
            status |= _REJECTED
    command = dec.tau
    drive_command = command
    if safe_commands(sup, command, c.tripped or c.diverged, pos, vel, drives.vidx):
        drive_command = sup.safe
    if c.tripped:
        status |= _TIMEOUT
    verdict, any_limited = drive_step_sense(drives, drive_command, c.braking, plant, c.t, pos, vel, c.nsub, c.check,
                                            guard, c.step, sensors)
    if any_limited:
        status |= _LIMITED
    if verdict != STEP_OK:
        return STEP_FAILED, status, verdict
    if not c.encode:
        return SENSED, status, 0
    saturated = encode_frames(enc, sensors.measured, status & c.announced, c.cycle + 1)
    return DONE, status, saturated
