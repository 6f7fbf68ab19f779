"""The run log's writer as a separate process: rows through a shared-memory ring, records through a pipe.

Why a process: the real-time loop thread holds the interpreter lock whenever it runs Python, and at a
period shorter than the pacer's spin (10 kHz) it never sleeps. A writer thread in the same process then
gets the lock only by forcing a switch every ``sys.getswitchinterval()`` (5 ms) and falls behind by
most rows; one that takes the lock in the loop's slack makes the loop wait for it on return from its
socket calls instead. A writer process shares no lock with the loop, and it runs on another CPU.

The ring is an anonymous shared mapping (memfd) handed to the writer by file descriptor: a control
block of two int64 counters, then ``slots = depth + 1`` rows of float64. ``committed`` (rows the loop
has published) is stored only by the loop, ``taken`` (rows the writer has written) only by the writer.
The loop fills slot ``committed % slots`` in place and publishes it by storing ``committed + 1``, but
only while ``committed - taken < depth``: the slot it fills is then never one the writer has still to
read. This relies on stores becoming visible in program order (x86-64 total store order); elsewhere
``available()`` is False and the run log keeps its writer thread.

Records (events, gap records, the header first) go through a pipe as frames ``<u64 seq><u32 length>``
plus a msgpack payload, ``seq`` being the number of rows committed before it: the writer writes a
record ahead of the row it precedes. A frame of at most PIPE_BUF bytes is written atomically without
blocking (``offer`` says False when the pipe is full, and the run logger keeps it waiting); an event
too long for that is cut to its event, cycle, time, fault and the start of its detail, and only the
header, at the start, is written in parts. Closing the pipe ends the run: the writer writes every row
committed and every record left, closes the log and exits 0; any error ends it with status 1 and a
message on its stderr, which ``close()`` reports.

    python -m hil.logs.writer_process RING_FD PIPE_FD DEPTH COLUMNS PATH    (started by WriterProcess)
"""
from __future__ import annotations

import contextlib
import mmap
import os
import platform
import select
import signal
import struct
import subprocess
import sys
import time
from collections import deque

import msgpack
import numpy as np

from hil.logs.run_format import RunLogError
from hil.logs.run_writers import FLUSH_INTERVAL_S, MsgpackRunWriter

FRAME = struct.Struct("<QI")     # rows committed before the record, payload length
CONTROL_BYTES = 64               # committed, taken (int64 each), padded to a cache line
POLL_S = 0.002                   # the writer's longest sleep between looks at the ring
PUBLISH_EVERY = 256              # rows between two stores of `taken` inside one catch-up
START_TIMEOUT_S = 30.0
MAX_FRAME_BYTES = 1 << 24        # a longer length in the pipe means its frames are out of step
CUT_CHARS = 128                  # of each text of an event too long for one atomic pipe write (UTF-8: 4 x)
STORE_ORDERED_MACHINES = ("x86_64", "amd64", "i386", "i686")


def available() -> bool:
    """Whether this machine can run the writer process: Linux memfd, and stores seen in program order."""
    return hasattr(os, "memfd_create") and platform.machine().lower() in STORE_ORDERED_MACHINES


def _views(buffer, depth: int, columns: int) -> tuple[np.ndarray, np.ndarray]:
    control = np.ndarray(2, np.int64, buffer)
    rows = np.ndarray((depth + 1, columns), np.float64, buffer, CONTROL_BYTES)
    return control, rows


def _ring_bytes(depth: int, columns: int) -> int:
    return CONTROL_BYTES + (depth + 1) * columns * 8


