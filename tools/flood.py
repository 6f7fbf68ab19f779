"""Malformed-frame flood through the front door: every rejection counted exactly, no good command lost.

The tool plays the firmware of a `hil run` in lockstep (started without `--firmware`; the tool opens
the link of the ready line). It answers each sensor cycle with `--per-cycle` malformed frames of
kinds drawn at random (seeded), then the good command with the next rolling counter and the plant's
holding torque. Kinds, and the emulator's counter each one must raise by exactly one:

  unknown_id   a frame with an id the bus map does not have        commands.rejected.unknown_id
  length       the next command one byte short                     commands.rejected.length
  range        the next command with a torque beyond its range     commands.rejected.range
  replay       the previous command again (stale counter)          commands.rejected.counter
  crc          the next command with one bit flipped (CAN maps     commands.rejected.crc
               with a CRC in the payload)
  link_crc     serial: a packet whose CRC-16 is wrong              link.rx_crc_errors
  cobs         serial: a packet that is no valid COBS              link.rx_framing_errors

The verdict compares the counts the emulator reports with the counts sent: every good command
accepted (`commands.accepted` = cycles), none lost, no resync, and each counter above equal to the
frames of its kind sent; a difference is a FAIL and the tool exits 1. Lockstep makes the accounting
exact on a busy machine (the emulator reads every frame of a cycle before it steps).

    python -m tools.flood [--links serial,classic,fd] [--cycles 3000] [--per-cycle 8] [--seed 1] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import select
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from firmware_bridge.links.base import Frame, Link
from firmware_bridge.links.connect import open_link
from firmware_bridge.wire.framing import cobs_encode, crc16_ccitt_false
from firmware_bridge.wire.messages import BusMap
from firmware_bridge.firmware.endpoint import SensorInput

ROOT = Path(__file__).resolve().parent.parent
ARM = "ella"
JOINTS = ["base_yaw", "shoulder_pitch", "elbow"]
# link name -> (bus map, hil run --link)
LINKS = {"serial": ("serial_frame", "pty"),
         "classic": ("compact_classic", "can:udp_loopback:flood_classic"),
         "fd": ("compact_fd", "canfd:udp_loopback:flood_fd")}
COMMAND_KINDS = ("unknown_id", "length", "range", "replay")
EXPECTED_COUNTER = {"unknown_id": ("commands", "unknown_id"), "length": ("commands", "length"),
                    "range": ("commands", "range"), "replay": ("commands", "counter"),
                    "crc": ("commands", "crc"), "link_crc": ("link", "rx_crc_errors"),
                    "cobs": ("link", "rx_framing_errors")}
FD_LENGTHS = (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64)
IDLE_S = 30.0             # no frame from the emulator for this long: it is gone


@dataclass
class Flooder:
    """The firmware side: per cycle, malformed frames of random kinds, then the good command."""
    bus: BusMap
    link: Link
    hold: np.ndarray
    per_cycle: int
    rng: random.Random
    sent: Counter = field(default_factory=Counter)
    counter: int = 0
    previous: Frame | None = None

    def __post_init__(self) -> None:
        self.cmd = self.bus.codec("cmd_torque")
        self.kinds = COMMAND_KINDS + (("link_crc", "cobs") if self.bus.kind == "serial" else ()) \
            + (("crc",) if self.cmd.crc_byte is not None else ())
        used = {c.arbitration_id for c in self.bus.messages("to_plant")} | \
               {c.arbitration_id for c in self.bus.messages("to_firmware")}
        self.foreign_id = next(i for i in range(0x55, 0x7FF) if i not in used and i < 0x80)

    def command(self, counter: int, tau=None, check_range: bool = True) -> Frame:
        return self.cmd.encode([*(self.hold if tau is None else tau), 0], counter=counter, check_range=check_range)

    def answer(self, first: bool) -> None:
        """One cycle's frames; the first cycle only the good command (the run starts with it)."""
        for _ in range(0 if first else self.per_cycle):
            kind = self.rng.choice([k for k in self.kinds if k != "replay" or self.previous is not None])
            self._send_bad(kind)
            self.sent[kind] += 1
        good = self.command(self.counter)
        self._send(good)
        self.sent["good"] += 1
        self.previous, self.counter = good, self.cmd.next_counter(self.counter)

    def _send(self, frame: Frame) -> None:
        if not self.link.send(frame):
            raise RuntimeError(f"the firmware side's link refused {frame}: the flood's counts would be wrong")

    def _send_packet(self, packet: bytes) -> None:
        if not self.link.send_packet(packet):
            raise RuntimeError("the firmware side's serial link refused a packet: the flood's counts would be wrong")

    def _send_bad(self, kind: str) -> None:
        good = self.command(self.counter)
        if kind == "unknown_id":
            self._send(Frame(self.foreign_id, good.data, good.is_fd))
        elif kind == "length":     # the next shorter length the link can carry (CAN FD: 12 -> 8 bytes)
            short = max(n for n in (FD_LENGTHS if good.is_fd else range(9)) if n < len(good.data))
            self._send(Frame(good.arbitration_id, good.data[:short], good.is_fd))
        elif kind == "range":
            tau = self.hold.copy()
            j = self.rng.randrange(len(tau))
            tau[j] = self.rng.choice((-1, 1)) * 1.5 * self.cmd.spec.signals[j].maximum     # representable, refused
            self._send(self.command(self.counter, tau, check_range=False))
        elif kind == "replay":
            self._send(self.previous)
        elif kind == "crc":
            data = bytearray(good.data)
            k = self.rng.choice([i for i in range(len(data)) if i != self.cmd.crc_byte])
            data[k] ^= 1 << self.rng.randrange(8)
            self._send(Frame(good.arbitration_id, bytes(data), good.is_fd))
        elif kind == "link_crc":
            body = bytes((good.arbitration_id,)) + good.data
            crc = crc16_ccitt_false(body) ^ (1 << self.rng.randrange(16))
            self._send_packet(cobs_encode(body + crc.to_bytes(2, "big")) + b"\x00")
        elif kind == "cobs":
            self._send_packet(bytes((0x09, 0x01, 0x02, 0x03)) + b"\x00")    # code 9 wants 8 bytes, has 3


