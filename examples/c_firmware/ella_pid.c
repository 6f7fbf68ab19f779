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
 * no second answer. The control law is joint_pid.h's.
 */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "joint_pid.h"

#define CYCLE_S 0.001

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
    struct joint_pid pid = {0};
    int counter = 0;
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
            if (joint_pid_seen(&pid, cycle_raw)) continue;                     /* a copy: answered already */
            double tau[3];
            joint_pid_step(&pid, counts, cycle_raw, CYCLE_S, tau);
            uint8_t cmd[10] = {0x01};
            for (int j = 0; j < 3; j++) {
                int16_t raw_tau = (int16_t)lround(tau[j] / 0.02);
                memcpy(cmd + 1 + 2 * j, &raw_tau, 2);
            }
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
