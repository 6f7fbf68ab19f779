"""A joint PID firmware for ELLA over a serial port, written with pyserial alone: the kind of
program `hil run ... --firmware "python examples/pyserial_firmware.py {port}"` starts.

It speaks configs/bus/serial_frame.toml: every packet on the wire is COBS(id, payload, CRC-16) and
a 0x00 delimiter (docs/firmware-guide.md "Serial frame"). Each sensor packet (id 0x81) is answered with one
command packet (id 0x01): joint torques from a PID on the motor encoders, following a smooth
ramp from the start pose to the set-points; a sensor packet repeating the last cycle counter is a
copy and gets no second answer. Time is the emulator's cycle counter, so a lockstep run gives the
same result on any machine.
"""
import math
import struct
import sys

import serial

SETPOINTS = (0.6922, -0.4928, 0.4270)        # rad: base_yaw, shoulder_pitch, elbow (seed 000)
GEAR = (160.0, 160.0, 100.0)                 # configs/ella.toml
COUNTS_PER_REV = 16384                       # 4096 lines x 4 at the motor
KP, KD, KI = (3000.0, 3000.0, 800.0), (300.0, 300.0, 80.0), (3000.0, 3000.0, 800.0)
LIMIT = (240.0, 360.0, 90.0)                 # N m: the command signals' range
CYCLE_S = 0.001
START_S, MOVE_S = 0.2, 1.0


def crc16(data: bytes) -> int:
    """CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, not reflected, no final xor."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021 if crc & 0x8000 else crc << 1) & 0xFFFF
    return crc


def cobs_encode(data: bytes) -> bytes:
    out, block = bytearray(), bytearray()
    for byte in data:
        if byte:
            block.append(byte)
        if not byte or len(block) == 254:
            out += bytes((len(block) + 1,)) + block
            block.clear()
    return bytes(out + bytes((len(block) + 1,)) + block)


def cobs_decode(data: bytes) -> bytes:
    out, i = bytearray(), 0
    while i < len(data):
        code = data[i]
        out += data[i + 1:i + code]
        i += code
        if code != 0xFF and i < len(data):
            out.append(0)
    return bytes(out)


def packet(ident: int, payload: bytes) -> bytes:
    body = bytes((ident,)) + payload
    return cobs_encode(body + crc16(body).to_bytes(2, "big")) + b"\x00"


def ramp(t: float) -> tuple[float, float]:
    """0 -> 1 between START_S and START_S + MOVE_S, minimum jerk: the blend and its rate [1/s]."""
    x = min(max((t - START_S) / MOVE_S, 0.0), 1.0)
    return x ** 3 * (10 - 15 * x + 6 * x * x), 30 * x * x * (1 - x) ** 2 / MOVE_S


def main(port: str) -> None:
    link = serial.Serial(port, 921600, timeout=1.0)      # opening flushes the input: the emulator sends again
    integral, last_q, qd = [0.0] * 3, None, [0.0] * 3
    cycle, last_raw, counter, buffer = None, 0, 0, b""
    while True:
        buffer += link.read(max(1, link.in_waiting))
        *packets, buffer = buffer.split(b"\x00")
        for raw in packets:
            body = cobs_decode(raw) if raw else b""
            if len(body) != 29 or body[0] != 0x81 or crc16(body):
                continue                                  # not a sensor packet, or damaged
            *counts, status, cycle_raw = struct.unpack_from("<3i6hBB", body, 1)[:3] + \
                struct.unpack_from("<BB", body, 25)
            if cycle is not None and cycle_raw == last_raw:
                continue                                  # a copy of the last packet: answered already
            cycle = cycle_raw if cycle is None else cycle + ((cycle_raw - last_raw) & 0xFF)
            last_raw = cycle_raw
            t = cycle * CYCLE_S
            q = [c * 2 * math.pi / (COUNTS_PER_REV * g) for c, g in zip(counts, GEAR)]
            if last_q is not None:
                qd = [v + 0.4 * ((a - b) / CYCLE_S - v) for v, a, b in zip(qd, q, last_q)]
            last_q = q
            tau = []
            s, sd = ramp(t)
            for j in range(3):
                e = SETPOINTS[j] * s - q[j]
                integral[j] = max(-200.0, min(200.0, integral[j] + KI[j] * e * CYCLE_S))
                u = KP[j] * e + KD[j] * (SETPOINTS[j] * sd - qd[j]) + integral[j]
                tau.append(max(-LIMIT[j], min(LIMIT[j], u)))
            payload = struct.pack("<3hB", *(round(u / 0.02) for u in tau), counter)
            link.write(packet(0x01, payload))
            counter = (counter + 1) & 0xFF


if __name__ == "__main__":
    main(sys.argv[1])
