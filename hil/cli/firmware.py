"""`hil firmware`: the reference firmware (controller side) on a link."""
from __future__ import annotations

import argparse
import json
import os
import sys

from hil.cli.registry import MAX_DURATION_S, command, cpu_index, duration_s, int_in, positive_float


def _firmware_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", required=True, help="the firmware's nominal arm parameter file (joint names, gears, "
                                                   "encoders, rigid links) or a shipped name, e.g. ella_nominal "
                                                   "(configs/firmware/ella_nominal.toml)")
    p.add_argument("--bus", required=True, help="bus map: a TOML file or a shipped name (serial_frame, ...)")
    p.add_argument("--link", required=True, help="link spec (see hil run --help)")
    p.add_argument("--duration", type=duration_s, default=MAX_DURATION_S, help="stop after this much emulator time in s")
    p.add_argument("--move-time", type=positive_float, default=2.0, help="duration of the set-point manoeuvre in s")
    p.add_argument("--vibration-suppression", action="store_true", help="damp the link modes with the tip IMU")
    p.add_argument("--realtime", action="store_true",
                   help="real-time treatment as the emulator's: SCHED_FIFO (--priority), memory locked, gc frozen, "
                        "optionally pinned (--cpu); each feature tried and reported in the result")
    p.add_argument("--priority", type=int_in(1, 99), default=70, help="--realtime: SCHED_FIFO priority (default 70, "
                                                                      "below the emulator loop's 80)")
    p.add_argument("--cpu", type=cpu_index, default=None, help="--realtime: pin the firmware to this CPU")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="stop as soon as the process that started this one is gone (the emulator that spawned it)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


@command("firmware", "the reference firmware (controller side) on a link", _firmware_arguments)
def _cmd_firmware(args: argparse.Namespace) -> int:
    from dataclasses import asdict
    from firmware_bridge.links.connect import open_link
    from firmware_bridge.reference.firmware import Firmware, serve
    from hil.cli.bus import load_bus
    from hil.model.presets import resolve
    from hil.runtime.realtime import RealtimeSetup

    bus = load_bus(resolve("bus", args.bus))
    parent = os.getppid() if args.exit_with_parent else None
    firmware = Firmware(bus, resolve("firmware", args.params), args.move_time,     # set up before the link opens
                        args.vibration_suppression)
    link = open_link(args.link)
    setup = RealtimeSetup(args.priority, args.cpu, move_kworkers=False) if args.realtime else None
    report = setup.apply() if setup else None
    print("ready", flush=True)
    try:
        result = serve(firmware, link, args.duration, parent_pid=parent)
    finally:
        if setup:
            setup.restore()
        try:
            link.close()
        except Exception as exc:     # e.g. python-can slcan writes "C" on close; the emulator may be gone
            print(f"hil firmware: closing {link.name}: {exc}", file=sys.stderr)
    out = {**asdict(result), "realtime": None if report is None else report.as_dict()}
    print(json.dumps(out) if args.json else out, flush=True)
    return 0
