"""The sensor stage of a cycle: ideal values from the plant state, then each sensor's model.

One call per plant step over flat per-channel tables built by hil.devices.sensors.SensorSuite (the
models are stated there). Allocation-free; the standard normals come in through `z`.
"""
from collections import namedtuple

import numpy as np

from .jit import kernel

# channel kinds
ENC = 0        # incremental encoder counter
INDEX = 1      # count latched at the last index mark of an encoder channel
ABS = 2        # single-turn absolute encoder
ANALOG = 3     # signal chain: misalignment, bias, random walk, noise, saturation, low-pass, quantisation

# where the ideal value comes from
SRC_POS = 0       # const + sum of coef * pos[idx] (generalized coordinates)
SRC_VEL = 1       # const + sum of coef * vel[idx]
SRC_STATION = 2   # a field of a sampled station, turned into the sensor frame (IMU triads)
SRC_TORQUE = 3    # joint axis . moment of the joint wrench
SRC_CURRENT = 4   # the drive model's motor current
SRC_NONE = 5      # derived from another channel (index latch)

# integer parameters ich[c, :]
I_KIND, I_SRC, I_DIV, I_REF, I_CPR, I_INDEX, I_BITS, I_LIN0, I_LIN1 = range(9)
N_INT = 9
# float parameters fch[c, :]
F_SIGMA, F_WALK, F_BIAS, F_RANGE, F_LSB, F_ALPHA, F_CONST, F_MODULUS, F_GAIN = range(9)
N_FLOAT = 9
# float state sf[c, :]: filter output, random-walk bias, ideal value now, chain input now
S_LPF, S_WALK, S_NOW, S_IN = range(4)
N_STATE = 4
# integer state si[c, :]: counter value at the previous step, counter (or latched count) now
S_PREV, S_COUNT = range(2)

# What the sensors read and keep, per channel c unless said: the plant's output stations (their world
# kinematics, hil.kernels.outputs.station_state), its joint wrenches, the drives' motor currents, the
# standard normals of this step (2 per channel), the parameters (ich, fch above) and states (sf, si),
# the IMU triads (gi: first channel, station, field; gm: their misalignment and sensitivity matrices),
# the linear maps of pos/vel (lin_idx, lin_coef rows I_LIN0:I_LIN1), the joint axes, and the outputs:
# the ideal value, the sampled one and the measured one (sampled, then changed by signal faults).
SensorTables = namedtuple("SensorTables",
                          "stations fj current z ich fch sf si gi gm lin_idx lin_coef jaxis truth sampled measured")


@kernel
def _wrap(count, bits):
    """A signed two's-complement counter of `bits` bits showing `count`."""
    half = np.int64(1) << (bits - 1)
    return (count + half) % (half << 1) - half


@kernel
def _ideal(pos, vel, tab):
    stations, fj, current, ich, fch, sf = tab.stations, tab.fj, tab.current, tab.ich, tab.fch, tab.sf
    gi, gm, lin_idx, lin_coef, jaxis = tab.gi, tab.gm, tab.lin_idx, tab.lin_coef, tab.jaxis
    for c in range(ich.shape[0]):
        src = ich[c, I_SRC]
        if src == SRC_POS or src == SRC_VEL:
            x = pos if src == SRC_POS else vel
            s = fch[c, F_CONST]
            for e in range(ich[c, I_LIN0], ich[c, I_LIN1]):
                s += lin_coef[e] * x[lin_idx[e]]
            sf[c, S_NOW] = s
        elif src == SRC_TORQUE:
            k = ich[c, I_REF]
            sf[c, S_NOW] = jaxis[k, 0] * fj[k, 0] + jaxis[k, 1] * fj[k, 1] + jaxis[k, 2] * fj[k, 2]
        elif src == SRC_CURRENT:
            sf[c, S_NOW] = current[ich[c, I_REF]]
        sf[c, S_IN] = sf[c, S_NOW]
    for g in range(gi.shape[0]):
        c0, o, f = gi[g, 0], stations[gi[g, 1]], gi[g, 2]
        # station axes: R^T v with R (world <- station) row-major at o[3:12]
        v0 = o[3] * o[f] + o[6] * o[f + 1] + o[9] * o[f + 2]
        v1 = o[4] * o[f] + o[7] * o[f + 1] + o[10] * o[f + 2]
        v2 = o[5] * o[f] + o[8] * o[f + 1] + o[11] * o[f + 2]
        for a in range(3):
            sf[c0 + a, S_NOW] = gm[g, 0, a, 0] * v0 + gm[g, 0, a, 1] * v1 + gm[g, 0, a, 2] * v2
        for a in range(3):
            sf[c0 + a, S_IN] = (gm[g, 1, a, 0] * sf[c0, S_NOW] + gm[g, 1, a, 1] * sf[c0 + 1, S_NOW]
                                + gm[g, 1, a, 2] * sf[c0 + 2, S_NOW])


