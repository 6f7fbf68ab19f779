"""What the live view (`hil run --live`) costs the loop thread, per cycle.

ELLA with its sensor and drive models behind an in-memory link, a holding firmware answering
each cycle (tools.bench_loop), paced at 1 kHz by sleeping to absolute deadlines (no real-time
setup). Each cycle's ``step_once`` (receive .. send and the log row handed to the logger thread)
is timed on the loop thread, in wall time and in the thread's own CPU time (which leaves out
waits for the GIL and for the CPU), under four settings, each an emulator of its own, stepped
in turn in blocks of 100 cycles so that all see the same machine load:

* ``none``: no logger;
* ``log``: the run log (a msgpack file, written on the logger thread);
* ``live``: the live view alone (the logger thread feeds only the Foxglove server);
* ``log+live``: both, a WebSocket client on 127.0.0.1 subscribed to every topic;
* ``log (A/A)``: the run log again, a control: its difference to ``log`` is the benchmark's noise.

The live view's cost on the loop thread is ``log+live - log`` (with a run log, as `make run`) and
``live - none`` (without one: then the loop also fills and queues the rows), in CPU time (the
work it adds to the loop thread) and in wall time (also the GIL waits the logger thread's frames
cause, and the machine's noise). The logger thread's time per live frame is reported too.
Timing belongs here, not in tests.

    python -m tools.bench_live [--cycles 5000] [--block 100] [--json]
"""
from __future__ import annotations

import argparse
import gc
import json
import struct
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from firmware_bridge.wire.messages import BusMap
from hil.model.config import load_model
from hil.runtime.loop import RunLogger
from hil.viz.live import LiveView
from tools.bench_loop import ARM, LINKS, ROOT
from tools.loop_rig import holding_emulator

SETTINGS = ("none", "log", "log (A/A)", "live", "log+live")
PERIOD_NS = 1_000_000


class _Client:
    """A Foxglove WebSocket client subscribed to every advertised channel; counts messages."""

    def __init__(self, port: int):
        from websockets.sync.client import connect
        self.ws = connect(f"ws://127.0.0.1:{port}", subprotocols=["foxglove.sdk.v1"]).__enter__()
        self.messages = 0
        self._stop = False
        channels = []
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(channels) < 3:
            msg = json.loads(self.ws.recv(timeout=5))
            if msg["op"] == "advertise":
                channels += [c["id"] for c in msg["channels"]]
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": i, "channelId": c}
                                                                       for i, c in enumerate(channels)]}))
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while not self._stop:
            try:
                msg = self.ws.recv(timeout=0.2)
            except TimeoutError:
                continue
            except Exception:
                return
            if isinstance(msg, bytes) and msg[:1] == b"\x01":
                struct.unpack_from("<IQ", msg, 1)
                self.messages += 1

    def close(self) -> None:
        self._stop = True
        self._thread.join(timeout=2)
        self.ws.close()


class _Rig:
    """One emulator (ELLA, models, holding firmware) with the logger of a setting."""

    def __init__(self, setting: str, cycles: int, workdir: Path):
        model, bus = load_model(ROOT / ARM), BusMap.load(ROOT / LINKS["pty"][0])
        self.setting = setting
        self.emu, self.firmware = holding_emulator(model, bus, "models", cycles + 10)
        self.live = self.client = None
        if "live" in setting:
            self.live = LiveView((ROOT / ARM).read_text(encoding="utf-8"), self.emu.columns, port=0)
            self.client = _Client(self.live.port)
        path = str(workdir / f"{len(list(workdir.iterdir()))}.msgpack") if "log" in setting else None
        if path or self.live:
            self.emu.logger = RunLogger(path, self.emu.header, self.emu.columns, tap=self.live)
        self.wall = np.zeros(cycles, np.int64)
        self.cpu = np.zeros(cycles, np.int64)
        self.n = 0

    def step(self) -> None:
        self.firmware.answer()
        c0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        self.emu.step_once()
        self.wall[self.n] = time.perf_counter_ns() - t0
        self.cpu[self.n] = time.thread_time_ns() - c0
        self.n += 1

    def result(self) -> dict:
        w, c = self.wall / 1e3, self.cpu / 1e3
        out = {"cpu_mean": float(c.mean()), "cpu_p50": float(np.percentile(c, 50)), "mean": float(w.mean()),
               "p50": float(np.percentile(w, 50)), "p99": float(np.percentile(w, 99)),
               "p99.9": float(np.percentile(w, 99.9)), "max": float(w.max())}
        if self.emu.logger:
            self.emu.logger.close()
            out["dropped_rows"] = self.emu.logger.dropped
        if self.live:
            time.sleep(0.5)                     # the last frames reach the client
            out["client_messages"] = self.client.messages
            self.client.close()
            self.live.close()
            out["live_frames"], out["live_dropped"] = self.live.frames, self.live.dropped
            out["live_us_per_frame_view_process"] = self.live.busy_s / max(self.live.frames, 1) * 1e6
        return out


