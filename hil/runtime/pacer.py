"""Fixed-period pacing on absolute deadlines of a monotonic integer-ns clock (hil.runtime.realtime
describes the loop it paces and what was measured with it)."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from config_schema import UserError

__all__ = ["OverrunHalt", "Pacer"]


class OverrunHalt(RuntimeError):
    """Raised by Pacer.wait() after `halt_after` consecutive overruns."""


class Pacer:
    """Fixed-period pacing on absolute deadlines of a monotonic integer-ns clock.

    The first wait() starts cycle 0 at once and anchors the grid there. Each later wait()
    sleeps until `spin_s` before the next deadline, then spins on the clock, and returns the
    wake-up lateness in ns (wake time minus the deadline actually waited for).

    An overrun is a call to wait() after the deadline it should wait for, i.e. the last
    cycle's work ran past it. "skip" keeps the grid and waits for the next future grid
    point (`skipped_periods` counts the grid points passed over); "slip" re-anchors the grid
    at now and starts the cycle at once. After `halt_after` (> 0) consecutive overruns
    wait() raises OverrunHalt. Overruns within `ignore_first_s` of the start go to
    `ignored_overruns` instead and never halt. Mode "afap" never waits and returns 0.
    """

    def __init__(self, period_s: float, mode: str = "realtime", spin_s: float = 150e-6,
                 overrun_policy: str = "skip", halt_after: int = 0,
                 ignore_first_s: float = 0.0, clock: Callable[[], int] = time.monotonic_ns,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if period_s <= 0 or spin_s < 0 or halt_after < 0 or ignore_first_s < 0:
            raise UserError("period_s must be > 0; spin_s, halt_after, ignore_first_s >= 0")
        if mode not in ("realtime", "afap"):
            raise UserError(f"mode must be 'realtime' or 'afap', not {mode!r}")
        if overrun_policy not in ("skip", "slip"):
            raise UserError(f"overrun_policy must be 'skip' or 'slip', not {overrun_policy!r}")
        self.period_ns = round(period_s * 1e9)
        self.spin_ns = round(spin_s * 1e9)
        self.mode = mode
        self.overrun_policy = overrun_policy
        self.halt_after = halt_after
        self._ignore_ns = round(ignore_first_s * 1e9)
        self._clock = clock
        self._sleep = sleep
        self._start_ns: int | None = None
        self._deadline = 0
        self.cycles = 0
        self.overruns = 0
        self.ignored_overruns = 0
        self.consecutive = 0
        self.max_consecutive = 0
        self.skipped_periods = 0

    @property
    def sleeps(self) -> bool:
        """Whether a wait can sleep at all: the period is longer than the spin (not at 10 kHz)."""
        return self.mode == "realtime" and self.period_ns > self.spin_ns

    def wait(self) -> int:
        """Block until the next deadline; return the wake-up lateness in ns."""
        now = self._clock()
        self.cycles += 1
        if self._start_ns is None:
            self._start_ns = now
            self._deadline = now + self.period_ns
            return 0
        if self.mode == "afap":
            return 0
        deadline = self._deadline
        if now > deadline:
            deadline = self._overrun(now, deadline)
        else:
            self.consecutive = 0
        self._deadline = deadline + self.period_ns
        return self._until(now, deadline)

    def _overrun(self, now: int, deadline: int) -> int:
        """Count an overrun, maybe halt, and return this cycle's deadline under the policy."""
        if now - self._start_ns < self._ignore_ns:
            self.ignored_overruns += 1
        else:
            self.overruns += 1
            self.consecutive += 1
            self.max_consecutive = max(self.max_consecutive, self.consecutive)
            if self.halt_after and self.consecutive >= self.halt_after:
                raise OverrunHalt(f"{self.consecutive} consecutive overruns of the "
                                  f"{self.period_ns / 1e6:g} ms period (cycle {self.cycles})")
        if self.overrun_policy == "slip":
            return now
        missed = (now - deadline) // self.period_ns + 1
        self.skipped_periods += missed
        return deadline + missed * self.period_ns

    def _until(self, now: int, deadline: int) -> int:
        """Hybrid wait: sleep to `spin_ns` before the deadline, then spin on the clock."""
        remaining = deadline - now
        if remaining > self.spin_ns:
            self._sleep((remaining - self.spin_ns) * 1e-9)
        clock = self._clock
        while (now := clock()) < deadline:
            pass
        return now - deadline

    def elapsed_ns(self) -> int:
        """Clock time since the first wait() (0 before it)."""
        return 0 if self._start_ns is None else self._clock() - self._start_ns

    def counters(self) -> dict[str, Any]:
        """Cycle and overrun counters plus elapsed time, for the log."""
        return {"cycles": self.cycles, "overruns": self.overruns,
                "ignored_overruns": self.ignored_overruns,
                "max_consecutive": self.max_consecutive,
                "skipped_periods": self.skipped_periods,
                "elapsed_s": self.elapsed_ns() * 1e-9}
