"""The bus map compiled once, at start, into what each part of the emulator needs of it, so that the
runtime, the fault engine and lockstep receive the plan and never the map:

- the command reader and the sensor writer (firmware_bridge.wire.signals: their counters and values),
  and the compiled decoder (hil.runtime.command_frames) and encoder (hil.runtime.sensor_frames) on the
  codec tables, with the rolling counters, E2E checks and torque slots;
- whether the frames go through Python instead (a CANopen map's nodes and their PDO mappings,
  firmware_bridge.canopen.network.DriveNodes, which the plan carries as ``protocol``);
- the encoding of the integer-coded sensor signals the fault engine's count faults need;
- the lockstep mirror of the firmware's receiver (hil.runtime.lockstep.FirmwareCue);
- the link's fault layer (firmware_bridge.links.faults.FaultyLink, which looks frames up in the map);
- the map's cycle and name, for the period check and messages.
"""
from __future__ import annotations

from firmware_bridge.links.base import Link
from firmware_bridge.links.faults import FaultyLink
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.faults.engine import bus_encoding
from hil.runtime.command_frames import CompiledCommandInput
from hil.runtime.lockstep import FirmwareCue, firmware_cue
from hil.runtime.sensor_frames import CompiledSensorFrames


class WirePlan:
    """One emulator's bus map, compiled (module docstring). `commands`, `sensors_out`: the reader and
    writer to use (default: new ones on the map; a CANopen map's from its `protocol`)."""

    def __init__(self, bus: BusMap, joint_names: list[str], protocol=None, commands: CommandInput | None = None,
                 sensors_out: SensorOutput | None = None):
        self.source, self.cycle_s = bus.source, bus.cycle_s
        self.protocol = protocol
        if commands is None:
            commands = protocol.commands if protocol is not None else CommandInput(bus, joint_names)
        if sensors_out is None:
            sensors_out = SensorOutput(bus, joint_names, protocol.own_ids if protocol is not None else ())
        self.commands, self.sensors_out = commands, sensors_out
        self.decoder = CompiledCommandInput(commands)
        # a CANopen map's RPDOs go through their node's PDO mapping (PdoCommandInput), in Python
        self.python_frames = type(commands) is not CommandInput
        self.sensor_encoding = bus_encoding(bus)
        self.cue: FirmwareCue | None = firmware_cue(bus, joint_names) if protocol is None else None
        self._bus = bus
        # the command frames the emulator takes: (name, id, payload bytes), for the start's map-mismatch hint
        self.expected_commands = [(c.name, c.arbitration_id, c.length) for c in bus.messages("to_plant")]
        self.encoder: CompiledSensorFrames | None = None

    @classmethod
    def of(cls, commands: CommandInput, sensors_out: SensorOutput, joint_names: list[str], protocol=None) -> WirePlan:
        """The plan of an existing reader and writer (on the same map)."""
        return cls(commands.reader.bus, joint_names, protocol, commands, sensors_out)

    def bind_sensors(self, channel_names: list[str]) -> CompiledSensorFrames:
        """The sensor writer bound to the emulator's channels and its compiled encoder (kept in ``encoder``)."""
        self.sensors_out.bind(channel_names)
        self.encoder = CompiledSensorFrames(self.sensors_out, channel_names)
        return self.encoder

    def fault_layer(self, link: Link) -> FaultyLink:
        """`link` behind its bus-fault layer."""
        return FaultyLink(link, self._bus)
