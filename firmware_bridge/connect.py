"""Opening a link from a short text spec, the same for the emulator and the firmware.

  serial:PATH                 a serial port or pty slave (COBS + CRC-16 packets)
  serial-fd:N                 an already open file descriptor (pty master)
  can:INTERFACE:CHANNEL       python-can by interface name (socketcan, pcan, virtual, udp_loopback, ...)
  canfd:INTERFACE:CHANNEL     the same with CAN FD
  slcan-adapter:PATH_OR_FD    this side emulates a LAWICEL adapter on a pty (firmware uses python-can slcan)
"""
from __future__ import annotations

from .link import Link


def open_link(spec: str) -> Link:
    kind, _, rest = spec.partition(":")
    if kind == "serial":
        from .serial_link import SerialLink
        return SerialLink(rest, name=spec)
    if kind == "serial-fd":
        from .serial_link import SerialLink
        return SerialLink.from_fd(int(rest), name=spec)
    if kind in ("can", "canfd"):
        from .can_link import CanLink
        interface, _, channel = rest.partition(":")
        if not interface or not channel:
            raise ValueError(f"link {spec!r}: expected {kind}:INTERFACE:CHANNEL")
        return CanLink(interface, channel, fd=kind == "canfd")
    if kind == "slcan-adapter":
        from .can_link import SlcanAdapterLink
        return SlcanAdapterLink(int(rest) if rest.isdigit() else rest)
    raise ValueError(f"link {spec!r}: expected serial:PATH, serial-fd:N, can:IF:CH, canfd:IF:CH or slcan-adapter:PATH")
