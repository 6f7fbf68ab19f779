"""The live view's gate (hil.viz.live_gate): a viewer reaches the server only from a loopback Host,
with a loopback or allowed Origin and, when one is set, the token; every refusal is counted by
cause, and the server never sees the token. Tested on a plain echo server behind the gate, then
on `hil run --live` with a WebSocket client."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hil.viz import live_gate
from hil.viz.live_gate import LiveGate

ROOT = Path(__file__).resolve().parent.parent


class Upstream:
    """A server that records each request head and then echoes what it gets."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.heads: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn):
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(4096)
        head, _, rest = data.partition(b"\r\n\r\n")
        self.heads.append(head)
        conn.sendall(b"HTTP/1.1 101 Switching Protocols\r\n\r\n" + rest)
        while chunk := conn.recv(4096):
            conn.sendall(chunk)
        conn.close()


def request(port: int, target: str = "/", host: str | None = None, origin: str | None = None,
            extra: bytes = b"") -> tuple[bytes, socket.socket]:
    """Send an opening handshake; the first answer and the open socket."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    lines = [f"GET {target} HTTP/1.1", f"Host: {host or f'127.0.0.1:{port}'}", "Upgrade: websocket",
             "Connection: Upgrade"] + ([f"Origin: {origin}"] if origin else [])
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + extra)
    return s.recv(4096), s


@pytest.fixture
def gate():
    up = Upstream()
    g = LiveGate(up.port, port=0, token="s3cret-token", allowed_origins=("https://app.foxglove.dev",))
    g.upstream = up
    yield g
    g.close()
    up.sock.close()


def test_a_loopback_viewer_with_the_token_is_relayed_and_the_server_never_sees_the_token(gate):
    answer, s = request(gate.port, "/?token=s3cret-token&x=1", extra=b"hello")
    assert answer.startswith(b"HTTP/1.1 101") and answer.endswith(b"hello")
    s.sendall(b"more")
    assert s.recv(4096) == b"more"
    s.close()
    assert gate.upstream.heads[0].startswith(b"GET /?x=1 HTTP/1.1") and b"s3cret" not in gate.upstream.heads[0]
    for origin in ("http://localhost:3000", "http://127.0.0.1", "https://[::1]:8080", "https://app.foxglove.dev"):
        answer, s = request(gate.port, "/?token=s3cret-token", origin=origin)
        s.close()
        assert answer.startswith(b"HTTP/1.1 101"), origin
    assert gate.stats() == {"admitted": 5, "refused": dict.fromkeys(live_gate.REFUSAL_CAUSES, 0)}


@pytest.mark.parametrize("target, host, origin, cause, status", [
    ("/?token=s3cret-token", None, "https://evil.example", "origin", b"403"),
    ("/?token=s3cret-token", None, "null", "origin", b"403"),
    ("/?token=s3cret-token", None, "http://127.0.0.1.evil.example", "origin", b"403"),
    ("/?token=s3cret-token", "rebound.example:8765", None, "host", b"403"),
    ("/?token=s3cret-tokem", None, None, "token", b"401"),
    ("/", None, None, "token", b"401"),
    ("/?token=s3cret-token-longer", None, None, "token", b"401"),
])
def test_a_viewer_from_elsewhere_or_without_the_token_is_refused_and_counted(gate, target, host, origin, cause,
                                                                             status):
    answer, s = request(gate.port, target, host, origin)
    s.close()
    assert answer.startswith(b"HTTP/1.1 " + status) and cause.encode() in answer
    assert gate.refused[cause] == 1 and gate.admitted == 0 and gate.upstream.heads == []


def test_a_malformed_oversized_or_stalled_handshake_is_refused(gate, monkeypatch):
    s = socket.create_connection(("127.0.0.1", gate.port), timeout=10)
    s.sendall(b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert s.recv(4096).startswith(b"HTTP/1.1 400")
    s = socket.create_connection(("127.0.0.1", gate.port), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\nX: " + b"a" * (live_gate.HANDSHAKE_BYTES + 10))
    assert s.recv(4096).startswith(b"HTTP/1.1 400")
    monkeypatch.setattr(live_gate, "HANDSHAKE_S", 0.2)
    s = socket.create_connection(("127.0.0.1", gate.port), timeout=10)
    s.sendall(b"GET / HTTP/1.1\r\n")                      # and nothing more
    assert s.recv(4096).startswith(b"HTTP/1.1 400")
    assert gate.refused["malformed"] == 3 and gate.upstream.heads == []


def test_viewers_beyond_the_limit_are_refused_busy(gate, monkeypatch):
    held = [request(gate.port, "/?token=s3cret-token")[1] for _ in range(live_gate.MAX_CLIENTS)]
    answer, s = request(gate.port, "/?token=s3cret-token")
    assert answer.startswith(b"HTTP/1.1 503") and gate.refused["busy"] == 1
    for h in held:
        h.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:                  # the slots free as the relays end
        answer, s = request(gate.port, "/?token=s3cret-token")
        s.close()
        if answer.startswith(b"HTTP/1.1 101"):
            break
        time.sleep(0.05)
    assert answer.startswith(b"HTTP/1.1 101")


def test_without_a_token_a_loopback_viewer_needs_none():
    up = Upstream()
    g = LiveGate(up.port, port=0)
    try:
        answer, s = request(g.port, "/")
        s.close()
        assert answer.startswith(b"HTTP/1.1 101")
        answer, s = request(g.port, "/", origin="https://app.foxglove.dev")     # not allowed here
        s.close()
        assert answer.startswith(b"HTTP/1.1 403")
    finally:
        g.close()
        up.sock.close()


def hil(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hil", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["--live-token", "abc"], "expected 8 to 128"),
    (["--live-token", "a b c d e f g h"], "expected 8 to 128"),
    (["--live-allow-origin", "app.foxglove.dev"], "expected an origin"),
    (["--live-allow-origin", "https://app.foxglove.dev/studio"], "expected an origin"),
    (["--live-allow-origin", "https://x:port"], "expected an origin"),
])
def test_a_bad_token_or_origin_is_a_one_line_error(args, message):
    proc = hil("run", "ella", "--bus", "serial_frame", "--live", "0", "--duration", "0.1", *args)
    assert proc.returncode == 2 and message in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


def test_the_live_options_need_live():
    proc = hil("run", "ella", "--bus", "serial_frame", "--duration", "0.1", "--live-token", "abcdefgh")
    assert proc.returncode == 2 and "--live-token needs --live" in proc.stderr and proc.stderr.count("\n") == 1
