"""The emulator as an XCP slave with pyxcp as the master (hil.runtime.xcp_server, `hil run --xcp`,
`hil xcp a2l`): calibrations change the plant as a plant built with the new value predicts, refusals come
back as XCP errors and are counted, DAQ over a real-time run delivers every cycle's row exactly once,
and the A2L file passes a2ltool's consistency check and describes the memory the slave serves."""
from __future__ import annotations

import copy
import json
import logging
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyxcp")
from pyxcp.config import create_application_from_config  # noqa: E402
from pyxcp.daq_stim import DaqList, DaqOnlinePolicy  # noqa: E402
from pyxcp.master import Master  # noqa: E402
from pyxcp.master.errorhandler import SystemExit as XcpRefusal  # noqa: E402

from firmware_bridge.links.can import CanLink  # noqa: E402
from firmware_bridge.wire.messages import BusMap  # noqa: E402
from firmware_bridge.xcp.a2l import Transport  # noqa: E402
from firmware_bridge.xcp.memory import MEASUREMENT_BASE  # noqa: E402
from hil.dynamics.plant import Plant  # noqa: E402
from hil.faults.scenario import load_scenario  # noqa: E402
from hil.logs.runlog import read_run  # noqa: E402
from hil.model.config import load_model  # noqa: E402
from hil.runtime.xcp_server import XcpBridge, a2l_file  # noqa: E402
from emulators import ARM, FakeFirmware, make_emulator  # noqa: E402
from links import AnsweringLink  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BUS = ROOT / "configs" / "bus" / "serial_frame.toml"


def master(port: int, policy=None) -> Master:
    app = create_application_from_config({"Transport": {"Eth": {"host": "127.0.0.1", "port": port, "protocol": "UDP"}},
                                          "General": {"connect_retries": 0}}, log_level=logging.ERROR)
    app.transport.timeout = 5.0
    return Master("eth", config=app, policy=policy)


class Samples(DaqOnlinePolicy):
    """pyxcp's DAQ decoder, every sample kept."""

    def __init__(self, daq_lists):
        super().__init__(daq_lists, logger=logging.getLogger("test.xcp"))
        self.pid_off = False
        self.rows: list[list[float]] = []
        self.lock = threading.Lock()

    def on_daq_list(self, daq_list, timestamp0, timestamp1, payload):
        with self.lock:
            self.rows.append(list(payload))


def rk4_arm():
    model = load_model(ARM)
    model.integrator.method, model.integrator.substeps = "rk4", 8     # one plan for every payload
    return model


def held_emulator(model):
    """ELLA behind a firmware that answers the holding torque, ideal drives (the applied torque is the command)."""
    link = AnsweringLink()
    emu = make_emulator(model, BusMap.load(BUS), link, ideal_drives=True)
    fw = FakeFirmware(BusMap.load(BUS), None, emu)
    link.answer = lambda frame: fw.answer(frame, lambda t: fw.hold)
    return emu


def test_a_payload_calibration_moves_the_arm_as_a_plant_built_with_that_payload(tmp_path):
    model = rk4_arm()
    emu = held_emulator(model)
    emu.xcp = bridge = XcpBridge(emu, port=0)
    bridge.start()
    names = [k.spec.name for k in bridge.knobs]
    payload = names.index("mass_kg_payload")
    try:
        with master(bridge.server.address[1]) as xm:
            xm.connect()
            for _ in range(50):
                emu.step_once()
            pos, vel, t, tau = emu.plant.pos.copy(), emu.plant.vel.copy(), emu.plant.t, emu.drives.tau.copy()
            xm.shortDownload(bridge.memory.calibration_address(payload), 0, struct.pack("<d", 2.0))
            for _ in range(100):
                emu.step_once()
            assert struct.unpack("<d", xm.shortUpload(8, MEASUREMENT_BASE))[0] == 150       # the cycle column
            assert xm.getDaqClock().timestamp == round(emu.plant.t * 1e6)                # the simulated clock, us
            event = xm.getDaqInfo(include_event_lists=True)["channels"][0]
            assert (event["name"], event["cycle"], event["unit"]) == ("cycle", 100, "EVENT_CHANNEL_TIME_UNIT_10US")
            xm.disconnect()
    finally:
        bridge.close()
    heavier = copy.deepcopy(model)
    attachment = next(a for b in heavier.bodies for a in b.attachments if a.name == "payload")
    attachment.inertia_kg_m2 = np.asarray(attachment.inertia_kg_m2) * (2.0 / attachment.mass_kg)
    attachment.mass_kg = 2.0
    predicted = Plant(heavier)
    predicted.pos[:], predicted.vel[:], predicted.t = pos, vel, t
    for _ in range(100):
        predicted.step(tau)
    np.testing.assert_allclose(emu.plant.pos, predicted.pos, rtol=0, atol=1e-12)
    assert np.abs(emu.plant.pos[:3] - pos[:3]).max() > 1e-5          # it moved: the torque holds 2.1 kg, not 2.0
    assert bridge.applied == 1 and emu.faults.active() == []        # a calibration, not a fault: no FAULT_ACTIVE


