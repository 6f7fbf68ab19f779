/* ELLA's joint PID of the C examples: PID on the motor encoders with the reference's rate
 * feedforward, along a minimum-jerk ramp from the start pose to the seed 000 set-points.
 * Time is the sensor frames' rolling 8-bit cycle counter times the cycle period, so the law is the
 * same at 1 kHz and at 10 kHz; the differentiated angle is filtered with a first-order lag of
 * RATE_LAG_S (0.4 of the new value per 1 ms cycle).
 */
#ifndef JOINT_PID_H
#define JOINT_PID_H

#include <math.h>
#include <stdint.h>

#define START_S 0.2
#define MOVE_S 1.0
#define RATE_LAG_S 0.0015
#define COUNTS_PER_REV 16384.0

static const double SETPOINT[3] = {0.6922, -0.4928, 0.4270};   /* rad: base_yaw, shoulder_pitch, elbow */
static const double GEAR[3] = {160.0, 160.0, 100.0};
static const double KP[3] = {3000.0, 3000.0, 800.0}, KD[3] = {300.0, 300.0, 80.0}, KI[3] = {3000.0, 3000.0, 800.0};
static const double LIMIT[3] = {240.0, 360.0, 90.0};            /* N m: the command signals' range */

struct joint_pid {
    double integral[3], qd[3], last_q[3];
    int started;
    long cycle, last_raw;
};

static double ramp(double t, double *rate) {
    double x = (t - START_S) / MOVE_S;
    x = x < 0 ? 0 : x > 1 ? 1 : x;
    *rate = 30 * x * x * (1 - x) * (1 - x) / MOVE_S;
    return x * x * x * (10 - 15 * x + 6 * x * x);
}

/* Whether a sensor frame with this cycle counter repeats the last one answered (a copy). */
static int joint_pid_seen(const struct joint_pid *c, long cycle_raw) {
    return c->started && cycle_raw == c->last_raw;
}

/* The joint torques [N m] for one sensor frame's motor encoder counts and its 8-bit cycle counter. */
static void joint_pid_step(struct joint_pid *c, const int32_t counts[3], long cycle_raw, double period_s,
                           double tau[3]) {
    c->cycle = c->started ? c->cycle + ((cycle_raw - c->last_raw) & 0xFF) : cycle_raw;
    c->last_raw = cycle_raw;
    double t = c->cycle * period_s, s_rate, s = ramp(t, &s_rate);
    double lag = period_s / (RATE_LAG_S + period_s);
    for (int j = 0; j < 3; j++) {
        double q = counts[j] * 2 * M_PI / (COUNTS_PER_REV * GEAR[j]);
        if (c->started) c->qd[j] += lag * ((q - c->last_q[j]) / period_s - c->qd[j]);
        c->last_q[j] = q;
        double e = SETPOINT[j] * s - q;
        c->integral[j] = fmax(-200.0, fmin(200.0, c->integral[j] + KI[j] * e * period_s));
        double u = KP[j] * e + KD[j] * (SETPOINT[j] * s_rate - c->qd[j]) + c->integral[j];
        tau[j] = fmax(-LIMIT[j], fmin(LIMIT[j], u));
    }
    c->started = 1;
}

#endif
