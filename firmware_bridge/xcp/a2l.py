"""The A2L file (ASAM MCD-2 MC, ASAP2 1.71) of the slave's memory: what CANape, INCA or pyxcp need to
measure and calibrate it.

One MODULE: every measurement a FLOAT64_IEEE at its address with its unit (a COMPU_METHOD per unit,
identical conversion), every parameter a VALUE CHARACTERISTIC (FLOAT64_IEEE with its limits, a switch
a UBYTE with a verbal table off/on), two MEMORY_SEGMENTs, and the XCP IF_DATA: the protocol layer,
the dynamic DAQ with its one event channel and 4-byte timestamps in us, XCP on UDP or on CAN at the
slave's address. Names are made A2L identifiers (letters, digits, underscore); texts lose double quotes.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from firmware_bridge.xcp.daq import MAX_DAQ
from firmware_bridge.xcp.memory import CALIBRATION_BASE, MEASUREMENT_BASE, SLOT, Calibration
from firmware_bridge.xcp.protocol import MAX_CTO, MAX_DTO, MAX_ODT_ENTRY_SIZE

FLOAT64_MAX = "1.7976931348623157E+308"


@dataclass(frozen=True)
class Measurement:
    name: str
    unit: str = ""
    description: str = ""


def identifier(name: str) -> str:
    """``name`` as an A2L identifier."""
    ident = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return ident if ident[:1].isalpha() or ident[:1] == "_" else "_" + ident


def _text(s: str) -> str:
    return '"' + s.replace('"', "'").replace("\\", "/") + '"'


def _unit_method(unit: str) -> str:
    return "CM_" + (identifier(unit.replace("/", "_per_").replace("^", "")) if unit else "none")


@dataclass(frozen=True)
class Transport:
    """Where the slave is: UDP at ``host:port``, or CAN with the master's and the slave's ids (``can``)
    at ``bitrate_bps`` (``fd``: CAN FD)."""
    host: str = "127.0.0.1"
    port: int = 5555
    can: tuple[int, int] | None = None
    fd: bool = False
    bitrate_bps: int = 500_000
    data_bitrate_bps: int = 2_000_000

    @property
    def packet_sizes(self) -> tuple[int, int]:
        return (MAX_CTO, MAX_DTO) if self.can is None else (64, 64) if self.fd else (8, 8)


def a2l(module: str, measurements: Sequence[Measurement], calibrations: Sequence[Calibration],
        event: tuple[str, int, int], transport: Transport, comment: str = "") -> str:
    """The A2L text (module docstring); ``event``: the channel's name, time cycle and unit (XCP's codes)."""
    name = identifier(module)
    units = sorted({m.unit for m in measurements} | {c.unit for c in calibrations if c.kind == "f8"})
    out = ["ASAP2_VERSION 1 71", f"/begin PROJECT {name} {_text(comment)}",
           f'  /begin HEADER {_text(comment)} VERSION "1" /end HEADER', f"  /begin MODULE {name} {_text(comment)}",
           "    /begin MOD_COMMON \"\"", "      BYTE_ORDER MSB_LAST", "      ALIGNMENT_BYTE 1",
           "      ALIGNMENT_WORD 1", "      ALIGNMENT_LONG 1", "      ALIGNMENT_FLOAT32_IEEE 1",
           "      ALIGNMENT_FLOAT64_IEEE 1", "    /end MOD_COMMON", "    /begin MOD_PAR \"\""]
    for segment, base, size in (("measurements", MEASUREMENT_BASE, SLOT * len(measurements)),
                                ("parameters", CALIBRATION_BASE, SLOT * max(1, len(calibrations)))):
        out.append(f"      /begin MEMORY_SEGMENT {segment} \"\" DATA RAM INTERN 0x{base:X} 0x{size:X} -1 -1 -1 -1 -1 "
                   "/end MEMORY_SEGMENT")
    out.append("    /end MOD_PAR")
    out += _if_data(event, transport)
    for unit in units:
        out.append(f"    /begin COMPU_METHOD {_unit_method(unit)} {_text(unit or 'no unit')} IDENTICAL \"%.6\" "
                   f"{_text(unit)} /end COMPU_METHOD")
    out += ["    /begin COMPU_METHOD CM_switch \"off / on\" TAB_VERB \"%.0\" \"\" COMPU_TAB_REF VT_switch "
            "/end COMPU_METHOD",
            "    /begin COMPU_VTAB VT_switch \"off / on\" TAB_VERB 2 0 \"off\" 1 \"on\" /end COMPU_VTAB",
            "    /begin RECORD_LAYOUT RL_FLOAT64 FNC_VALUES 1 FLOAT64_IEEE COLUMN_DIR DIRECT /end RECORD_LAYOUT",
            "    /begin RECORD_LAYOUT RL_UBYTE FNC_VALUES 1 UBYTE COLUMN_DIR DIRECT /end RECORD_LAYOUT"]
    for k, m in enumerate(measurements):
        out.append(f"    /begin MEASUREMENT {identifier(m.name)} {_text(m.description)} FLOAT64_IEEE "
                   f"{_unit_method(m.unit)} 0 0 -{FLOAT64_MAX} {FLOAT64_MAX} "
                   f"ECU_ADDRESS 0x{MEASUREMENT_BASE + SLOT * k:X} /end MEASUREMENT")
    for k, c in enumerate(calibrations):
        layout, method = ("RL_FLOAT64", _unit_method(c.unit)) if c.kind == "f8" else ("RL_UBYTE", "CM_switch")
        out.append(f"    /begin CHARACTERISTIC {identifier(c.name)} {_text(c.description)} VALUE "
                   f"0x{CALIBRATION_BASE + SLOT * k:X} {layout} 0 {method} {c.minimum!r} {c.maximum!r} "
                   "/end CHARACTERISTIC")
    out += _groups(measurements, calibrations)
    out += ["  /end MODULE", "/end PROJECT", ""]
    return "\n".join(out)


def _if_data(event: tuple[str, int, int], transport: Transport) -> list[str]:
    event_name, cycle, unit = event
    max_cto, max_dto = transport.packet_sizes
    if transport.can is None:
        where = f"      /begin XCP_ON_UDP_IP 0x0100 {transport.port} ADDRESS {_text(transport.host)} /end XCP_ON_UDP_IP"
    else:
        master, slave = (f"0x{i | (0x80000000 if i > 0x7FF else 0):X}" for i in transport.can)
        fd = f" /begin CAN_FD MAX_DLC 64 CAN_FD_DATA_TRANSFER_BAUDRATE {transport.data_bitrate_bps} /end CAN_FD"
        where = (f"      /begin XCP_ON_CAN 0x0100 CAN_ID_MASTER {master} CAN_ID_SLAVE {slave} BAUDRATE "
                 f"{transport.bitrate_bps}{fd if transport.fd else ''} /end XCP_ON_CAN")
    return ["    /begin IF_DATA XCP",
            f"      /begin PROTOCOL_LAYER 0x0100 2000 2000 0 0 0 0 0 {max_cto} {max_dto} BYTE_ORDER_MSB_LAST "
            "ADDRESS_GRANULARITY_BYTE OPTIONAL_CMD GET_COMM_MODE_INFO OPTIONAL_CMD GET_ID OPTIONAL_CMD SET_MTA "
            "OPTIONAL_CMD UPLOAD OPTIONAL_CMD SHORT_UPLOAD OPTIONAL_CMD DOWNLOAD OPTIONAL_CMD SHORT_DOWNLOAD "
            "OPTIONAL_CMD GET_DAQ_CLOCK OPTIONAL_CMD GET_DAQ_PROCESSOR_INFO OPTIONAL_CMD GET_DAQ_RESOLUTION_INFO "
            "OPTIONAL_CMD GET_DAQ_EVENT_INFO OPTIONAL_CMD GET_DAQ_LIST_MODE OPTIONAL_CMD FREE_DAQ OPTIONAL_CMD ALLOC_DAQ "
            "OPTIONAL_CMD ALLOC_ODT OPTIONAL_CMD ALLOC_ODT_ENTRY OPTIONAL_CMD WRITE_DAQ_MULTIPLE /end PROTOCOL_LAYER",
            f"      /begin DAQ DYNAMIC {MAX_DAQ} 1 0 OPTIMISATION_TYPE_DEFAULT ADDRESS_EXTENSION_FREE "
            f"IDENTIFICATION_FIELD_TYPE_ABSOLUTE GRANULARITY_ODT_ENTRY_SIZE_DAQ_BYTE {min(MAX_ODT_ENTRY_SIZE, max_dto - 1)} "
            "NO_OVERLOAD_INDICATION",
            "        /begin TIMESTAMP_SUPPORTED 0x1 SIZE_DWORD UNIT_1US /end TIMESTAMP_SUPPORTED",
            f"        /begin EVENT {_text(event_name)} {_text(event_name)} 0 DAQ 0xFF {cycle} {unit} 0 /end EVENT",
            "      /end DAQ",
            where, "    /end IF_DATA"]


def _groups(measurements: Sequence[Measurement], calibrations: Sequence[Calibration]) -> list[str]:
    out = ["    /begin GROUP measurements \"the run log's columns\" ROOT",
           "      /begin REF_MEASUREMENT " + " ".join(identifier(m.name) for m in measurements) + " /end REF_MEASUREMENT",
           "    /end GROUP"]
    if calibrations:
        out += ["    /begin GROUP parameters \"calibratable plant and fault parameters\" ROOT",
                "      /begin REF_CHARACTERISTIC " + " ".join(identifier(c.name) for c in calibrations)
                + " /end REF_CHARACTERISTIC", "    /end GROUP"]
    return out
