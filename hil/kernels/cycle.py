"""One real-time cycle in one call: advance the plant, then sample it for the sensors."""

from .jit import kernel
from .aba import forward_dynamics
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
