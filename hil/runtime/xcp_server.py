"""The emulator as an XCP slave (``hil run --xcp`` or ``--xcp-can``): measure every run-log column,
calibrate plant and fault parameters while the run goes, from CANape, INCA or pyxcp.

Measurements: the run log's columns (hil.runtime.cycle_record), one FLOAT64 each, the row of the last
cycle; DAQ on one event channel, the cycle (firmware_bridge.xcp.daq), with timestamps of the
simulated clock in us. Transports: UDP (``--xcp [HOST:]PORT``, the slave's own socket and thread) or
the emulator's CAN link (``--xcp-can MASTER_ID:SLAVE_ID``, firmware_bridge.xcp.can: the loop hands the
commands over and sends the answers at its next cycle start). Calibrations (``knobs``: those the arm
and the scenario have):

- ``mass_kg_<attachment>``: an attachment's mass (the payload's, a motor's), its inertia scaled with it, kg;
- ``friction_scale_<joint>``, ``kt_scale_<joint>``: the drive's friction and torque constant, factors;
- ``damping_scale_<body>``, ``stiffness_scale_<body>``: a flexible body's modal damping and stiffness;
- ``fault_<name>``: a switch of the scenario's fault ``<name>`` (1 armed as the scenario says,
  0 cleared; 1 again strikes it at once).

A calibration acts through the fault kinds' effects (hil.faults: payload, friction, kt_loss, damping,
stiffness_loss) outside the fault list, so it sets no FAULT_ACTIVE bit. A write is checked and its
effect bound on the XCP thread (a payload re-assembles the model there), then applied on the loop's
thread at the start of the next cycle, between two plant steps, and logged as an event
``{"event": "calibrate", "parameter", "value", "previous"}``. The A2L file describing all of this:
``hil xcp a2l`` (hil.cli.xcp).

Cost in the loop: with no master connected, a look at two queues per cycle (calibrations to apply,
answers to send on CAN); connected, the row is written to the slave's memory each cycle; with DAQ
running, the packets are filled and sent (hil bench xcp measures each).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

from firmware_bridge.xcp.a2l import Measurement, Transport, a2l, identifier
from firmware_bridge.xcp.can import CanXcpTransport, packet_sizes
from firmware_bridge.xcp.memory import Calibration, MemoryMap, XcpError
from firmware_bridge.xcp.protocol import ETH_HEADER_SIZE, Err, event_cycle
from firmware_bridge.xcp.slave import XcpSlave
from firmware_bridge.xcp.udp import UdpXcpServer
from hil.faults.fault import Fault, FaultError
from hil.logs.units import describe

SCALE_LIMITS = (0.05, 20.0)         # friction, kt and damping factors
PAYLOAD_LIMIT = (0.0, 50.0)         # kg
DEFAULT_PORT = 5555


@dataclass
class Knob:
    """One calibratable parameter: through a fault kind's effect (``kind``, ``target``, ``key``), or
    the switch of a scenario fault (``switch``: its Fault and Duration)."""
    spec: Calibration
    kind: str = ""
    target: str = ""
    key: str = ""
    switch: tuple[Any, Any] | None = None
    active: Any = None              # the effect in force (None: nominal), or the switched fault's handle
    value: float = math.nan         # the value in force (loop thread)

    def __post_init__(self):
        self.value = self.spec.value


def knobs(emu) -> list[Knob]:
    """The calibratable parameters of an emulator's arm, drives and scenario (module docstring)."""
    plant, out = emu.plant, []
    for body in plant.asm.model.bodies:
        for a in body.attachments:
            if a.mass_kg > 0:
                out.append(Knob(Calibration(f"mass_kg_{a.name}", a.mass_kg, *PAYLOAD_LIMIT, "kg",
                                            f"mass of {body.name}/{a.name}, inertia scaled with it"),
                                "payload", f"{body.name}/{a.name}", "mass_kg"))
    for j in plant.layout.joint_names:
        out.append(Knob(Calibration(f"friction_scale_{j}", 1.0, *SCALE_LIMITS, "", f"joint {j}: friction factor"),
                        "friction", j, "friction_scale"))
        out.append(Knob(Calibration(f"kt_scale_{j}", 1.0, *SCALE_LIMITS, "",
                                    f"joint {j}: motor torque constant factor"), "kt_loss", j, "kt_scale"))
    for k, body in enumerate(plant.layout.body_names):
        if plant.km.nm[k] > 0:
            out.append(Knob(Calibration(f"damping_scale_{body}", 1.0, *SCALE_LIMITS, "",
                                        f"{body}: modal damping factor"), "damping", body, "damping_scale"))
            out.append(Knob(Calibration(f"stiffness_scale_{body}", 1.0, SCALE_LIMITS[0], 1.0, "",
                                        f"{body}: modal stiffness factor (a loss)"), "stiffness_loss", body,
                            "stiffness_scale"))
    for sf, handle in zip(emu.scenario_faults, emu.scenario_handles):
        out.append(Knob(Calibration(f"fault_{identifier(sf.fault.name)}", 1.0, 0.0, 1.0, "", f"switch of fault {sf.fault.name}: "
                                    "1 armed, 0 cleared", kind="u1"), switch=(sf.fault, sf.duration), active=handle))
    return out


