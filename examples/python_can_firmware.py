"""A joint PID firmware for ELLA over CAN FD on a python-can bus it opens itself: the kind of program
`hil run ella --bus compact_fd --link canfd:udp_loopback:mybench --firmware
"python examples/python_can_firmware.py {interface} {channel}"` starts (any python-can interface:
socketcan, pcan, ... on real hardware; udp_loopback between two processes on one machine).

It speaks configs/bus/compact_fd.toml (or the map given third), AUTOSAR E2E Profile 5 frames: the
wire library's FirmwareWire checks each sensor frame's CRC-16 (Data ID the CAN id) and rolling
counter and gives the encoder counts; it encodes the command frame with its CRC and counter.
python-can moves the frames. A sensor frame the emulator sends again for a cycle already answered
gets the same torques again.
"""
import sys

import can

from firmware_bridge.firmware import FirmwareWire
from firmware_bridge.links.base import Frame
from joint_pid import JointPid


def main(interface: str, channel: str, bus_map: str = "compact_fd") -> None:
    wire = FirmwareWire(bus_map, ["base_yaw", "shoulder_pitch", "elbow"])
    pid = JointPid(wire.bus.cycle_s, wire.commands.limit)
    bus = can.Bus(interface=interface, channel=channel, fd=True)
    answered, tau = None, None
    while True:
        msg = bus.recv(timeout=1.0)
        if msg is None or not wire.sensors.feed(Frame(msg.arbitration_id, bytes(msg.data), msg.is_fd,
                                                      msg.is_extended_id)):
            continue
        cycle = wire.sensors.cycle
        if cycle != answered:
            tau, answered = pid(wire.sensors.counts, cycle), cycle
        for f in wire.commands.frames(tau, cycle):
            bus.send(can.Message(arbitration_id=f.arbitration_id, data=f.data, is_fd=f.is_fd,
                                 is_extended_id=f.is_extended_id))


if __name__ == "__main__":
    main(*sys.argv[1:])
