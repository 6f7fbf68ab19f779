"""The report's content as data: sections of plots and tables, and the arrays they draw.

A plot names its arrays by key; ``ReportData.arrays`` holds them (float32 signals, float64 x
axes) for the page (``hil.viz.report_html``). Time plots share one time axis, ``t``: every time
signal is decimated together (``hil.viz.signals.minmax_decimate``) to the report's point budget.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Series", "Plot", "Section", "ReportData", "TIME", "DEFAULT_MAX_POINTS"]

TIME = "t"
DEFAULT_MAX_POINTS = 40_000     # stored points per time signal (min/max pairs beyond)


@dataclass
class Series:
    label: str
    key: str                      # array key of the y values
    color: str | None = None
    dash: bool = False
    points: bool = False          # markers only, no line
    bars: bool = False            # histogram bars (x: left bin edges)


@dataclass
class Plot:
    id: str
    title: str
    x: str                        # array key of the x values
    series: list[Series]
    ylabel: str = ""
    xlabel: str = "t [s]"
    hlines: list[tuple[float, str]] = field(default_factory=list)   # (y, label)
    vlines: list[tuple[float, str]] = field(default_factory=list)   # (x, label)
    logx: bool = False
    logy: bool = False
    events: bool = False          # draw the run's events as vertical lines
    lanes: list[str] = field(default_factory=list)   # y tick labels 0, 1, ... (timeline plots)
    note: str = ""

    def as_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "x": self.x, "xlabel": self.xlabel, "ylabel": self.ylabel,
                "series": [vars(s) for s in self.series], "hlines": self.hlines, "vlines": self.vlines,
                "logx": self.logx, "logy": self.logy, "events": self.events, "lanes": self.lanes,
                "note": self.note}


@dataclass
class Section:
    id: str
    title: str
    plots: list[Plot] = field(default_factory=list)
    html: str = ""                # tables and text above the plots (already escaped)
    note: str = ""


@dataclass
class ReportData:
    title: str
    subtitle: str
    sections: list[Section] = field(default_factory=list)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, key: str, values: np.ndarray, dtype=np.float32) -> str:
        self.arrays[key] = np.ascontiguousarray(values, dtype=dtype)
        return key

    def plot_ids(self) -> list[str]:
        return [p.id for s in self.sections for p in s.plots]
