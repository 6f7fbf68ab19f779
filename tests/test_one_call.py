"""The emulator's cycle, one compiled call (hil.runtime.one_call), against its Python model
(tests/cycle_oracle.py: each stage in Python on the devices' own calls), cycle by cycle: the logged row (every column but the four timings), the
events, the frames sent, the command reader's and sensor writer's counters, the watchdog, the command
age and the emulator's own flags must be the same. The frames a scripted firmware sends cover every
rejection kind (CRC, length, NaN, range, counter), an unknown id, a frame of the other direction, a
frame longer than any command, lost and re-anchored counters, two commands in one cycle, torques
beyond the drives' limits, and silences that trip and clear the watchdog; with each safe state, a
voltage drive, a signal fault and plant faults (friction, torque constant, stiffness, a brake fault
and a payload drop). Two deliberately broken calls (the running bit missing from the status; a hold
gain doubled) must be caught. The call must have returned to Python for every trip and clear and
computed the safe state's cycles itself.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.devices.drives import DriveBank
from hil.dynamics.plant import Plant
from hil.faults.scenario import scenario_from_string
from hil.kernels.emulator_cycle import SP_KP
from hil.runtime import one_call
from hil.runtime.loop import Emulator, RuntimeOptions
from bus_maps import float_commands
from cycle_oracle import StageEmulator
from tests.test_compiled_cycle import PLANT_FAULTS
from tools.loop_rig import MemoryEnd

ROOT = Path(__file__).resolve().parent.parent
CYCLES = 420
TIMINGS = ("lateness_us", "compute_us", "io_us", "cmd_age_us")
SILENT = set(range(60, 90)) | set(range(240, 300))     # no command: the 20 ms watchdog trips, then clears

# full_fd with float32 torques (a NaN can be sent), a CRC-16 and the rolling counter
FLOAT_COMMANDS = float_commands(crc="crc16", crc_byte=14)

SIGNAL_AND_PLANT_FAULTS = """
[scenario]
description = "an encoder dropout for a while, a friction fault from early on"
seed = 3
[[fault]]
name = "dropout"
kind = "dropout"
target = "enc_elbow"
mode = "zero"
  [fault.trigger]
  at_s = 0.1
  [fault.duration]
  for_s = 0.05
[[fault]]
name = "friction"
kind = "friction"
target = "elbow"
friction_scale = 3.0
  [fault.trigger]
  at_s = 0.03
"""


def _float_map(tmp_path_factory) -> BusMap:
    text = (ROOT / "configs" / "bus" / "full_fd.toml").read_text()
    start = text.index("[[message]]")
    end = text.index("[[message]]", start + 1)
    path = tmp_path_factory.mktemp("bus") / "float_fd.toml"
    path.write_text(text[:start] + FLOAT_COMMANDS.lstrip() + "\n" + text[end:])
    return BusMap.load(path)


class _Rows:
    """A run logger's interface, keeping the rows and events."""

    def __init__(self, columns: list[str]):
        self.width, self.rows, self.events = len(columns), [], []

    def row(self) -> np.ndarray:
        return np.zeros(self.width)

    def put(self, row: np.ndarray) -> None:
        self.rows.append(row.copy())

    def event(self, event: dict) -> None:
        self.events.append(dict(event))


def _rig(model, bus: BusMap, safe_state: str, scenario: str | None, elbow: str = "current", cls=Emulator):
    """ELLA with the elbow drive's current limited to 10 A (a command beyond 60 N m is clamped), as a
    current or a voltage drive (48 V; its command a duty)."""
    plant = Plant(model)
    plant.equilibrium_eta()
    names = plant.layout.joint_names
    specs = [b.joint.motor for b in model.bodies]
    specs[-1] = replace(specs[-1], current_limit_A=10.0,
                        **({"interface": "voltage", "supply_V": 48.0} if elbow == "voltage" else {}))
    here, there = MemoryEnd("emulator"), MemoryEnd("firmware")
    here.peer, there.peer = there, here
    emu = cls(plant, here, CommandInput(bus, names), SensorOutput(bus, names),
              RuntimeOptions(mode="afap", realtime=False, stats_capacity=CYCLES + 10, safe_state=safe_state,
                             watchdog_s=0.02),
              scenario=None if scenario is None else scenario_from_string(scenario),
              drives=DriveBank(plant, specs))
    emu.logger = _Rows(emu.columns)
    return emu, there