@kernel
def _analog(c, first, sample, z, fch, sf, truth, measured):
    r = fch[c, F_RANGE]
    walk = 0.0 if first else sf[c, S_WALK] + fch[c, F_WALK] * z[2 * c + 1]
    sensed = fch[c, F_GAIN] * sf[c, S_IN]
    x = min(max(sensed + fch[c, F_BIAS] + walk + fch[c, F_SIGMA] * z[2 * c], -r), r)
    if first:      # powered up long before: the filter has settled on the noise-free input
        sf[c, S_LPF] = min(max(sensed + fch[c, F_BIAS], -r), r)
    y = sf[c, S_LPF] + fch[c, F_ALPHA] * (x - sf[c, S_LPF])
    sf[c, S_LPF] = y
    sf[c, S_WALK] = walk
    if sample:
        truth[c] = sf[c, S_NOW]
        lsb = fch[c, F_LSB]
        if lsb > 0.0:
            y = lsb * np.floor(y / lsb + 0.5)
        measured[c] = min(max(y, -r), r)


@kernel
def _index_latch(c, e, ich, si):
    """The latch of index channel c after encoder channel e moved from S_PREV to S_COUNT: the
    marks sit at counts idx + k cpr; the last one crossed (upwards the highest, downwards the
    lowest) is latched."""
    cpr, idx = ich[c, I_CPR], ich[c, I_INDEX]
    k_prev = (si[e, S_PREV] - idx) // cpr
    k_now = (si[e, S_COUNT] - idx) // cpr
    if k_now > k_prev:
        si[c, S_COUNT] = idx + k_now * cpr
    elif k_now < k_prev:
        si[c, S_COUNT] = idx + (k_now + 1) * cpr


@kernel
def sense(step, first, pos, vel, tab):
    """Advance every channel by one plant step (`first`: start-up, every channel samples and its
    state starts settled); channels whose divider divides `step` publish tab.truth and
    tab.sampled (the SensorTables above)."""
    z, ich, fch, sf, si, truth, measured = tab.z, tab.ich, tab.fch, tab.sf, tab.si, tab.truth, tab.sampled
    _ideal(pos, vel, tab)
    n = ich.shape[0]
    for c in range(n):
        kind = ich[c, I_KIND]
        sample = first or step % ich[c, I_DIV] == 0
        if kind == ANALOG:
            _analog(c, first, sample, z, fch, sf, truth, measured)
        elif kind == ENC:
            count = np.int64(np.floor(sf[c, S_NOW]))
            si[c, S_COUNT] = count
            if first:
                si[c, S_PREV] = count
            if sample:
                truth[c] = sf[c, S_NOW]
                measured[c] = _wrap(count, ich[c, I_BITS])
        elif kind == INDEX:
            if first:
                si[c, S_COUNT] = 0
            else:
                _index_latch(c, ich[c, I_REF], ich, si)
            if sample:
                truth[c] = si[c, S_COUNT]
                measured[c] = _wrap(si[c, S_COUNT], ich[c, I_BITS])
        elif kind == ABS:
            if sample:
                modulus = fch[c, F_MODULUS]
                turn = sf[c, S_NOW] % modulus
                truth[c] = turn
                measured[c] = np.floor(turn) % modulus
    for c in range(n):
        if ich[c, I_KIND] == ENC:
            si[c, S_PREV] = si[c, S_COUNT]
