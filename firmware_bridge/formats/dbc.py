"""DBC files both ways: a CAN bus map written as a DBC with its TOML sidecar, and a DBC with its
sidecar read back into a bus map.

A DBC says frames, signals, scaling, ranges, units, senders and receivers, the FD flag and cycle
times; it cannot say which frame bytes the emulator checks as a CRC, which signal is a rolling
counter and how far it may jump, the cycle a frame is sent in (rate offset) or the emulator's
cycle. Those go in the sidecar ``FILE.dbc.toml`` beside ``FILE.dbc`` (schema below); a DBC
without its sidecar is refused, as is a sidecar that names a frame or signal the DBC lacks.

The DBC written (:func:`dbc_text`): nodes FIRMWARE and PLANT (a to_firmware frame is sent by
PLANT and received by FIRMWARE, a to_plant frame the other way round); ``BO_`` per message (an
extended id with bit 31 set), ``SG_`` per signal (``@1`` little-endian / Intel, ``@0`` big-endian /
Motorola with the MSB as start bit, ``+``/``-`` unsigned/signed, (scale, offset), [min|max],
unit), the CRC as an unsigned signal ``<message>_crc`` over its bytes; ``SIG_VALTYPE_`` 1 for
float32 signals; the attributes ``BusType``, ``Baudrate``, ``BaudrateCANFD`` (network),
``VFrameFormat``, ``CANFD_BRS``, ``GenMsgSendType``, ``GenMsgCycleTime`` [ms] (where whole
milliseconds) and ``GenMsgCycleTimeUs`` [us] (messages; no cycle time: sent on event), ``SignalRole`` (data | counter | crc), ``CounterWidth`` [bits],
``CounterMaxDelta``, ``CRCAlgorithm``, ``CRCPolynomial``, ``CRCInit``, ``CRCXorOut``,
``CRCCoverage`` and ``CRCDataID`` (signals); comments (``CM_``) say the same in words.

Sidecar schema (every key checked; errors name the sidecar, the key and the DBC)::

    [bus]      cycle_s (the emulator's cycle; every cycle time must be a whole number of cycles),
               plant_node (default "PLANT": frames it sends go to_firmware, all others to_plant),
               bitrate_bps, data_bitrate_bps (when the DBC has no Baudrate / BaudrateCANFD)
    [message.<DBC message name>]   one table per DBC message, none for a frame the DBC lacks
               id (checked against the DBC), name (the emulator's name; default the DBC's),
               rate_offset, counter (a DBC signal), counter_max_delta, crc = "crc8" | "crc16",
               crc_signal (the DBC signal that holds the CRC), signals = { <DBC signal> =
               "<emulator signal>" } (tau_<joint>, a sensor channel, status, cycle; default: the same)

Writing needs nothing beyond the standard library; reading needs ``cantools`` (the ``dbc`` extra).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from config_schema import ConfigError, Document, MISSING, Table, UserError, load_toml
from firmware_bridge.wire.bus_schema import BusSpec, read_bus_map
from firmware_bridge.wire.codec import CRC_WIDTH, MessageSpec, SignalSpec

PLANT = "PLANT"
FIRMWARE = "FIRMWARE"
SIDECAR_SUFFIX = ".toml"
CRC_TEXT = {
    "crc8": ("CRC-8/SAE-J1850", 0x1D, 0xFF, 0xFF),
    "crc16": ("CRC-16/CCITT-FALSE (AUTOSAR E2E Profile 5)", 0x1021, 0xFFFF, 0x0000),
}
_ATTRIBUTE_DEFINITIONS = '''BA_DEF_ "BusType" STRING ;
BA_DEF_ "Baudrate" INT 1 1000000000;
BA_DEF_ "BaudrateCANFD" INT 1 1000000000;
BA_DEF_ BO_ "VFrameFormat" ENUM "StandardCAN","ExtendedCAN","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","reserved","StandardCAN_FD","ExtendedCAN_FD";
BA_DEF_ BO_ "CANFD_BRS" ENUM "0","1";
BA_DEF_ BO_ "GenMsgSendType" ENUM "Cyclic","Event";
BA_DEF_ BO_ "GenMsgCycleTime" INT 0 65535;
BA_DEF_ BO_ "GenMsgCycleTimeUs" INT 0 65535000;
BA_DEF_ SG_ "SignalRole" ENUM "data","counter","crc";
BA_DEF_ SG_ "CounterWidth" INT 0 32;
BA_DEF_ SG_ "CounterMaxDelta" INT 0 65535;
BA_DEF_ SG_ "CRCAlgorithm" STRING ;
BA_DEF_ SG_ "CRCPolynomial" HEX 0 65535;
BA_DEF_ SG_ "CRCInit" HEX 0 65535;
BA_DEF_ SG_ "CRCXorOut" HEX 0 65535;
BA_DEF_ SG_ "CRCCoverage" STRING ;
BA_DEF_ SG_ "CRCDataID" HEX 0 65535;
BA_DEF_DEF_ "BusType" "CAN";
BA_DEF_DEF_ "Baudrate" 500000;
BA_DEF_DEF_ "BaudrateCANFD" 2000000;
BA_DEF_DEF_ "VFrameFormat" "StandardCAN";
BA_DEF_DEF_ "CANFD_BRS" "1";
BA_DEF_DEF_ "GenMsgSendType" "Cyclic";
BA_DEF_DEF_ "GenMsgCycleTime" 0;
BA_DEF_DEF_ "GenMsgCycleTimeUs" 0;
BA_DEF_DEF_ "SignalRole" "data";
BA_DEF_DEF_ "CounterWidth" 0;
BA_DEF_DEF_ "CounterMaxDelta" 0;
BA_DEF_DEF_ "CRCAlgorithm" "";
BA_DEF_DEF_ "CRCPolynomial" 0;
BA_DEF_DEF_ "CRCInit" 0;
BA_DEF_DEF_ "CRCXorOut" 0;
BA_DEF_DEF_ "CRCCoverage" "";
BA_DEF_DEF_ "CRCDataID" 0;'''


def sidecar_path(dbc: str | Path) -> Path:
    """The sidecar of a DBC file: ``FILE.dbc.toml`` beside ``FILE.dbc``."""
    dbc = Path(dbc)
    return dbc.with_name(dbc.name + SIDECAR_SUFFIX)


def _num(x: float) -> str:
    """A number as DBC text that reads back to the same float."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def crc_signal_name(spec: MessageSpec) -> str:
    return f"{spec.name}_crc"