def test_refusals_come_back_as_xcp_errors_and_are_counted():
    emu = held_emulator(load_model(ARM))
    emu.xcp = bridge = XcpBridge(emu, port=0)
    bridge.start()
    names = [k.spec.name for k in bridge.knobs]
    try:
        with master(bridge.server.address[1]) as xm:
            xm.connect()
            refusals = {
                "ERR_OUT_OF_RANGE": lambda: xm.shortDownload(bridge.memory.calibration_address(
                    names.index("mass_kg_payload")), 0, struct.pack("<d", 80.0)),
                "ERR_WRITE_PROTECTED": lambda: xm.shortDownload(MEASUREMENT_BASE, 0, struct.pack("<d", 1.0)),
                "ERR_ACCESS_DENIED": lambda: xm.shortUpload(8, 0x4000),
            }
            for name, request in refusals.items():
                with pytest.raises(XcpRefusal) as refused:
                    request()
                assert str(refused.value.error_code) == name
            xm.disconnect()
    finally:
        bridge.close()
    summary = bridge.summary()
    assert summary["errors"] == {name: 1 for name in refusals} and summary["calibrations_applied"] == 0
    assert emu.xcp.pending == type(emu.xcp.pending)()


def run_with_xcp(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """`hil run` with the reference firmware in real time, serving XCP, until SIGINT."""
    log = tmp_path / "run.msgpack"
    cmd = [sys.executable, "-m", "hil", "run", "ella", "--bus", "serial_frame", "--link", "pty", "--spawn-firmware",
           "--move-time", "1.0", "--xcp", "0", "--log", str(log), "--json", "--no-realtime"]
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    line = run.stdout.readline()
    assert line.startswith("ready "), (line, run.stderr.read() if run.poll() is not None else "")
    return run, json.loads(line[6:])["xcp"]


def test_daq_of_20_channels_in_real_time_delivers_every_cycle_once_and_a_calibration_is_logged(tmp_path):
    text = a2l_text(tmp_path)
    run, address = run_with_xcp(tmp_path)
    columns = ["cycle", "t", "q_base_yaw", "q_shoulder_pitch", "q_elbow", "qd_base_yaw", "qd_shoulder_pitch",
               "qd_elbow", "tau_base_yaw", "tau_shoulder_pitch", "tau_elbow", "tip_x", "tip_y", "tip_z",
               "status", "imu_ax", "imu_ay", "imu_az", "imu_gx", "imu_gy"]
    order = None
    try:
        addresses = dict(re.findall(r"/begin MEASUREMENT (\S+) .*? ECU_ADDRESS (0x[0-9A-F]+)", text))
        knobs = re.findall(r"/begin CHARACTERISTIC (\S+) .*? VALUE (0x[0-9A-F]+)", text)
        daq = DaqList(name="arm", event_num=0, stim=False, enable_timestamps=True, priority=0, prescaler=1,
                      measurements=[(c, int(addresses[c], 16), 0, "F64") for c in columns])
        samples = Samples([daq])
        with master(int(address.rsplit(":", 1)[1]), samples) as xm:
            xm.connect()
            assert xm.identifier(1).endswith(".a2l")                # GET_ID: the A2L file's name
            samples.setup()
            order = [name for name, _ in daq.headers]
            samples.start()
            wait_for(samples, 5000)                                  # 5 s of cycles (the loop starts with the firmware)
            friction = int(dict(knobs)["friction_scale_elbow"], 16)
            xm.shortDownload(friction, 0, struct.pack("<d", 2.0))
            wait_for(samples, 5500)
            samples.stop()
            xm.disconnect()
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["xcp"]["daq_packets_lost"] == 0 and summary["xcp"]["calibrations_applied"] == 1, err[-2000:]
    got = np.array(samples.rows)
    assert got.shape[0] >= 5500 and got.shape[1] == 20
    cycle = got[:, order.index("cycle")]
    np.testing.assert_array_equal(np.diff(cycle), 1)               # none lost, none twice
    header, log = read_run(tmp_path / "run.msgpack")
    index = [header["columns"].index(c) for c in order]
    rows = log[np.searchsorted(log[:, 0], cycle)]
    np.testing.assert_array_equal(got, rows[:, index])             # the log's very rows
    calibrations = [e for e in header["events"] if e.get("event") == "calibrate"]
    assert [(e["parameter"], e["value"], e["previous"]) for e in calibrations] == [("friction_scale_elbow", 2.0, 1.0)]


def wait_for(samples: Samples, n: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(samples.rows) < n and time.monotonic() < deadline:
        time.sleep(0.05)


def a2l_text(tmp_path: Path) -> str:
    """The A2L file of the shipped preset, as a user writes it (`hil xcp a2l`)."""
    path = tmp_path / "ella.a2l"
    done = subprocess.run([sys.executable, "-m", "hil", "xcp", "a2l", "ella", "--out", str(path)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return path.read_text()


def test_the_a2l_file_passes_a2ltool_and_names_every_column_at_the_slaves_address(tmp_path):
    a2ltool = Path(sys.executable).with_name("a2ltool")
    if not a2ltool.is_file():
        pytest.skip("a2ltool is not installed (pip install 'ella-hil[xcp]')")
    emu = held_emulator(load_model(ARM))
    text = a2l_file(emu, Transport())
    path = tmp_path / "ella.a2l"
    path.write_text(text)
    check = subprocess.run([str(a2ltool), "--check", str(path)], capture_output=True, text=True)
    assert check.returncode == 0 and "No problems found" in check.stdout + check.stderr, check.stdout + check.stderr
    measured = re.findall(r"/begin MEASUREMENT (\S+) \"[^\"]*\" FLOAT64_IEEE (\S+) .*? ECU_ADDRESS (0x[0-9A-F]+)", text)
    assert [m[0] for m in measured] == emu.columns
    assert [int(m[2], 16) for m in measured] == [MEASUREMENT_BASE + 8 * k for k in range(len(emu.columns))]
    assert dict((m[0], m[1]) for m in measured)["q_elbow"] == "CM_rad"
    broken = tmp_path / "broken.a2l"             # a measurement whose conversion does not exist
    broken.write_text(text.replace("FLOAT64_IEEE CM_rad", "FLOAT64_IEEE CM_radian", 1))
    check = subprocess.run([str(a2ltool), "--check", str(broken)], capture_output=True, text=True)
    assert "CM_radian" in check.stdout + check.stderr


def can_master(channel: str, policy=None) -> Master:
    app = create_application_from_config({"Transport": {"CAN": {"interface": "virtual", "channel": channel,
                                                                "can_id_master": 0x7F0, "can_id_slave": 0x7F1,
                                                                "fd": True}},
                                          "General": {"connect_retries": 0}}, log_level=logging.ERROR)
    app.transport.timeout = 5.0
    return Master("can", config=app, policy=policy)


def test_xcp_on_the_emulators_can_fd_link_measures_every_cycle_and_calibrates(tmp_path):
    """The slave on the run's own CAN FD link (python-can's virtual bus), beside the firmware's frames:
    DAQ of 10 channels (two frames a cycle) equal to the run log's rows, a calibration logged, a refusal
    counted; the firmware's decoder never sees an XCP frame."""
    channel = f"xcp-{uuid.uuid4().hex[:8]}"
    bus = BusMap.load(ROOT / "configs" / "bus" / "compact_fd.toml")
    emu = make_emulator(load_model(ARM), bus, CanLink("virtual", channel, fd=True), mode="realtime",
                        duration_s=4.0, log_path=str(tmp_path / "run.msgpack"), watchdog_s=60.0)
    emu.xcp = bridge = XcpBridge(emu, can=(0x7F0, 0x7F1, True))
    bridge.start()
    columns = ["cycle", "t", "q_base_yaw", "q_shoulder_pitch", "q_elbow", "tip_x", "tip_y", "tip_z", "imu_gy", "status"]
    daq = DaqList(name="arm", event_num=0, stim=False, enable_timestamps=True, priority=0, prescaler=1,
                  measurements=[(c, bridge.memory.measurement_address(emu.columns.index(c)), 0, "F64")
                                for c in columns])
    samples = Samples([daq])
    result = {}
    loop = threading.Thread(target=lambda: result.update(emu.run()))
    names = [k.spec.name for k in bridge.knobs]
    try:
        loop.start()
        with can_master(channel, samples) as xm:
            xm.connect()
            assert xm.identifier(1).endswith(".a2l")
            samples.setup()
            order = [name for name, _ in daq.headers]
            samples.start()
            wait_for(samples, 1000)
            damping = bridge.memory.calibration_address(names.index("damping_scale_link2"))
            xm.shortDownload(damping, 0, struct.pack("<d", 2.0))
            with pytest.raises(XcpRefusal) as refused:
                xm.shortDownload(damping, 0, struct.pack("<d", 100.0))
            assert str(refused.value.error_code) == "ERR_OUT_OF_RANGE"
            wait_for(samples, 1500)
            samples.stop()
            xm.disconnect()
    finally:
        loop.join(timeout=60)
        bridge.close()
    assert result["xcp"]["errors"] == {"ERR_OUT_OF_RANGE": 1} and result["xcp"]["calibrations_applied"] == 1
    commands = result["commands"]            # no XCP frame reached the firmware's decoder
    assert commands["ignored"] == 0 and not any(commands["rejected"].values()), commands
    got = np.array(samples.rows)
    cycle = got[:, order.index("cycle")]
    assert len(cycle) >= 1500
    np.testing.assert_array_equal(np.diff(cycle), 1)
    header, log = read_run(tmp_path / "run.msgpack")
    rows = log[np.searchsorted(log[:, 0], cycle)]
    np.testing.assert_array_equal(got, rows[:, [header["columns"].index(c) for c in order]])
    assert [e["parameter"] for e in header["events"] if e.get("event") == "calibrate"] == ["damping_scale_link2"]


@pytest.mark.parametrize("argv, message", [
    (["--bus", "serial_frame", "--xcp-can", "0x7F0:0x7F1"], "is a serial map; XCP on CAN needs a CAN map"),
    (["--bus", "compact_fd", "--link", "canfd:virtual:x", "--xcp-can", "0x100:0x7F1"], "the map's message cmd_torque"),
    (["--bus", "canopen_cst", "--link", "can:virtual:x", "--xcp-can", "0x601:0x7F1"], "a CANopen id"),
])
def test_xcp_on_can_is_refused_before_the_run_where_it_cannot_work(argv, message, capsys):
    from hil.cli.main import main
    assert main(["run", "ella", *argv, "--duration", "1"]) != 0
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("option, value, message", [
    ("--xcp-can", "0x7F0:0x7F0", "two different CAN ids"), ("--xcp-can", "0x7F0", "MASTER_ID:SLAVE_ID"),
    ("--xcp", "localhost:5555", "an IPv4 address"), ("--xcp", "70000", "port 0 .. 65535"),
])
def test_xcp_option_values_are_checked(option, value, message, capsys):
    from hil.cli.main import main
    with pytest.raises(SystemExit):
        main(["run", "ella", "--bus", "compact_fd", option, value])
    assert message in capsys.readouterr().err


def test_a_fault_switch_clears_the_scenarios_fault_and_strikes_it_again(tmp_path):
    scenario = tmp_path / "bias.toml"
    scenario.write_text('[[fault]]\nname = "accel_x_bias"\nkind = "offset"\ntarget = "imu_ax"\noffset_m_s2 = 0.4\n')
    emu = make_emulator(load_model(ARM), BusMap.load(BUS), AnsweringLink(), ideal_drives=True,
                        scenario=load_scenario(scenario))
    emu.xcp = bridge = XcpBridge(emu, port=0)
    bridge.start()
    switch = bridge.memory.calibration_address([k.spec.name for k in bridge.knobs].index("fault_accel_x_bias"))
    ax = emu.sensors.channel_names.index("imu_ax")

    def bias() -> float:
        emu.step_once()
        return float(emu.sensors.measured[ax] - emu.sensors.truth[ax])
    try:
        with master(bridge.server.address[1]) as xm:
            xm.connect()
            assert bias() == pytest.approx(0.4, abs=0.05)            # the scenario's fault, struck at once
            xm.shortDownload(switch, 0, b"\x00")
            assert bias() == pytest.approx(0.0, abs=0.05) and emu.faults.active() == []
            assert xm.shortUpload(1, switch) == b"\x00"
            xm.shortDownload(switch, 0, b"\x01")
            assert bias() == pytest.approx(0.4, abs=0.05)
            with pytest.raises(XcpRefusal):
                xm.shortDownload(switch, 0, b"\x02")                  # a switch is 0 or 1
            xm.disconnect()
    finally:
        bridge.close()
    assert [e.action for e in emu.faults.events] == ["inject", "clear", "inject"]
