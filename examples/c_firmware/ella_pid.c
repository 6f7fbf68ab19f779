/* A joint PID firmware for ELLA in C over a serial port (the emulator's pty):
 *
 *     cc -O2 -o ella_pid examples/c_firmware/ella_pid.c -lm
 *     hil run ella --bus serial_frame --mode lockstep --duration 4 --firmware "./ella_pid {port}"
 *
 * Wire format (configs/bus/serial_frame.toml, README "Serial frame"): every packet is
 * COBS(id, payload, CRC-16/CCITT-FALSE big-endian) followed by 0x00. Each sensor packet
 * (id 0x81, 26 bytes: 3 x int32 encoder counts, 6 x int16 IMU, uint8 status, uint8 cycle; little
 * endian) is answered by one command packet (id 0x01, 7 bytes: 3 x int16 torque at 0.02 N m per
 * LSB, uint8 rolling counter); a sensor packet repeating the last cycle counter is a copy and gets
 * no second answer. The control law: PID on the motor encoders with the reference's rate
 * feedforward, along a minimum-jerk ramp from the start pose to the seed 000 set-points.
 */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define CYCLE_S 0.001
#define START_S 0.2
#define MOVE_S 1.0
#define COUNTS_PER_REV 16384.0

static const double SETPOINT[3] = {0.6922, -0.4928, 0.4270};   /* rad: base_yaw, shoulder_pitch, elbow */
static const double GEAR[3] = {160.0, 160.0, 100.0};
static const double KP[3] = {3000.0, 3000.0, 800.0}, KD[3] = {300.0, 300.0, 80.0}, KI[3] = {3000.0, 3000.0, 800.0};
static const double LIMIT[3] = {240.0, 360.0, 90.0};            /* N m: the command signals' range */

static uint16_t crc16(const uint8_t *p, size_t n) {              /* poly 0x1021, init 0xFFFF, no xorout */
    uint16_t crc = 0xFFFF;
    while (n--) {
        crc ^= (uint16_t)(*p++) << 8;
        for (int b = 0; b < 8; b++) crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

static size_t cobs_encode(const uint8_t *in, size_t n, uint8_t *out) {   /* out: n + 2 bytes at least */
    size_t code_at = 0, o = 1;
    uint8_t code = 1;
    for (size_t i = 0; i < n; i++) {
        if (in[i]) { out[o++] = in[i]; code++; }
        if (!in[i] || code == 0xFF) { out[code_at] = code; code_at = o++; code = 1; }
    }
    out[code_at] = code;
    return o;
}

static long cobs_decode(const uint8_t *in, size_t n, uint8_t *out, size_t cap) {
    size_t i = 0, o = 0;
    while (i < n) {
        uint8_t code = in[i++];
        if (code == 0 || i + code - 1 > n) return -1;
        for (int k = 1; k < code; k++) { if (o >= cap) return -1; out[o++] = in[i++]; }
        if (code != 0xFF && i < n) { if (o >= cap) return -1; out[o++] = 0; }
    }
    return (long)o;
}

static double ramp(double t, double *rate) {
    double x = (t - START_S) / MOVE_S;
    x = x < 0 ? 0 : x > 1 ? 1 : x;
    *rate = 30 * x * x * (1 - x) * (1 - x) / MOVE_S;
    return x * x * x * (10 - 15 * x + 6 * x * x);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s PORT\n", argv[0]); return 2; }
    int fd = open(argv[1], O_RDWR | O_NOCTTY);
    if (fd < 0) { perror(argv[1]); return 1; }
    struct termios tio;
    tcgetattr(fd, &tio);
    cfmakeraw(&tio);
    tcsetattr(fd, TCSANOW, &tio);

    uint8_t raw[64], body[64], buf[256];
    size_t have = 0;
    double integral[3] = {0}, qd[3] = {0}, last_q[3] = {0};
    int started = 0, counter = 0;
    long cycle = 0, last_raw = 0;
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got <= 0) { perror("read"); return 1; }
        for (ssize_t k = 0; k < got; k++) {
            if (buf[k] != 0) { if (have < sizeof raw) raw[have++] = buf[k]; else have = sizeof raw + 1; continue; }
            long n = have <= sizeof raw ? cobs_decode(raw, have, body, sizeof body) : -1;
            have = 0;
            if (n != 29 || body[0] != 0x81 || crc16(body, 29) != 0) continue;   /* not a good sensor packet */
            int32_t counts[3];
            memcpy(counts, body + 1, sizeof counts);                           /* little endian, as this host */
            long cycle_raw = body[26];
            if (started && cycle_raw == last_raw) continue;                   /* a copy: answered already */
            cycle = started ? cycle + ((cycle_raw - last_raw) & 0xFF) : cycle_raw;
            last_raw = cycle_raw;
            double t = cycle * CYCLE_S, s_rate, s = ramp(t, &s_rate);
            uint8_t cmd[10] = {0x01};
            for (int j = 0; j < 3; j++) {
                double q = counts[j] * 2 * M_PI / (COUNTS_PER_REV * GEAR[j]);
                if (started) qd[j] += 0.4 * ((q - last_q[j]) / CYCLE_S - qd[j]);
                last_q[j] = q;
                double e = SETPOINT[j] * s - q;
                integral[j] = fmax(-200.0, fmin(200.0, integral[j] + KI[j] * e * CYCLE_S));
                double u = KP[j] * e + KD[j] * (SETPOINT[j] * s_rate - qd[j]) + integral[j];
                int16_t raw_tau = (int16_t)lround(fmax(-LIMIT[j], fmin(LIMIT[j], u)) / 0.02);
                memcpy(cmd + 1 + 2 * j, &raw_tau, 2);
            }
            started = 1;
            cmd[7] = (uint8_t)counter;
            counter = (counter + 1) & 0xFF;
            uint16_t crc = crc16(cmd, 8);
            cmd[8] = (uint8_t)(crc >> 8);
            cmd[9] = (uint8_t)crc;
            uint8_t wire[16];
            size_t len = cobs_encode(cmd, 10, wire);
            wire[len++] = 0;
            if (write(fd, wire, len) != (ssize_t)len) { perror("write"); return 1; }
        }
    }
}