def _dbc_id(spec: MessageSpec) -> int:
    return spec.arbitration_id | 0x80000000 if spec.extended_id else spec.arbitration_id


def _ends(spec: MessageSpec) -> tuple[str, str]:
    """(sender, receiver) of a message."""
    return (PLANT, FIRMWARE) if spec.direction == "to_firmware" else (FIRMWARE, PLANT)


def _crc_coverage(spec: MessageSpec) -> str:
    crc = set(spec.crc_bytes)
    covered = [b for b in range(spec.length) if b not in crc]
    runs, start = [], None
    for i, b in enumerate(covered):
        if start is None:
            start = b
        if i + 1 == len(covered) or covered[i + 1] != b + 1:
            runs.append(f"B{start}" if start == b else f"B{start}-{b}")
            start = None
    text = "payload " + ",".join(runs)
    if spec.crc == "crc16":
        text += f" then Data ID 0x{spec.arbitration_id & 0xFFFF:04X} (low byte, high byte)"
    return text + f"; stored little-endian at B{spec.crc_byte}"


def _crc_lines(spec: MessageSpec, message_id: int, receiver: str) -> tuple[list[str], list[str], list[str]]:
    """(SG_ line, attribute lines, comment lines) of a message's CRC signal."""
    name = crc_signal_name(spec)
    bits = 8 * CRC_WIDTH[spec.crc]
    algorithm, poly, init, xorout = CRC_TEXT[spec.crc]
    coverage = _crc_coverage(spec)
    sg = [f' SG_ {name} : {8 * spec.crc_byte}|{bits}@1+ (1,0) [0|{(1 << bits) - 1}] "" {receiver}']
    attrs = [f'BA_ "SignalRole" SG_ {message_id} {name} 2;',
             f'BA_ "CRCAlgorithm" SG_ {message_id} {name} "{algorithm}";',
             f'BA_ "CRCPolynomial" SG_ {message_id} {name} {poly};',
             f'BA_ "CRCInit" SG_ {message_id} {name} {init};',
             f'BA_ "CRCXorOut" SG_ {message_id} {name} {xorout};',
             f'BA_ "CRCCoverage" SG_ {message_id} {name} "{coverage}";']
    if spec.crc == "crc16":
        attrs.append(f'BA_ "CRCDataID" SG_ {message_id} {name} {spec.arbitration_id & 0xFFFF};')
    comment = [f'CM_ SG_ {message_id} {name} "{algorithm}: poly 0x{poly:X}, init 0x{init:X}, xorout 0x{xorout:X}, '
               f'not reflected, over {coverage}";']
    return sg, attrs, comment


