"""Drive torques tabulated over time (``hil simulate --input``): read from CSV with one-line errors naming
the file, evaluated by linear interpolation and held constant outside the table."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from hil.kernels.offline import TorqueInput, torque_at
from config_schema import UserError

__all__ = ["InputError", "TorqueTable"]


class InputError(UserError):
    """Unusable simulation input (torque table); the message names the file."""


class TorqueTable:
    """Drive torques tabulated over time: linear interpolation, held constant outside the table."""

    def __init__(self, t: np.ndarray, tau: np.ndarray):
        self.t = np.ascontiguousarray(t, dtype=float)
        self.tau = np.ascontiguousarray(np.asarray(tau, dtype=float).reshape(len(self.t), -1))
        self._input = TorqueInput(self.tau[0], self.t, self.tau)

    @classmethod
    def from_csv(cls, path: str | Path, joint_names: list[str], prescribed: tuple[str, ...] = ()) -> "TorqueTable":
        """Read columns ``t`` and ``tau_<joint>`` (absent joints: zero torque) from a CSV file.

        Raises InputError naming the file for an unknown, duplicate or prescribed-joint column,
        a value that is not a finite number, or times that do not strictly increase.
        """
        try:
            with open(path, encoding="utf-8", newline="") as f:
                reader = csv.reader(f)
                header = [h.strip() for h in next(reader, [])]
                index = _torque_columns(path, header, joint_names, prescribed)
                values = [_parse_row(path, reader.line_num, header, r) for r in reader if any(c.strip() for c in r)]
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not a text file (byte {exc.start} is not UTF-8); expected a CSV of "
                             "t, tau_<joint>") from None
        if not values:
            raise InputError(f"{path}: no data rows (expected columns t, tau_<joint>)")
        data = np.array(values)
        t = data[:, header.index("t")]
        bad = np.nonzero(np.diff(t) <= 0)[0]
        if bad.size:
            i = int(bad[0]) + 1
            raise InputError(f"{path}: column 't': times must strictly increase (data row {i + 1}: "
                             f"t = {t[i]!r} after {t[i - 1]!r})")
        tau = np.zeros((len(t), len(joint_names)))
        for col, k in index.items():
            tau[:, k] = data[:, col]
        return cls(t, tau)

    def __call__(self, t: float, out: np.ndarray) -> None:
        """Write the torques at time t into out (no allocation; the interpolation the offline stepper's
        kernel does at every stage, hil.kernels.offline.torque_at)."""
        torque_at(self._input, t, out)


def _torque_columns(path, header: list[str], joint_names: list[str], prescribed) -> dict[int, int]:
    """CSV column index -> joint index, validating the header."""
    if not header or header == [""]:
        raise InputError(f"{path}: empty file (expected a header line with columns t, tau_<joint>)")
    expected = ", ".join(["t"] + [f"tau_{j}" for j in joint_names if j not in prescribed])
    index = {}
    for col, name in enumerate(header):
        if header.index(name) != col:
            raise InputError(f"{path}: column {name!r} appears twice")
        if name == "t":
            continue
        joint = name[4:] if name.startswith("tau_") else None
        if joint in prescribed:
            raise InputError(f"{path}: column {name!r}: joint {joint!r} is prescribed (its angle is imposed) "
                             f"and takes no torque input; expected columns: {expected}")
        if joint not in joint_names:
            raise InputError(f"{path}: unknown column {name!r}; expected columns: {expected}")
        index[col] = joint_names.index(joint)
    if "t" not in header:
        raise InputError(f"{path}: missing column 't'; expected columns: {expected}")
    return index


def _parse_row(path, line: int, header: list[str], cells: list[str]) -> list[float]:
    if len(cells) != len(header):
        raise InputError(f"{path}: line {line}: {len(cells)} values, expected {len(header)} "
                         f"(one per column: {', '.join(header)})")
    out = []
    for name, cell in zip(header, cells):
        try:
            v = float(cell)
        except ValueError:
            v = math.nan
        if not math.isfinite(v):
            raise InputError(f"{path}: line {line}: column {name!r} = {cell.strip()!r}: expected a finite number")
        out.append(v)
    return out
