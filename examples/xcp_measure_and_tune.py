"""Measure and tune a running emulator over XCP with pyxcp (docs/xcp.md).

    hil run ella --bus serial_frame --link pty --spawn-firmware --xcp 5555 --duration 30 &
    hil xcp a2l ella --out ella.a2l
    python examples/xcp_measure_and_tune.py ella.a2l [--port 5555]

Reads the addresses from the A2L file, records the elbow's angle and torque and the tip's height by
DAQ for 2 s, doubles the elbow's friction (calibration), records 2 s more, and prints what changed.
"""
from __future__ import annotations

import argparse
import logging
import re
import struct
import time

import numpy as np
from pyxcp.config import create_application_from_config
from pyxcp.daq_stim import DaqList, DaqOnlinePolicy
from pyxcp.master import Master

CHANNELS = ("cycle", "q_elbow", "tau_elbow", "tip_z")


class Recorder(DaqOnlinePolicy):
    def __init__(self, daq_lists):
        super().__init__(daq_lists, logger=logging.getLogger("xcp_example"))
        self.pid_off = False
        self.rows: list[list[float]] = []

    def on_daq_list(self, daq_list, timestamp0, timestamp1, payload):
        self.rows.append(list(payload))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a2l")
    p.add_argument("--port", type=int, default=5555)
    args = p.parse_args()
    text = open(args.a2l, encoding="ascii").read()
    measurements = dict(re.findall(r"/begin MEASUREMENT (\S+) .*? ECU_ADDRESS (0x[0-9A-F]+)", text))
    parameters = dict(re.findall(r"/begin CHARACTERISTIC (\S+) .*? VALUE (0x[0-9A-F]+)", text))
    daq = DaqList(name="elbow", event_num=0, stim=False, enable_timestamps=True, priority=0, prescaler=1,
                  measurements=[(c, int(measurements[c], 16), 0, "F64") for c in CHANNELS])
    recorder = Recorder([daq])
    app = create_application_from_config({"Transport": {"Eth": {"host": "127.0.0.1", "port": args.port,
                                                                 "protocol": "UDP"}}}, log_level=logging.ERROR)
    with Master("eth", config=app, policy=recorder) as xm:
        xm.connect()
        print(f"connected to {xm.identifier(1)}: MAX_DTO {xm.slaveProperties.maxDto}")
        recorder.setup()
        order = [name for name, _ in daq.headers]
        recorder.start()
        time.sleep(2.0)
        split = len(recorder.rows)
        friction = int(parameters["friction_scale_elbow"], 16)
        print(f"friction_scale_elbow was {struct.unpack('<d', xm.shortUpload(8, friction))[0]}")
        xm.shortDownload(friction, 0, struct.pack("<d", 2.0))
        print(f"friction_scale_elbow now {struct.unpack('<d', xm.shortUpload(8, friction))[0]}")
        time.sleep(2.0)
        recorder.stop()
        xm.disconnect()
    rows = np.array(recorder.rows)
    cycles = rows[:, order.index("cycle")]
    print(f"{len(rows)} samples, cycles {cycles[0]:.0f} .. {cycles[-1]:.0f}, "
          f"{int(np.sum(np.diff(cycles) != 1))} gaps")
    for name in ("tau_elbow", "q_elbow", "tip_z"):
        k = order.index(name)
        before, after = rows[:split, k], rows[split:, k]
        print(f"  {name:10s} mean before {before.mean():+.5f}, after {after.mean():+.5f}")


if __name__ == "__main__":
    main()
