"""`hil xcp a2l PRESET [--bus MAP] --out ella.a2l`: the A2L file of the emulator's XCP slave (hil run --xcp)."""
from __future__ import annotations

import argparse
from pathlib import Path

from hil.cli.registry import CliError, command


def _xcp_arguments(p: argparse.ArgumentParser) -> None:
    from hil.cli.run import xcp_address
    p.add_argument("action", choices=("a2l",))
    p.add_argument("config", help="arm preset: a TOML file or a shipped name (ella, ...)")
    p.add_argument("--bus", default="serial_frame", help="the bus map the run uses (default serial_frame)")
    p.add_argument("--scenario", help="the run's fault scenario: each fault gets a switch fault_<name>")
    p.add_argument("--log-wrenches", action="store_true", help="the run logs the joint wrenches (more measurements)")
    p.add_argument("--xcp", metavar="[HOST:]PORT", type=xcp_address, default=("127.0.0.1", 5555),
                   help="the slave's address the file states (hil run --xcp; default 127.0.0.1:5555)")
    p.add_argument("--out", required=True, help="the A2L file to write (.a2l)")


@command("xcp", "XCP: write the A2L file of the emulator's XCP slave (hil run --xcp): every run-log column as a "
                "measurement with its unit, every calibratable plant and fault parameter", _xcp_arguments)
def _cmd_xcp(args: argparse.Namespace) -> int:
    from hil.runtime.launch import build_emulator
    from hil.runtime.options import RuntimeOptions
    from hil.runtime.xcp_server import a2l_file
    from firmware_bridge.wire.messages import BusMap
    from hil.model.presets import resolve

    out = Path(args.out)
    if out.suffix != ".a2l" or not out.parent.is_dir() or out.is_dir():
        raise CliError(f"--out {args.out}: expected a .a2l file in an existing folder")
    link = "pty" if BusMap.load(resolve("bus", args.bus)).kind == "serial" else "slcan-pty"
    built = build_emulator(args.config, args.bus, link, RuntimeOptions(log_wrenches=args.log_wrenches),
                           args.scenario)
    try:
        text = a2l_file(built.emulator, *args.xcp)
    finally:
        built.emulator.link.close()
    try:
        out.write_text(text, encoding="ascii", errors="replace")
    except OSError as exc:
        raise CliError(f"--out {args.out}: {exc.strerror or exc}") from None
    emu = built.emulator
    print(f"{out}: {len(emu.columns)} measurements, {text.count('/begin CHARACTERISTIC')} parameters, XCP on UDP "
          f"{args.xcp[0]}:{args.xcp[1]}")
    return 0
