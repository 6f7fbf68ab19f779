"""Live view: a Foxglove WebSocket server on 127.0.0.1 with the arm's 3D scene and selected
signals while the emulator runs.

It is fed from the log writer's side and runs in its own process, so that neither its work nor
the GIL it would hold touches the loop: the loop hands each row to its logger thread as it does
for the run log (``hil.runtime.loop.RunLogger``), and on that thread ``LiveView.row`` keeps one
row per 1/rate_hz of simulated time (default 50 Hz) and writes the columns the view needs (time,
joint angles, modal coordinates, the selected signals) in one non-blocking write to a pipe: a
full pipe drops the frame and counts it, no thread or lock is added. The view's process
(``LiveServer``) builds the scene (``hil.viz.scene``) and publishes the Foxglove messages; the
SDK's server runs the sockets, on an ephemeral loopback port behind the view's gate
(``hil.viz.live_gate``: the Host and Origin checks and the optional token). Topics as the MCAP
export (``hil.viz.foxglove_scene``) plus ``/signals/live`` (the selected signals); Foxglove Studio
connects to ``ws://127.0.0.1:<port>`` (``/?token=...`` with a token).
"""
from __future__ import annotations

import fnmatch
import json
import multiprocessing
import os
import select
import struct
import time

import numpy as np

from hil.model.assembly import assemble
from hil.model.config import load_model_from_string
from hil.model.spec import Model
from hil.viz.live_gate import LiveGate
from hil.viz.foxglove_scene import EVENT_TOPIC, SCENE_TOPIC, group_schema, imu_transforms, ns, scene_update
from hil.viz.scene import ArmScene
from config_schema import UserError

__all__ = ["LiveView", "LiveServer", "DEFAULT_SIGNALS"]

DEFAULT_SIGNALS = ("q_*", "qd_*", "tau_*", "tip_*", "eta_*", "imu_*", "brake_*", "status", "cmd_age_us")
ROW, EVENT = b"r", b"e"
_EVENT_LIMIT = select.PIPE_BUF - 5      # an event's JSON in one atomic write (length and kind first)


def _frame(kind: bytes, payload: bytes) -> bytes:
    """One message as multiprocessing.Connection.recv_bytes reads it: length (big-endian int32),
    then the bytes."""
    return struct.pack("!i", len(payload) + 1) + kind + payload