def interleaved(cycles: int, block: int, workdir: Path) -> dict:
    """The four settings' emulators stepped in turn, `block` cycles each, at 1 kHz, until each has
    run `cycles`: every setting sees the same machine load."""
    rigs = [_Rig(s, cycles, workdir) for s in SETTINGS]
    gc.collect()
    deadline = time.monotonic_ns()
    for k in range(cycles // block * len(rigs)):
        rig = rigs[k % len(rigs)]
        for _ in range(block):
            deadline += PERIOD_NS
            while time.monotonic_ns() < deadline - 150_000:
                time.sleep(100e-6)
            while time.monotonic_ns() < deadline:
                pass
            rig.step()
    return {r.setting: r.result() for r in rigs}


def feed_cost(rows: int = 100_000) -> dict:
    """LiveView.row on its own: the logger thread's time per logged row (1 kHz rows, 50 Hz frames
    put in the view's queue, a full queue dropping)."""
    model, bus = load_model(ROOT / ARM), BusMap.load(ROOT / LINKS["pty"][0])
    emu, _ = holding_emulator(model, bus, "models", 10)
    live = LiveView((ROOT / ARM).read_text(encoding="utf-8"), emu.columns, port=0)
    row = np.zeros(len(emu.columns))
    t_col = emu.columns.index("t")
    t0 = time.perf_counter_ns()
    for i in range(rows):
        row[t_col] = i * 1e-3
        live.row(row)
    per_row = (time.perf_counter_ns() - t0) / rows / 1e3
    frames = live.sent + live.dropped
    live.close()
    return {"rows": rows, "us_per_row": per_row, "frames": frames, "queued": live.sent, "dropped": live.dropped}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench_live", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cycles", type=int, default=5000, help="timed cycles per setting (1 kHz)")
    p.add_argument("--block", type=int, default=100, help="cycles a setting runs before the next one's turn")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        runs = interleaved(args.cycles, args.block, Path(tmp))
    def diff(key: str, a: str, b: str) -> float:
        return runs[b][key] - runs[a][key]
    report = {"cycles": args.cycles, "block": args.block, "runs": runs, "feed": feed_cost(),
              "live_cost_us_per_cycle": {
                  f"{key} {label}": diff(key, a, b) for key in ("cpu_mean", "cpu_p50", "mean")
                  for label, (a, b) in (("with run log", ("log", "log+live")), ("without", ("none", "live")),
                                        ("A/A noise", ("log", "log (A/A)")))}}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"loop thread, step_once per cycle at 1 kHz ({args.cycles} cycles per setting, interleaved in blocks "
          f"of {args.block}), us:")
    for s in SETTINGS:
        for r in [runs[s]]:
            extra = (f"  live frames {r['live_frames']}, {r['live_us_per_frame_view_process']:.0f} us each in the "
                     f"view's process, client got {r['client_messages']} messages") if "live_frames" in r else ""
            print(f"  {s:10s} cpu p50 {r['cpu_p50']:6.1f} mean {r['cpu_mean']:6.1f} | wall mean {r['mean']:7.1f}  "
                  f"p50 {r['p50']:7.1f}  p99 {r['p99']:7.1f}  p99.9 {r['p99.9']:7.1f}  "
                  f"max {r['max']:8.1f}{extra}")
    f = report["feed"]
    print(f"LiveView.row on the logger thread: {f['us_per_row']:.2f} us per row over {f['rows']} rows "
          f"({f['frames']} frames at 50 Hz, {f['dropped']} dropped by the full pipe in this tight loop)")
    print("live view cost on the loop thread per cycle, us (cpu_mean, cpu_p50: the thread's CPU time; mean: wall):")
    for name, value in report["live_cost_us_per_cycle"].items():
        print(f"  {name:28s} {value:+7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
