"""A joint PID firmware for ELLA over CAN FD with python-can: the kind of program
`hil run ella --bus compact_fd --link canfd:udp_loopback:mybench --firmware
"python examples/python_can_firmware.py {interface} {channel}"` starts (any python-can interface:
socketcan, pcan, ... on real hardware; udp_loopback between two processes on one machine).

It speaks configs/bus/compact_fd.toml, AUTOSAR E2E Profile 5 frames: the sensor frame 0x110 (32
bytes: 3 x int32 encoder counts, 6 x int16 IMU, uint8 status, CRC-16 in bytes 25-26, uint8 cycle
counter in byte 27, 4 reserved) is answered by the command frame 0x100 (12 bytes: 3 x int16 torque
at 0.02 N m per LSB, CRC-16 in bytes 6-7, uint8 rolling counter in byte 8, 3 reserved). A sensor
frame repeating the last cycle counter is a copy and gets no second answer. The control law is
the one of examples/pyserial_firmware.py.
"""
import binascii
import math
import struct
import sys

import can

SETPOINTS = (0.6922, -0.4928, 0.4270)        # rad: base_yaw, shoulder_pitch, elbow (seed 000)
GEAR = (160.0, 160.0, 100.0)
KP, KD, KI = (3000.0, 3000.0, 800.0), (300.0, 300.0, 80.0), (3000.0, 3000.0, 800.0)
LIMIT = (240.0, 360.0, 90.0)
CYCLE_S, START_S, MOVE_S = 0.001, 0.2, 1.0


def e2e_crc(data: bytes, crc_at: int, data_id: int) -> int:
    """E2E Profile 5's CRC of a frame: CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no xorout) of
    every byte but the two CRC bytes at crc_at, then of the Data ID (the CAN id) low byte, high byte."""
    crc = binascii.crc_hqx(data[:crc_at] + data[crc_at + 2:], 0xFFFF)
    return binascii.crc_hqx(data_id.to_bytes(2, "little"), crc)


def main(interface: str, channel: str) -> None:
    bus = can.Bus(interface=interface, channel=channel, fd=True)
    integral, last_q, qd = [0.0] * 3, None, [0.0] * 3
    cycle, last_raw, counter = None, 0, 0
    while True:
        msg = bus.recv(timeout=1.0)
        if (msg is None or msg.arbitration_id != 0x110 or len(msg.data) != 32
                or e2e_crc(msg.data, 25, 0x110) != int.from_bytes(msg.data[25:27], "little")):
            continue
        counts = struct.unpack_from("<3i", msg.data, 0)
        cycle_raw = msg.data[27]
        if cycle is not None and cycle_raw == last_raw:
            continue                                         # a copy of the last frame: answered already
        cycle = cycle_raw if cycle is None else cycle + ((cycle_raw - last_raw) & 0xFF)
        last_raw = cycle_raw
        t = cycle * CYCLE_S
        x = min(max((t - START_S) / MOVE_S, 0.0), 1.0)
        s, sd = x ** 3 * (10 - 15 * x + 6 * x * x), 30 * x * x * (1 - x) ** 2 / MOVE_S
        q = [c * 2 * math.pi / (16384 * g) for c, g in zip(counts, GEAR)]
        if last_q is not None:
            qd = [v + 0.4 * ((a - b) / CYCLE_S - v) for v, a, b in zip(qd, q, last_q)]
        last_q = q
        tau = []
        for j in range(3):
            e = SETPOINTS[j] * s - q[j]
            integral[j] = max(-200.0, min(200.0, integral[j] + KI[j] * e * CYCLE_S))
            tau.append(max(-LIMIT[j], min(LIMIT[j], KP[j] * e + KD[j] * (SETPOINTS[j] * sd - qd[j]) + integral[j])))
        data = bytearray(struct.pack("<3h2xB3x", *(round(u / 0.02) for u in tau), counter))
        data[6:8] = e2e_crc(data, 6, 0x100).to_bytes(2, "little")
        bus.send(can.Message(arbitration_id=0x100, data=data, is_fd=True, is_extended_id=False))
        counter = (counter + 1) & 0xFF


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
