"""The live view's gate: the socket a viewer connects to, in front of the Foxglove server (which
listens on an ephemeral loopback port and has no hook into its handshake).

A WebSocket is not bound by a browser's same-origin policy: any web page the user has open could
connect to ``ws://127.0.0.1:8765``, and a page on a rebound DNS name could pose as loopback. The
gate reads each connection's opening handshake (at most HANDSHAKE_BYTES within HANDSHAKE_S) and
lets it through to the server only if

* its ``Host`` header names loopback (``127.0.0.1``, ``localhost``, ``[::1]``, any port): a
  rebound name is refused;
* its ``Origin`` header, when there is one (browsers always send it, desktop clients need not), is a
  loopback origin or one the user allowed (``--live-allow-origin https://app.foxglove.dev``);
* with a token set (``--live-token``), the request carries it as ``?token=...`` (compared in
  constant time; the query is removed before the server sees the request).

A refused connection gets ``403`` (``401`` for a missing or wrong token, ``503`` beyond MAX_CLIENTS
viewers) and is counted by cause in ``refused``; an admitted one is relayed both ways until
either side closes, one thread per direction.
"""
from __future__ import annotations

import hmac
import socket
import threading
from collections import Counter
from urllib.parse import parse_qsl, urlencode, urlsplit

HANDSHAKE_BYTES = 8192          # an opening handshake longer than this is refused
HANDSHAKE_S = 5.0               # ... and one slower than this
MAX_CLIENTS = 8                 # viewers at once
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
REFUSAL_CAUSES = ("malformed", "host", "origin", "token", "busy")
_STATUS = {"malformed": "400 Bad Request", "host": "403 Forbidden", "origin": "403 Forbidden",
           "token": "401 Unauthorized", "busy": "503 Service Unavailable"}


def _hostname(authority: str) -> str:
    """The host of a ``host[:port]`` or ``[v6]:port`` authority, lower case."""
    return (urlsplit(f"//{authority}").hostname or "").lower()


def loopback_origin(origin: str) -> bool:
    """Whether `origin` (an Origin header) is http(s) on a loopback host."""
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and (parts.hostname or "").lower() in LOOPBACK_HOSTS


class Handshake:
    """The opening request's target and headers (names lower case)."""

    def __init__(self, head: bytes):
        lines = head.decode("latin-1").split("\r\n")
        method, self.target, version = (lines[0].split(" ") + ["", "", ""])[:3]
        if method != "GET" or not version.startswith("HTTP/1."):
            raise ValueError("not an HTTP/1.1 GET")
        self.headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise ValueError("a header line without a colon")
            self.headers[name.strip().lower()] = value.strip()
        self.lines = lines

    def without_token(self) -> bytes:
        """The request as the server gets it: the token removed from its target."""
        parts = urlsplit(self.target)
        query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "token"])
        target = (parts.path or "/") + (f"?{query}" if query else "")
        first = self.lines[0].split(" ")
        return "\r\n".join([" ".join([first[0], target, *first[2:]]), *self.lines[1:]]).encode("latin-1") + b"\r\n\r\n"


class LiveGate:
    """Listens on host:port (0: a free port, ``port``) and admits viewers to the server at
    127.0.0.1:`upstream_port` (module docstring)."""

    def __init__(self, upstream_port: int, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
                 allowed_origins: tuple[str, ...] = ()):
        self.upstream_port = upstream_port
        self.token = token
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.refused: Counter = Counter({k: 0 for k in REFUSAL_CAUSES})
        self.admitted = 0
        self._clients = threading.BoundedSemaphore(MAX_CLIENTS)
        self._listener = socket.create_server((host, port))
        self.port: int = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="live-gate", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return                          # closed
            threading.Thread(target=self._admit, args=(conn,), name="live-gate-client", daemon=True).start()

    def verdict(self, request: Handshake) -> str | None:
        """The refusal cause of a handshake, None to admit it."""
        if _hostname(request.headers.get("host", "")) not in LOOPBACK_HOSTS:
            return "host"
        origin = request.headers.get("origin")
        if origin is not None and not loopback_origin(origin) and origin.rstrip("/").lower() not in self.allowed_origins:
            return "origin"
        if self.token is not None:
            given = dict(parse_qsl(urlsplit(request.target).query)).get("token", "")
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return "token"
        return None

    def _admit(self, conn: socket.socket) -> None:
        if not self._clients.acquire(blocking=False):
            self._refuse(conn, "busy")
            return
        try:
            try:
                head, rest = _read_head(conn)
                request = Handshake(head)
            except ValueError:
                self._refuse(conn, "malformed")
                return
            cause = self.verdict(request)
            if cause is not None:
                self._refuse(conn, cause)
                return
            conn.settimeout(None)
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            upstream.sendall(request.without_token() + rest)
            self.admitted += 1
            self._relay(conn, upstream)
        except OSError:
            conn.close()
        finally:
            self._clients.release()

    def _refuse(self, conn: socket.socket, cause: str) -> None:
        self.refused[cause] += 1
        body = f"live view: refused ({cause})\n".encode()
        try:
            conn.sendall(f"HTTP/1.1 {_STATUS[cause]}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
                         .encode() + body)
        except OSError:
            pass
        conn.close()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        with self._lock:
            if self._closed:
                client.close()
                upstream.close()
                return
            self._open.update((client, upstream))
        back = threading.Thread(target=_pump, args=(upstream, client), name="live-gate-relay", daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        with self._lock:
            self._open.difference_update((client, upstream))
        client.close()
        upstream.close()

    def stats(self) -> dict:
        return {"admitted": self.admitted, "refused": dict(self.refused)}

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for s in self._open:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._listener.close()


def _read_head(conn: socket.socket) -> tuple[bytes, bytes]:
    """The handshake's head (up to the blank line) and any bytes after it; ValueError if it is
    longer than HANDSHAKE_BYTES or slower than HANDSHAKE_S (OSError for a socket error)."""
    conn.settimeout(HANDSHAKE_S)
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HANDSHAKE_BYTES:
            raise ValueError("handshake too long")
        try:
            chunk = conn.recv(4096)
        except TimeoutError:
            raise ValueError("handshake too slow") from None
        if not chunk:
            raise ValueError("closed during the handshake")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if len(head) > HANDSHAKE_BYTES:
        raise ValueError("handshake too long")
    return head, rest


def _pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy src to dst until src ends or either fails; then end dst's writing side."""
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