def _signal_line(s: SignalSpec, receiver: str) -> str:
    order = "1" if s.byte_order == "little" else "0"
    sign = "-" if s.signed else "+"
    return (f' SG_ {s.name} : {s.start_bit}|{s.length_bits}@{order}{sign} ({_num(s.scale)},{_num(s.offset)}) '
            f'[{_num(s.minimum)}|{_num(s.maximum)}] "{s.unit}" {receiver}')


def _cycle_attributes(spec: MessageSpec, mid: int, cycle_s: float, source: str) -> list[str]:
    """GenMsgCycleTime [ms] where the cycle time is whole milliseconds, and GenMsgCycleTimeUs [us] always
    (the 0.1 ms frames of a 10 kHz map have no GenMsgCycleTime: tools that know only it see no cycle)."""
    us = spec.rate_divider * cycle_s * 1e6
    if abs(us - round(us)) > 1e-6 or round(us) > 65535000:
        raise ConfigError(source, f"message[{spec.name}].rate_divider", spec.rate_divider,
                          f"a cycle time of whole microseconds up to 65535 ms (cycle_s = {cycle_s:g}: {us:g} us)")
    us = round(us)
    whole_ms = [f'BA_ "GenMsgCycleTime" BO_ {mid} {us // 1000};'] if us % 1000 == 0 else []
    return whole_ms + [f'BA_ "GenMsgCycleTimeUs" BO_ {mid} {us};']


def dbc_text(bus: BusSpec, source: str = "<map>") -> str:
    """The DBC of a CAN or CAN FD bus map (a serial map: ConfigError, DBC describes CAN frames only)."""
    if bus.kind == "serial":
        raise ConfigError(source, "bus.kind", bus.kind, "a CAN or CAN FD map: a DBC describes CAN frames only, "
                                                        "a serial map has none (its C code: hil bus export MAP --c DIR)")
    fd = bus.kind == "canfd"
    frames, attrs, comments, valtypes = [], [], [], []
    attrs.append(f'BA_ "BusType" "{"CAN FD" if fd else "CAN"}";')
    attrs.append(f'BA_ "Baudrate" {bus.bitrate_bps};')
    if fd:
        attrs.append(f'BA_ "BaudrateCANFD" {bus.data_bitrate_bps};')
    for spec in bus.messages:
        mid = _dbc_id(spec)
        sender, receiver = _ends(spec)
        frames.append(f"BO_ {mid} {spec.name}: {spec.length} {sender}")
        frames += [_signal_line(s, receiver) for s in spec.signals]
        attrs.append(f'BA_ "VFrameFormat" BO_ {mid} {(14 if fd else 0) + spec.extended_id};')   # ..._FD: 14, 15
        if fd:
            attrs.append(f'BA_ "CANFD_BRS" BO_ {mid} 1;')
        if spec.rate_divider:
            attrs += _cycle_attributes(spec, mid, bus.cycle_s, source)
        else:
            attrs.append(f'BA_ "GenMsgSendType" BO_ {mid} 1;')
        every = ("every cycle" if spec.rate_divider == 1 else f"every {spec.rate_divider} cycles from cycle "
                 f"{spec.rate_offset}") if spec.rate_divider else "on event"
        comments.append(f'CM_ BO_ {mid} "{spec.direction}, {every}";')
        if spec.counter is not None:
            c = next(s for s in spec.signals if s.name == spec.counter)
            attrs += [f'BA_ "SignalRole" SG_ {mid} {c.name} 1;',
                      f'BA_ "CounterWidth" SG_ {mid} {c.name} {c.length_bits};',
                      f'BA_ "CounterMaxDelta" SG_ {mid} {c.name} {spec.counter_max_delta};']
            comments.append(f'CM_ SG_ {mid} {c.name} "rolling counter, {c.length_bits} bits, +1 per frame, '
                            f'wraps at {1 << c.length_bits}; a receiver takes steps 1..{spec.counter_max_delta}";')
        if spec.crc is not None:
            if crc_signal_name(spec) in {s.name for s in spec.signals}:
                raise ConfigError(source, f"message[{spec.name}].signal[{crc_signal_name(spec)}].name",
                                  crc_signal_name(spec), "a name other than the one the DBC gives the CRC signal")
            sg, a, c = _crc_lines(spec, mid, receiver)
            frames += sg
            attrs += a
            comments += c
        valtypes += [f"SIG_VALTYPE_ {mid} {s.name} : 1;" for s in spec.signals if s.is_float]
        frames.append("")
    head = ['VERSION ""', "", "NS_ :", "\tCM_", "\tBA_DEF_", "\tBA_", "\tBA_DEF_DEF_", "\tSIG_VALTYPE_", "",
            "BS_:", "", f"BU_: {FIRMWARE} {PLANT}", "", ""]
    return "\n".join(head + frames + comments + [_ATTRIBUTE_DEFINITIONS] + attrs + valtypes) + "\n"


