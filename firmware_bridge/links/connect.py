"""Opening a link from a short text spec, the same for the emulator and the firmware.

  serial:PATH                 a serial port or pty slave (COBS + CRC-16 packets)
  serial-fd:N                 an already open file descriptor (pty master)
  can:INTERFACE:CHANNEL       python-can by interface name (socketcan, pcan, virtual, udp_loopback, ...)
  canfd:INTERFACE:CHANNEL     the same with CAN FD
  slcan-adapter:PATH_OR_FD    this side emulates a LAWICEL adapter on a pty (firmware uses python-can slcan)

A can/canfd spec may end in ``,KEY=VALUE`` options passed to ``can.Bus`` (ints, floats,
true/false, else text), e.g. ``can:udp_loopback:bench,nodes=2`` or
``can:slcan:/dev/pts/7,bitrate=1000000,sleep_after_open=0,timeout=0``.

``check_link_fits(bus, spec)`` refuses a link that cannot carry the bus map's frames (a serial map
needs a serial link, a CAN map a CAN link, a CAN FD map a CAN FD one), before anything is opened.

``open_pty_pair_link(kind)`` makes a new pty pair for a spawned firmware: ``pty`` (serial framing
on both ends) or ``slcan-pty`` (this side an emulated slcan adapter, the firmware python-can slcan).
"""
from __future__ import annotations

from .base import Link
from config_schema import UserError


def open_link(spec: str) -> Link:
    kind, _, rest = spec.partition(":")
    if kind == "serial":
        from .serial import SerialLink
        return SerialLink(rest, name=spec)
    if kind == "serial-fd":
        from .serial import SerialLink
        if not rest.isdigit():
            raise UserError(f"link {spec!r}: expected serial-fd:N, N an open file descriptor")
        return SerialLink.from_fd(int(rest), name=spec)
    if kind in ("can", "canfd"):
        interface, _, channel = rest.partition(":")
        channel, *options = channel.split(",")
        if not interface or not channel:
            raise UserError(f"link {spec!r}: expected {kind}:INTERFACE:CHANNEL[,KEY=VALUE...]")
        return _can_link(spec, interface, channel, kind == "canfd", _options(spec, options))
    if kind == "slcan-adapter":
        from .can import SlcanAdapterLink
        return SlcanAdapterLink(int(rest) if rest.isdigit() else rest)
    raise UserError(f"link {spec!r}: expected serial:PATH, serial-fd:N, can:IF:CH, canfd:IF:CH or slcan-adapter:PATH")


SERIAL_LINKS = ("pty", "serial", "serial-fd")
CAN_LINKS = ("can", "canfd", "slcan-pty", "slcan-adapter")     # the slcan adapter carries CAN FD frames too
FD_LINKS = ("canfd", "slcan-pty", "slcan-adapter")


def check_link_fits(bus, spec: str) -> None:
    """ValueError (one line) if link `spec` cannot carry the frames of bus map `bus`."""
    kind = spec.partition(":")[0]
    fits = {"serial": SERIAL_LINKS, "can": CAN_LINKS, "canfd": FD_LINKS}[bus.kind]
    if kind in fits:
        return
    need = {"serial": "a serial link (pty, serial:PATH)",
            "can": "a CAN link (can:IF:CH, canfd:IF:CH, slcan-pty, slcan-adapter:PATH)",
            "canfd": "a CAN FD link (canfd:IF:CH, slcan-pty, slcan-adapter:PATH)"}[bus.kind]
    raise UserError(f"link {spec!r} cannot carry the frames of {bus.source} (kind = {bus.kind!r}): "
                     f"it needs {need}")


def _can_link(spec: str, interface: str, channel: str, fd: bool, options: dict[str, object]) -> Link:
    """A CanLink; python-can's refusals (no such interface, a channel or option it rejects) become
    a ValueError naming the spec."""
    import can

    from .can import CanLink
    try:
        return CanLink(interface, channel, fd=fd, **options)
    except (can.CanError, ImportError, TypeError) as exc:
        raise UserError(f"link {spec!r}: {exc}") from None


def _options(spec: str, items: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` items of a link spec as keyword arguments (int, float, bool, else str)."""
    out: dict[str, object] = {}
    for item in items:
        key, eq, text = item.partition("=")
        if not eq or not key.isidentifier():
            raise UserError(f"link {spec!r}: option {item!r}: expected KEY=VALUE")
        value: object = text
        if text.lower() in ("true", "false"):
            value = text.lower() == "true"
        else:
            for convert in (int, float):
                try:
                    value = convert(text)
                    break
                except ValueError:
                    pass
        out[key] = value
    return out


def open_pty_pair_link(kind: str, bus=None) -> tuple[Link, str]:
    """A new pty pair for a spawned firmware: (this side's Link, the spec the firmware opens).

    ``pty``: serial framing on both ends. ``slcan-pty``: this side is an emulated slcan adapter
    (SlcanAdapterLink.on_new_pty); the firmware opens the slave with python-can ``slcan`` at the
    bus map's bitrate (``can:`` or, for a CAN FD map, ``canfd:``), without the 2 s settle time
    meant for USB adapters and with non-blocking reads.
    """
    if kind == "pty":
        from .serial import SerialLink, open_pty_pair
        master, slave = open_pty_pair()
        return SerialLink.from_fd(master, name=f"pty {slave}"), f"serial:{slave}"
    if kind == "slcan-pty":
        from .can import SlcanAdapterLink
        link = SlcanAdapterLink.on_new_pty()
        fd = bus is not None and bus.kind == "canfd"
        bitrate = getattr(bus, "bitrate_bps", None) or 1_000_000
        return link, (f"{'canfd' if fd else 'can'}:slcan:{link.slave_path},"
                      f"bitrate={bitrate},sleep_after_open=0,timeout=0")
    raise ValueError(f"pty pair {kind!r}: expected pty or slcan-pty")
