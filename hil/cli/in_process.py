"""`hil run`'s firmware options, and the reference firmware run in the emulator's own process
(`--firmware-in-process`: firmware_bridge.links.in_process, pumped by the lockstep loop)."""
from __future__ import annotations

import argparse
import json
import sys

from hil.cli.registry import CliError, positive_float


def firmware_arguments(p: argparse.ArgumentParser) -> None:
    """Which firmware answers the run, and the reference firmware's options."""
    who = p.add_mutually_exclusive_group()
    who.add_argument("--spawn-firmware", action="store_true", help="start the reference firmware in a second process")
    who.add_argument("--firmware", metavar="CMD",
                     help="start this firmware command line in a second process; placeholders: {port} (device path "
                          "or CAN channel), {link} (link spec), {interface}, {channel}, {bus} (bus map file)")
    who.add_argument("--firmware-in-process", action="store_true",
                     help="run the reference firmware in this process, pumped by the loop over a private link "
                          "(an in-memory byte pipe, or a virtual CAN channel): no second process; --mode lockstep, no --link")
    p.add_argument("--firmware-link", help="link spec the firmware opens (default: the pty's other end, or --link)")
    p.add_argument("--firmware-params", help="the reference firmware: its nominal arm parameter file, or a shipped "
                                             "name (default: ella_nominal, configs/firmware/ella_nominal.toml)")
    p.add_argument("--move-time", type=positive_float, default=2.0, help="the reference firmware: duration of the "
                                                                          "manoeuvre in s")
    p.add_argument("--vibration-suppression", action="store_true", help="the reference firmware: IMU vibration "
                                                                         "suppression")


def check_in_process(args: argparse.Namespace) -> None:
    """CliError for what --firmware-in-process cannot do: another mode than lockstep (nothing paces the firmware
    but the loop), a link of the user's (it brings its own)."""
    if args.mode != "lockstep":
        raise CliError(f"--firmware-in-process runs in lockstep (the loop pumps the firmware); got --mode {args.mode}")
    if args.link not in ("pty", "slcan-pty") or args.firmware_link:
        raise CliError("--firmware-in-process brings its own link (an in-memory byte pipe, or a virtual CAN channel); "
                       "leave out --link and --firmware-link")


def run_in_process(args: argparse.Namespace, built) -> dict:
    """The reference firmware on the private link's far end, pumped by the loop; its result in the summary
    as a spawned one's ("firmware")."""
    from dataclasses import asdict

    from firmware_bridge.reference.firmware import Firmware, session
    from hil.cli.bus import load_bus
    from hil.model.presets import resolve
    from hil.runtime.launch import REFERENCE_PARAMS

    params = resolve("firmware", args.firmware_params) if args.firmware_params else REFERENCE_PARAMS
    firmware = Firmware(load_bus(resolve("bus", built.endpoint.bus)), str(params), args.move_time,
                        args.vibration_suppression)
    pumped, law = session(firmware, built.firmware_end, args.duration)
    built.pumped.pump = pumped.pump
    print("ready " + json.dumps(built.ready_line()), flush=True)
    built.emulator.on_progress = lambda text: print(f"hil: {text}", file=sys.stderr, flush=True)
    try:
        summary = built.emulator.run()
        pumped.pump()               # the frames of the last cycle, as a firmware of its own reads them after the run
    finally:
        built.emulator.link.close()
        built.firmware_end.close()
    result = law.result(pumped.result("duration" if pumped.done else "stopped"))
    summary["firmware"] = {**asdict(result), "realtime": None}
    return summary
