"""The joint PID of the Python example firmwares (standard library only): a minimum-jerk ramp from
the start pose to the seed-000 set-points, PID on the joint angles the motor encoders give.

Time is the emulator's cycle counter times the cycle, so a lockstep run gives the same torques on
any machine. Gears and encoder resolution are ELLA's (configs/ella.toml: the counts are at the
motor shaft, 4096 lines x 4 per revolution, geared down to the joint).
"""
import math

SETPOINTS_RAD = (0.6922, -0.4928, 0.4270)     # base_yaw, shoulder_pitch, elbow
GEAR = (160.0, 160.0, 100.0)
COUNTS_PER_REV = 16384
KP, KD, KI = (3000.0, 3000.0, 800.0), (300.0, 300.0, 80.0), (3000.0, 3000.0, 800.0)
INTEGRAL_LIMIT_N_M = 200.0
START_S, MOVE_S = 0.2, 1.0


def ramp(t: float) -> tuple[float, float]:
    """0 -> 1 between START_S and START_S + MOVE_S, minimum jerk: the blend and its rate [1/s]."""
    x = min(max((t - START_S) / MOVE_S, 0.0), 1.0)
    return x ** 3 * (10 - 15 * x + 6 * x * x), 30 * x * x * (1 - x) ** 2 / MOVE_S


class JointPid:
    """``pid(counts, cycle)``: joint torques [N m] within `limits_N_m` from the motor encoder counts."""

    def __init__(self, cycle_s: float, limits_N_m):
        self.cycle_s, self.limits = cycle_s, list(limits_N_m)
        self.integral, self.last_q, self.qd = [0.0] * 3, None, [0.0] * 3

    def __call__(self, counts, cycle: int) -> list[float]:
        q = [c * 2 * math.pi / (COUNTS_PER_REV * g) for c, g in zip(counts, GEAR)]
        if self.last_q is not None:      # a filtered difference: the encoders give no rate
            self.qd = [v + 0.4 * ((a - b) / self.cycle_s - v) for v, a, b in zip(self.qd, q, self.last_q)]
        self.last_q = q
        s, sd = ramp(cycle * self.cycle_s)
        tau = []
        for j in range(3):
            e = SETPOINTS_RAD[j] * s - q[j]
            self.integral[j] = max(-INTEGRAL_LIMIT_N_M, min(INTEGRAL_LIMIT_N_M,
                                                            self.integral[j] + KI[j] * e * self.cycle_s))
            u = KP[j] * e + KD[j] * (SETPOINTS_RAD[j] * sd - self.qd[j]) + self.integral[j]
            tau.append(max(-self.limits[j], min(self.limits[j], u)))
        return tau
