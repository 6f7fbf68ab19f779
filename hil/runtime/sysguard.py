"""Nothing left behind when the emulator dies, however: a system-wide setting it changed is put
back (SettingGuard), a firmware it spawned exits with it (exit_with_parent).

The real-time setup changes one setting outside its own process: the CPUs unbound kernel
workqueues may run on (hil.runtime.realtime, feature "kworkers"). A normal exit and SIGTERM
restore it in ``RealtimeSetup.restore``; a SIGKILL, a crash or an OOM kill give no chance to. So
before the change a guardian process is started: a separate small interpreter that holds the old
value and waits on a pipe from the emulator. When the pipe closes without the word "released"
(the emulator died, however), the guardian writes the old value back and exits; after a normal
restore the emulator sends "released" and the guardian exits without writing. The guardian runs
under SCHED_OTHER on every CPU, ignores SIGINT, SIGTERM and SIGHUP (a Ctrl-C to the terminal's
process group must not take it down before the emulator), and imports nothing of the project.

The emulator and its guardian can die together (a kill of the whole process group or cgroup, the
OOM killer). So each change is first recorded in a file of its own under the settings folder
(``settings_dir()``: the path, the old value, the owner's pid and start time, the guardian's pid);
the owner removes the record once it restored the setting, the guardian once it wrote the old value
back. A record whose owner and guardian are both gone is stale: ``restore_stale()`` writes its old
value back and removes it; `hil run` calls it before it starts, and `hil doctor --restore` on
demand. The limits: a record in a removed folder, or a setting changed again by someone else after
the run died, is restored to the old value all the same (the record cannot know); a reboot resets
the kernel settings anyway.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

RELEASED = b"released\n"

# The guardian's program: argv = [path, old value]. It says "armed" once it waits.
_PROGRAM = r"""
import os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
try:
    os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    os.sched_setaffinity(0, range(os.cpu_count() or 1))
except OSError:
    pass
path, old, record = sys.argv[1], sys.argv[2], sys.argv[3]
sys.stdout.write("armed\n")
sys.stdout.flush()
said = b""
while True:
    chunk = os.read(0, 64)
    if not chunk:
        break
    said += chunk
if said != RELEASED:
    with open(path, "w") as f:
        f.write(old)
    try:
        os.unlink(record)
    except OSError:
        pass
""".replace("RELEASED", repr(RELEASED))


def settings_dir() -> Path:
    """Where the records of changed settings live: $HIL_RUNTIME_DIR, else $XDG_RUNTIME_DIR/ella-hil, else
    /run/ella-hil for root, else ella-hil-<uid> in the temporary folder."""
    if os.environ.get("HIL_RUNTIME_DIR"):
        base = Path(os.environ["HIL_RUNTIME_DIR"])
    elif os.environ.get("XDG_RUNTIME_DIR"):
        base = Path(os.environ["XDG_RUNTIME_DIR"]) / "ella-hil"
    elif os.geteuid() == 0 and Path("/run").is_dir():
        base = Path("/run/ella-hil")
    else:
        base = Path(tempfile.gettempdir()) / f"ella-hil-{os.geteuid()}"
    return base / "settings"


def start_time(pid: int) -> int | None:
    """The start time of process `pid` in clock ticks after boot (/proc/<pid>/stat field 22), None if it is gone
    or a zombie: with the pid it names one process, not a later one that reused the number."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return None if fields[0] == "Z" else int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int, started: int | None) -> bool:
    return started is not None and start_time(pid) == started


class SettingGuard:
    """Restores `path` to `old` if this process dies before ``release()`` (the guardian), or, should the guardian
    die with it, at the next restore_stale() (the record)."""

    def __init__(self, path: str | Path, old: str):
        self.path = str(path)
        folder = settings_dir()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, record = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".json", dir=folder)
        self.record = Path(record)
        entry = {"path": self.path, "old": old, "owner": os.getpid(), "owner_start": start_time(os.getpid())}
        with os.fdopen(fd, "w", encoding="utf-8") as f:          # recorded before the setting is changed
            json.dump(entry, f)
        self._proc = subprocess.Popen([sys.executable, "-c", _PROGRAM, self.path, old, record], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, start_new_session=True, close_fds=True)
        line = self._proc.stdout.readline()
        if line != b"armed\n":
            self._proc.kill()
            self._proc.wait()
            self.record.unlink(missing_ok=True)
            raise RuntimeError(f"the guardian of {self.path} did not start ({line!r})")
        entry.update(guardian=self._proc.pid, guardian_start=start_time(self._proc.pid))
        self.record.write_text(json.dumps(entry), encoding="utf-8")

    @property
    def pid(self) -> int:
        return self._proc.pid

    def release(self) -> None:
        """The setting was restored by its owner: the guardian exits without writing, the record goes."""
        try:
            self._proc.stdin.write(RELEASED)
            self._proc.stdin.close()
        except OSError:
            pass
        self._proc.wait(timeout=5.0)
        self._proc.stdout.close()
        self.record.unlink(missing_ok=True)


def temp_folder(kind: str) -> str:
    """A new temporary folder ``hil-<kind>-<pid>-*``: the pid lets remove_stale_folders() tell a dead run's."""
    return tempfile.mkdtemp(prefix=f"hil-{kind}-{os.getpid()}-")


def remove_stale_folders(kind: str, base: str | Path | None = None) -> int:
    """Remove the temporary folders of `kind` (temp_folder) whose process is gone (killed before it could);
    how many."""
    import shutil
    removed = 0
    for folder in Path(base or tempfile.gettempdir()).glob(f"hil-{kind}-*-*"):
        pid = folder.name.split("-")[2]
        if pid.isdigit() and start_time(int(pid)) is None and folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    return removed


def restore_stale(folder: Path | None = None) -> list[str]:
    """Write back the old value of every recorded setting whose owner and guardian are both gone, and remove
    those records; one line per setting restored (or that could not be)."""
    folder = folder or settings_dir()
    done = []
    for record in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        try:
            entry = json.loads(record.read_text(encoding="utf-8"))
            path, old = str(entry["path"]), str(entry["old"])
        except (OSError, ValueError, KeyError, TypeError):
            done.append(f"{record}: an unreadable record of a changed setting, left in place")
            continue
        if _alive(entry.get("owner", -1), entry.get("owner_start")) or \
                _alive(entry.get("guardian", -1), entry.get("guardian_start")):
            continue                                  # its run, or its guardian, still looks after it
        try:
            Path(path).write_text(old, encoding="ascii")
        except OSError as exc:
            done.append(f"{path}: could not restore {old.strip()!r} ({exc.strerror or exc}); record kept: {record}")
            continue
        record.unlink(missing_ok=True)
        done.append(f"{path} restored to {old.strip()!r} (left changed by run pid {entry.get('owner')}, which died "
                    "with its guardian)")
    return done


PR_SET_PDEATHSIG = 1     # <linux/prctl.h>


def exit_with_parent(parent_pid: int, signum: int = signal.SIGTERM) -> None:
    """In a child process before exec: `signum` when the thread that spawned it dies (Linux
    PR_SET_PDEATHSIG), and at once if the parent `parent_pid` is already gone. A no-op where prctl
    is not available. SIGTERM lets a child clean up; a child whose SIGTERM stops a run gracefully
    (the loop's handler) and then waits for more work needs SIGKILL."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:
        os._exit(1)
