"""A system-wide setting the emulator changes (the unbound workqueues' CPU mask with --cpu) is put
back on any exit: restore() on a normal one, the guardian process after a real SIGKILL."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from hil.runtime.realtime import RealtimeSetup

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="moving the workqueues needs a second CPU")

HOLDER = """
import sys, time
from hil.runtime.realtime import RealtimeSetup
report = RealtimeSetup(priority=None, cpu=0, lock_memory=False, gc_mode="keep", workqueue_mask=sys.argv[1]).apply()
print(report["kworkers"].active, report["kworkers"].detail, flush=True)
time.sleep(120)
"""


def wait_for(predicate, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_a_sigkilled_emulator_leaves_the_workqueue_mask_as_it_found_it(tmp_path):
    mask = tmp_path / "cpumask"
    mask.write_text("ff")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(mask)], stdout=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline()
        assert line.startswith("True ") and "guardian pid" in line
        others = sum(1 << c for c in range(1, os.cpu_count()))
        assert mask.read_text() == format(others, "x")        # changed while the emulator runs
        guardian = int(line.split("guardian pid ")[1].rstrip(")\n"))
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        assert wait_for(lambda: mask.read_text() == "ff")     # put back by the guardian
        assert wait_for(lambda: not _alive(guardian))
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.stdout.close()


def test_a_normal_restore_releases_the_guardian_without_a_second_write(tmp_path):
    mask = tmp_path / "cpumask"
    mask.write_text("3")
    setup = RealtimeSetup(priority=None, cpu=0, lock_memory=False, gc_mode="keep", workqueue_mask=str(mask))
    report = setup.apply()
    assert report["kworkers"].active and mask.read_text() != "3"
    guardian = setup._changed[str(mask)][1].pid
    setup.restore()
    assert mask.read_text() == "3" and not _alive(guardian)
    mask.write_text("1")                 # changed by someone else afterwards: the guardian is gone, no write
    time.sleep(0.05)
    assert mask.read_text() == "1"


def test_an_unwritable_setting_is_reported_and_leaves_no_guardian(tmp_path):
    setup = RealtimeSetup(priority=None, cpu=0, lock_memory=False, gc_mode="keep",
                          workqueue_mask=str(tmp_path / "missing" / "cpumask"))
    report = setup.apply()
    assert not report["kworkers"].active and "not readable" in report["kworkers"].detail
    assert not setup._changed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


GROUP = """
import os, sys, time
os.environ["HIL_RUNTIME_DIR"] = sys.argv[2]
from hil.runtime.realtime import RealtimeSetup
report = RealtimeSetup(priority=None, cpu=0, lock_memory=False, gc_mode="keep", workqueue_mask=sys.argv[1]).apply()
print(report["kworkers"].active, report["kworkers"].detail, flush=True)
time.sleep(120)
"""


def test_a_setting_left_changed_when_the_emulator_dies_with_its_guardian_is_restored_by_the_next_run(tmp_path,
                                                                                                    monkeypatch):
    """A kill of the whole process group takes the guardian too; the record written before the change lets
    the next run (restore_stale, which `hil run` and `hil doctor --restore` call) put the setting back."""
    from hil.runtime.sysguard import restore_stale
    runtime = tmp_path / "runtime"
    monkeypatch.setenv("HIL_RUNTIME_DIR", str(runtime))
    mask = tmp_path / "cpumask"
    mask.write_text("ff")
    holder = subprocess.Popen([sys.executable, "-c", GROUP, str(mask), str(runtime)], stdout=subprocess.PIPE,
                              text=True, start_new_session=True)
    try:
        line = holder.stdout.readline()
        assert line.startswith("True ")
        guardian = int(line.split("guardian pid ")[1].rstrip(")\n"))
        records = list((runtime / "settings").glob("*.json"))
        assert len(records) == 1 and mask.read_text() != "ff"
        assert restore_stale() == []                                # its owner lives: nothing touched
        os.killpg(holder.pid, signal.SIGKILL)                       # the emulator ...
        os.kill(guardian, signal.SIGKILL)                           # ... and its guardian (its own session)
        holder.wait()
        assert wait_for(lambda: not _alive(guardian))
        assert mask.read_text() != "ff"                             # nobody put it back
        restored = restore_stale()
        assert len(restored) == 1 and f"{mask} restored to 'ff'" in restored[0] and "died" in restored[0]
        assert mask.read_text() == "ff" and not list((runtime / "settings").glob("*.json"))
        assert restore_stale() == []                                # once
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.stdout.close()


def test_a_normal_restore_and_a_guardian_restore_leave_no_record(tmp_path, monkeypatch):
    monkeypatch.setenv("HIL_RUNTIME_DIR", str(tmp_path / "runtime"))
    mask = tmp_path / "cpumask"
    mask.write_text("3")
    setup = RealtimeSetup(priority=None, cpu=0, lock_memory=False, gc_mode="keep", workqueue_mask=str(mask))
    setup.apply()
    assert len(list((tmp_path / "runtime" / "settings").glob("*.json"))) == 1
    setup.restore()
    assert not list((tmp_path / "runtime" / "settings").glob("*.json"))