class WriterProcess:
    """The loop's side: rows filled in place in the ring, records framed into the pipe."""

    def __init__(self, path: str, header: dict, columns: int, depth: int):
        self.path, self.depth = str(path), depth
        self.error: str | None = None
        self.unwritten = 0                  # rows published that the writer did not write (set by close)
        self._committed = 0
        size = _ring_bytes(depth, columns)
        ring_fd = os.memfd_create("hil-log-ring")
        self.proc = None
        fds = [ring_fd]
        try:
            os.ftruncate(ring_fd, size)
            self._map = mmap.mmap(ring_fd, size)
            read_fd, self._pipe = os.pipe()
            fds.append(read_fd)
            # its own session: a Ctrl-C or SIGTERM to the emulator's process group must not end the writer
            # before the rows in the ring are written; the pipe's end stops it
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hil.logs.writer_process", str(ring_fd), str(read_fd), str(depth),
                 str(columns), self.path], pass_fds=(ring_fd, read_fd), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            for fd in fds:
                os.close(fd)
            fds = []
            self._control, self._rows = _views(self._map, depth, columns)
            self._slot = self._rows[0]
            self._write_blocking(self._frame(header), START_TIMEOUT_S)
            self._await_ready()
        except BaseException:
            self._abandon(fds)
            raise
        os.set_blocking(self._pipe, False)

    def _abandon(self, fds: list[int]) -> None:
        """A start that failed: the child reaped, every descriptor closed."""
        for fd in fds + ([self._pipe] if hasattr(self, "_pipe") else []):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.communicate()
        self.__dict__.pop("_slot", None)
        self.__dict__.pop("_rows", None)
        self.__dict__.pop("_control", None)
        if hasattr(self, "_map"):
            self._map.close()               # no row of it was handed out yet

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _await_ready(self) -> None:
        ready, _, _ = select.select([self.proc.stdout], [], [], START_TIMEOUT_S)
        if not ready or self.proc.stdout.readline() != b"ready\n":
            self.proc.kill()
            _, err = self.proc.communicate()
            raise RunLogError(f"{self.path}: the log writer process did not start: "
                              f"{err.decode(errors='replace').strip() or 'no answer'}")

    def slot(self) -> np.ndarray:
        """The ring slot the next row is filled in."""
        return self._slot

    def room(self) -> bool:
        """Whether the ring takes another row."""
        return self._committed - int(self._control[1]) < self.depth

    def offer_row(self, row: np.ndarray) -> bool:
        """Publish the row (filled in slot(), else copied there); False when the ring is full."""
        if not self.room():
            return False
        if row is not self._slot:
            self._slot[:] = row
        self._committed += 1
        self._control[0] = self._committed
        self._slot = self._rows[self._committed % (self.depth + 1)]
        return True

    def backlog(self) -> int:
        """Rows published and not yet written."""
        return self._committed - int(self._control[1])

    def offer(self, item: dict | list) -> bool:
        """Send an event (dict) or a gap record (list) without blocking; False when the pipe is full. An
        event too long for one atomic write keeps its event, cycle, t and fault and the start of its detail."""
        frame = self._frame(item)
        if len(frame) > select.PIPE_BUF:
            frame = self._frame(_shortened(item, len(frame)))
        try:
            os.write(self._pipe, frame)
        except BlockingIOError:
            return False
        except BrokenPipeError:
            return True         # the writer is gone: close() reports it and the rows it did not write
        return True

    def put_waiting(self, item: dict | list, timeout_s: float = 5.0) -> None:
        """Send a record, waiting up to `timeout_s` for room (at the end of a run); a writer that takes
        nothing for that long leaves the record unwritten and the run's `error` says so."""
        deadline = time.monotonic() + timeout_s
        while not self.offer(item):
            if self.error is not None or time.monotonic() >= deadline:
                self.error = self.error or f"the log writer took no record for {timeout_s:g} s: events not written"
                return
            select.select([], [self._pipe], [], 0.05)

    def _frame(self, item) -> bytes:
        payload = msgpack.packb(item, use_bin_type=True)
        return FRAME.pack(self._committed, len(payload)) + payload

    def _write_blocking(self, frame: bytes, timeout_s: float) -> None:
        """The header (longer than one atomic write), while the pipe still blocks; a writer that is gone or
        takes nothing for `timeout_s` fails the start in _await_ready."""
        view, deadline = memoryview(frame), time.monotonic() + timeout_s
        while view and select.select([], [self._pipe], [], max(0.0, deadline - time.monotonic()))[1]:
            try:
                view = view[os.write(self._pipe, view[:select.PIPE_BUF]):]
            except BrokenPipeError:
                return

    def close(self, timeout_s: float = 60.0) -> None:
        """End the run: the writer writes what is left. A writer that failed or did not finish is kept in
        `error`, the rows it did not write in `unwritten`. The ring is left to the collector: a row view
        the loop still holds must not point into an unmapped page."""
        os.close(self._pipe)
        try:
            _, err = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
            self.error = f"the log writer did not finish within {timeout_s:g} s; killed"
        if self.proc.returncode and self.error is None:
            self.error = (err.decode(errors="replace").strip().splitlines() or [""])[-1] \
                or f"the log writer exited with status {self.proc.returncode}"
        if self.error is not None:
            self.unwritten = self._committed - int(self._control[1])