def _script(bus: BusMap, hold: np.ndarray, elbow: str = "current") -> list[list[Frame]]:
    """The frames a firmware sends before each cycle (module docstring); to a voltage elbow drive a
    small duty."""
    codec = bus.codec("cmd_torque")
    other = next(c for c in bus.codecs if c.direction == "to_firmware")
    counter, script, last = 0, [], None
    for c in range(CYCLES):
        frames = []
        if c not in SILENT:
            tau = hold + 0.5 * np.sin(0.05 * c)
            if 120 <= c < 126:
                tau[-1] = 85.0                    # beyond the elbow drive's limit
            if elbow == "voltage":
                tau[-1] = round(tau[-1] * 0.002, 2)
            if c % 47 == 17:
                counter = codec.next_counter(counter)      # one lost (within the window of 2)
            if 150 <= c < 152:
                counter = (counter + 100) & 0xFF  # a restarted sender: rejected, then re-anchored
            values = [*tau, 0]
            frame = codec.encode(values, counter=counter)
            if c % 23 == 5:
                damaged = bytearray(frame.data)
                damaged[2] ^= 0x10
                frames.append(Frame(frame.arbitration_id, bytes(damaged), frame.is_fd))
            if c % 29 == 7:
                frames.append(Frame(frame.arbitration_id, frame.data[:-1], frame.is_fd))
            if c % 31 == 9:
                frames.append(Frame(0x7EE, frame.data, frame.is_fd))
            if c % 37 == 11:
                frames.append(Frame(other.arbitration_id, bytes(other.length), other.is_fd))
            if c % 41 == 13 and codec.spec.signals[0].is_float:
                frames.append(codec.encode([np.nan, *values[1:]], counter=counter))
            if c % 43 == 15:
                frames.append(codec.encode([300.0, *values[1:]], counter=counter, check_range=False))
            if c % 59 == 21:
                frames.append(Frame(frame.arbitration_id, bytes(80), frame.is_fd))
            frames.append(frame)
            if c % 17 == 3 and last is not None:
                frames.append(last)              # a replay: counter rejected
            if c % 53 == 19:
                counter = codec.next_counter(counter)
                frames.append(codec.encode(values, counter=counter))      # two commands in one cycle
            last = frame
            counter = codec.next_counter(counter)
        script.append(frames)
    return script


def _state(emu, sent: list[Frame]) -> dict:
    """What one cycle leaves behind, timings aside."""
    row = emu.logger.rows[-1]
    keep = [i for i, name in enumerate(emu.columns) if name not in TIMINGS]
    reader, writer = emu.commands.reader, emu.sensors_out.writer
    return {
        "row": row[keep].tobytes(), "events": list(emu.logger.events),
        "sent": [(f.arbitration_id, f.data) for f in sent], "commands": emu.commands.counters(),
        "values": [v.tobytes() for v in reader.values.values()], "tau_cmd": emu.commands.tau.tobytes(),
        "writer": (writer.saturated, writer.refused),
        "watchdog": (emu.watchdog.tripped, emu.watchdog.trips, emu.watchdog.last_valid_s, emu.watchdog.events),
        "age": (emu.age._answered, emu.age.count, emu.age.missed),
        "flags": (emu.supervisor.rejected_now, emu.supervisor.limited_cycles, emu.drives.torque_limited, emu.held_fresh, emu.cycle),
        "state": (emu.plant.pos.tobytes(), emu.plant.vel.tobytes(), emu.plant.t, emu.sensors.step_count,
                  emu.drives.outputs.tobytes(), emu.supervisor.tau.tobytes()),
    }


def _recording(call, outcomes: list):
    """`call` (the compiled cycle), keeping each outcome in `outcomes`."""
    def recorded(*args):
        result = call(*args)
        outcomes.append(result[0])
        return result
    return recorded


def _run_pair(model, bus, safe_state, scenario, broken=None, elbow="current"):
    """The emulator and its model through the script; returns (first difference or None, the
    outcomes of the compiled calls, cycles the call ran with the watchdog tripped)."""
    fast, fast_fw = _rig(model, bus, safe_state, scenario, elbow)
    ref, ref_fw = _rig(model, bus, safe_state, scenario, elbow, cls=StageEmulator)
    if broken is not None:
        broken(fast)
    outcomes, tripped_done = [], 0
    fast.one_call._call = _recording(fast.one_call._call, outcomes)
    hold = np.round(fast.hold_tau / 0.02) * 0.02
    for c, frames in enumerate(_script(bus, hold, elbow)):
        states = []
        for emu, fw in ((fast, fast_fw), (ref, ref_fw)):
            emu.link.inner.inbox.extend(frames)
            was_tripped, before = emu.watchdog.tripped, len(outcomes)
            emu.step_once()
            sent = list(fw.inbox)
            fw.inbox.clear()
            states.append(_state(emu, sent))
            if emu is fast and was_tripped and outcomes[before:] in ([one_call.DONE], [one_call.SENSED]):
                tripped_done += 1
        for key in states[0]:
            if states[0][key] != states[1][key]:
                return f"cycle {c}: {key} differs", outcomes, tripped_done
    return None, outcomes, tripped_done


