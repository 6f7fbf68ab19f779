"""A joint PID firmware for ELLA over a serial port it opens with pyserial itself: the kind of
program `hil run ... --firmware "python examples/pyserial_firmware.py {port}"` starts, for a firmware
that keeps its own I/O and takes only the packets from the wire library.

It speaks configs/bus/serial_frame.toml: every packet on the wire is COBS(id, payload, CRC-16) and
a 0x00 delimiter (the firmware author's guide, "Serial frame"); the library's StreamDecoder and
encode_frame do the packets, FirmwareWire the sensor and command payloads. Each cycle's sensor
packet is answered with one command packet; a sensor packet the emulator sends again for a cycle
already answered gets the same torques again.
"""
import sys

import serial

from firmware_bridge.firmware import FirmwareWire
from firmware_bridge.wire.framing import StreamDecoder, encode_frame
from joint_pid import JointPid


def main(port: str, bus: str = "serial_frame") -> None:
    wire = FirmwareWire(bus, ["base_yaw", "shoulder_pitch", "elbow"])
    pid = JointPid(wire.bus.cycle_s, wire.commands.limit)
    link = serial.Serial(port, 921600, timeout=1.0)      # opening flushes the input: the emulator sends again
    packets = StreamDecoder()
    answered, tau = None, None
    while True:
        for frame in packets.feed(link.read(max(1, link.in_waiting))):
            if not wire.sensors.feed(frame):
                continue                                  # not a complete, valid sensor packet
            cycle = wire.sensors.cycle
            if cycle != answered:
                tau, answered = pid(wire.sensors.counts, cycle), cycle
            for f in wire.commands.frames(tau, cycle):
                link.write(encode_frame(f))


if __name__ == "__main__":
    main(*sys.argv[1:])
