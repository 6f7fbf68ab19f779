"""Bounded statistics for a firmware (plain Python) that runs for days: a histogram of log-spaced bins instead of
a list of every sample, so memory stays constant however long it runs.

Bins are 1/BINS_PER_DECADE of a decade wide from LOW_US to HIGH_US (samples outside go to the first
or last bin); a quantile is interpolated inside its bin, so it is exact to within a bin's width
(10^(1/50) - 1 = 4.7 % of the value); count, min, max and mean are exact.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from itertools import accumulate

LOW_US, HIGH_US = 0.1, 1e6
BINS_PER_DECADE = 50


class LatencyHistogram:
    """Samples in us, kept as counts per log-spaced bin."""

    def __init__(self) -> None:
        decades = math.log10(HIGH_US / LOW_US)
        self.edges = [LOW_US * 10.0 ** (k / BINS_PER_DECADE) for k in range(int(decades * BINS_PER_DECADE) + 1)]
        self.counts = [0] * (len(self.edges) + 1)   # [0]: below LOW_US, [-1]: HIGH_US and above
        self._log_low = math.log10(LOW_US)
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf

    def add(self, us: float) -> None:
        """One sample (no allocation)."""
        if us > 0:
            k = int((math.log10(us) - self._log_low) * BINS_PER_DECADE) + 1
            k = min(max(k, 0), len(self.counts) - 1)
        else:
            k = 0
        self.counts[k] += 1
        self.count += 1
        self.total += us
        self.min = min(self.min, us)
        self.max = max(self.max, us)

    def quantile(self, q: float) -> float:
        """The q-quantile (0..1), interpolated inside its bin and clipped to [min, max]."""
        rank = q * (self.count - 1)
        cumulative = list(accumulate(self.counts))
        k = bisect_right(cumulative, rank)
        before = cumulative[k - 1] if k else 0
        lo = self.edges[k - 1] if k else self.min
        hi = self.edges[k] if k < len(self.edges) else self.max
        frac = (rank - before + 0.5) / self.counts[k] if self.counts[k] else 0.0
        return float(min(max(lo + (hi - lo) * min(frac, 1.0), self.min), self.max))

    def summary(self) -> dict:
        """count, min, p50, p99, p99.9, max, mean in us ({"count": 0} without samples)."""
        if not self.count:
            return {"count": 0}
        return {"count": self.count, "min": self.min, "p50": self.quantile(0.5), "p99": self.quantile(0.99),
                "p99.9": self.quantile(0.999), "max": self.max, "mean": self.total / self.count}
