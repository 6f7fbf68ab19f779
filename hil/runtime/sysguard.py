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
"""
from __future__ import annotations

import subprocess
import sys
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
path, old = sys.argv[1], sys.argv[2]
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
""".replace("RELEASED", repr(RELEASED))


class SettingGuard:
    """Restores `path` to `old` if this process dies before ``release()``."""

    def __init__(self, path: str | Path, old: str):
        self.path = str(path)
        self._proc = subprocess.Popen([sys.executable, "-c", _PROGRAM, self.path, old], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, start_new_session=True, close_fds=True)
        line = self._proc.stdout.readline()
        if line != b"armed\n":
            self._proc.kill()
            self._proc.wait()
            raise RuntimeError(f"the guardian of {self.path} did not start ({line!r})")

    @property
    def pid(self) -> int:
        return self._proc.pid

    def release(self) -> None:
        """The setting was restored by its owner: the guardian exits without writing."""
        try:
            self._proc.stdin.write(RELEASED)
            self._proc.stdin.close()
        except OSError:
            pass
        self._proc.wait(timeout=5.0)
        self._proc.stdout.close()


PR_SET_PDEATHSIG = 1     # <linux/prctl.h>


def exit_with_parent(parent_pid: int) -> None:
    """In a child process before exec: SIGTERM when the thread that spawned it dies (Linux
    PR_SET_PDEATHSIG), and at once if the parent `parent_pid` is already gone. A no-op where prctl
    is not available."""
    import ctypes
    import ctypes.util
    import os
    import signal

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent_pid:
        os._exit(1)