class LiveView:
    """The logger thread's end of the live view (module docstring). Call ``row``/``event`` from
    one thread (the logger's), ``close`` when the run ends. `config_text`: the arm preset (TOML
    text; `source` names it in errors). `port` 0 picks a free port (``port``)."""

    def __init__(self, config_text: str, columns: list[str], port: int = 8765, rate_hz: float = 50.0,
                 signals: tuple[str, ...] = DEFAULT_SIGNALS, host: str = "127.0.0.1", source: str = "<preset>",
                 start_timeout_s: float = 120.0, token: str | None = None, allowed_origins: tuple[str, ...] = ()):
        keep = [i for i, c in enumerate(columns) if c == "t" or c.startswith(("q_", "eta_"))
                or (any(fnmatch.fnmatchcase(c, g) for g in signals) and not c.endswith("_true"))]
        self._keep = np.array(keep, np.int64)
        if len(_frame(ROW, np.zeros(len(keep)).tobytes())) > select.PIPE_BUF:
            raise UserError(f"the live view's {len(keep)} columns exceed one atomic pipe write; select fewer signals")
        ctx = multiprocessing.get_context("spawn")
        rows_in, self._rows = ctx.Pipe(duplex=False)
        self._control, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, name="hil-live", daemon=True,
                                 args=(child, rows_in, config_text, source, [columns[i] for i in keep], port,
                                       tuple(signals), host, token, tuple(allowed_origins)))
        self._proc.start()
        rows_in.close()
        self._fd = self._rows.fileno()
        os.set_blocking(self._fd, False)
        self.period_s = 1.0 / rate_hz
        self._t = columns.index("t")
        self._next_t = -np.inf
        self.sent = self.dropped = 0
        self.frames, self.error, self.busy_s = 0, None, 0.0     # from the view's process, after close()
        self.gate: dict = {}
        ready = self._control.poll(start_timeout_s)
        reply = self._control.recv() if ready else ("error", "no answer from the live view's process")
        if reply[0] != "ready":
            self._proc.kill()
            raise RuntimeError(f"the live view did not start: {reply[1]}")
        self.port: int = reply[1]

    def row(self, row: np.ndarray) -> None:
        """A logged row: every 1/rate_hz of simulated time, its columns to the view's process."""
        t = row[self._t]
        if t < self._next_t:
            return
        # the next frame one period on; after a gap (or the first row) one period after this one
        self._next_t = self._next_t + self.period_s if t - self._next_t < self.period_s else t + self.period_s
        self._write(_frame(ROW, row[self._keep].tobytes()))

    def event(self, event: dict) -> None:
        text = json.dumps(event, default=str).encode()
        excess = len(text) - _EVENT_LIMIT
        if excess > 0:                      # a long description is cut, the event kept
            detail = str(event.get("detail", ""))
            text = json.dumps({**event, "detail": detail[:max(0, len(detail) - excess - 3)] + "..."},
                              default=str).encode()
        if len(text) <= _EVENT_LIMIT:
            self._write(_frame(EVENT, text))
        else:
            self.dropped += 1

    def _write(self, message: bytes) -> None:
        """One atomic, non-blocking write (at most PIPE_BUF bytes: all or nothing)."""
        try:
            os.write(self._fd, message)
            self.sent += 1
        except BlockingIOError:
            self.dropped += 1
        except BrokenPipeError:
            self.dropped += 1
            self.error = self.error or "the live view's process ended"

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop the view's process (after what the pipe holds) and take its counters."""
        try:
            self._rows.close()                  # end of file: the view drains the pipe and stops
            if self._control.poll(timeout_s):
                stats = self._control.recv()
                self.frames, self.error, self.busy_s = stats["frames"], stats["error"], stats["busy_s"]
                self.gate = stats["gate"]
        except (EOFError, OSError) as exc:
            self.error = self.error or f"live view did not stop cleanly: {exc}"
        self._proc.join(timeout_s)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()


def _serve(control, rows, config_text: str, source: str, columns: list[str], port: int, signals: tuple[str, ...],
           host: str, token: str | None, allowed_origins: tuple[str, ...]) -> None:
    """The view's process: serve until the feed's pipe closes, then report the counters."""
    try:
        server = LiveServer(load_model_from_string(config_text, source), columns, port, signals, host, token,
                            allowed_origins)
    except Exception as exc:
        control.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    control.send(("ready", server.port))
    try:
        while True:
            try:
                message = rows.recv_bytes()
            except EOFError:
                break
            if message[:1] == ROW:
                server.row(np.frombuffer(message, offset=1))
            else:
                server.event(json.loads(message[1:]))
    finally:
        control.send({"frames": server.frames, "error": server.error, "busy_s": server.busy_s,
                      "gate": server.gate.stats()})
        server.close()


class LiveServer:
    """The Foxglove server and its messages (in the live view's process): ``row`` publishes the
    scene and the selected signals of each row it gets, ``event`` an event."""

    def __init__(self, model: Model, columns: list[str], port: int, signals: tuple[str, ...], host: str,
                 token: str | None = None, allowed_origins: tuple[str, ...] = ()):
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
        self.server = foxglove.start_server(name="ella-hil", host="127.0.0.1", port=0, context=self.context)
        try:
            self.gate = LiveGate(self.server.port, host, port, token, allowed_origins)
        except OSError:
            self.server.stop()
            raise
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
        return self.gate.port

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
        self.gate.close()
        self.server.stop()
