"""An emulator built from files, and a firmware process beside it: what `hil run` and the pytest
plugin (hil.testing.pytest_plugin) share.

``build_emulator`` reads the arm preset, the bus map and a fault scenario, opens the link and
returns the emulator with the far end of the link its firmware opens. ``spawn_firmware`` starts a
firmware (the reference firmware, or any command line of the user's, with placeholders for that
end: hil.runtime.firmware_process) in its own process. A bus map refuses a link that cannot carry
its frames, and the plant step, the cycle period and the bus map's cycle must agree.
"""
from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from config_schema import UserError
from firmware_bridge.links.base import Link
from firmware_bridge.links.in_process import PumpedLink, in_process_pair
from hil.logs.targets import Targets
from hil.model.presets import CONFIG_ROOT, resolve
from hil.runtime.firmware_process import Endpoint, FirmwareProcess, endpoint_of, expand
from hil.runtime.loop import Emulator, RuntimeOptions
from hil.runtime.sysguard import exit_with_parent

LINK_PLACEHOLDER = "{link}"     # in a firmware command line: replaced by the spec its end opens
# the reference firmware's own description of ELLA (firmware_bridge.reference.nominal)
REFERENCE_PARAMS = CONFIG_ROOT / "firmware" / "ella_nominal.toml"


@dataclass
class Built:
    emulator: Emulator
    endpoint: Endpoint          # the firmware's end of the link (the other end of a pty pair)
    arm: str                    # the preset file
    scenario_targets: Targets | None = None     # the scenario's [verdict] table
    pumped: PumpedLink | None = None    # link "in-process": the loop's end, which pumps the firmware
    firmware_end: Link | None = None    # and the firmware's end (firmware_bridge.links.in_process)

    @property
    def firmware_link(self) -> str:
        return self.endpoint.link

    def ready_line(self) -> dict:
        """What a firmware needs to connect, once the emulator takes commands (`hil run` prints it)."""
        opt = self.emulator.opt
        return {"link": self.endpoint.kind, "endpoint": self.endpoint.port, "firmware_link": self.endpoint.link,
                "interface": self.endpoint.interface, "bus": self.endpoint.bus, "period_s": opt.period_s,
                "mode": opt.mode, "start": "first_command" if opt.mode == "lockstep" else opt.start}


def build_emulator(arm: str | Path, bus: str | Path, link: str = "pty", options: RuntimeOptions | None = None,
                   scenario: str | Path | None = None, heartbeat_s: float | None = None,
                   firmware_link: str | None = None, ideal_sensors: bool = False,
                   ideal_drives: bool = False, formulation: str = "aba") -> Built:
    """The emulator of the arm preset `arm` behind `link` (a spec of firmware_bridge.links.connect,
    "pty"/"slcan-pty" for a new pty pair, or "in-process" for a firmware run in this process:
    Built.pumped and Built.firmware_end), speaking the bus map `bus`, with the faults of the
    scenario file; the plant starts at rest (static deflection, holding torque). `ideal_sensors`:
    ideal encoders and tip IMU (hil.model.sensor_specs.default_sensors) instead of the preset's sensor
    models; `ideal_drives`: ideal torque drives instead of its motors (the loop benchmark's
    reference, `hil bench loop --models`); `formulation`: the plant's kernel (hil.dynamics.plant.FORMULATIONS)."""
    from firmware_bridge.canopen.network import DriveNodes, is_canopen
    from firmware_bridge.links.connect import check_link_fits, open_link, open_pty_pair_link
    from firmware_bridge.wire.messages import BusMap
    from hil.model.config import load_model
    from hil.devices.drives import DriveBank
    from hil.dynamics.integrator_plan import judge
    from hil.dynamics.plant import Plant
    from hil.faults.scenario import load_scenario
    from hil.model.plausibility import warn_static_deflection
    from hil.model.sensor_specs import default_sensors
    from hil.runtime.wire_plan import WirePlan

    arm, bus = resolve("preset", arm), resolve("bus", bus)
    scenario = None if scenario is None else resolve("scenario", scenario)
    bus_map = BusMap.load(bus)
    if link != "in-process":
        check_link_fits(bus_map, link)
    if firmware_link is not None:
        check_link_fits(bus_map, firmware_link)
    plant = Plant(load_model(arm), formulation=formulation)
    judge(plant.asm, plant.plan)        # a pinned plan's accuracy and motion error for the summary
    plant.equilibrium_eta()
    warn_static_deflection(plant)
    names = plant.layout.joint_names
    protocol = DriveNodes(bus_map, names, heartbeat_s) if is_canopen(bus_map) else None
    faults = load_scenario(scenario) if scenario else None
    firmware_end = None
    if link == "in-process":
        raw, firmware_end = in_process_pair(bus_map.kind)
        other_end = link
    elif link in ("pty", "slcan-pty"):
        raw, other_end = open_pty_pair_link(link, bus_map)
    else:
        raw, other_end = open_link(link), link
    options = options or RuntimeOptions()
    header = {"config": str(arm), "config_text": Path(arm).read_text(encoding="utf-8"), "bus": str(bus),
              "link": link, "mode": options.mode, "formulation": formulation, "integrator": plant.plan_identity(),
              "scenario": None if scenario is None else str(scenario),
              "scenario_text": None if scenario is None else Path(scenario).read_text(encoding="utf-8"),
              "versions": versions()}
    try:
        plan = WirePlan(bus_map, names, protocol)       # the map compiled once; the emulator receives the plan
        emulator = Emulator(plant, raw, plan.commands, plan.sensors_out, options, header, protocol, faults,
                            drives=DriveBank(plant, [None] * len(names)) if ideal_drives else None,
                            sensors=default_sensors(plant.asm.model) if ideal_sensors else None, plan=plan)
        if protocol is not None:        # the drives see the faults on their joints and the applied torque
            protocol.attach(emulator.faults, lambda: plant.tau)
    except Exception:
        raw.close()
        if firmware_end is not None:
            firmware_end.close()
        raise
    return Built(emulator, endpoint_of(firmware_link or other_end, str(bus)), str(arm),
                 None if faults is None else faults.targets, raw if firmware_end is not None else None, firmware_end)


