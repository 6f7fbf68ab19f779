/* The joint PID (joint_pid.h) on the C code the emulator generates from its bus map:
 *
 *     hil bus export serial_frame --c build/
 *     cc -O2 -Ibuild -o ella_pid_generated examples/c_firmware/ella_pid_generated.c \
 *         build/serial_frame.c build/serial_frame_protocol.c -lm
 *     hil run ella --bus serial_frame --mode lockstep --duration 4 --firmware "./ella_pid_generated {port}"
 *
 * serial_frame.h (cantools' generator) packs and unpacks the payloads and scales each signal
 * (serial_frame_cmd_torque_tau_elbow_encode: N m to the raw int16); serial_frame_protocol.h reads
 * and writes the packets (COBS, CRC-16) and steps the rolling counter. Nothing of the wire format
 * is written by hand here, so a changed bus map needs only a new export and a rebuild.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <termios.h>
#include <unistd.h>

#include "serial_frame.h"
#include "serial_frame_protocol.h"
#include "joint_pid.h"

struct pid {
    struct joint_pid law;
    uint32_t counter;
};

/* One sensor payload in, the command payload out (serial_frame_cmd_torque_pack's bytes). */
static void control(struct pid *c, const struct serial_frame_sensors_t *in, struct serial_frame_cmd_torque_t *out) {
    const int32_t counts[3] = {in->enc_base_yaw, in->enc_shoulder_pitch, in->enc_elbow};
    double tau[3];
    joint_pid_step(&c->law, counts, in->cycle, SERIAL_FRAME_CYCLE_S, tau);
    out->tau_base_yaw = serial_frame_cmd_torque_tau_base_yaw_encode(tau[0]);
    out->tau_shoulder_pitch = serial_frame_cmd_torque_tau_shoulder_pitch_encode(tau[1]);
    out->tau_elbow = serial_frame_cmd_torque_tau_elbow_encode(tau[2]);
    out->command_counter = (uint8_t)c->counter;
    c->counter = serial_frame_cmd_torque_counter_next(c->counter);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s PORT\n", argv[0]); return 2; }
    int fd = open(argv[1], O_RDWR | O_NOCTTY);
    if (fd < 0) { perror(argv[1]); return 1; }
    struct termios tio;
    tcgetattr(fd, &tio);
    cfmakeraw(&tio);
    tcsetattr(fd, TCSANOW, &tio);

    uint8_t packet[SERIAL_FRAME_MAX_PACKET], buf[256];
    size_t have = 0;
    struct pid c = {0};
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got <= 0) { perror("read"); return 1; }
        for (ssize_t k = 0; k < got; k++) {
            if (buf[k] != 0) { if (have < sizeof packet) packet[have++] = buf[k]; else have = sizeof packet + 1; continue; }
            uint8_t id, payload[SERIAL_FRAME_SENSORS_LENGTH];
            long n = have <= sizeof packet ? serial_frame_packet_read(packet, have, &id, payload, sizeof payload) : -1;
            have = 0;
            struct serial_frame_sensors_t sensors;
            if (n != SERIAL_FRAME_SENSORS_LENGTH || id != SERIAL_FRAME_SENSORS_FRAME_ID ||
                serial_frame_sensors_unpack(&sensors, payload, (size_t)n) != 0) continue;   /* not a good sensor packet */
            if (joint_pid_seen(&c.law, sensors.cycle)) continue;                         /* a copy: answered already */
            struct serial_frame_cmd_torque_t command;
            uint8_t body[SERIAL_FRAME_CMD_TORQUE_LENGTH], wire[SERIAL_FRAME_MAX_PACKET];
            control(&c, &sensors, &command);
            serial_frame_cmd_torque_pack(body, &command, sizeof body);
            size_t len = serial_frame_packet_write(SERIAL_FRAME_CMD_TORQUE_FRAME_ID, body, sizeof body, wire);
            if (write(fd, wire, len) != (ssize_t)len) { perror("write"); return 1; }
        }
    }
}
