"""`hil xcp a2l PRESET [--bus MAP] --out ella.a2l`: the A2L file of the emulator's XCP slave; the options of
`hil run --xcp` and `--xcp-can` (their values, their checks before the run, the slave started)."""
from __future__ import annotations

import argparse

from hil.cli.registry import CliError, command, output_file


def xcp_address(text: str) -> tuple[str, int]:
    """An --xcp value: PORT or HOST:PORT, HOST an IPv4 address (default loopback), PORT 0 .. 65535."""
    import ipaddress
    host, _, port = text.rpartition(":")
    try:
        ipaddress.IPv4Address(host or "127.0.0.1")
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError("expected PORT or HOST:PORT (an IPv4 address, port 0 .. 65535), e.g. 5555")
    return host or "127.0.0.1", number


def xcp_can_ids(text: str) -> tuple[int, int]:
    """An --xcp-can value: MASTER_ID:SLAVE_ID, each 0 .. 0x1FFFFFFF, two different ids."""
    try:
        master, slave = (int(part, 0) for part in text.split(":"))
    except ValueError:
        master = slave = -1
    if not (0 <= master <= 0x1FFFFFFF and 0 <= slave <= 0x1FFFFFFF and master != slave):
        raise argparse.ArgumentTypeError("expected MASTER_ID:SLAVE_ID, two different CAN ids, e.g. 0x7F0:0x7F1")
    return master, slave


def serve_xcp(args: argparse.Namespace, emulator):
    """The emulator's XCP slave, bound and serving before the ready line (which gives its address)."""
    from hil.runtime.xcp_server import XcpBridge
    if args.xcp_can:
        emulator.xcp = XcpBridge(emulator, can=(*args.xcp_can, emulator.sensors_out.bus.kind == "canfd"))
    else:
        try:
            emulator.xcp = XcpBridge(emulator, *args.xcp)
        except OSError as exc:
            raise CliError(f"--xcp {args.xcp[0]}:{args.xcp[1]}: {exc}") from None
    emulator.xcp.start()
    return emulator.xcp


def check_xcp_can(ids: tuple[int, int], bus_map) -> None:
    """--xcp-can on a CAN map, its ids free: not the map's messages, not CANopen's predefined ones."""
    from firmware_bridge.canopen.network import is_canopen
    if bus_map.kind == "serial":
        raise CliError(f"--xcp-can: {bus_map.source} is a serial map; XCP on CAN needs a CAN map (or --xcp: UDP)")
    for ident in ids:
        taken = bus_map.by_id(ident, ident > 0x7FF)
        if taken is not None:
            raise CliError(f"--xcp-can {ident:#x}: the map's message {taken.name} has that id")
        if is_canopen(bus_map) and ident <= 0x7FF and not (0x680 <= ident <= 0x6FF or 0x780 <= ident <= 0x7DF):
            raise CliError(f"--xcp-can {ident:#x}: a CANopen id (CiA 301's predefined set); take 0x680 .. 0x6FF, "
                           "0x780 .. 0x7DF or an extended id")


def _xcp_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("a2l",))
    p.add_argument("config", help="arm preset: a TOML file or a shipped name (ella, ...)")
    p.add_argument("--bus", default="serial_frame", help="the bus map the run uses (default serial_frame)")
    p.add_argument("--scenario", help="the run's fault scenario: each fault gets a switch fault_<name>")
    p.add_argument("--log-wrenches", action="store_true", help="the run logs the joint wrenches (more measurements)")
    p.add_argument("--xcp", metavar="[HOST:]PORT", type=xcp_address, default=("127.0.0.1", 5555),
                   help="the slave's address the file states (hil run --xcp; default 127.0.0.1:5555)")
    p.add_argument("--xcp-can", metavar="MASTER_ID:SLAVE_ID", type=xcp_can_ids, default=None,
                   help="the slave on the CAN link instead (hil run --xcp-can), at the map's bit rate")
    p.add_argument("--out", required=True, help="the A2L file to write (.a2l)")


@command("xcp", "XCP: write the A2L file of the emulator's XCP slave (hil run --xcp): every run-log column as a "
                "measurement with its unit, every calibratable plant and fault parameter", _xcp_arguments)
def _cmd_xcp(args: argparse.Namespace) -> int:
    from hil.runtime.launch import build_emulator
    from hil.runtime.options import RuntimeOptions
    from hil.runtime.xcp_server import a2l_file
    from firmware_bridge.wire.messages import BusMap
    from firmware_bridge.xcp.a2l import Transport
    from hil.model.presets import resolve

    out = output_file(args.out, ".a2l")
    bus_map = BusMap.load(resolve("bus", args.bus))
    if args.xcp_can:
        check_xcp_can(args.xcp_can, bus_map)
        transport = Transport(can=args.xcp_can, fd=bus_map.kind == "canfd", bitrate_bps=bus_map.bitrate_bps,
                              data_bitrate_bps=bus_map.data_bitrate_bps or bus_map.bitrate_bps)
    else:
        transport = Transport(*args.xcp)
    link = "pty" if bus_map.kind == "serial" else "slcan-pty"
    built = build_emulator(args.config, args.bus, link, RuntimeOptions(log_wrenches=args.log_wrenches),
                           args.scenario)
    try:
        text = a2l_file(built.emulator, transport)
    finally:
        built.emulator.link.close()
    try:
        out.write_text(text, encoding="ascii", errors="replace")
    except OSError as exc:
        raise CliError(f"--out {args.out}: {exc.strerror or exc}") from None
    emu = built.emulator
    where = (f"CAN {args.xcp_can[0]:#x} -> {args.xcp_can[1]:#x}" if args.xcp_can
             else f"UDP {args.xcp[0]}:{args.xcp[1]}")
    print(f"{out}: {len(emu.columns)} measurements, {text.count('/begin CHARACTERISTIC')} parameters, XCP on {where}")
    return 0
