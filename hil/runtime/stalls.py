"""Why a cycle overran: the emulator's own compute or I/O, a late wake-up, or a host stall (the
machine itself was not running the process).

Evidence, all cheap: a heartbeat thread that does nothing but sleep HEARTBEAT_S and note when it
woke (started from the loop thread, so it shares its CPU and scheduling class); a gap of more than
GAP_S between two of its wake-ups means that nothing of the process ran for that long. And the
loop thread's own CPU time per cycle (CLOCK_THREAD_CPUTIME_ID) beside its wall time: a thread that
computed shows both, a thread that was not running shows wall time only.

An overrun (the pacer found the previous cycle's deadline passed) is attributed to

* ``host_stall``: a heartbeat gap overlaps the late stretch, and the loop thread used less than
  half of the stretch's wall time as CPU time: neither thread ran, the machine was stopped (a
  hypervisor that ran other work, SIGSTOP, a suspended VM);
* ``compute`` or ``io``: the previous cycle's work itself took longer than the period, by the
  larger of its two parts;
* ``late_wakeup``: the work fit in the period and the process was running, but the loop woke
  late (another task or an interrupt on its CPU, timer slack).
"""
from __future__ import annotations

import threading
import time

import numpy as np

HEARTBEAT_S = 1e-3
GAP_S = 4e-3            # a heartbeat later than this (sleep + the other threads' turns): nothing ran
GAPS_KEPT = 4096        # the latest gaps kept (start, end); more are counted
CAUSES = ("host_stall", "compute", "io", "late_wakeup")


class Heartbeat:
    """A thread that wakes every HEARTBEAT_S and keeps the gaps longer than GAP_S (monotonic ns)."""

    def __init__(self) -> None:
        self.gaps = np.zeros((GAPS_KEPT, 2), np.int64)
        self.count = 0
        self.max_gap_ns = 0
        self.last_ns = time.monotonic_ns()      # its latest wake-up
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="hil-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _beat(self) -> None:
        gap_ns = round(GAP_S * 1e9)
        self.last_ns = last = time.monotonic_ns()
        while not self._stop.wait(HEARTBEAT_S):
            now = time.monotonic_ns()
            if now - last > gap_ns:
                self.gaps[self.count % GAPS_KEPT] = last, now
                self.count += 1
                self.max_gap_ns = max(self.max_gap_ns, now - last)
            self.last_ns = last = now

    def overlaps(self, start_ns: int, end_ns: int) -> bool:
        """Whether a gap overlaps [start_ns, end_ns]: a kept one, or the one still open at end_ns (after
        a stop both threads wake, and the loop may look before the heartbeat has noted its gap)."""
        kept = self.gaps[:min(self.count, GAPS_KEPT)]
        if np.any((kept[:, 0] < end_ns) & (kept[:, 1] > start_ns)):
            return True
        return start_ns < end_ns and end_ns - self.last_ns > GAP_S * 1e9

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(1.0)


class OverrunCauses:
    """Counts overruns by cause (CAUSES), from the previous cycle's times and the heartbeat."""

    def __init__(self, period_s: float, heartbeat: Heartbeat | None):
        self.period_ns = round(period_s * 1e9)
        self.heartbeat = heartbeat
        self.counts = dict.fromkeys(CAUSES, 0)

    def attribute(self, start_ns: int, now_ns: int, cpu_ns: int, compute_ns: int, io_ns: int) -> str:
        """The cause of an overrun found at now_ns; the previous cycle started at start_ns, used
        cpu_ns of CPU time and took compute_ns + io_ns of wall time for its work."""
        stalled = self.heartbeat is not None and self.heartbeat.overlaps(start_ns, now_ns)
        if stalled and cpu_ns < 0.5 * (now_ns - start_ns):
            cause = "host_stall"
        elif compute_ns + io_ns > self.period_ns:
            cause = "compute" if compute_ns >= io_ns else "io"
        else:
            cause = "late_wakeup"
        self.counts[cause] += 1
        return cause

    def summary(self) -> dict:
        hb = self.heartbeat
        return {**self.counts, "heartbeat_gaps": 0 if hb is None else hb.count,
                "max_heartbeat_gap_us": 0.0 if hb is None else hb.max_gap_ns * 1e-3}
