"""Recordings as a lab has them (hil.logs.recordings): the synthetic real arm's run log exported to
CSV, MDF4, Parquet and MCAP reads back onto the plant's grid with every value as logged; a
channel at another rate is resampled and said so; a missing channel, a time that runs backwards,
a NaN stretch and a damaged file are one-line errors naming the file and the channel."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from config_schema import UserError
from hil.logs.recordings import ColumnMap, on_grid
from hil.logs.runlog import read_run

ROOT = Path(__file__).resolve().parent.parent
WANTED = ["tau_base_yaw", "tau_shoulder_pitch", "tau_elbow", "imu_gx", "imu_gy", "imu_gz"]
OPTIONAL = ["q_elbow", "brake_elbow"]


@pytest.fixture
def exports(real_arm_exports):
    return real_arm_exports


@pytest.mark.parametrize("fmt", ["csv", "mdf4", "parquet", "mcap"])
def test_every_format_reads_back_onto_the_grid_as_logged(exports, fmt):
    log, files = exports
    header, rows = read_run(log)
    columns, got, resampled = on_grid(files[fmt], WANTED, {}, 1e-3, OPTIONAL)
    assert resampled == {} and columns == ["t", *WANTED, *OPTIONAL]
    assert len(got) == len(rows)
    for j, c in enumerate(columns[1:], start=1):
        np.testing.assert_array_equal(got[:, j], rows[:, header["columns"].index(c)], err_msg=f"{fmt} {c}")


def test_a_channel_at_another_rate_is_resampled_and_said_so(real_arm, tmp_path):
    header, rows = read_run(real_arm[1])
    cols = header["columns"]
    slow = tmp_path / "mixed.csv"
    lines = ["t,T1,T2,T3,gyro_x,t_gyro"]
    for k, r in enumerate(rows):           # the gyro at 500 Hz in its own columns, the torques at 1 kHz
        g = rows[2 * (k // 2)] if 2 * (k // 2) < len(rows) else r
        values = [r[cols.index(c)] for c in ("t", "tau_base_yaw", "tau_shoulder_pitch", "tau_elbow")]
        lines.append(",".join(repr(float(v)) for v in [*values, g[cols.index("imu_gx")], 0.0]))
    slow.write_text("\n".join(lines) + "\n")
    column_map = {"tau_base_yaw": ColumnMap("T1"), "tau_shoulder_pitch": ColumnMap("T2"),
                  "tau_elbow": ColumnMap("T3", scale=2.0), "imu_gx": ColumnMap("gyro_x")}
    columns, got, resampled = on_grid(slow, WANTED[:4], column_map, 1e-3)
    assert resampled == {}                                  # on the grid (held values are still samples)
    np.testing.assert_array_equal(got[:, 3], 2.0 * rows[:, cols.index("tau_elbow")])
    half = tmp_path / "half.csv"
    half.write_text("t,imu_gx\n" + "".join(f"{float(r[cols.index('t')])!r},{float(r[cols.index('imu_gx')])!r}\n"
                                           for r in rows[::2]))
    columns, got, resampled = on_grid(half, ["imu_gx"], {}, 1e-3)
    assert resampled == {"imu_gx": "interpolated linearly from its 500 Hz samples onto the 1000 Hz grid"}
    t = rows[:, cols.index("t")]
    inside = (t >= got[0, 0] - 1e-12) & (t <= got[-1, 0] + 1e-12)
    np.testing.assert_allclose(got[::2, 1], rows[inside, cols.index("imu_gx")][::2], atol=1e-12)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("name, text, message", [
    ("backwards.csv", "t,imu_gx\n0.0,1\n0.002,2\n0.001,3\n" + "".join(f"{0.003 + k * 1e-3},0\n" for k in range(20)),
     "channel imu_gx: time not strictly increasing at sample 2 (t = 0.002 then 0.001 s)"),
    ("gap.csv", "t,imu_gx\n" + "".join(f"{k * 1e-3},{'nan' if 5 <= k < 9 else 1.0}\n" for k in range(30)),
     "channel imu_gx has NaN or infinite samples from t = 0.005 to 0.008 s"),
    ("short.csv", "t,imu_gx\n0,1\n0.001,2\n0.002,3\n", "fewer than 10 steps"),
    ("named.csv", "t,imu_gy\n" + "".join(f"{k * 1e-3},1\n" for k in range(30)), "no channel 'imu_gx' (for imu_gx)"),
    ("timeless.csv", "time,imu_gx\n" + "".join(f"{k * 1e-3},1\n" for k in range(30)), "no time column 't'"),
    ("damaged.mf4", "MDF     4.10    not really", "not a readable MDF4 file"),
    ("damaged.parquet", "PAR1 not really PAR1", "not a readable Parquet file"),
    ("damaged.mcap", "\x89MCAP0\r\n not really", "MCAP"),
    ("wrong.txt", "t,imu_gx\n", "expected a recording ending in"),
])
def test_a_bad_recording_is_one_line_naming_file_and_channel(tmp_path, name, text, message):
    path = _write(tmp_path / name, text)
    with pytest.raises(UserError) as error:
        on_grid(path, ["imu_gx"], {}, 1e-3)
    assert message in str(error.value) and str(path.name) in str(error.value) and "\n" not in str(error.value)


def test_a_truncated_export_is_refused(exports, tmp_path):
    for fmt in ("mdf4", "parquet", "mcap"):
        data = exports[1][fmt].read_bytes()
        cut = tmp_path / f"cut{exports[1][fmt].suffix}"
        cut.write_bytes(data[: len(data) // 2])
        with pytest.raises(UserError, match="cut"):
            on_grid(cut, WANTED, {}, 1e-3)