def holding_torque() -> np.ndarray:
    """ELLA's torque at rest under gravity, on the command signals' 0.02 N m grid."""
    from hil.dynamics.plant import Plant
    from hil.model.config import load_model
    from hil.model.presets import resolve
    return np.round(Plant(load_model(resolve("preset", ARM))).equilibrium_eta() / 0.02) * 0.02


def start_emulator(bus_name: str, link_spec: str, cycles: int) -> tuple[subprocess.Popen, dict]:
    duration = cycles * 1e-3
    cmd = [sys.executable, "-m", "hil", "run", ARM, "--bus", bus_name, "--link", link_spec, "--mode", "lockstep",
           "--duration", f"{duration:g}", "--json", "--no-realtime"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    for line in proc.stdout:
        if line.startswith("ready "):
            return proc, json.loads(line[len("ready "):])
    proc.wait()
    raise RuntimeError(f"hil run ended before its ready line (status {proc.returncode}): {' '.join(cmd)}")


def flood(name: str, cycles: int, per_cycle: int, seed: int, hold: np.ndarray) -> dict:
    """One lockstep run of `cycles` cycles on link `name` under the flood; the counts and the verdict."""
    bus_name, link_spec = LINKS[name]
    bus = BusMap.load(ROOT / "configs" / "bus" / f"{bus_name}.toml")
    proc, ready = start_emulator(bus_name, link_spec, cycles)
    link = open_link(ready["firmware_link"])
    flooder = Flooder(bus, link, hold, per_cycle, random.Random(seed))
    sensors = SensorInput(bus, JOINTS)
    answered = -1
    last_rx = time.monotonic()
    try:
        while answered < cycles - 1 and time.monotonic() - last_rx < IDLE_S:
            frame = link.recv()
            if frame is None:
                _wait(link)
                continue
            last_rx = time.monotonic()
            if sensors.feed(frame) and sensors.cycle > answered:     # a re-sent frame is no new cycle
                flooder.answer(first=answered < 0)
                answered = sensors.cycle
        summary = json.loads(proc.communicate(timeout=120)[0].strip().splitlines()[-1])
    finally:
        link.close()
        if proc.poll() is None:
            proc.kill()
    return judge(summary, flooder.sent, cycles) | {"link": name, "bus": bus_name, "seed": seed}


def _wait(link: Link) -> None:
    fileno = getattr(link, "fileno", None)
    if fileno is None:
        time.sleep(50e-6)
    else:
        select.select([fileno()], [], [], 0.01)


def judge(summary: dict, sent: Counter, cycles: int) -> dict:
    """Each expected count against the emulator's summary; passed only if every one is equal."""
    commands, link = summary["commands"], summary["link"]
    got = {"commands": commands["rejected"], "link": link}
    rows = [{"check": "good commands accepted", "sent": cycles, "counted": commands["accepted"]},
            {"check": "commands lost", "sent": 0, "counted": commands["lost"]},
            {"check": "counter resyncs", "sent": 0, "counted": commands["resyncs"]},
            {"check": "frames dropped by the receive budget", "sent": 0,
             "counted": summary["receive"]["frames_dropped"]}]
    for kind, (where, key) in EXPECTED_COUNTER.items():
        if kind in sent or got[where].get(key, 0):
            rows.append({"check": f"{kind} -> {where}.{key}", "sent": sent[kind], "counted": got[where].get(key, 0)})
    for row in rows:
        row["passed"] = row["sent"] == row["counted"]
    return {"cycles": summary["cycles"], "malformed": sum(v for k, v in sent.items() if k != "good"),
            "rows": rows, "passed": summary["cycles"] == cycles and all(r["passed"] for r in rows)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.flood", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--links", default="serial,classic,fd", help=f"comma list of {', '.join(LINKS)}")
    p.add_argument("--cycles", type=int, default=3000, help="lockstep cycles per link (default 3000)")
    p.add_argument("--per-cycle", type=int, default=8, help="malformed frames per cycle (default 8)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    hold = holding_torque()
    results = [flood(name, args.cycles, args.per_cycle, args.seed + k, hold)
               for k, name in enumerate(args.links.split(","))]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for r in results:
            print(f"{r['link']} ({r['bus']}): {r['cycles']} cycles, {r['malformed']} malformed frames: "
                  + ("PASS" if r["passed"] else "FAIL"))
            for row in r["rows"]:
                print(f"  {'ok  ' if row['passed'] else 'DIFF'} {row['check']:42s} sent {row['sent']:7d}"
                      f"  counted {row['counted']:7d}")
    return 0 if all(r["passed"] for r in results) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
