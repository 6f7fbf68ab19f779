"""How old the command is that the plant uses, for any firmware: the emulator's own measurement.

Each cycle the emulator sends its sensor frames (`sent`) and takes in commands (`taken`). A
command answers the newest sensor frames sent before the command was read off the link; the
loop reads the link at the start of a cycle and once more just before it sends, so a command
that arrives while the plant steps counts as an answer to the frames before. Where the command
message has a rolling counter, a repeated counter is rejected by the reader and so is no new
command: the plant keeps the old one and its age grows.

Per cycle, `cycle_start(now)` gives the age [us] of the command the plant takes in at that
cycle (NaN before the first command): now minus the send time of the frames it answers. A
cycle whose command does not answer the newest frames sent is a missed cycle (the firmware was
late, or silent: a tripped watchdog counts every cycle until commands return).
"""
from __future__ import annotations

import math

import numpy as np

HISTORY = 1024          # send times kept (a command answering older frames is older than a second)


class CommandAge:
    def __init__(self, capacity: int):
        self._sent_ns = [0] * HISTORY       # a list: a third of the numpy array's time per access
        self._sends = 0                     # sensor sends so far (index of the next one)
        self._answered = -1                 # send index the newest command answers (-1: none yet)
        self._answered_ns = 0               # its send time (kept: the ring overwrites it after HISTORY sends)
        self.ages_us = np.empty(capacity)          # read only up to count
        self._capacity = capacity
        self.count = 0
        self.missed = 0

    def sent(self, now_ns: int) -> None:
        """The cycle's sensor frames went out at now_ns."""
        self._sent_ns[self._sends % HISTORY] = now_ns
        self._sends += 1

    def taken(self, arrival_ns: int) -> None:
        """A valid command, read off the link at arrival_ns, was taken in."""
        k = self._sends - 1
        oldest = max(self._sends - HISTORY, 0)
        while k >= oldest and self._sent_ns[k % HISTORY] > arrival_ns:
            k -= 1
        if k >= oldest and k > self._answered:
            self._answered, self._answered_ns = k, int(self._sent_ns[k % HISTORY])

    def cycle_start(self, now_ns: int) -> float:
        """Age [us] of the command in use at this cycle; NaN before the first command."""
        if self._answered < 0:
            return math.nan
        age = (now_ns - self._answered_ns) * 1e-3
        if self._answered < self._sends - 1:
            self.missed += 1
        self.ages_us[self.count % self._capacity] = age
        self.count += 1
        return age

    def summary(self) -> dict:
        """cmd_age_us percentiles over the cycles with a command, and the missed cycles."""
        n = min(self.count, len(self.ages_us))
        out: dict = {"cycles_with_command": self.count, "missed_cycles": self.missed}
        if n:
            v = self.ages_us[:n]
            out["cmd_age_us"] = {"p50": float(np.percentile(v, 50)), "p99": float(np.percentile(v, 99)),
                                 "max": float(v.max())}
        return out
