"""The loop's statistics: each cycle's lateness, compute, I/O and total time (hil.runtime.cycle_stats),
the read-to-send latency of each new command, the firmware's command age (hil.runtime.command_age),
and the cause of each overrun the pacer finds (hil.runtime.stalls)."""
from __future__ import annotations

import time

import numpy as np

from hil.runtime.command_age import CommandAge
from hil.runtime.cycle_stats import CycleStats, series_summary
from hil.runtime.pacer import Pacer
from hil.runtime.stalls import Heartbeat, OverrunCauses, thread_usage, usage_between


class LoopTiming:
    """The statistics of one emulator's loop (module docstring), each ring `capacity` cycles long."""

    def __init__(self, capacity: int, period_s: float):
        self.period_s = period_s
        self.cycles = CycleStats(capacity)
        self.age = CommandAge(capacity)
        # read-to-send latency: a command frame taken off the link -> the first sensor frame computed with it
        self._latency_ns = np.empty(capacity, np.int64)     # read only up to _latency_count
        self._latency_count = 0
        self.overrun_causes = OverrunCauses(period_s, None)
        self._last_work: tuple[int, int] | None = None   # the last cycle's compute and I/O ns
        self._wait_from: int | None = None          # when the latest pacer wait began (monotonic ns)
        self._usage_from = None                     # the loop thread's usage then (hil.runtime.stalls.thread_usage)

    def start(self, heartbeat: bool) -> None:
        """The run starts; `heartbeat`: a heartbeat thread beside the loop tells a host stall from the
        loop's own (hil.runtime.stalls; only where the loop sleeps)."""
        self.overrun_causes = OverrunCauses(self.period_s, Heartbeat().start() if heartbeat else None)

    def stop(self) -> None:
        if self.overrun_causes.heartbeat is not None:
            self.overrun_causes.heartbeat.stop()

    def cycle_done(self, lateness_ns: int, t0: int, t1: int, t2: int, t3: int, arrival_s: float | None) -> None:
        """A cycle that began at t0, computed from t1 to t2 and sent at t3 (monotonic ns); `arrival_s`:
        when the new command it computed with arrived (the frame's time stamp), or None."""
        if arrival_s:
            self._latency_ns[self._latency_count % len(self._latency_ns)] = t3 - int(arrival_s * 1e9)
            self._latency_count += 1
        io_ns = (t1 - t0) + (t3 - t2)
        self.cycles.record(lateness_ns, t2 - t1, io_ns, t3 - t0)
        self._last_work = (t2 - t1, io_ns)

    def paced_wait(self, pacer: Pacer) -> int:
        """pacer.wait(); an overrun it finds is attributed to its cause (hil.runtime.stalls) over the stretch
        since the previous wait began (a stop while that wait slept is found only at this one)."""
        before = pacer.overruns + pacer.ignored_overruns
        waited_from, self._wait_from = self._wait_from, time.monotonic_ns()
        usage_from, self._usage_from = self._usage_from, thread_usage()
        lateness = pacer.wait()
        if pacer.overruns + pacer.ignored_overruns > before and self._last_work is not None and waited_from is not None:
            cpu_ns, switches = usage_between(usage_from, thread_usage())
            self.overrun_causes.attribute(waited_from, time.monotonic_ns(), cpu_ns, *self._last_work, switches)
        return lateness

    def summary(self) -> dict:
        """The run summary's timing entries."""
        n = min(self._latency_count, len(self._latency_ns))
        latency = {"count": self._latency_count} | (series_summary(self._latency_ns[:n]) if n else {})
        return {"overrun_causes": self.overrun_causes.summary(), "timing": self.cycles.summary(),
                "read_to_send_us": latency, "firmware_timing": self.age.summary()}