def sidecar_text(bus: BusSpec, dbc_name: str) -> str:
    """The sidecar TOML of :func:`dbc_text`'s DBC."""
    lines = [f"# {dbc_name}: what the DBC cannot say (firmware_bridge.formats.dbc). The DBC holds the frames,",
             "# signals, scaling, ranges, FD flags, bit rates and cycle times.", "",
             "[bus]", f"cycle_s = {bus.cycle_s!r}", f'plant_node = "{PLANT}"', ""]
    for spec in bus.messages:
        lines += [f"[message.{spec.name}]", f"id = 0x{spec.arbitration_id:X}"]
        if spec.rate_offset:
            lines.append(f"rate_offset = {spec.rate_offset}")
        if spec.counter is not None:
            lines += [f'counter = "{spec.counter}"', f"counter_max_delta = {spec.counter_max_delta}"]
        if spec.crc is not None:
            lines += [f'crc = "{spec.crc}"', f'crc_signal = "{crc_signal_name(spec)}"']
        lines.append("")
    return "\n".join(lines)


def export_dbc(bus: BusSpec, out: str | Path, source: str = "<map>") -> list[Path]:
    """Write the DBC ``out`` and its sidecar ``out.toml``; the paths written. With cantools installed
    the pair is read back first and must give ``bus`` again (ValueError naming the first message
    that differs; nothing is left written)."""
    out = Path(out)
    text = dbc_text(bus, source)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    side = sidecar_path(out)
    side.write_text(sidecar_text(bus, out.name))
    try:
        _verify(bus, out)
    except ValueError:
        out.unlink()
        side.unlink()
        raise
    return [out, side]


def _verify(bus: BusSpec, out: Path) -> None:
    """``out`` read back (when cantools is there) is ``bus``."""
    try:
        back = read_dbc(out)
    except ImportError:
        return
    if back == bus:
        return
    first = next((a.name for a, b in zip(bus.messages, back.messages) if a != b), "the bus")
    raise UserError(f"{out}: the DBC written does not read back as the map ({first} differs); not written")


# ----------------------------------------------------------------------------- reading
SIDECAR_BUS_KEYS = ("cycle_s", "plant_node", "bitrate_bps", "data_bitrate_bps")
SIDECAR_MESSAGE_KEYS = ("id", "name", "rate_offset", "counter", "counter_max_delta", "crc", "crc_signal", "signals")


def read_dbc(path: str | Path, sidecar: str | Path | None = None) -> BusSpec:
    """The bus map of a DBC file and its sidecar (default ``FILE.dbc.toml``); needs ``cantools``.

    Multiplexed and 64-bit signals are refused. Errors are ConfigErrors naming the file and key."""
    try:
        import cantools
    except ImportError as exc:
        raise ImportError("a DBC bus map needs the optional package cantools "
                          "(pip install 'ella-hil[dbc]' or pip install cantools)") from exc
    source = str(path)
    side = Path(sidecar) if sidecar is not None else sidecar_path(path)
    if not side.is_file():
        raise ConfigError(source, None, None, "", message=(
            f"{source}: no sidecar {side} (the TOML that says the emulator's cycle, counters and CRCs; "
            "hil bus export MAP --dbc FILE.dbc writes both)"))
    try:
        db = cantools.database.load_file(source, database_format="dbc")
    except Exception as exc:  # cantools raises several parser-specific types
        raise ConfigError(source, None, None, "a DBC file",
                          message=f"{source}: not a readable DBC file: {exc}".splitlines()[0]) from exc
    return _Sidecar(db, source, str(side)).bus_map(load_toml(side))


