"""One real-time cycle in one call: advance the plant, then sample it for the sensors."""
from numba import njit

from .aba import forward_dynamics
from .integrate import advance, stage_vector
from .layout import W_ACC, at
from .outputs import station_state, world_poses


@njit(cache=True)
def step_and_sample(mi, mf, w, t, pos, vel, tau, dt, nsub, method, stations, out):
    """Advance (pos, vel) from t to t + dt, then solve the accelerations at the new state and
    write the world kinematics of each station index in `stations` to out[i] (see
    outputs.station_state). The joint angles, rates and rotor angles are pos/vel themselves."""
    ok = advance(mi, mf, w, t, pos, vel, tau, dt, nsub, method)
    ok &= forward_dynamics(mi, mf, w, t + dt, pos, vel, tau, pos, vel, 0.0, 0.0, stage_vector(mi, w, W_ACC))
    world_poses(mi, mf, w)
    for i in range(stations.shape[0]):
        station_state(mi, mf, w, stations[i], out[i])
    return ok
