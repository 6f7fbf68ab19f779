"""A firmware written on the wire library alone (firmware_bridge: the link, the sensor decoder and the
command encoder with its rolling counter and CRC): a joint PD that holds the pose it first reads.

    python tests/firmwares/hold_pose.py BUS_MAP LINK_SPEC [--out-of-range-at N|all] [--silent-from N]

`--out-of-range-at N` sends its Nth command with the elbow's torque at the largest raw value of its
signal (far beyond the map's range): one bad frame among good ones, which the emulator must reject
and a checked run must fail on; `all`: every command so. `--silent-from N`: it stops answering after
N commands (it keeps reading). It exits when no frame comes for 5 s.
"""
import argparse
import select
import time

import numpy as np

from firmware_bridge.links.base import Frame
from firmware_bridge.links.connect import open_link
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.firmware.endpoint import CommandOutput, SensorInput

JOINTS = ["base_yaw", "shoulder_pitch", "elbow"]
GEAR = np.array([160.0, 160.0, 100.0])       # configs/ella.toml
COUNTS_PER_REV = 16384
KP, KD = np.array([3000.0, 3000.0, 800.0]), np.array([300.0, 300.0, 80.0])
IDLE_S = 5.0


def out_of_range(frame: Frame) -> Frame:
    """The frame with the elbow's int16 torque (bytes 4-5) at its largest raw value."""
    data = bytearray(frame.data)
    data[4:6] = (0x7FFF).to_bytes(2, "little")
    return Frame(frame.arbitration_id, bytes(data), frame.is_fd, frame.is_extended_id)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("bus")
    p.add_argument("link")
    p.add_argument("--out-of-range-at", default="-1")
    p.add_argument("--silent-from", type=int, default=None)
    args = p.parse_args()
    bad = (lambda n: True) if args.out_of_range_at == "all" else (lambda n: n == int(args.out_of_range_at))
    bus = BusMap.load(args.bus)
    link = open_link(args.link)
    sensors, commands = SensorInput(bus, JOINTS), CommandOutput(bus, JOINTS)
    hold = last_q = None
    qd = np.zeros(3)
    sent = 0
    last_rx = time.monotonic()
    while time.monotonic() - last_rx < IDLE_S:
        frame = link.recv()
        if frame is None:
            select.select([link.fileno()], [], [], 0.01)
            continue
        last_rx = time.monotonic()
        if not sensors.feed(frame):
            continue
        q = np.asarray(sensors.counts) * 2 * np.pi / (COUNTS_PER_REV * GEAR)
        hold = q.copy() if hold is None else hold
        if last_q is not None:
            qd += 0.4 * ((q - last_q) / bus.cycle_s - qd)
        last_q = q
        if args.silent_from is not None and sent >= args.silent_from:
            continue
        for f in commands.frames(KP * (hold - q) - KD * qd, sensors.cycle):
            link.send(out_of_range(f) if bad(sent) else f)
            sent += 1


if __name__ == "__main__":
    main()
