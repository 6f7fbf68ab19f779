"""What the XCP slave (`hil run --xcp`, hil.runtime.xcp_server) costs the loop thread, per cycle.

ELLA with its sensor and drive models behind an in-memory link, a holding firmware answering each
cycle (tools.loop_rig), under four settings, each an emulator of its own, stepped in turn in
blocks of 100 cycles so that all see the same machine load:

* ``none``: no XCP slave; ``none (A/A)``: the same again, a control (its difference is the noise);
* ``idle``: the slave bound and serving, no master connected (the goal: under 2 us per cycle);
* ``daq20``: a master connected with one DAQ list of 20 channels running: each cycle the row goes
  to the slave's memory and one packet (20 float64 and a timestamp) to the master's socket, which the
  benchmark drains after the timed cycle and counts (a draining thread, sharing the interpreter lock
  with the stepping, fell behind on a busy machine and its socket dropped packets).

Each cycle's ``step_once`` is timed in wall time and in the loop thread's CPU time; the report gives
p50 and mean per setting and their differences to ``none``. Timing belongs here, not in tests.

    python -m tools.bench_xcp [--cycles 20000] [--block 100] [--json]
    hil bench xcp ...         (also hil bench loop --xcp [--cycles N])
"""
from __future__ import annotations

import argparse
import gc
import json
import socket
import struct
import time

import numpy as np

from firmware_bridge.wire.messages import BusMap
from hil.model.config import load_model
from hil.runtime.xcp_server import XcpBridge
from tools.loop_rig import ARM, ROOT, SERIAL_BUS, WARMUP_CYCLES, holding_emulator

SETTINGS = ("none", "none (A/A)", "idle", "daq20")
DAQ_CHANNELS = 20
GOAL_US = 2.0               # what an idle slave may add to a cycle


class _DaqMaster:
    """A master of ``bridge``'s slave with DAQ of its first columns running: the commands go to the slave
    directly, its packets to a socket drained (and counted) between the timed cycles."""

    def __init__(self, bridge: XcpBridge, channels: int):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        bridge.server.master = self.sock.getsockname()
        address = bridge.memory.measurement_address
        setup = [b"\xff\x00", b"\xd6", b"\xd5\x00\x01\x00", b"\xd4\x00\x00\x00\x01",
                 b"\xd3\x00\x00\x00\x00" + bytes((channels,)), b"\xe2\x00\x00\x00\x00\x00"]
        setup += [b"\xe1\xff\x08\x00" + struct.pack("<I", address(k)) for k in range(channels)]
        setup += [b"\xe0\x10\x00\x00\x00\x00\x01\x00", b"\xde\x02\x00\x00", b"\xdd\x01"]
        for packet in setup:
            if bridge.slave.handle(packet)[0] != 0xFF:
                raise RuntimeError(f"the slave refused {packet.hex()}: {bridge.slave.last_error}")
        self.received = 0
        self.sock.setblocking(False)

    def drain(self) -> None:
        """Count the packets waiting on the socket."""
        while True:
            try:
                self.sock.recv(2048)
            except BlockingIOError:
                return
            self.received += 1

    def close(self) -> None:
        self.sock.close()


def measure(cycles: int, block: int) -> dict:
    model, bus = load_model(ROOT / ARM), BusMap.load(ROOT / SERIAL_BUS)
    rigs = {name: holding_emulator(model, bus, "models", WARMUP_CYCLES + cycles) for name in SETTINGS}
    for name in ("idle", "daq20"):
        emu = rigs[name][0]
        emu.xcp = XcpBridge(emu, port=0)
        emu.xcp.start()
    master = _DaqMaster(rigs["daq20"][0].xcp, DAQ_CHANNELS)
    wall = {name: np.zeros(cycles, np.int64) for name in SETTINGS}
    cpu = {name: np.zeros(cycles, np.int64) for name in SETTINGS}
    gc.collect()
    for start in range(-WARMUP_CYCLES, cycles, block):
        for name, (emu, firmware) in rigs.items():
            for k in range(start, min(start + block, cycles)):
                firmware.answer()
                w0, c0 = time.perf_counter_ns(), time.thread_time_ns()
                emu.step_once()
                if k >= 0:
                    wall[name][k], cpu[name][k] = time.perf_counter_ns() - w0, time.thread_time_ns() - c0
                if name == "daq20":
                    master.drain()
    master.drain()
    xcp = rigs["daq20"][0].xcp.summary()
    for emu, _ in rigs.values():
        if emu.xcp is not None:
            emu.xcp.close()
    master.close()
    stats = {name: {clock: {"p50": float(np.percentile(series[name], 50)) * 1e-3,
                            "mean": float(series[name].mean()) * 1e-3} for clock, series in (("wall", wall), ("cpu", cpu))}
             for name in SETTINGS}
    difference = {name: {clock: {q: stats[name][clock][q] - stats["none"][clock][q] for q in ("p50", "mean")}
                         for clock in ("wall", "cpu")} for name in SETTINGS if name != "none"}
    return {"cycles": cycles, "block": block, "stats_us": stats, "difference_us": difference,
            "daq_packets_sent": xcp["daq_packets_sent"], "daq_packets_lost": xcp["daq_packets_lost"],
            "daq_packets_received": master.received}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hil bench xcp", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cycles", type=int, default=20000, help="timed cycles per setting (default 20000)")
    p.add_argument("--block", type=int, default=100, help="cycles per setting in turn (default 100)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if not 100 <= args.cycles <= 10_000_000 or not 1 <= args.block <= args.cycles:
        p.error("expected 100 <= --cycles <= 1e7 and 1 <= --block <= --cycles")
    report = measure(args.cycles, args.block)
    print(json.dumps(report) if args.json else "\n".join(report_lines(report)))
    return 0


def report_lines(report: dict) -> list[str]:
    """The report as text: each setting, its difference to none, the idle slave against the goal."""
    lines = [f"step_once per cycle, us ({report['cycles']} cycles per setting, blocks of {report['block']}); "
             f"daq20: {report['daq_packets_sent']} packets sent, {report['daq_packets_received']} received, "
             f"{report['daq_packets_lost']} lost"]
    for name in SETTINGS:
        s, d = report["stats_us"][name], report["difference_us"].get(name)
        line = f"  {name:12s} wall p50 {s['wall']['p50']:7.2f} mean {s['wall']['mean']:7.2f} | cpu p50 " \
               f"{s['cpu']['p50']:7.2f} mean {s['cpu']['mean']:7.2f}"
        if d is not None:
            line += f" | - none: wall p50 {d['wall']['p50']:+6.2f} mean {d['wall']['mean']:+6.2f}, cpu p50 " \
                    f"{d['cpu']['p50']:+6.2f} mean {d['cpu']['mean']:+6.2f}"
        lines.append(line)
    idle = report["difference_us"]["idle"]["cpu"]["mean"]
    lines.append(f"  the idle slave adds {idle:+.2f} us of loop-thread CPU per cycle: "
                 + ("within" if idle < GOAL_US else "OVER") + f" the goal of {GOAL_US:g} us")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
