"""One real-time cycle in one call: advance the plant, then sample it for the sensors."""
from numba import njit

from .aba import forward_dynamics
from .integrate import advance
from .outputs import station_state, world_poses


@njit(cache=True)
def step_and_sample(m, w, t, pos, vel, tau, dt, nsub, method, stations, out):
    """Advance (pos, vel) from t to t + dt, then solve the accelerations at the new state and
    write the world kinematics of each station index in `stations` to out[i] (see
    outputs.station_state). The joint angles, rates and rotor angles are pos/vel themselves."""
    ok = advance(m, w, t, pos, vel, tau, dt, nsub, method)
    ok &= forward_dynamics(m, w, t + dt, pos, vel, tau, pos, vel, 0.0, 0.0, w.acc)
    world_poses(m, w)
    for i in range(stations.shape[0]):
        station_state(m, w, stations[i], out[i])
    return ok
