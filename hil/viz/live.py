"""Live view: a Foxglove WebSocket server on 127.0.0.1 with the arm's 3D scene and selected
signals while the emulator runs.

It is fed from the log writer's side and runs in its own process, so that neither its work nor
the GIL it would hold touches the loop: the loop hands each row to its logger thread as it does
for the run log (``hil.runtime.loop.RunLogger``), and on that thread ``LiveView.row`` keeps one
row per 1/rate_hz of simulated time (default 50 Hz) and puts its bytes in a bounded queue (a
full queue drops the frame and counts it). The view's process (``LiveServer``) builds the scene
(``hil.viz.scene``) and publishes the Foxglove messages; the SDK's server runs the sockets.
Topics as the MCAP export (``hil.viz.foxglove_scene``) plus ``/signals/live`` (the selected
signals); Foxglove Studio connects to ``ws://127.0.0.1:<port>``.
"""
from __future__ import annotations

import fnmatch
import json
import multiprocessing
import queue
import time

import numpy as np

from hil.model.assembly import assemble
from hil.model.config import load_model_from_string
from hil.model.spec import Model
from hil.viz.foxglove_scene import EVENT_TOPIC, SCENE_TOPIC, group_schema, imu_transforms, ns, scene_update
from hil.viz.scene import ArmScene

__all__ = ["LiveView", "LiveServer", "DEFAULT_SIGNALS"]

DEFAULT_SIGNALS = ("q_*", "qd_*", "tau_*", "tip_*", "eta_*", "imu_*", "brake_*", "status", "cmd_age_us")
QUEUE_FRAMES = 64          # frames in flight to the view's process (about 1 s at 50 Hz)


class LiveView:
    """The logger thread's end of the live view (module docstring). Call ``row``/``event`` from
    one thread (the logger's), ``close`` when the run ends. `config_text`: the arm preset (TOML
    text; `source` names it in errors). `port` 0 picks a free port (``port``)."""

    def __init__(self, config_text: str, columns: list[str], port: int = 8765, rate_hz: float = 50.0,
                 signals: tuple[str, ...] = DEFAULT_SIGNALS, host: str = "127.0.0.1", source: str = "<preset>",
                 start_timeout_s: float = 120.0):
        ctx = multiprocessing.get_context("spawn")
        self._queue = ctx.Queue(QUEUE_FRAMES)
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, name="hil-live", daemon=True,
                                 args=(child, self._queue, config_text, source, columns, port, tuple(signals), host))
        self._proc.start()
        self.period_s = 1.0 / rate_hz
        self._t = columns.index("t")
        self._next_t = -np.inf
        self.sent = self.dropped = 0
        self.frames, self.error, self.busy_s = 0, None, 0.0     # from the view's process, after close()
        reply = self._conn.recv() if self._conn.poll(start_timeout_s) else ("error", "no answer from the live view")
        if reply[0] != "ready":
            self._proc.kill()
            raise RuntimeError(f"the live view did not start: {reply[1]}")
        self.port: int = reply[1]

    def row(self, row: np.ndarray) -> None:
        """A logged row: every 1/rate_hz of simulated time, its bytes to the view's process."""
        t = row[self._t]
        if t < self._next_t:
            return
        # the next frame one period on; after a gap (or the first row) one period after this one
        self._next_t = self._next_t + self.period_s if t - self._next_t < self.period_s else t + self.period_s
        self._put(row.tobytes())

    def event(self, event: dict) -> None:
        self._put(event)

    def _put(self, item) -> None:
        try:
            self._queue.put_nowait(item)
            self.sent += 1
        except queue.Full:
            self.dropped += 1

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the view's process (after what is queued) and take its counters."""
        try:
            self._queue.put(None, timeout=timeout_s)
            if self._conn.poll(timeout_s):
                stats = self._conn.recv()
                self.frames, self.error, self.busy_s = stats["frames"], stats["error"], stats["busy_s"]
        except (queue.Full, EOFError, OSError) as exc:
            self.error = self.error or f"live view did not stop cleanly: {exc}"
        self._proc.join(timeout_s)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()


def _serve(conn, rows, config_text: str, source: str, columns: list[str], port: int, signals: tuple[str, ...],
           host: str) -> None:
    """The view's process: serve until the feed sends None, then report the counters."""
    try:
        server = LiveServer(load_model_from_string(config_text, source), columns, port, signals, host)
    except Exception as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", server.port))
    try:
        while (item := rows.get()) is not None:
            if isinstance(item, bytes):
                server.row(np.frombuffer(item))
            else:
                server.event(item)
    finally:
        conn.send({"frames": server.frames, "error": server.error, "busy_s": server.busy_s})
        server.close()


class LiveServer:
    """The Foxglove server and its messages (in the live view's process): ``row`` publishes the
    scene and the selected signals of each row it gets, ``event`` an event."""

    def __init__(self, model: Model, columns: list[str], port: int, signals: tuple[str, ...], host: str):
        import foxglove
        from foxglove.channels import FrameTransformChannel, SceneUpdateChannel

        self.scene = ArmScene(assemble(model))
        self.columns = columns
        self._t = columns.index("t")
        chosen = [i for i, c in enumerate(columns)
                  if any(fnmatch.fnmatchcase(c, g) for g in signals) and not c.endswith("_true")]
        self._signal_idx = chosen
        self._signal_names = [columns[i] for i in chosen]
        self.context = foxglove.Context()
        self.server = foxglove.start_server(name="ella-hil", host=host, port=port, context=self.context)
        self._signals = foxglove.Channel("/signals/live", schema=group_schema(columns, chosen), context=self.context)
        self._scene = SceneUpdateChannel(SCENE_TOPIC, context=self.context)
        self._imus = {name: FrameTransformChannel(f"/arm/imu_{name}", context=self.context)
                      for name in self.scene.imu_names}
        self._events = foxglove.Channel(EVENT_TOPIC, context=self.context)
        self.frames = 0
        self.busy_s = 0.0          # time spent publishing
        self.error: str | None = None   # the first failure; the view stops publishing
        scene_update(self.scene.frame(0.0, self.scene.asm.pos0))   # compiled and warm before the first row

    @property
    def port(self) -> int:
        return self.server.port

    def row(self, row: np.ndarray) -> None:
        """Publish a row's signals and scene; the first failure is kept in ``error`` and stops it."""
        if self.error is not None:
            return
        try:
            self._publish(float(row[self._t]), row)
        except Exception as exc:        # a bad row must not end the view's process
            self.error = f"{type(exc).__name__}: {exc}"

    def _publish(self, t: float, row: np.ndarray) -> None:
        t0 = time.perf_counter()
        stamp = ns(t)
        values = row.tolist()
        self._signals.log(json.dumps({n: values[i] for n, i in zip(self._signal_names, self._signal_idx)}).encode(),
                          log_time=stamp)
        pos, _ = self.scene.coordinates(self.columns, row[None])
        frame = self.scene.frame(t, pos[0])
        self._scene.log(scene_update(frame), log_time=stamp)
        for name, transform in imu_transforms(frame).items():
            self._imus[name].log(transform, log_time=stamp)
        self.frames += 1
        self.busy_s += time.perf_counter() - t0

    def event(self, event: dict) -> None:
        if self.error is None:
            self._events.log(json.dumps(event, default=str).encode(), log_time=ns(float(event["t"])))

    def close(self) -> None:
        self.server.stop()
