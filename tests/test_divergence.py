"""A plant that blows up: the offending command is in the log, the message names the likely cause
(the command's magnitude against the drives, or the integration), the safe state is latched and the
run goes on from the last good state."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.links.base import Frame
from firmware_bridge.wire.messages import BusMap, StatusFlag
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.devices.drives import DriveBank
from hil.dynamics.plant import Plant
from hil.logs.runlog import read_run
from hil.model.config import load_model
from hil.runtime.loop import Emulator, RuntimeOptions

from bus_maps import float_map
from links import MemoryLink

ROOT = Path(__file__).resolve().parent.parent
NAMES = ["base_yaw", "shoulder_pitch", "elbow"]
# float32 torque commands with an absurd range: any magnitude up to 1e36 N m gets through the map
FLOAT_MAP = float_map(crc="crc16", crc_byte=14, limits=(1e36, 1e36, 1e36))


class Firmware(MemoryLink):
    """Answers each sensor frame with the hold torque, and at cue `at` with `huge` on the elbow."""

    def __init__(self, bus: BusMap, hold: np.ndarray, at: int, huge: float):
        super().__init__("fw")
        self.cmd, self.hold, self.at, self.huge, self.cues = bus.codec("cmd_torque"), hold, at, huge, 0
        self.status: list[int] = []
        self.sensors = bus.codec("sensors")

    def send(self, frame: Frame) -> bool:
        self.status.append(int(self.sensors.decode(frame)[self.sensors.index("status")]))
        tau = self.hold.copy()
        if self.cues == self.at:
            tau[2] = self.huge
        self.inbox.append(self.cmd.encode([*tau, 0], counter=self.cues))
        self.cues += 1
        return True


def run(tmp_path, huge: float, safe_state: str = "zero_torque") -> tuple[dict, dict, np.ndarray, Firmware]:
    bus = BusMap.from_string(FLOAT_MAP, "float map")
    plant = Plant(load_model(ROOT / "configs" / "ella.toml"))
    hold = plant.equilibrium_eta()
    fw = Firmware(bus, hold, 50, huge)
    log = tmp_path / "run.msgpack"
    opts = RuntimeOptions(mode="afap", realtime=False, duration_s=0.2, log_path=str(log), safe_state=safe_state)
    emu = Emulator(plant, fw, CommandInput(bus, NAMES), SensorOutput(bus, NAMES), opts,
                   drives=DriveBank(plant, [None] * 3))
    summary = emu.run()
    header, rows = read_run(log)
    return summary, header, rows, fw


def test_a_huge_command_is_logged_named_as_the_cause_and_the_safe_state_latches(tmp_path):
    summary, header, rows, fw = run(tmp_path, 1e30)
    cols = header["columns"]
    d = summary["diverged"]
    assert d is not None and d["cycle"] == 50 and "the command diverged the plant: tau_cmd_elbow = 1e+30 N m" in d["detail"]
    assert "its drive has no limit" in d["detail"]
    assert [e for e in header["events"] if e["event"] == "diverged"] == [d]
    # the offending command is in the log, in the row of the cycle it came in; the plant stayed finite
    assert len(rows) == summary["cycles"] == 200
    row = rows[rows[:, cols.index("cycle")] == 51][0]
    assert row[cols.index("tau_cmd_elbow")] == pytest.approx(1e30, rel=1e-6)
    state = [i for i, c in enumerate(cols) if c.startswith(("q_", "qd_", "eta_", "tip_"))]
    assert np.all(np.isfinite(rows[:, state]))
    # the safe state from then on: zero torque applied, FAULT_ACTIVE in every status sent
    tau = rows[:, [cols.index(f"tau_{j}") for j in NAMES]]
    assert np.all(tau[50:] == 0.0) and np.all(tau[:50, 1] < -90.0)      # the pitch held against gravity before
    assert all(s & StatusFlag.FAULT_ACTIVE for s in fw.status[52:]) and not fw.status[10] & StatusFlag.FAULT_ACTIVE


def test_a_moderate_command_is_not_blamed(tmp_path):
    summary, header, rows, fw = run(tmp_path, 300.0)
    assert summary["diverged"] is None


def test_the_cause_is_the_integration_when_the_torques_are_moderate():
    from hil.runtime.divergence import DivergenceGuard
    plant = Plant(load_model(ROOT / "configs" / "ella.toml"))
    guard = DivergenceGuard(plant, DriveBank(plant, [None] * 3))
    text = guard.cause(np.array([10.0, -80.0, 5.0]), np.array([10.0, -80.0, 5.0]), NAMES, "t = 1 s: non-finite state")
    assert "the integration" in text and "reduce dt, add substeps or use imex_midpoint" in text
    limited = DivergenceGuard(plant, DriveBank(plant))
    text = limited.cause(np.array([0.0, 0.0, 500.0]), np.array([0.0, 0.0, 90.0]), NAMES, "x")
    assert "tau_cmd_elbow = 500 N m (its drive's limit" in text