def _shortened(item: dict, size: int) -> dict:
    """An event of `size` bytes cut to fit one atomic pipe write: its event, cycle, t, fault and the start
    of its detail, each text at most CUT_CHARS long (a gap record always fits)."""
    kept = {k: item[k] for k in ("event", "cycle", "t", "fault") if k in item}
    kept = {k: v[:CUT_CHARS] if isinstance(v, str) else v for k, v in kept.items()}
    return {**kept, "detail": f"{str(item.get('detail', ''))[:CUT_CHARS]} ... (a {size}-byte event, cut for the log)"}


class _Frames:
    """The writer's side of the pipe: whole frames (seq, item) out of what has been read."""

    def __init__(self, fd: int):
        self.fd, self.buf, self.eof = fd, bytearray(), False

    def drain(self, out: deque) -> None:
        """Read everything the pipe holds now (the descriptor does not block), or up to its end."""
        while not self.eof:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            if not data:
                self.eof = True
                if self.buf:
                    raise RunLogError(f"the run's last record was cut short ({len(self.buf)} bytes)")
            self.buf += data
            self._frames(out)

    def _frames(self, out: deque) -> None:
        while len(self.buf) >= FRAME.size:
            seq, n = FRAME.unpack_from(self.buf)
            if n > MAX_FRAME_BYTES:
                raise RunLogError(f"a record of {n} bytes in the pipe: the frames are out of step")
            if len(self.buf) < FRAME.size + n:
                break
            out.append((seq, msgpack.unpackb(bytes(self.buf[FRAME.size:FRAME.size + n]), raw=False)))
            del self.buf[:FRAME.size + n]

    def first(self):
        out: deque = deque()
        while not out:
            if self.eof:
                raise RunLogError("the run ended before the log header arrived")
            select.select([self.fd], [], [], POLL_S)
            self.drain(out)
        return out.popleft()[1]


def _write_record(out: MsgpackRunWriter, item) -> None:
    if isinstance(item, list):
        out.write_gap(*item)
    else:
        out.write_event(item)


def serve(ring_fd: int, pipe_fd: int, depth: int, columns: int, path: str) -> None:
    """The writer's loop: rows in order, each record ahead of the row it precedes, until the pipe closes.

    Each pass reads `committed` first and then drains the pipe: a record sent before row k was committed
    is then already read when row k is written (the loop writes it before it stores the count)."""
    ring = mmap.mmap(ring_fd, _ring_bytes(depth, columns))
    control, rows = _views(ring, depth, columns)
    os.set_blocking(pipe_fd, False)
    frames = _Frames(pipe_fd)
    out = MsgpackRunWriter(path, frames.first())
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    records: deque = deque()
    taken, slots = 0, depth + 1
    flushed_at, unflushed = time.monotonic(), False
    while not frames.eof:
        select.select([pipe_fd], [], [], POLL_S)
        committed = int(control[0])
        frames.drain(records)
        if frames.eof:                  # the loop closed the pipe after its last row
            committed = int(control[0])
        while True:
            if records and records[0][0] <= taken:
                _write_record(out, records.popleft()[1])
            elif taken < committed:
                out.write(rows[taken % slots])
                taken += 1
                if taken % PUBLISH_EVERY == 0:
                    control[1] = taken
            else:
                break
            unflushed = True
        control[1] = taken
        if unflushed and time.monotonic() - flushed_at >= FLUSH_INTERVAL_S:   # caught up: what a crash would lose
            out.flush()
            flushed_at, unflushed = time.monotonic(), False
    while records:
        _write_record(out, records.popleft()[1])
    out.close()


def main(argv: list[str]) -> int:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):     # the pipe's end stops it, nothing else
        signal.signal(signum, signal.SIG_IGN)
    ring_fd, pipe_fd, depth, columns = (int(a) for a in argv[:4])
    try:
        serve(ring_fd, pipe_fd, depth, columns, argv[4])
    except (OSError, RunLogError, ValueError) as exc:
        print(f"log writer: {argv[4]}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
