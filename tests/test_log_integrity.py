"""Run logs never lie: a writer that falls behind drops whole rows and records the gaps, events are
never lost, every record carries a checksum that the reader checks (damage is reported and skipped,
never returned as data), and the reader streams the file in bounded blocks."""
from __future__ import annotations

import json
import mmap
import os
import signal
import subprocess
import sys
import threading
import time

import msgpack
import numpy as np
import pytest

from hil.cli.integrity_summary import integrity_lines
from hil.cli.main import main
from hil.logs import writer_process
from hil.logs.run_logger import RunLogger
from hil.logs import runlog
from hil.logs.runlog import MsgpackRunWriter, RunLogError, RunLogReader, read_run

COLUMNS = ["cycle", "t", "x"]


needs_process = pytest.mark.skipif(not writer_process.available(), reason="no writer process on this machine")
WRITERS = ["thread", pytest.param("process", marks=needs_process)]


class Gate:
    """Holds a run logger's writer until set(): the writer thread waits at its first row; the writer
    process is stopped (SIGSTOP) and continued."""

    def __init__(self, logger: RunLogger):
        self.logger, self.event = logger, threading.Event()
        if isinstance(logger.out, writer_process.WriterProcess):
            stop_process(logger.out.pid)
            return
        write = logger.out.writer.write

        def slow(row):
            self.event.wait()
            write(row)
        logger.out.writer.write = slow

    def set(self) -> None:
        if isinstance(self.logger.out, writer_process.WriterProcess):
            os.kill(self.logger.out.pid, signal.SIGCONT)
        self.event.set()


