"""A joint PID firmware for ELLA on the wire library, over any link and any shipped bus map: the
kind of program `hil run ella --bus compact_fd --firmware "python examples/wire_firmware.py {link}
--bus compact_fd"` starts. The library (firmware_bridge.firmware, plain Python, installable on its
own as ella-wire) decodes the sensor frames, checks CRCs and rolling counters, encodes the
commands, runs the CANopen master on a CANopen map, and loops until the emulator's time is up.
"""
import argparse

from firmware_bridge.firmware import FirmwareWire, serve
from firmware_bridge.links.connect import open_link
from joint_pid import JointPid


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("link", help="link spec: serial:PATH, canfd:INTERFACE:CHANNEL, ... (hil run's {link})")
    p.add_argument("--bus", default="serial_frame", help="bus map: a shipped name or a file (default serial_frame)")
    p.add_argument("--duration", type=float, default=None, help="stop after this much emulator time in s")
    args = p.parse_args()
    wire = FirmwareWire(args.bus, ["base_yaw", "shoulder_pitch", "elbow"])
    pid = JointPid(wire.bus.cycle_s, wire.commands.limit)
    result = serve(wire, open_link(args.link), lambda sensors, cycle: pid(sensors.counts, cycle), args.duration)
    print(f"{result.answered} cycles answered, ended by {result.ended_by}; sensor frames {result.sensors}")


if __name__ == "__main__":
    main()