def reference_firmware(params: str | Path, bus: str | Path, duration_s: float | None = None,
                       move_time_s: float = 2.0, vibration_suppression: bool = False,
                       realtime: bool = False, priority: int | None = None) -> list[str]:
    """Command line of the reference firmware (`hil firmware`) with its nominal arm parameter file
    `params` (e.g. REFERENCE_PARAMS), its link left as LINK_PLACEHOLDER; it stops when the process
    that spawns it is gone; with `realtime` it gets the emulator's real-time treatment (reported)."""
    cmd = [sys.executable, "-m", "hil", "firmware", "--params", str(params), "--bus", str(bus),
           "--link", LINK_PLACEHOLDER, "--json", "--move-time", str(move_time_s), "--exit-with-parent"]
    if duration_s:
        cmd += ["--duration", str(duration_s)]
    if realtime:
        cmd += ["--realtime"] + (["--priority", str(priority)] if priority else [])
    return cmd + (["--vibration-suppression"] if vibration_suppression else [])


def spawn_firmware(command: Sequence[str], endpoint: Endpoint, cpu: int | None = None, priority: int | None = None,
                   ready_line: str | None = "ready", cwd: str | Path | None = None,
                   echo: Callable[[str], None] | None = None, ready_timeout_s: float = 300.0) -> FirmwareProcess:
    """Start a firmware process: `command` with its placeholders filled in from `endpoint`
    (hil.runtime.firmware_process), pinned to `cpu` and under SCHED_FIFO `priority` if given.
    With `ready_line`, wait until the firmware prints it (it has opened its end of the link) and
    fail with its exit status and output otherwise."""
    def placement() -> None:
        exit_with_parent(parent)
        if cpu is not None:
            os.sched_setaffinity(0, {cpu})
        if priority is not None:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    parent = os.getpid()
    firmware = FirmwareProcess(expand(command, endpoint), cwd=cwd, placement=placement, echo=echo)
    if ready_line is not None:
        try:
            line = firmware.next_line(ready_timeout_s)
        except BaseException:
            firmware.stop(0.0)
            raise
        if line is None or line.strip() != ready_line:
            status = firmware.stop(0.0)
            raise FirmwareStartError(f"{firmware.describe_exit(status)} (it did not print {ready_line!r} first; "
                                     f"got {line!r})")
    return firmware


class FirmwareStartError(UserError):
    """The firmware did not start as the run needs (it exited, printed no ready line, never opened the link)."""


def await_host(link, timeout_s: float) -> None:
    """An emulated slcan adapter refuses frames until the host's open command ("O") has been read:
    take in the host's setup lines before the first sensor frame goes out (no-op for other links).
    The wait is the run's start timeout: a firmware that starts slowly on a busy machine is no fault."""
    if not hasattr(link, "channel_open"):
        return
    deadline = time.monotonic() + timeout_s
    while not link.channel_open and time.monotonic() < deadline:
        if link.recv() is None:
            time.sleep(1e-3)
    if not link.channel_open:
        raise FirmwareStartError(f"{link.name}: the firmware did not open the slcan channel within {timeout_s} s")


def versions() -> dict:
    import numba
    return {"python": sys.version.split()[0], "numpy": np.__version__, "numba": numba.__version__}
