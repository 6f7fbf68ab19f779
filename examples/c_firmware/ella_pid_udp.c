/* The joint PID (joint_pid.h) at 10 kHz over udp_loopback, on the C code generated from its bus map:
 *
 *     hil bus export udp_10khz --c build/
 *     cc -O2 -Ibuild -o ella_pid_udp examples/c_firmware/ella_pid_udp.c \
 *         build/udp_10khz.c build/udp_10khz_protocol.c -lm
 *     hil run configs/ella_10khz.toml --bus udp_10khz --link canfd:udp_loopback:ella,nodes=2 \
 *         --firmware "./ella_pid_udp {channel} 2"
 *
 * udp_loopback (firmware_bridge's python-can interface) carries each CAN FD frame as one datagram
 * on 127.0.0.1: an 18-byte header (magic "CL", version 1, flags, dlc, a pad byte, the arbitration
 * id as big-endian uint32, the sender's wall-clock time as a big-endian double) and the data. A
 * channel of NODES consecutive ports starts at its base port (a decimal channel is the base port;
 * a name hashes to 20000 + 8 (CRC-32(name) mod 1500)); a node binds the first free port of the
 * group and sends every frame to all the others. Each good sensor frame (its E2E CRC right, not a
 * copy of the last cycle) is answered at once by one command frame; everything else is ignored.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "udp_10khz.h"
#include "udp_10khz_protocol.h"
#include "joint_pid.h"

#define HEADER 18
#define MAX_NODES 8
#define FLAG_FD 8
#define FLAG_BRS 16

static uint32_t crc32_of(const char *text) {                    /* zlib's CRC-32 (reflected 0xEDB88320) */
    uint32_t crc = 0xFFFFFFFFu;
    for (; *text; text++) {
        crc ^= (uint8_t)*text;
        for (int b = 0; b < 8; b++) crc = (crc & 1) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
    }
    return ~crc;
}

static long base_port(const char *channel) {
    char *end;
    long port = strtol(channel, &end, 10);
    if (*channel && *end == 0) return port >= 1024 && port <= 65536 - MAX_NODES ? port : -1;
    return 20000 + MAX_NODES * (long)(crc32_of(channel) % 1500);
}

static struct sockaddr_in loopback(long port) {
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* Bind the first free port of the group; its index, or -1. */
static int bind_node(int fd, long base, int nodes) {
    for (int k = 0; k < nodes; k++) {
        struct sockaddr_in a = loopback(base + k);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0) return k;
        if (errno != EADDRINUSE) break;
    }
    return -1;
}

static void put_header(uint8_t *out, uint32_t id, uint8_t dlc) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double stamp = now.tv_sec + 1e-9 * now.tv_nsec;
    uint64_t bits;
    memcpy(&bits, &stamp, sizeof bits);
    out[0] = 'C'; out[1] = 'L'; out[2] = 1; out[3] = FLAG_FD | FLAG_BRS; out[4] = dlc; out[5] = 0;
    for (int i = 0; i < 4; i++) out[6 + i] = (uint8_t)(id >> (24 - 8 * i));
    for (int i = 0; i < 8; i++) out[10 + i] = (uint8_t)(bits >> (56 - 8 * i));
}

/* The sensor frame's data in a datagram, or NULL: another frame, a malformed datagram, a bad CRC. */
static const uint8_t *sensor_data(const uint8_t *d, ssize_t n) {
    if (n != HEADER + UDP_10KHZ_SENSORS_LENGTH || d[0] != 'C' || d[1] != 'L' || d[2] != 1 || !(d[3] & FLAG_FD)
        || d[4] != UDP_10KHZ_SENSORS_LENGTH)
        return NULL;
    uint32_t id = (uint32_t)d[6] << 24 | (uint32_t)d[7] << 16 | (uint32_t)d[8] << 8 | d[9];
    if (id != UDP_10KHZ_SENSORS_FRAME_ID || !udp_10khz_sensors_crc_ok(d + HEADER)) return NULL;
    return d + HEADER;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) { fprintf(stderr, "usage: %s CHANNEL [NODES]\n", argv[0]); return 2; }
    long base = base_port(argv[1]);
    int nodes = argc == 3 ? atoi(argv[2]) : MAX_NODES;
    if (base < 0 || nodes < 1 || nodes > MAX_NODES) { fprintf(stderr, "bad channel or node count\n"); return 2; }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    int node = fd < 0 ? -1 : bind_node(fd, base, nodes);
    if (node < 0) { perror("udp_loopback: no free node"); return 1; }

    struct joint_pid law = {0};
    uint32_t counter = 0;
    uint8_t datagram[256], out[HEADER + UDP_10KHZ_CMD_TORQUE_LENGTH];
    for (;;) {
        ssize_t n = recv(fd, datagram, sizeof datagram, 0);
        if (n < 0) { if (errno == EINTR) continue; perror("recv"); return 1; }
        const uint8_t *data = sensor_data(datagram, n);
        struct udp_10khz_sensors_t sensors;
        if (!data || udp_10khz_sensors_unpack(&sensors, data, UDP_10KHZ_SENSORS_LENGTH) != 0) continue;
        if (joint_pid_seen(&law, sensors.cycle)) continue;                      /* a copy: answered already */
        const int32_t counts[3] = {sensors.enc_base_yaw, sensors.enc_shoulder_pitch, sensors.enc_elbow};
        double tau[3];
        joint_pid_step(&law, counts, sensors.cycle, UDP_10KHZ_CYCLE_S, tau);
        struct udp_10khz_cmd_torque_t command = {
            .tau_base_yaw = udp_10khz_cmd_torque_tau_base_yaw_encode(tau[0]),
            .tau_shoulder_pitch = udp_10khz_cmd_torque_tau_shoulder_pitch_encode(tau[1]),
            .tau_elbow = udp_10khz_cmd_torque_tau_elbow_encode(tau[2]),
            .command_counter = (uint8_t)counter};
        counter = udp_10khz_cmd_torque_counter_next(counter);
        uint8_t *frame = out + HEADER;
        udp_10khz_cmd_torque_pack(frame, &command, UDP_10KHZ_CMD_TORQUE_LENGTH);
        udp_10khz_cmd_torque_protect(frame);
        put_header(out, UDP_10KHZ_CMD_TORQUE_FRAME_ID, UDP_10KHZ_CMD_TORQUE_LENGTH);
        for (int k = 0; k < nodes; k++) {
            if (k == node) continue;
            struct sockaddr_in to = loopback(base + k);
            if (sendto(fd, out, sizeof out, 0, (struct sockaddr *)&to, sizeof to) < 0 && errno != ECONNREFUSED) {
                perror("sendto");
                return 1;
            }
        }
    }
}