def a2l_file(emu, transport: Transport) -> str:
    """The A2L text of the emulator's slave: its measurements (the log's columns with their units) and
    its calibratable parameters, XCP on UDP or CAN as ``transport`` says."""
    plant = emu.plant
    return a2l(plant.asm.model.name, [Measurement(c, *describe(c)) for c in emu.columns],
               [k.spec for k in knobs(emu)], ("cycle", *event_cycle(plant.dt)), transport,
               f"{plant.asm.model.name}: the emulated arm as an XCP slave (hil run --xcp)")


class XcpBridge:
    """The emulator's XCP slave (module docstring): on UDP at ``host:port``, or with ``can`` = (master id,
    slave id, CAN FD) on the emulator's own CAN link (firmware_bridge.xcp.can); ``start()`` before
    the run, ``close()`` after."""

    def __init__(self, emu, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                 can: tuple[int, int, bool] | None = None):
        self.emu = emu
        self.knobs = knobs(emu)
        self.memory = MemoryMap(emu.columns, [k.spec for k in self.knobs])
        self.memory.on_write = self._request
        plant = emu.plant
        sizes = {} if can is None else dict(zip(("max_cto", "max_dto"), packet_sizes(can[2])))
        self.slave = XcpSlave(self.memory, f"{plant.asm.model.name}.a2l", ("cycle", event_cycle(plant.dt)),
                              lambda: int(round(plant.t * 1e6)), header=b"" if can else bytes(ETH_HEADER_SIZE),
                              **sizes)
        if can is None:
            self.server = UdpXcpServer(self.slave, host, port)
        else:
            self.server = CanXcpTransport(self.slave, *can, send=emu.io.send)
            emu.io.side = self.server
        self.pending: deque[tuple[Knob, float, Any]] = deque()
        self.applied = 0
        self.events = 0             # DAQ events (cycles sampled while connected)

    @property
    def address(self) -> str:
        """Where the master finds the slave: HOST:PORT, or the CAN ids."""
        a = self.server.address
        return a if isinstance(a, str) else f"{a[0]}:{a[1]}"

    @property
    def busy(self) -> bool:
        """Something for the loop's cycle start: calibrations to apply, responses to send (CAN)."""
        return bool(self.pending or self.server.outbound)

    def start(self) -> None:
        self.server.start()

    def close(self) -> None:
        self.server.close()

    def cycle_start(self, cycle: int, t: float) -> None:
        """The loop's cycle start: the responses ready go out, the calibrations written are applied."""
        if self.server.outbound:
            self.server.flush()
        if self.pending:
            self.apply_pending(cycle, t)

    # ------------------------------------------------------------------ the XCP thread
    def _request(self, spec: Calibration, value: float) -> None:
        """A write the memory accepted: bind its effect now, apply it at the next cycle start."""
        knob = next(k for k in self.knobs if k.spec is spec)
        prepared = None
        if knob.switch is None and value != spec.value:
            fault = Fault(f"calibration {spec.name}", knob.kind, knob.target, {knob.key: value})
            try:
                prepared = self.emu.faults.bind_effect(fault)
            except FaultError as exc:
                raise XcpError(Err.OUT_OF_RANGE, f"{spec.name} = {value}: {exc}") from None
        self.pending.append((knob, value, prepared))

    # ------------------------------------------------------------------ the loop's thread
    def apply_pending(self, cycle: int, t: float) -> None:
        """Apply the calibrations written since the last cycle, in order, each logged as an event."""
        engine = self.emu.faults
        while self.pending:
            knob, value, prepared = self.pending.popleft()
            previous, knob.value = knob.value, value
            if knob.switch is not None:
                self._switch(knob, bool(value))
            else:
                if knob.active is not None:
                    knob.active.stop(engine)
                knob.active = prepared
                if prepared is not None:
                    prepared.start(engine)
            self.applied += 1
            if self.emu.logger is not None:
                self.emu.logger.event({"event": "calibrate", "cycle": cycle, "t": t, "parameter": knob.spec.name,
                                       "value": value, "previous": previous})

    def _switch(self, knob: Knob, on: bool) -> None:
        fault, duration = knob.switch
        if on:
            knob.active = self.emu.faults.inject(fault, None, duration)
        else:
            self.emu.faults.clear(knob.active)

    def sample(self) -> None:
        """After the cycle's row is in the memory: the running DAQ lists' packets."""
        plan = self.slave.plan
        if plan is not None:
            server = self.server
            plan.sample(self.memory.row_bytes, self.events, int(round(self.emu.plant.t * 1e6)), server.counter,
                        server.send_dto)
        self.events += 1

    def summary(self) -> dict:
        s, counts = self.server, self.slave.counts
        return {"address": self.address, "connects": counts["connects"],
                "commands": counts["commands"], "errors": self.slave.errors, "last_error": self.slave.last_error,
                "malformed_datagrams": s.malformed, "daq_packets_sent": s.dto_sent, "daq_packets_lost": s.dto_lost,
                "calibrations_applied": self.applied, "measurements": len(self.memory.measurements),
                "calibrations": len(self.knobs)}
