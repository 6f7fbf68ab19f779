"""One real-time cycle in one call: advance the plant, then sample it for the sensors; with the
drives before and the sensor models after (drive_step_sense)."""
from collections import namedtuple

from .jit import kernel
from .aba import forward_dynamics
from .drive import drives_update
from . import screw_dae_step
from .sensing import sense
from .formulation import AbaPlant
from .integrate import steps
from .layout import DIM_NQ, W_ACC
from .outputs import station_state, world_poses

# What a cycle's plant step reads and writes besides the state (pos, vel): the kernel model and work
# arrays (hil.model.kernel_arrays), the drive torques, the step dt, the scheme (layout.METHOD_*), the
# formulation (dae: the screw DAE's step, else the articulated-body one), the output stations and their
# world kinematics.
PlantStep = namedtuple("PlantStep", "mi mf w tau dt method dae stations out")
# The divergence guard's (hil.runtime.divergence): where the modal coordinates eta begin in pos, the
# reach of each, and the state kept before the step.
Guard = namedtuple("Guard", "eta0 reach kept_pos kept_vel")


@kernel
def step_and_sample(mi, mf, w, t, pos, vel, tau, dt, nsub, method, stations, out):
    """Advance (pos, vel) from t to t + dt, then solve the accelerations at the new state and
    write the world kinematics of each station index in `stations` to out[i] (see
    outputs.station_state). The joint angles, rates and rotor angles are pos/vel themselves."""
    ok = steps(AbaPlant(mi, mf, w), t, pos, vel, tau, dt, nsub, method)
    acc = w[mi[W_ACC]:mi[W_ACC] + mi[DIM_NQ]]
    ok &= forward_dynamics(mi, mf, w, t + dt, pos, vel, tau, pos, vel, 0.0, 0.0, acc)
    world_poses(mi, mf, w)
    for i in range(stations.shape[0]):
        station_state(mi, mf, w, stations[i], out[i])
    return ok


OK, DIVERGED, DEFLECTED = 0, 1, 2      # drive_step_sense's verdicts


@kernel
def drive_step_sense(drives, command, braking, plant, t, pos, vel, nsub, check, guard, step, sensors):
    """The compute of one emulator cycle in one call: the drives and their brakes
    (hil.kernels.drive.drives_update: the commands -> link-side torques, into plant.tau), the plant
    step from t with nsub substeps and its output stations (step_and_sample; the screw DAE's with
    plant.dae), with `check` the links' deflection |eta_i| = |pos[eta0 + i]| against the guard's
    reach[i], then the sensors at the new instant (hil.kernels.sensing.sense, plant step number
    `step`, normals drawn before), their sampled outputs copied to the measured ones. The state the
    step starts from (after a brake stopped a joint) is copied to the guard's kept_pos, kept_vel
    (hil.runtime.divergence.DivergenceGuard's last good state). Returns (verdict, any drive
    limited): OK, DIVERGED (non-finite state or singular inertia) or DEFLECTED; the sensors run only
    on OK."""
    mi, mf, w, tau, dt, method, stations, out = (plant.mi, plant.mf, plant.w, plant.tau, plant.dt, plant.method,
                                                 plant.stations, plant.out)
    any_limited = drives_update(drives, command, braking, mi, mf, t, pos, vel)
    kept_pos, kept_vel, reach = guard.kept_pos, guard.kept_vel, guard.reach
    for i in range(pos.shape[0]):
        kept_pos[i] = pos[i]
    for i in range(vel.shape[0]):
        kept_vel[i] = vel[i]
    dout = drives.out
    for k in range(command.shape[0]):
        tau[k] = dout[0, k]
    if plant.dae:
        ok = screw_dae_step.step_and_sample(mi, mf, w, t, pos, vel, tau, dt, nsub, method, stations, out)
    else:
        ok = step_and_sample(mi, mf, w, t, pos, vel, tau, dt, nsub, method, stations, out)
    if not ok:
        return DIVERGED, any_limited
    if check:
        for i in range(reach.shape[0]):
            if abs(pos[guard.eta0 + i]) > reach[i]:
                return DEFLECTED, any_limited
    sense(step, False, pos, vel, sensors)
    sampled, measured = sensors.sampled, sensors.measured
    for c in range(measured.shape[0]):
        measured[c] = sampled[c]
    return OK, any_limited