def stop_process(pid: int) -> None:
    """SIGSTOP, returning once the process is stopped (a writer running on the other CPU may take a few
    more rows between the signal and its stop)."""
    os.kill(pid, signal.SIGSTOP)
    until(lambda: open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T", "the writer stops")


def until(condition, what: str, timeout_s: float = 60.0) -> None:
    """Wait for `condition()`; a failure of the test, not a hang, when it never holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"waited {timeout_s:g} s for: {what}"
        time.sleep(1e-3)


def throttled_logger(path, writer: str, depth: int = 8) -> tuple[RunLogger, Gate]:
    """A run logger whose writer (thread or process) holds until the gate opens."""
    logger = RunLogger(str(path), {}, COLUMNS, depth=depth, process=writer == "process")
    return logger, Gate(logger)


def put_rows(logger: RunLogger, cycles) -> None:
    for c in cycles:
        r = logger.row()
        r[:] = (c, c * 1e-3, -c)
        logger.put(r)


def covered(header: dict, rows: np.ndarray) -> list[int]:
    """Every cycle the log accounts for: its rows and its recorded gaps, in file order."""
    out = rows[:, 0].astype(int).tolist()
    for g in header["gaps"]:
        out += list(range(g["first_cycle"], g["last_cycle"] + 1))
    return sorted(out)


@pytest.mark.parametrize("writer", WRITERS)
def test_a_writer_that_falls_behind_drops_whole_rows_and_records_the_gap(tmp_path, writer):
    path = tmp_path / "run.msgpack"
    logger, gate = throttled_logger(path, writer)
    put_rows(logger, range(100))            # the thread holds one row and its queue 8, the process's ring 8
    gate.set()
    logger.close()
    header, rows = read_run(path)
    cycles = rows[:, 0]
    # the rows logged are the first ones queued, exactly as they were filled (none overwritten)
    np.testing.assert_array_equal(cycles, np.arange(len(rows)))
    np.testing.assert_array_equal(rows[:, 2], -cycles)
    assert 8 <= len(rows) <= 9
    assert header["gaps"] == [{"first_cycle": len(rows), "last_cycle": 99, "rows": 100 - len(rows),
                               "t": len(rows) * 1e-3}]
    assert logger.dropped == 100 - len(rows) and logger.report()["first_gaps"] == [(len(rows), 99)]
    assert [e["event"] for e in header["events"]] == ["log_gap"]


@pytest.mark.parametrize("writer", WRITERS)
def test_gaps_and_rows_account_for_every_cycle_when_the_writer_catches_up(tmp_path, writer):
    path = tmp_path / "run.msgpack"
    logger, gate = throttled_logger(path, writer, depth=4)
    put_rows(logger, range(0, 30))
    gate.set()
    until(lambda: not logger.out.backlog(), "the writer drains")    # then log more, then fall behind again
    put_rows(logger, range(30, 34))
    logger.close()
    header, rows = read_run(path)
    assert np.all(np.diff(rows[:, 0]) > 0)
    np.testing.assert_array_equal(rows[:, 2], -rows[:, 0])
    assert covered(header, rows) == list(range(34))
    assert sum(g["rows"] for g in header["gaps"]) == logger.dropped > 0


@pytest.mark.parametrize("writer", WRITERS)
def test_events_are_never_dropped_and_keep_their_order(tmp_path, writer):
    path = tmp_path / "run.msgpack"
    logger, gate = throttled_logger(path, writer, depth=4)
    for c in range(40):
        put_rows(logger, [c])
        if c % 5 == 0:
            logger.event({"event": "inject", "cycle": c, "t": c * 1e-3, "fault": f"f{c}", "detail": "d"})
    gate.set()
    logger.close()
    header, rows = read_run(path)
    injected = [e["cycle"] for e in header["events"] if e["event"] == "inject"]
    assert injected == list(range(0, 40, 5))
    assert covered(header, rows) == list(range(40))


def file_order(path) -> list[tuple[str, int]]:
    """The log's records after its header as they lie in the file: ("row", cycle) or ("event", cycle)."""
    with open(path, "rb") as f:
        records = list(msgpack.Unpacker(f, raw=False))[1:]
    return [("event", msgpack.unpackb(r.data[:-4])["cycle"]) if isinstance(r, msgpack.ExtType) else ("row", int(r[0]))
            for r in records]


@pytest.mark.parametrize("writer", WRITERS)
def test_each_event_lies_between_the_rows_it_was_logged_between(tmp_path, writer):
    path = tmp_path / "run.msgpack"
    logger = RunLogger(str(path), {}, COLUMNS, process=writer == "process")
    logger.event({"event": "start", "cycle": -1, "t": 0.0})
    for c in range(10):
        put_rows(logger, [c])
        if c in (0, 3, 7):
            logger.event({"event": "inject", "cycle": c, "t": c * 1e-3})
    logger.close()
    expected = [("event", -1)]
    for c in range(10):
        expected += [("row", c)] + ([("event", c)] if c in (0, 3, 7) else [])
    assert file_order(path) == expected


@needs_process
def test_a_writer_process_that_dies_leaves_its_lost_rows_counted_and_says_so(tmp_path):
    path = tmp_path / "run.msgpack"
    logger = RunLogger(str(path), {}, COLUMNS, depth=8, process=True)
    put_rows(logger, range(5))
    until(lambda: len(read_run(path)[1]) == 5, "5 rows written and flushed (FLUSH_INTERVAL_S when idle)")
    os.kill(logger.out.pid, signal.SIGKILL)
    logger.out.proc.wait()
    put_rows(logger, range(5, 50))          # the ring takes 8 more, nobody reads them
    logger.close()
    report = logger.report()
    assert report["writer"] == "process" and "status -9" in report["writer_error"]
    assert logger.dropped == 50 - 5 - 8 and report["first_gaps"] == [(13, 49)] and report["unwritten_rows"] == 8
    header, rows = read_run(path)
    np.testing.assert_array_equal(rows[:, 0], np.arange(5))
    lines = integrity_lines({"log": report})
    assert any(line.startswith("RUN LOG INCOMPLETE: the process writer failed") and "8 rows handed over not written"
               in line for line in lines)


def test_a_writer_thread_whose_disk_fills_counts_the_rows_it_could_not_write(tmp_path):
    path = tmp_path / "run.msgpack"
    logger = RunLogger(str(path), {}, COLUMNS)
    write, written = logger.out.writer.write, []

    def disk_fills(row):
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        write(row)
        written.append(row[0])
    logger.out.writer.write = disk_fills
    put_rows(logger, range(10))
    logger.close()
    report = logger.report()
    assert report["writer"] == "thread" and "No space left on device" in report["writer_error"]
    assert report["unwritten_rows"] == 7 and logger.dropped == 0
    assert any("RUN LOG INCOMPLETE: the thread writer failed" in line and "7 rows handed over not written" in line
               for line in integrity_lines({"log": report}))
    np.testing.assert_array_equal(read_run(path)[1][:, 0], np.arange(3))


@needs_process
def test_a_record_sent_while_the_writer_looks_away_still_goes_ahead_of_its_row(tmp_path, monkeypatch):
    """The loop sends an event and then commits rows just after the writer has drained the pipe (made to
    happen here by the writer's drain); the event must still lie ahead of row 0 in the log."""
    path, depth, columns = tmp_path / "run.msgpack", 8, 3
    size = writer_process._ring_bytes(depth, columns)
    ring_fd = os.memfd_create("test-ring")
    os.ftruncate(ring_fd, size)
    control, rows = writer_process._views(mmap.mmap(ring_fd, size), depth, columns)
    read_fd, write_fd = os.pipe()

    def frame(seq, item):
        payload = msgpack.packb(item, use_bin_type=True)
        return writer_process.FRAME.pack(seq, len(payload)) + payload
    os.write(write_fd, frame(0, {"columns": COLUMNS}))
    drain, drains = writer_process._Frames.drain, []

    def loop_acts_meanwhile(self, out):
        drain(self, out)
        drains.append(1)
        if len(drains) == 2:                    # the first drain after the header
            os.write(write_fd, frame(0, {"event": "inject", "cycle": 0, "t": 0.0}))    # ahead of row 0
            for c in range(3):
                rows[c] = (c, c * 1e-3, -c)
                control[0] = c + 1
        elif len(drains) == 4:
            os.close(write_fd)
    monkeypatch.setattr(writer_process._Frames, "drain", loop_acts_meanwhile)
    monkeypatch.setattr(writer_process.sys, "stdout", open(os.devnull, "w"))
    writer_process.serve(ring_fd, read_fd, depth, columns, str(path))
    assert file_order(path) == [("event", 0), ("row", 0), ("row", 1), ("row", 2)]


@needs_process
def test_a_ctrl_c_to_the_emulators_process_group_leaves_the_writer_writing(tmp_path):
    path = tmp_path / "run.msgpack"
    proc = subprocess.run([sys.executable, "-c", LOOP_INTERRUPTED, str(path)], capture_output=True, text=True,
                          timeout=120, start_new_session=True)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["writer_error"] is None and report["dropped_rows"] == 0
    header, rows = read_run(path)
    np.testing.assert_array_equal(rows[:, 0], np.arange(3000))
    assert [e["event"] for e in header["events"]] == ["stop"]


def test_a_writer_process_needs_a_path_and_no_tap():
    with pytest.raises(ValueError, match="needs a path"):
        RunLogger(None, {}, COLUMNS, process=True)
    with pytest.raises(ValueError, match="takes no tap"):
        RunLogger("run.msgpack", {}, COLUMNS, process=True, tap=object())


LOOP_INTERRUPTED = """
import json, os, signal, sys, time
from hil.logs.run_logger import RunLogger
signal.signal(signal.SIGINT, lambda *_: None)          # the loop stops at its own pace (hil run: stop_requested)
logger = RunLogger(sys.argv[1], {}, ["cycle", "t", "x"], process=True)
for c in range(3000):
    if c == 1000:
        os.killpg(os.getpgid(0), signal.SIGINT)        # Ctrl-C in the terminal: the whole process group
        time.sleep(0.2)
    r = logger.row()
    r[:] = (c, c * 1e-3, -c)
    logger.put(r)
logger.event({"event": "stop", "cycle": 2999, "t": 2.999})
logger.close()
print(json.dumps(logger.report()))
"""


LOOP_THAT_DIES = """
import os, signal, sys
from hil.logs.run_logger import RunLogger
logger = RunLogger(sys.argv[1], {}, ["cycle", "t", "x"], process=True)
for c in range(5000):
    r = logger.row()
    r[:] = (c, c * 1e-3, -c)
    logger.put(r)
logger.event({"event": "last", "cycle": 4999, "t": 4.999})
print(logger.out.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def gone(pid: int) -> bool:
    """Whether process `pid` has exited (an orphan's zombie counts as gone)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@needs_process
def test_the_log_of_a_loop_that_is_killed_holds_every_row_it_handed_over(tmp_path):
    """The writer process outlives the loop's process: the pipe's end tells it to write what is left."""
    path = tmp_path / "run.msgpack"
    proc = subprocess.run([sys.executable, "-c", LOOP_THAT_DIES, str(path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    until(lambda: gone(int(proc.stdout)), "the orphaned writer finishes on its own")
    header, rows = read_run(path)
    np.testing.assert_array_equal(rows[:, 0], np.arange(5000))
    assert [e["event"] for e in header["events"]] == ["last"], header
    assert not header["corrupt"] and header["trailing_bytes"] == 0, header


@needs_process
def test_a_stuck_writer_process_never_holds_up_the_end_of_the_run(tmp_path, monkeypatch):
    path = tmp_path / "run.msgpack"
    logger = RunLogger(str(path), {}, COLUMNS, depth=8, process=True)
    stop_process(logger.out.pid)
    for c in range(2000):                   # ~140 kB of events: more than the pipe holds
        logger.event({"event": "inject", "cycle": c, "t": c * 1e-3, "detail": "x" * 100})
    assert logger._pending                  # the rest wait in order
    waiting = logger._pending[0]
    logger.out.put_waiting(waiting, timeout_s=0.2)
    assert "took no record for 0.2 s" in logger.out.error

    def no_wait(*_):
        raise AssertionError("waited for a writer known to be stuck")
    monkeypatch.setattr(writer_process.select, "select", no_wait)
    logger.out.put_waiting(waiting, timeout_s=60.0)      # once it is known stuck, no wait at all
    monkeypatch.undo()
    os.kill(logger.out.pid, signal.SIGKILL)
    logger.close()
    assert "took no record" in logger.report()["writer_error"]


@pytest.mark.parametrize("writer", WRITERS)
def test_an_event_too_long_for_the_pipe_is_logged_cut(tmp_path, writer):
    path = tmp_path / "run.msgpack"
    logger = RunLogger(str(path), {}, COLUMNS, process=writer == "process")
    put_rows(logger, [0])
    logger.event({"event": "inject", "cycle": 0, "t": 0.0, "fault": "f", "detail": "y" * 10_000})
    logger.close()
    (event,) = read_run(path)[0]["events"]
    assert (event["event"], event["cycle"], event["fault"]) == ("inject", 0, "f")
    if writer == "process":
        assert event["detail"].startswith("y" * writer_process.CUT_CHARS) and event["detail"].endswith("cut for the log)")
    else:
        assert event["detail"] == "y" * 10_000


@needs_process
def test_a_writer_process_that_cannot_open_the_log_is_an_error_at_the_start(tmp_path):
    path = tmp_path / "missing" / "run.msgpack"
    with pytest.raises(RunLogError, match="the log writer process did not start: .*run.msgpack"):
        RunLogger(str(path), {}, COLUMNS, process=True)


def write_log(path, n: int = 50, events: bool = True) -> np.ndarray:
    rows = np.column_stack([np.arange(n), np.arange(n) * 1e-3, np.sin(np.arange(n))])
    with MsgpackRunWriter(path, {"columns": COLUMNS}) as w:
        for k, r in enumerate(rows):
            if events and k == n // 2:
                w.write_event({"event": "watchdog_tripped", "cycle": k, "t": k * 1e-3})
            w.write(r)
    return rows


def record_size() -> int:
    return 1 + 9 * len(COLUMNS) + 5


def test_a_damaged_row_is_reported_and_skipped_never_returned(tmp_path):
    path = tmp_path / "run.msgpack"
    rows = write_log(path, events=False)
    data = bytearray(path.read_bytes())
    first_row = len(data) - 50 * record_size()
    at = first_row + 10 * record_size() + 13          # inside row 10's values
    data[at] ^= 0x10
    path.write_bytes(bytes(data))
    header, back = read_run(path)
    np.testing.assert_array_equal(back, np.delete(rows, 10, axis=0))
    assert header["corrupt"] == [{"offset": first_row + 10 * record_size(), "bytes": record_size(), "after_cycle": 9}]


def test_damage_to_a_record_header_resynchronises_on_the_next_good_row(tmp_path):
    path = tmp_path / "run.msgpack"
    rows = write_log(path)
    data = bytearray(path.read_bytes())
    size = record_size()
    first_row = data.index(bytes([0x94, 0xCB]))
    data[first_row + 3 * size] = 0x00                  # row 3's array header
    data[first_row + 3 * size + size + 20] ^= 0xFF     # and row 4's values: a stretch of two rows
    path.write_bytes(bytes(data))
    header, back = read_run(path)
    np.testing.assert_array_equal(back, np.delete(rows, [3, 4], axis=0))
    assert header["corrupt"] == [{"offset": first_row + 3 * size, "bytes": 2 * size, "after_cycle": 2}]
    assert [e["event"] for e in header["events"]] == ["watchdog_tripped"]


def test_a_damaged_event_is_reported_not_returned(tmp_path):
    path = tmp_path / "run.msgpack"
    rows = write_log(path)
    data = bytearray(path.read_bytes())
    at = data.index(b"watchdog_tripped")
    data[at + 3] ^= 0x01
    path.write_bytes(bytes(data))
    header, back = read_run(path)
    np.testing.assert_array_equal(back, rows)
    assert header["events"] == [] and len(header["corrupt"]) == 1 and header["corrupt"][0]["after_cycle"] == 24


def test_a_cut_record_at_the_end_is_trailing_not_damage(tmp_path):
    path = tmp_path / "run.msgpack"
    rows = write_log(path, events=False)
    path.write_bytes(path.read_bytes()[:-13])
    header, back = read_run(path)
    np.testing.assert_array_equal(back, rows[:-1])
    assert header["trailing_bytes"] == record_size() - 13 and header["corrupt"] == []


def test_a_chunk_boundary_anywhere_in_a_record_is_read_as_the_record_it_cuts(tmp_path, monkeypatch):
    path = tmp_path / "run.msgpack"
    rows = write_log(path, n=40)
    size = record_size()
    for chunk in range(3 * size, 4 * size + 1):          # the boundaries fall at every byte of a record
        monkeypatch.setattr(runlog, "_CHUNK_BYTES", chunk)
        reader = RunLogReader(path)
        back = np.concatenate(list(reader.blocks()))
        assert reader.corrupt == [] and reader.trailing_bytes == 0, chunk
        np.testing.assert_array_equal(back, rows)
        assert [e["event"] for e in reader.events] == ["watchdog_tripped"]


def test_a_log_that_grows_while_it_is_read_is_read_whole(tmp_path, monkeypatch):
    path = tmp_path / "run.msgpack"
    rows = write_log(path, n=10, events=False)
    more = np.column_stack([np.arange(10, 60), np.arange(10, 60) * 1e-3, np.zeros(50)])
    blocks = RunLogReader.blocks

    def writer_goes_on(self, columns=None):
        with open(path, "ab") as f:             # the run's writer appends while the reader starts
            f.write(row_records(more, tmp_path / "more.msgpack"))
        yield from blocks(self, columns)
    monkeypatch.setattr(RunLogReader, "blocks", writer_goes_on)
    header, back = read_run(path)
    np.testing.assert_array_equal(back, np.vstack([rows, more]))


def row_records(rows: np.ndarray, scratch) -> bytes:
    """The row records of `rows` as the writer lays them out, without a header."""
    with MsgpackRunWriter(scratch, {"columns": COLUMNS}) as w:
        start = scratch.stat().st_size
        for r in rows:
            w.write(r)
    return scratch.read_bytes()[start:]


def test_the_reader_streams_in_bounded_blocks(tmp_path):
    path = tmp_path / "run.msgpack"
    rows = write_log(path, n=20000)
    reader = RunLogReader(path)
    blocks = list(reader.blocks(["x", "cycle"]))
    assert max(len(b) for b in blocks) <= 4096 and len(blocks) >= 5
    np.testing.assert_array_equal(np.concatenate(blocks), rows[:, [2, 0]])
    assert [e["event"] for e in reader.events] == ["watchdog_tripped"]


def test_version_1_logs_are_still_read(tmp_path):
    path = tmp_path / "old.msgpack"
    rows = np.array([[0.0, 0.0, 1.5], [1.0, 1e-3, 2.5]])
    with open(path, "wb") as f:
        f.write(msgpack.packb({"format": "hil-run", "version": 1, "columns": COLUMNS}))
        f.write(msgpack.packb(rows[0].tolist()))
        f.write(msgpack.packb({"event": "inject", "cycle": 1, "t": 1e-3}))
        f.write(msgpack.packb(rows[1].tolist()))
    header, back = read_run(path)
    np.testing.assert_array_equal(back, rows)
    assert header["events"] == [{"event": "inject", "cycle": 1, "t": 1e-3}]


@pytest.mark.parametrize("header, message", [
    ({"format": "hil-run", "version": 2}, '"columns" = None: expected a list'),
    ({"format": "hil-run", "version": 2, "columns": 7}, '"columns" = 7: expected a list'),
    ({"format": "hil-run", "version": 9, "columns": ["t"]}, "version 9 is not supported"),
])
def test_a_broken_header_is_a_one_line_error_naming_the_file(tmp_path, capsys, header, message):
    path = tmp_path / "bad.msgpack"
    path.write_bytes(msgpack.packb(header))
    with pytest.raises(RunLogError, match=message):
        read_run(path)
    assert main(["log", "export", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and message in err


def test_an_event_without_its_time_is_a_one_line_error(tmp_path, capsys):
    path = tmp_path / "bad.msgpack"
    with MsgpackRunWriter(path, {"columns": COLUMNS}) as w:
        w.write_event({"event": "inject", "cycle": 3})
    assert main(["log", "export", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err and '"t" = None: expected a number in s' in err


def test_a_binary_csv_log_names_the_file(tmp_path):
    path = tmp_path / "run.csv"
    path.write_bytes(b"t,x\n\xff\xfe\x00\x01")
    with pytest.raises(RunLogError, match=f"{path}: not a text file"):
        read_run(path)


def test_log_export_reports_gaps_and_damage_and_exports_only_good_rows(tmp_path, capsys):
    path = tmp_path / "run.msgpack"
    logger, gate = throttled_logger(path, "thread", depth=4)
    put_rows(logger, range(20))
    gate.set()
    logger.close()
    data = bytearray(path.read_bytes())
    first_row = data.index(bytes([0x94, 0xCB]))
    data[first_row + 2 * record_size() + 5] ^= 0x04
    path.write_bytes(bytes(data))
    assert main(["log", "export", str(path), "--out", str(tmp_path / "run.csv")]) == 0
    out = capsys.readouterr().out
    assert "rows dropped by the writer in 1 gaps (cycles" in out and "damaged bytes in 1 stretches skipped" in out
    header, rows = read_run(tmp_path / "run.csv")
    assert 2 not in rows[:, 0] and np.all(rows[:, 2] == -rows[:, 0])
    events = (tmp_path / "run.events.csv").read_text()
    assert "log_gap" in events
