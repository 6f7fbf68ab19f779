"""One real-time cycle in one call: advance the plant, then sample it for the sensors; with the
drives before and the sensor models after (drive_step_sense)."""

from .jit import kernel
from .aba import forward_dynamics
from .drive import drives_update
from . import screw_dae_step
from .sensing import sense
from .integrate import advance
from .layout import DIM_NQ, W_ACC
from .outputs import station_state, world_poses


@kernel
def step_and_sample(mi, mf, w, t, pos, vel, tau, dt, nsub, method, stations, out):
    """Advance (pos, vel) from t to t + dt, then solve the accelerations at the new state and
    write the world kinematics of each station index in `stations` to out[i] (see
    outputs.station_state). The joint angles, rates and rotor angles are pos/vel themselves."""
    ok = advance(mi, mf, w, t, pos, vel, tau, dt, nsub, method)
    acc = w[mi[W_ACC]:mi[W_ACC] + mi[DIM_NQ]]
    ok &= forward_dynamics(mi, mf, w, t + dt, pos, vel, tau, pos, vel, 0.0, 0.0, acc)
    world_poses(mi, mf, w)
    for i in range(stations.shape[0]):
        station_state(mi, mf, w, stations[i], out[i])
    return ok


OK, DIVERGED, DEFLECTED = 0, 1, 2      # drive_step_sense's verdicts


@kernel
def drive_step_sense(par, command, vidx, kt_scale, dout, flags, braking, brakes,
                     mi, mf, w, t, pos, vel, tau, dt, nsub, method, dae, stations, out, check, eta0, reach, kept_pos,
                     kept_vel, step, fj, current, z, ich, fch, sf, si, gi, gm, lin_idx, lin_coef, jaxis, truth, sampled,
                     measured):
    """The compute of one emulator cycle in one call: the drives and their brakes
    (hil.kernels.drive.drives_update: the commands -> link-side torques, dout[0], into tau), the
    plant step with its output stations (step_and_sample; with `dae` the screw-DAE formulation's),
    with `check` the links' deflection |eta_i| = |pos[eta0 + i]| against reach[i], then the sensors
    at the new instant (hil.kernels.sensing.sense, plant step number `step`, normals z drawn
    before), their outputs copied to `measured`. The state the step starts from (after a brake
    stopped a joint) is copied to kept_pos, kept_vel (hil.runtime.divergence.DivergenceGuard's last
    good state). Returns (verdict, any drive limited): OK, DIVERGED (non-finite state or singular
    inertia) or DEFLECTED; the sensors run only on OK."""
    any_limited = drives_update(par, command, vel, vidx, kt_scale, dout, flags, braking, brakes, mi, mf, t, pos)
    for i in range(pos.shape[0]):
        kept_pos[i] = pos[i]
    for i in range(vel.shape[0]):
        kept_vel[i] = vel[i]
    for k in range(command.shape[0]):
        tau[k] = dout[0, k]
    if dae:
        ok = screw_dae_step.step_and_sample(mi, mf, w, t, pos, vel, tau, dt, nsub, method, stations, out)
    else:
        ok = step_and_sample(mi, mf, w, t, pos, vel, tau, dt, nsub, method, stations, out)
    if not ok:
        return DIVERGED, any_limited
    if check:
        for i in range(reach.shape[0]):
            if abs(pos[eta0 + i]) > reach[i]:
                return DEFLECTED, any_limited
    sense(step, False, pos, vel, out, fj, current, z, ich, fch, sf, si, gi, gm, lin_idx, lin_coef, jaxis,
          truth, sampled)
    for c in range(measured.shape[0]):
        measured[c] = sampled[c]
    return OK, any_limited
