"""A full disk loses nothing already written: the summary is printed whole (and exits 4) when the run
log or its summary file cannot be written, each named with the reason; the log stays readable up to
where the disk filled."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hil.cli import run as run_cli
from hil.cli.registry import EXIT_RECORDS_INCOMPLETE
from hil.logs.runlog import read_run

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MB tmpfs (needs the rights to mount one)."""
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (not root, or no mount rights): the injected ENOSPC test covers it")
    yield where
    subprocess.run(["umount", str(where)], capture_output=True)


def test_a_full_disk_keeps_the_printed_summary_and_says_what_was_lost(small_disk):
    log = small_disk / "run.msgpack"
    proc = subprocess.run([sys.executable, "-m", "hil", "run", "ella", "--bus", "serial_frame", "--mode", "lockstep",
                           "--no-realtime", "--spawn-firmware", "--duration", "3", "--log", str(log), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == EXIT_RECORDS_INCOMPLETE, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.splitlines()[-1])
    assert summary["cycles"] == 3000 and "No space left on device" in summary["log"]["writer_error"]
    assert "No space left on device" in summary["summary_file_error"]
    assert not Path(str(log) + ".summary.json").exists()            # no empty summary file left behind
    header, rows = read_run(log)                                    # the log reads up to where the disk filled
    assert 0 < len(rows) < 3000


def test_a_summary_file_that_cannot_be_written_is_reported_not_raised(tmp_path, monkeypatch):
    path = tmp_path / "run.msgpack.summary.json"
    real_open = open

    def full(file, mode="r", *args, **kwargs):
        if str(file) == str(path) and "w" in mode:
            handle = real_open(file, mode, *args, **kwargs)
            handle.close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(file, mode, *args, **kwargs)
    monkeypatch.setattr("builtins.open", full)
    error = run_cli._write_summary(str(path), {"cycles": 1})
    assert error == f"{path}: No space left on device" and not path.exists()
    summary = {"log": {"writer_error": "x.msgpack: [Errno 28] No space left on device"}, "summary_file_error": error}
    assert run_cli.records_incomplete(summary) == ["run log: x.msgpack: [Errno 28] No space left on device",
                                                  f"summary file: {error}"]
    assert run_cli._exit_status({**summary, "run_failures": []}, check=False) == EXIT_RECORDS_INCOMPLETE
