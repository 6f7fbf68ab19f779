"""Small campaign files for the campaign tests: short lockstep cases (0.3 s simulated)."""
from __future__ import annotations

from pathlib import Path

VERDICT = """
[verdict]
setpoints_rad = { base_yaw = 0.0, shoulder_pitch = 0.0, elbow = 0.0 }
tolerance_rad = 0.5
max_torque_N_m = 250.0
"""


def write_campaign(folder: Path, *, firmware: str = "", scenarios: str = '["none"]', variations: str = "",
                   sampling: str = 'method = "grid"\nlevels = 2', timeout_s: float = 600.0, logs: str = "failing",
                   duration_s: float = 0.3, name: str = "small") -> Path:
    firmware = firmware or '[[firmware]]\nname = "pid"\nmove_time_s = 0.2\n'
    text = (f'[campaign]\nname = "{name}"\narm = "ella"\nbus = "serial_frame"\nmode = "lockstep"\n'
            f"duration_s = {duration_s}\nseed = 3\ntimeout_s = {timeout_s}\nlogs = \"{logs}\"\n"
            f"scenarios = {scenarios}\n\n{firmware}\n[sampling]\n{sampling}\n\n[variations]\n{variations}\n{VERDICT}")
    path = folder / f"{name}.toml"
    path.write_text(text, encoding="utf-8")
    return path


TWO_FIRMWARE = ('[[firmware]]\nname = "pid"\nmove_time_s = 0.2\n\n'
                '[[firmware]]\nname = "pid_vs"\nmove_time_s = 0.2\nvibration_suppression = true\n')
PAYLOAD = "body.link2.attachment.payload.mass_kg = {uniform = [1.8, 2.4]}"
# what a rerun anywhere reproduces; the worker, its memory, wall-clock time and command age are the machine's
VOLATILE = ("worker", "wall_s", "ended_unix_s", "loop_s", "worker_rss_mb", "cmd_age_p99_us", "cmd_age_max_us")


def same_log(a: Path, b: Path) -> bool:
    """The two run logs have the same rows, bit for bit (the machine's own timings aside)."""
    from hil.logs.compare import DEFAULT_IGNORE, compare_runs
    from hil.logs.runlog import read_run

    ha, ra = read_run(a)
    hb, rb = read_run(b)
    return len(ra) == len(rb) > 0 and compare_runs(ha["columns"], ra, hb["columns"], rb, 0.0, [], DEFAULT_IGNORE,
                                                   ()).passed


def comparable(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]