CASES = {
    "zero_torque": ("full_fd", "zero_torque", None),
    "hold, voltage elbow": ("full_fd", "hold", None),
    "hold, float commands": ("float", "hold", None),
    "brake": ("full_fd", "brake", None),
    "signal and plant faults": ("full_fd", "hold", SIGNAL_AND_PLANT_FAULTS),
    "brake and payload faults": ("serial_frame", "zero_torque", PLANT_FAULTS[:PLANT_FAULTS.index(
        '[[fault]]\nname = "gyro_noise"')]),
}


@pytest.mark.parametrize("case", CASES)
def test_the_cycle_equals_its_model(model, tmp_path_factory, case):
    name, safe_state, scenario = CASES[case]
    bus = _float_map(tmp_path_factory) if name == "float" else BusMap.load(ROOT / "configs" / "bus" / f"{name}.toml")
    difference, outcomes, tripped_done = _run_pair(model, bus, safe_state, scenario,
                                                   elbow="voltage" if "voltage" in case else "current")
    assert difference is None, difference
    finished = outcomes.count(one_call.DONE) + outcomes.count(one_call.SENSED)
    # every cycle finishes in the call; two trips and two clears return to Python and come back
    assert finished == CYCLES and outcomes.count(one_call.SUPERVISE) == 4, outcomes
    assert tripped_done > 20, tripped_done          # the safe state's torques (and closed brakes) in the call
    if scenario is not None and "dropout" in scenario:
        assert outcomes.count(one_call.SENSED) >= 50, outcomes      # the encoder dropout's 50 ms


def test_the_script_covers_every_rejection(model, tmp_path_factory):
    bus = _float_map(tmp_path_factory)
    emu, _ = _rig(model, bus, "hold", None)
    hold = np.round(emu.hold_tau / 0.02) * 0.02
    for frames in _script(bus, hold):
        emu.link.inner.inbox.extend(frames)
        emu.step_once()
    counts = emu.commands.counters()
    assert all(n > 0 for n in counts["rejected"].values()), counts
    assert counts["lost"] > 0 and counts["resyncs"] > 0 and counts["ignored"] > 0, counts
    assert emu.watchdog.trips == 2 and emu.supervisor.limited_cycles > 0


def test_a_status_without_the_running_bit_is_caught(model, monkeypatch):
    monkeypatch.setattr(one_call, "_RUNNING", 0)        # the call's status only; the stage path keeps its own
    difference, _, _ = _run_pair(model, BusMap.load(ROOT / "configs" / "bus" / "full_fd.toml"), "hold", None)
    assert difference == "cycle 0: row differs", difference


def test_a_wrong_hold_gain_is_caught(model):
    """The call's hold state with kp doubled: the same until the watchdog's first trip, then not."""
    def doubled(emu):
        emu.one_call.safe_state.sp[SP_KP] *= 2.0
    difference, _, _ = _run_pair(model, BusMap.load(ROOT / "configs" / "bus" / "full_fd.toml"), "hold", None,
                                 doubled)
    assert difference is not None and min(SILENT) < int(difference.split()[1].rstrip(":")) < 90, difference


def test_a_step_failing_in_the_call_recovers_as_its_model(model, tmp_path):
    """A command of 1e30 N m to an ideal drive diverges the plant inside the call (STEP_FAILED): the
    safe state latched, the step computed again, the log and the statuses sent as the model's."""
    from tests.test_divergence import FLOAT_MAP, NAMES, Firmware
    from hil.logs.runlog import read_run
    runs, outcomes = [], []
    for fast in (True, False):
        bus = BusMap.from_string(FLOAT_MAP, "float map")
        plant = Plant(model)
        fw = Firmware(bus, plant.equilibrium_eta(), 50, 1e30)
        log = tmp_path / f"{fast}.msgpack"
        emu = (Emulator if fast else StageEmulator)(
            plant, fw, CommandInput(bus, NAMES), SensorOutput(bus, NAMES),
            RuntimeOptions(mode="afap", realtime=False, duration_s=0.08, log_path=str(log)),
            drives=DriveBank(plant, [None] * 3))
        if fast:
            emu.one_call._call = _recording(emu.one_call._call, outcomes)
        summary = emu.run()
        header, rows = read_run(log)
        keep = [i for i, name in enumerate(header["columns"]) if name not in TIMINGS]
        runs.append((rows[:, keep].tobytes(), header["events"], fw.status, summary["diverged"]))
    assert one_call.STEP_FAILED in outcomes and runs[0][3] is not None
    assert runs[0] == runs[1]
