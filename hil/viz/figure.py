"""`hil plot`: a matplotlib figure of chosen log columns over time, one panel per unit."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from hil.logs.units import describe

__all__ = ["plot_columns"]


def plot_columns(columns: list[str], rows: np.ndarray, chosen: list[str], out: str | None, title: str,
                 t0: float | None = None, t1: float | None = None) -> Path | None:
    """Draw the chosen columns against ``t`` (all samples), grouped in panels by unit; save to
    `out` (format by suffix) or show a window. Returns the saved path."""
    import matplotlib
    if out:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = rows[:, columns.index("t")] if "t" in columns else np.arange(len(rows), dtype=float)
    keep = (t >= (-np.inf if t0 is None else t0)) & (t <= (np.inf if t1 is None else t1))
    panels: dict[str, list[str]] = {}
    for c in chosen:
        panels.setdefault(describe(c)[0], []).append(c)
    fig, axes = plt.subplots(len(panels), 1, sharex=True, squeeze=False, figsize=(11, 2.6 * len(panels) + 0.8))
    for ax, (unit, names) in zip(axes[:, 0], panels.items()):
        for c in names:
            ax.plot(t[keep], rows[keep, columns.index(c)], lw=0.9, label=c)
        ax.set_ylabel(unit or "-")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8, ncol=min(4, len(names)))
    axes[-1, 0].set_xlabel("t [s]")
    fig.suptitle(title)
    fig.tight_layout()
    if not out:
        plt.show()
        return None
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return Path(out)
