"""A firmware under test as a process beside the emulator: any program, in any language.

The command line may hold placeholders for the link's far end (Endpoint): ``{port}`` (a plain
device path: the pty or slcan pty, or the CAN channel), ``{link}`` (a link spec of
firmware_bridge.links.connect, e.g. ``serial:/dev/pts/3``), ``{interface}`` and ``{channel}`` (the
python-can interface and channel; ``serial`` and the path for a serial link) and ``{bus}`` (the
bus map file). Its output is read by two threads that keep the last lines (the firmware never
blocks on a full pipe); a third waits for its exit and reports it, so that a firmware that dies
mid-run fails the run with its exit status and last words.
"""
from __future__ import annotations

import os
import re
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from config_schema import UserError

TAIL_LINES = 20


@dataclass(frozen=True)
class Endpoint:
    """The firmware's end of the link."""

    kind: str           # serial | can | canfd
    link: str           # link spec (firmware_bridge.links.connect)
    port: str           # device path, or the CAN channel
    interface: str      # python-can interface, or "serial"
    channel: str        # CAN channel, or the serial device path
    bus: str            # bus map file

    def placeholders(self) -> dict[str, str]:
        return {"port": self.port, "link": self.link, "interface": self.interface, "channel": self.channel,
                "bus": self.bus}


def endpoint_of(link_spec: str, bus_path: str) -> Endpoint:
    """The Endpoint a firmware opens with `link_spec` (its own spec of the link)."""
    kind, _, rest = link_spec.partition(":")
    if kind in ("serial", "serial-fd"):
        return Endpoint("serial", link_spec, rest, "serial", rest, bus_path)
    if kind in ("can", "canfd"):
        interface, _, channel = rest.partition(":")
        channel = channel.split(",")[0]
        return Endpoint(kind, link_spec, channel, interface, channel, bus_path)
    return Endpoint(kind, link_spec, rest, kind, rest, bus_path)


_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def expand(command: Sequence[str], endpoint: Endpoint) -> list[str]:
    """The command line with its placeholders filled in: exactly {port}, {link}, {interface}, {channel} and
    {bus} ({{ and }} for literal braces); anything else in braces, or a lone brace, is a UserError naming
    it. Plain substitution: no attribute, index or format spec of the user's text is evaluated."""
    values = endpoint.placeholders()

    def fill(m: re.Match, part: str) -> str:
        text = m.group(0)
        if text in ("{{", "}}"):
            return text[0]
        if m.group(1) in values:
            return values[m.group(1)]
        raise UserError(f"firmware command {part!r}: {text!r} is not a placeholder; expected "
                        + ", ".join("{" + k + "}" for k in values) + " ({{ and }} for literal braces)")
    return [_PLACEHOLDER.sub(lambda m, part=part: fill(m, part), part) for part in command]


class FirmwareProcess:
    """A started firmware: its output tails, its exit watched (`on_exit(status)` from a thread)."""

    def __init__(self, argv: Sequence[str], cwd: str | Path | None = None,
                 placement: Callable[[], None] | None = None, echo: Callable[[str], None] | None = None):
        """`placement` runs in the child before exec (CPU, priority); `echo(line)` sees every
        line the firmware prints (e.g. to pass it on to the user)."""
        self.argv = list(argv)
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     cwd=cwd, preexec_fn=placement, bufsize=1)
        self.stdout: deque[str] = deque(maxlen=TAIL_LINES)
        self.stderr: deque[str] = deque(maxlen=TAIL_LINES)
        self.lines: deque[str] = deque()      # stdout lines not yet taken by next_line()
        self._line_ready = threading.Condition()
        self._echo = echo
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout, True),
                                          name="firmware-stdout", daemon=True),
                         threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr, False),
                                          name="firmware-stderr", daemon=True)]
        for t in self._readers:
            t.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll()

    def _read(self, pipe, tail: deque, keep: bool) -> None:
        for line in pipe:
            line = line.rstrip("\n")
            tail.append(line)
            if keep:
                with self._line_ready:
                    self.lines.append(line)
                    self._line_ready.notify_all()
            if self._echo is not None:
                self._echo(line)
        with self._line_ready:
            self._line_ready.notify_all()

    def next_line(self, timeout_s: float) -> str | None:
        """The next line the firmware printed on stdout; None at its end or after the timeout."""
        with self._line_ready:
            self._line_ready.wait_for(lambda: self.lines or not self._readers[0].is_alive(), timeout_s)
            return self.lines.popleft() if self.lines else None

    def watch(self, on_exit: Callable[[int], None]) -> None:
        """Call on_exit(status) from a thread once the process has exited."""
        def wait() -> None:
            on_exit(self.proc.wait())
        threading.Thread(target=wait, name="firmware-exit", daemon=True).start()

    def wait(self, timeout_s: float) -> int | None:
        """Its exit status, waiting up to timeout_s; None if it still runs."""
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, grace_s: float = 2.0) -> int:
        """Wait up to grace_s for its own exit, then terminate it (kill it a second later); reap it
        and let the readers finish."""
        if self.wait(grace_s) is None:
            self.proc.terminate()
            if self.wait(1.0) is None:
                self.proc.kill()
        status = self.proc.wait()
        for t in self._readers:
            t.join(2.0)
        for pipe in (self.proc.stdout, self.proc.stderr):
            pipe.close()
        return status

    def output(self) -> str:
        """Everything it printed on stdout that is still kept (the last lines)."""
        return "\n".join(self.stdout)

    def describe_exit(self, status: int) -> str:
        """One paragraph: the exit status (or signal) and the last lines of stderr."""
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        tail = list(self.stderr) or list(self.stdout)
        words = ("; last output:\n    " + "\n    ".join(tail[-8:])) if tail else " (no output)"
        return f"firmware {os.path.basename(self.argv[0])} (pid {self.pid}) {how}{words}"
