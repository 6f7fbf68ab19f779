"""The live view: a Foxglove WebSocket client on 127.0.0.1 receives the scene, the signals and the
events fed through the run logger's thread; `hil run --live` serves a run."""
from __future__ import annotations

import base64
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from hil.logs.runlog import read_run
from hil.runtime.loop import RunLogger
from runlogs import ARM, EVENTS, write_synthetic_log

pytest.importorskip("foxglove")
websockets_client = pytest.importorskip("websockets.sync.client")

ROOT = Path(__file__).resolve().parent.parent


class Client:
    """Subscribes to every advertised channel; collects (topic, log time, payload) per message."""

    def __init__(self, port: int, path: str = "", origin: str | None = None):
        self.ws = websockets_client.connect(f"ws://127.0.0.1:{port}{path}", subprotocols=["foxglove.sdk.v1"],
                                            origin=origin).__enter__()
        self.channels: dict[int, dict] = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(self.channels) < 4:
            msg = json.loads(self.ws.recv(timeout=10))
            if msg["op"] == "advertise":
                self.channels.update({c["id"]: c for c in msg["channels"]})
        self.subs = {i: c for i, c in enumerate(self.channels.values())}
        self.ws.send(json.dumps({"op": "subscribe", "subscriptions": [{"id": i, "channelId": c["id"]}
                                                                       for i, c in self.subs.items()]}))
        self.messages: list[tuple[str, int, bytes]] = []

    def collect(self, quiet_s: float = 1.5) -> dict[str, list]:
        try:
            while True:
                msg = self.ws.recv(timeout=quiet_s)
                if isinstance(msg, bytes) and msg[0] == 1:          # message data
                    sub, stamp = struct.unpack_from("<IQ", msg, 1)
                    self.messages.append((self.subs[sub]["topic"], stamp, msg[13:]))
        except TimeoutError:
            pass
        out: dict[str, list] = {}
        for topic, stamp, payload in self.messages:
            out.setdefault(topic, []).append((stamp, payload))
        return out

    def decoder(self, topic: str):
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        c = next(c for c in self.channels.values() if c["topic"] == topic)
        pool = descriptor_pool.DescriptorPool()
        for f in descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(c["schema"])).file:
            pool.Add(f)
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(c["schemaName"])).FromString

    def close(self) -> None:
        self.ws.close()


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("live") / "run.msgpack"
    write_synthetic_log(path, duration_s=1.0)
    return read_run(path)


def test_a_client_receives_the_scene_signals_and_events_from_the_logger_thread(log):
    from hil.viz.live import LiveView
    header, rows = log
    cols = header["columns"]
    live = LiveView(ARM.read_text(encoding="utf-8"), cols, port=0, rate_hz=50, source=str(ARM))
    client = Client(live.port)
    try:
        assert {c["topic"] for c in client.channels.values()} >= {"/arm/scene", "/signals/live", "/events"}
        time.sleep(0.3)                                 # the subscription is in place
        logger = RunLogger(None, header, cols, tap=live)    # rows reach the view on the logger's thread only
        events = iter(EVENTS)
        pending = next(events)
        for row in rows:
            if pending is not None and pending["t"] <= row[1]:
                logger.event(pending)
                pending = next(events, None)
            buffer = logger.row()
            buffer[:] = row
            logger.put(buffer)
            time.sleep(2e-5)
        logger.close()
        got = client.collect()
    finally:
        client.close()
        live.close()
    assert live.error is None and live.dropped == 0
    assert live.frames == len(got["/arm/scene"]) == 50                 # 1 s of rows at 50 Hz
    t = rows[:, cols.index("t")]
    signals = [json.loads(p) for _, p in got["/signals/live"]]
    frame_rows = np.searchsorted(t, [s / 1e9 - 1e-9 for s, _ in got["/signals/live"]])
    assert [s["q_elbow"] for s in signals] == rows[frame_rows, cols.index("q_elbow")].tolist()
    assert not any(k.endswith("_true") for k in signals[0]) and "imu_ax" in signals[0]
    scene = client.decoder("/arm/scene")(got["/arm/scene"][-1][1])
    lines = scene.entities[0].lines
    assert len(lines) == 3 and len(lines[1].points) == len(lines[2].points) == 24
    assert [json.loads(p) for _, p in got["/events"]] == EVENTS


def test_the_view_admits_a_viewer_with_its_token_and_refuses_a_foreign_page(log):
    """Through the view's gate (hil.viz.live_gate, tested on its own in test_live_gate.py)."""
    from websockets.exceptions import InvalidStatus
    from hil.viz.live import LiveView
    header, _ = log
    live = LiveView(ARM.read_text(encoding="utf-8"), header["columns"], port=0, source=str(ARM),
                    token="view-token-1", allowed_origins=("https://app.foxglove.dev",))
    try:
        client = Client(live.port, "/?token=view-token-1", origin="https://app.foxglove.dev")
        assert {c["topic"] for c in client.channels.values()} >= {"/arm/scene", "/signals/live"}
        client.close()
        for path, origin, status in (("/?token=view-token-1", "https://evil.example", 403), ("/", None, 401)):
            with pytest.raises(InvalidStatus) as refused:
                Client(live.port, path, origin)
            assert refused.value.response.status_code == status
    finally:
        live.close()
    assert live.gate["admitted"] == 1 and live.gate["refused"]["origin"] == live.gate["refused"]["token"] == 1


def test_a_failing_row_stops_the_view_not_the_logger(log):
    from hil.model.config import load_model
    from hil.viz.live import LiveServer
    header, rows = log
    server = LiveServer(load_model(ARM), header["columns"], 0, ("q_*",), "127.0.0.1")
    try:
        server.row(rows[0][:5])                        # too short: the view records the error
        assert server.error and "IndexError" in server.error
        server.row(rows[1])                            # and stays quiet afterwards
        assert server.frames == 0
    finally:
        server.close()


def test_hil_run_live_serves_a_run(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "hil", "run", "configs/ella.toml", "--bus", "configs/bus/serial_frame.toml",
                           "--link", "pty", "--spawn-firmware", "--mode", "lockstep", "--no-realtime",
                           "--duration", "0.5", "--live", "0", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "live view: ws://127.0.0.1:" in proc.stderr
    live = json.loads(proc.stdout.strip().splitlines()[-1])["live"]
    assert live["error"] is None and live["dropped"] == 0 and live["frames"] == 25


def test_a_full_pipe_drops_frames_and_counts_them(log):
    """The feed never blocks the logger thread: frames beyond what the pipe holds are dropped."""
    from hil.viz.live import LiveView
    header, rows = log
    live = LiveView(ARM.read_text(encoding="utf-8"), header["columns"], port=0, rate_hz=1e6, source=str(ARM))
    os.kill(live._proc.pid, signal.SIGSTOP)  # the view stops reading: the pipe fills
    try:
        live.event({"event": "inject", "cycle": 1, "t": 0.001, "fault": "f", "detail": "x" * 10_000})  # cut to fit
        for k in range(2000):
            row = rows[k % len(rows)].copy()
            row[1] = k * 1e-3
            live.row(row)
    finally:
        os.kill(live._proc.pid, signal.SIGCONT)
        live.close()
    assert live.sent > 0 and live.dropped > 0 and live.sent + live.dropped == 2001
    assert live.error is None and live.frames == live.sent - 1     # every frame the pipe took was served