class _Sidecar:
    """A cantools database and its sidecar, merged into bus-map dicts and checked against each other."""

    def __init__(self, db: Any, source: str, side: str):
        self.db = db
        self.source = source
        self.doc = Document(side)

    def error(self, key: str, value: Any, expected: str) -> ConfigError:
        return ConfigError(self.doc.source, key, value, f"{expected} (DBC {self.source})")

    def network_attribute(self, name: str) -> Any:
        attrs = getattr(self.db.dbc, "attributes", None) or {}
        return attrs[name].value if name in attrs else None

    def bus_map(self, data: dict) -> BusSpec:
        top = self.doc.root(data, ("bus", "message"))
        bus = top.table("bus", SIDECAR_BUS_KEYS, required=True, what="a [bus] table")
        cycle_s = bus.number("cycle_s", unit="s", positive=True)
        plant = bus.string("plant_node", PLANT)
        nodes = [n.name for n in self.db.nodes]
        if plant not in nodes:
            raise bus.error("plant_node", plant, f"a node of the DBC ({', '.join(nodes) or 'none'}; DBC {self.source})")
        fd = any(m.is_fd for m in self.db.messages)
        out = {"kind": "canfd" if fd else "can", "cycle_s": cycle_s,
               "bitrate_bps": self.bitrate(bus, "bitrate_bps", "Baudrate")}
        if fd:
            out["data_bitrate_bps"] = self.bitrate(bus, "data_bitrate_bps", "BaudrateCANFD")
        tables = top.table("message", [m.name for m in self.db.messages], required=True,
                           what="one [message.<name>] table per DBC message")
        messages = []
        for m in self.db.messages:
            if m.name not in tables.data:
                raise self.error(f"message.{m.name}", MISSING, "required; expected a table for every DBC message")
            t = Table(self.doc, tables.data[m.name], f"message.{m.name}", "message", SIDECAR_MESSAGE_KEYS,
                      "a [message.<name>] table")
            if fd and not m.is_fd:
                raise ConfigError(self.source, f"message[{m.name}]", m.name,
                                  "an FD frame (VFrameFormat StandardCAN_FD/ExtendedCAN_FD): other frames are FD")
            messages.append(self.message(m, t, plant, cycle_s))
        return read_bus_map({"bus": out, "message": messages}, self.source)

    def bitrate(self, bus: Table, key: str, attribute: str) -> int:
        dbc = self.network_attribute(attribute)
        if not bus.has(key):
            if dbc is None:
                raise self.error(f"bus.{key}", MISSING, f"required: the DBC has no {attribute} attribute")
            return int(dbc)
        value = bus.integer(key, minimum=1, maximum=10**9, what="bit/s")
        if dbc is not None and int(dbc) != value:
            raise bus.error(key, value, f"the DBC's {attribute} {dbc} (DBC {self.source})")
        return value

    def message(self, m: Any, t: Table, plant: str, cycle_s: float) -> dict:
        if t.has("id"):
            ident = t.integer("id", minimum=0, maximum=0x1FFFFFFF, what="CAN id")
            if ident != m.frame_id:
                raise t.error("id", ident, f"the DBC's id of {m.name}, 0x{m.frame_id:X} (DBC {self.source})")
        names = {s.name for s in m.signals}
        rename = self.renames(t, m, names)
        crc_signal = self.signal_key(t, "crc_signal", names)
        counter = self.signal_key(t, "counter", names)
        d: dict[str, Any] = {"name": t.raw("name", m.name), "id": m.frame_id, "extended_id": bool(m.is_extended_frame),
                             "direction": "to_firmware" if plant in (m.senders or ()) else "to_plant",
                             "dlc": m.length, "rate_divider": self.divider(m, cycle_s)}
        for key in ("rate_offset", "counter_max_delta", "crc"):
            if t.has(key):
                d[key] = t.raw(key)
        self.check_roles(t, m, counter, crc_signal)
        if counter is not None:
            d["counter"] = rename.get(counter, counter)
        if crc_signal is not None:
            d["crc_byte"] = self.crc_byte(t, m, crc_signal)
        elif t.has("crc"):
            raise t.error("crc", t.raw("crc"), "only with crc_signal (the DBC signal that holds the CRC)")
        d["signal"] = [_dbc_signal(s, rename.get(s.name, s.name), m.name, self.source)
                       for s in m.signals if s.name != crc_signal]
        return d

    def renames(self, t: Table, m: Any, names: set[str]) -> dict[str, str]:
        raw = t.raw("signals", {})
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise t.error("signals", raw, 'expected a table { <DBC signal> = "<emulator signal>" }')
        for k in raw:
            if k not in names:
                raise t.error(f"signals.{k}", raw[k], f"a signal of DBC message {m.name} ({', '.join(sorted(names))})")
        return dict(raw)

    def signal_key(self, t: Table, key: str, names: set[str]) -> str | None:
        v = t.raw(key, None)
        if v is not None and v not in names:
            raise t.error(key, v, f"a signal of the DBC message ({', '.join(sorted(names))})")
        return v

    def check_roles(self, t: Table, m: Any, counter: str | None, crc_signal: str | None) -> None:
        """The DBC's own annotations (SignalRole, CRCPolynomial), where it has them, agree with the sidecar."""
        for s in m.signals:
            attrs = s.dbc.attributes if s.dbc is not None else {}
            if "SignalRole" not in attrs:
                continue
            role = attrs["SignalRole"].value
            role = role if isinstance(role, str) else attrs["SignalRole"].definition.choices[role]
            for key, named in (("counter", counter), ("crc_signal", crc_signal)):
                is_it = role == ("counter" if key == "counter" else "crc")
                if is_it != (named == s.name):
                    raise t.error(key, named if named is not None else MISSING,
                                  f"the DBC's SignalRole: {s.name} is {'the' if is_it else 'no'} "
                                  f"{'rolling counter' if key == 'counter' else 'CRC'} of {m.name} (DBC {self.source})")
            if role == "crc" and "CRCPolynomial" in attrs:
                kind = t.raw("crc", "crc16" if m.is_fd else "crc8")
                if CRC_TEXT.get(kind, (None, None))[1] != attrs["CRCPolynomial"].value:
                    raise t.error("crc", kind, f"the DBC's CRCPolynomial 0x{attrs['CRCPolynomial'].value:X} "
                                               f"of {s.name} (DBC {self.source})")

    def crc_byte(self, t: Table, m: Any, name: str) -> int:
        s = m.get_signal_by_name(name)
        kind = t.raw("crc", "crc16" if m.is_fd else "crc8")
        bits = 8 * CRC_WIDTH.get(kind, 0)
        if s.start % 8 or s.length != bits or s.byte_order != "little_endian" or s.is_signed or s.scale != 1:
            raise t.error("crc_signal", name, f"an unsigned little-endian {bits}-bit signal on a byte boundary "
                                              f"for {kind} (DBC: {s.length} bits from bit {s.start})")
        return s.start // 8

    def divider(self, m: Any, cycle_s: float) -> int:
        """Cycles between two frames (0: on event), from GenMsgCycleTimeUs where given, else GenMsgCycleTime."""
        attrs = m.dbc.attributes if m.dbc is not None else {}
        us = attrs["GenMsgCycleTimeUs"].value if "GenMsgCycleTimeUs" in attrs else 0
        if us and m.cycle_time and us != 1000 * m.cycle_time:
            raise ConfigError(self.source, f"message[{m.name}].GenMsgCycleTimeUs", us,
                              f"the same cycle time as its GenMsgCycleTime ({m.cycle_time} ms)")
        key, period_s = ("GenMsgCycleTimeUs", us * 1e-6) if us else ("GenMsgCycleTime", (m.cycle_time or 0) * 1e-3)
        if not period_s:
            return 0
        n = period_s / cycle_s
        if abs(n - round(n)) > 1e-9 or round(n) < 1:
            raise ConfigError(self.source, f"message[{m.name}].{key}", us or m.cycle_time,
                              f"a whole number of the sidecar's cycles ({cycle_s:g} s, {self.doc.source})")
        return round(n)


def _dbc_signal(s: Any, name: str, message: str, source: str) -> dict:
    """The bus-map dict of one cantools Signal."""
    key = f"message[{message}].signal[{s.name}]"
    if s.is_multiplexer or s.multiplexer_ids:
        raise ConfigError(source, key, s.name, "multiplexed signals are not supported")
    if s.length > 32:
        raise ConfigError(source, f"{key}.length_bits", s.length, "expected at most 32 bits")
    if s.is_float:
        typ = "float32"
    elif s.length == 1 and not s.is_signed and s.scale == 1 and s.offset == 0:
        typ = "bool"
    else:
        width = 8 if s.length <= 8 else 16 if s.length <= 16 else 32
        typ = f"{'int' if s.is_signed else 'uint'}{width}"
    d = {"name": name, "type": typ, "start_bit": s.start, "length_bits": s.length,
         "byte_order": "little" if s.byte_order == "little_endian" else "big",
         "scale": float(s.scale), "offset": float(s.offset), "unit": s.unit or ""}
    if s.minimum is not None:
        d["min"] = float(s.minimum)
    if s.maximum is not None:
        d["max"] = float(s.maximum)
    return d
