"""Benchmark of `hil fit`: six parameters fitted to 10 s of 1 kHz data on this machine.

The "real arm" is ELLA with its links 10 % softer, twice as damped, its payload and its shoulder's
viscous friction 30 % more than the preset says, recorded through the emulator's own sensors in lockstep with the reference
firmware: a slow set-point move over half the recording (the joints' friction at work), an elbow
encoder signal loss at 40 % of it (mid-move), the brakes' stop and the links ringing out. The fit starts from the nominal preset, on the gyro and encoder channels of
one recording, judged on a second (a different move). Prints the wall time, the plant replays,
and each parameter's true, fitted and relative error; --json for one object.

    python -m tools.bench_fit [--duration 10] [--jobs N] [--keep DIR] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRUE = {"body.link1.beam.E_Pa": 2.1e11 * 0.9, "body.link2.beam.E_Pa": 2.1e11 * 0.9,
        "body.link1.beam.damping_ratio": 0.02, "body.link2.beam.damping_ratio": 0.02,
        "body.link2.attachment.payload.mass_kg": 2.1 * 1.3, "body.link1.joint.viscous_N_m_s_rad": 1.3}
BOUNDS = {"E_Pa": (1.5e11, 2.5e11, "Pa"), "damping_ratio": (0.002, 0.05, "1"), "mass_kg": (1.0, 4.0, "kg"),
          "viscous_N_m_s_rad": (0.2, 3.0, "N_m_s_rad")}
CHANNELS = ("imu_gy", "imu_gz", "enc_base_yaw", "enc_shoulder_pitch", "enc_elbow")
FAULTED, FAULT_SHARE = "enc_elbow", 0.4      # its signal is lost at 40 % of the recording: matched up to then
SCENARIO = """[scenario]
description = "elbow encoder reads 0 from the given time on (permanent dropout)"
seed = 0

[[fault]]
name = "elbow_encoder_signal_loss"
kind = "dropout"
target = "enc_elbow"
mode = "zero"
  [fault.trigger]
  at_s = {at_s}
  [fault.duration]
  permanent = true
"""


def real_arm(folder: Path) -> Path:
    text = (ROOT / "configs/ella.toml").read_text()
    text = text.replace("E_Pa = 2.1e11", "E_Pa = 1.89e11").replace("damping_ratio = 0.01\n", "damping_ratio = 0.02\n")
    payload = 'name = "payload"\n  station_m = 0.93\n  mass_kg = 2.1'
    shoulder = '"link1"'
    head, tail = text.split(shoulder, 1)
    tail = tail.replace("viscous_N_m_s_rad = 1.0", "viscous_N_m_s_rad = 1.3", 1)
    path = folder / "real_arm.toml"
    path.write_text((head + shoulder + tail).replace(payload, payload.replace("2.1", "2.73")))
    return path


def record(preset: Path, log: Path, move_time_s: float, duration_s: float) -> None:
    scenario = log.with_suffix(".scenario.toml")
    scenario.write_text(SCENARIO.replace("{at_s}", repr(round(FAULT_SHARE * duration_s, 3))))
    subprocess.run([sys.executable, "-m", "hil", "run", str(preset), "--bus", "serial_frame", "--spawn-firmware",
                    "--mode", "lockstep", "--duration", str(duration_s), "--move-time", str(move_time_s),
                    "--scenario", str(scenario), "--safe-state", "brake", "--watchdog", "0.02",
                    "--lockstep-timeout", "0.3", "--log", str(log)], cwd=ROOT, check=True, capture_output=True,
                   timeout=1800)


def fit_file(folder: Path, max_evaluations: int, shooting_s: float | None, jobs: int, duration_s: float) -> Path:
    text = f'[fit]\nmodel = "ella"\nmax_evaluations = {max_evaluations}\njobs = {jobs}\n'
    text += f"shooting_s = {shooting_s}\n\n" if shooting_s else "\n"
    text += '[[recording]]\nfile = "a.msgpack"\nrole = "training"\n\n[[recording]]\nfile = "b.msgpack"\nrole = "validation"\n\n'
    for path in TRUE:
        lo, hi, unit = BOUNDS[path.rsplit(".", 1)[1]]
        text += f'[[parameter]]\npath = "{path}"\nlower = {lo}\nupper = {hi}\nunit = "{unit}"\n\n'
    text += "".join(f'[[channel]]\nname = "{c}"\n' + (f"window_s = [0.0, {FAULT_SHARE * duration_s - 0.01:.3f}]\n" if c == FAULTED else "")
                    for c in CHANNELS)
    text += "\n[validation]\nmax_nrmse = 0.3\n"
    path = folder / "bench.toml"
    path.write_text(text)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--duration", type=float, default=10.0, help="s of each recording (default 10)")
    p.add_argument("--max-evaluations", type=int, default=200, help="the fit's replay budget (default 200)")
    p.add_argument("--shooting", type=float, default=0.25, help="multiple shooting segment in s (0: single shooting)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="local processes (default: the processor count)")
    p.add_argument("--keep", type=Path, help="keep (and reuse) the recordings in this folder")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    from hil.fit.fit import run_fit
    from hil.fit.fit_file import load_fit

    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        preset = real_arm(folder)
        for name, move_share in (("a", 0.5), ("b", 0.45)):
            if not (folder / f"{name}.msgpack").is_file():
                record(preset, folder / f"{name}.msgpack", move_share * args.duration, args.duration)
        spec = load_fit(fit_file(folder, args.max_evaluations, args.shooting or None, args.jobs, args.duration))
        t0 = time.perf_counter()
        result, _ = run_fit(spec)
        wall = time.perf_counter() - t0
    out = {"duration_s": args.duration, "parameters": len(TRUE), "shooting_s": args.shooting or None,
           "jobs": args.jobs, "wall_s": wall, "replays": result.evaluations, "converged": result.converged,
           "passed": result.passed, "message": result.message, "validation_nrmse": result.validation_nrmse,
           "values": {k: {"true": v, "modal_start": result.modal_start[k], "fitted": result.values[k],
                          "error": result.values[k] / v - 1.0, "stderr": result.stderr[k],
                          "ci95_holds_true": abs(result.values[k] - v) <= 1.96 * result.stderr[k]}
                      for k, v in TRUE.items()}}
    if args.json:
        print(json.dumps(out))
        return 0
    shooting = f"multiple shooting every {args.shooting:g} s" if args.shooting else "single shooting"
    print(f"hil fit, {len(TRUE)} parameters, {args.duration:g} s of 1 kHz data, {shooting}, {args.jobs} process{'es' if args.jobs > 1 else ''}: {wall:.1f} s wall, "
          f"{result.evaluations} plant replays, verdict {'PASS' if result.passed else 'FAIL'} ({result.message})")
    for k, v in out["values"].items():
        print(f"  {k:<42} true {v['true']:<10.5g} after the pre-fits {v['modal_start']:<10.5g} "
              f"fitted {v['fitted']:<10.5g} error {v['error']:+.2%} (standard error {v['stderr'] / v['true']:.2%}, "
              f"95 % interval {'holds' if v['ci95_holds_true'] else 'misses'} the truth)")
    for name, channels in result.validation_nrmse.items():
        print(f"  validation {name}: NRMSE " + ", ".join(f"{c} {v:.3g}" for c, v in channels.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
