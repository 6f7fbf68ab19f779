"""Closed-loop benchmark: the emulator and the reference firmware in two processes at 1 kHz.

For each link and each real-time setting it runs `hil run ... --spawn-firmware --json`
and prints, side by side: wake-up lateness, compute, I/O and total cycle time
(p50/p99/p99.9/max), overruns, and the command-to-sensor latency seen by the firmware
(its command sent -> the next sensor frame, computed with that command, received). Both processes are pinned to the
same CPU when --cpu is given (crossing CPUs adds about 20 us each way on this machine).

What the sensor, drive and fault models cost (the budget: 10 us per 1 ms cycle) is measured
between three emulators of ELLA: "before" with ideal sensors (hil.model.sensor_specs.default_sensors),
ideal torque drives and no faults; "models" with the preset's sensor and drive models and the
fault engine armed but idle (the budget's case); "faulted" with the same models under the
benchmark's fault load (configs/scenarios/overhead.toml: seven active faults that leave the plant's
cost alone). Compute is the plant step with drives, sensors and signal faults; total is the whole
cycle (also the fault engine's cycle start and the bus fault layer).

* --models: the closed loop above, once per model set, one after the other, on each link (real time);
* --inprocess: the emulators in this process, on in-memory links in afap mode with a firmware
  answering the holding torque between the cycles, stepped alternately cycle by cycle so that
  both see the same machine load, no firmware process to disturb them (--cycles, default 20000);
  each stage's p50 (p99) of the three (hil.runtime.stages; the compiled cycle's grouping of stages
  is stated there). A previous checkout's numbers come from tools.bench_checkouts.

    python -m tools.bench_loop [--duration 60] [--links pty,udp,slcan] [--cpu 0] [--models] [--inprocess]
                               [--cycles 20000] [--arm PRESET] [--bus MAP] [--fmu PART.fmu --connect PAIRS] [--xcp]
                               [--rate10k [--rate10k-firmware reference,c] [--firmware-cpu N] [--log PATH]
                               [--lift-rt-throttling]] [--json]

* --fmu PART.fmu --connect PAIRS: what a co-simulated FMU costs the loop (hil run --fmu,
  hil.runtime.cosim): the real-time closed loop on the pty link without it, then with it; compute
  and total p50/p99 of each and their difference, and the FMU's own step per cycle (its summary);
* --xcp: what the XCP slave (hil run --xcp) costs a cycle in process, idle and with a master's DAQ of
  20 channels running (tools.bench_xcp, also `hil bench xcp`);
* --rate10k: ELLA at 10 kHz (configs/ella_10khz.toml, configs/bus/udp_10khz.toml) in real time over
  udp_loopback (a two-node channel) for --duration, once with each firmware: the reference firmware
  in Python (which cannot answer within 0.1 ms, so its backlog loads the emulator's I/O) and the C
  example on the map's generated code (examples/c_firmware/ella_pid_udp.c, built with
  tools.c_firmware), which measures the emulator. Overruns by cause (hil.runtime.stalls) and the
  share not caused by the host against the goal of 0.1 %, lateness, compute, I/O and total
  percentiles, the command age, and the load average around the run; with --log the run logs
  (PATH with _reference / _c before its suffix) and the rows their writer dropped; with
  --lift-rt-throttling the runs without RT throttling (hil run --lift-rt-throttling: root, a pinned CPU).
    hil bench loop ...
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from firmware_bridge.wire.messages import BusMap
from hil.model.config import load_model
from hil.runtime.cycle_stats import SERIES
from hil.runtime.stages import STAGES, StageClock
from tools import bench_xcp, c_firmware
from tools.loop_rig import ARM, OVERHEAD, ROOT, SERIAL_BUS, WARMUP_CYCLES, holding_emulator

LINKS = {
    "pty": (SERIAL_BUS, ["--link", "pty"]),
    "udp": ("configs/bus/compact_fd.toml", ["--link", "canfd:udp_loopback:{channel}"]),
    "slcan": ("configs/bus/compact_classic.toml", ["--link", "slcan-pty"]),
}
ARM_10KHZ, BUS_10KHZ = "configs/ella_10khz.toml", "configs/bus/udp_10khz.toml"
LINK_10KHZ = ["--link", "canfd:udp_loopback:{channel},nodes=2"]
C_FIRMWARE_10KHZ = "ella_pid_udp.c"
FIRMWARES_10KHZ = ("reference", "c")
NOT_HOST_GOAL_PERCENT = 0.1  # of the cycles at 10 kHz with the C firmware
MODEL_SETS = {"before": ["--ideal-sensors", "--ideal-drives"], "models": [], "faulted": ["--scenario", OVERHEAD]}
BUDGET_US = 10.0            # what sensor, drive and fault models may add to a 1 ms cycle


def run_once(link: str, duration: float, realtime: bool, cpu: int | None, extra: list[str] | None = None,
             arm: str = ARM, bus: str | None = None, link_args: list[str] | None = None,
             firmware: str | None = None) -> dict:
    """One `hil run --json` with the reference firmware (or the `firmware` command line) on `link`."""
    map_path, default_link = LINKS[link]
    link_args = [a.format(channel=f"bench{os.getpid()}") for a in link_args or default_link]
    who = ["--spawn-firmware"] if firmware is None else ["--firmware", firmware]
    cmd = [sys.executable, "-m", "hil", "run", arm, "--bus", bus or map_path, *link_args, *who,
           "--duration", str(duration), "--json", *(extra or [])]
    if not realtime:
        cmd.append("--no-realtime")
    if cpu is not None:
        cmd += ["--cpu", str(cpu)]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=duration * 3 + 120)
    if out.returncode != 0:
        return {"error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def rate_10khz(duration: float, cpu: int | None, firmware_cpu: int | None, log: str | None = None,
               lift_rt_throttling: bool = False, firmware: str = "reference") -> dict:
    """ELLA at 10 kHz in real time over udp_loopback (a two-node channel: the plant and the firmware)
    with the reference firmware in Python, or the C example on the map's generated code ("c"): the
    summary of `hil run` (with `log`: its run log there), the load average before and after (other
    processes share the machine)."""
    extra = [] if firmware_cpu is None else ["--firmware-cpu", str(firmware_cpu)]
    extra += [] if log is None else ["--log", str(firmware_log(log, firmware).resolve())]
    extra += ["--lift-rt-throttling"] if lift_rt_throttling else []
    with tempfile.TemporaryDirectory(prefix="hil-c-firmware-") as build_dir:
        command = None
        if firmware == "c":
            try:
                command = f"{c_firmware.build(C_FIRMWARE_10KHZ, BUS_10KHZ, Path(build_dir))} {{channel}} 2"
            except RuntimeError as exc:
                return {"firmware": firmware, "error": f"C firmware not built: {exc}"}
        before = os.getloadavg()
        s = run_once("udp", duration, True, cpu, extra, arm=ARM_10KHZ, bus=BUS_10KHZ, link_args=LINK_10KHZ,
                     firmware=command)
    s["firmware"] = firmware
    s["loadavg_before"], s["loadavg_after"] = before, os.getloadavg()
    return s


def firmware_label(firmware: str) -> str:
    return "the reference firmware (Python)" if firmware == "reference" else f"the C firmware ({C_FIRMWARE_10KHZ})"


def firmware_log(log: str | Path, firmware: str) -> Path:
    """The run log of the 10 kHz run with `firmware`: `log` with _<firmware> before its suffix."""
    log = Path(log)
    return log.with_name(f"{log.stem}_{firmware}{log.suffix}")


def not_host_overruns(s: dict) -> int:
    """Overruns the host's stalls do not explain: the emulator's compute or I/O, and late wake-ups."""
    causes = s.get("overrun_causes") or {}
    return sum(causes.get(c, 0) for c in ("compute", "io", "late_wakeup"))


def rate_rows(s: dict, duration: float) -> list[str]:
    """Overruns by cause, lateness, compute and total percentiles [us] of a rate_10khz run."""
    firmware = firmware_label(s["firmware"])
    if "error" in s:
        return [f"10 kHz, {firmware}: failed: {s['error']}"]
    t, p, causes = s["timing"], s["pacer"], s.get("overrun_causes") or {}
    own = not_host_overruns(s)
    rows = [f"10 kHz, {firmware} ({ARM_10KHZ}, {BUS_10KHZ}, udp_loopback, {duration:g} s, {s['cycles']} cycles), "
            f"load average before {s['loadavg_before'][0]:.2f}, after {s['loadavg_after'][0]:.2f}:",
            f"  overruns {p['overruns']} (max consecutive {p['max_consecutive']}, skipped periods "
            f"{p.get('skipped_periods', 0)}); by cause: host stall {causes.get('host_stall', 0)}, compute "
            f"{causes.get('compute', 0)}, I/O {causes.get('io', 0)}, late wake-up {causes.get('late_wakeup', 0)}",
            f"  not caused by the host: {own} = {100.0 * own / max(s['cycles'], 1):.3f} % of the cycles "
            f"(goal at most {NOT_HOST_GOAL_PERCENT:g} %)"]
    for series in ("lateness", "compute", "io", "total"):
        q = t[series]
        rows.append(f"  {series:9s} p50 {q['p50']:7.1f} p99 {q['p99']:7.1f} p99.9 {q['p99.9']:7.1f} max {q['max']:8.1f}")
    fw = s.get("firmware_timing") or {}
    age = fw.get("cmd_age_us", {})
    rows.append(f"  command age p50 {age.get('p50', float('nan')):7.1f} p99 {age.get('p99', float('nan')):7.1f}; "
                f"missed cycles {fw.get('missed_cycles')} of {s['cycles']}")
    if s.get("log"):
        log = s["log"]
        rows.append(f"  run log ({log['writer']} writer): {log['dropped_rows']} rows dropped in {log['gaps']} gaps"
                    + (f"; WRITER FAILED: {log['writer_error']}" if log.get("writer_error") else ""))
    return rows


def host() -> dict:
    def read(path: str) -> str:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return "?"
    cpu = next((l.split(":", 1)[1].strip() for l in read("/proc/cpuinfo").splitlines() if l.startswith("model name")),
               platform.processor())
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "rt_runtime_us": read("/proc/sys/kernel/sched_rt_runtime_us"),
            "clocksource": read("/sys/devices/system/clocksource/clocksource0/current_clocksource")}


def row(name: str, s: dict) -> str:
    if "error" in s:
        return f"{name:28s} failed: {s['error']}"
    t, lat = s["timing"], (s.get("firmware") or {}).get("command_to_sensor_us", {})
    rt = s.get("realtime") or {}
    feats = "+".join(n for n, f in rt.get("features", {}).items() if f["active"]) or "none"
    return (f"{name:28s} {feats:28s} late p99 {t['lateness']['p99']:7.1f} p99.9 {t['lateness']['p99.9']:7.1f} "
            f"max {t['lateness']['max']:8.1f} | compute p50 {t['compute']['p50']:6.1f} p99 {t['compute']['p99']:6.1f} "
            f"| total p99.9 {t['total']['p99.9']:7.1f} | overruns {s['pacer']['overruns']:4d} "
            f"| cmd->sensor p50 {lat.get('p50', float('nan')):7.1f} p99 {lat.get('p99', float('nan')):7.1f}")


# ----------------------------------------------------------------------------- model overhead
def difference(before: dict, after: dict) -> dict | None:
    """after - before of compute and total p50/p99 [us] (None if a run failed)."""
    if "error" in before or "error" in after:
        return None
    return {series: {q: after[series][q] - before[series][q] for q in ("p50", "p99")}
            for series in ("compute", "total")}


def differences(timing: dict) -> dict:
    """Each model set minus "before"."""
    return {name: difference(timing["before"], t) for name, t in timing.items() if name in MODEL_SETS and name != "before"}


def models_comparison(link: str, duration: float, cpu: int | None) -> dict:
    """The real-time closed loop with each model set, one after the other."""
    runs = {name: run_once(link, duration, True, cpu, args) for name, args in MODEL_SETS.items()}
    timing = {name: r if "error" in r else r["timing"] for name, r in runs.items()}
    return {"link": link, "runs": runs, "difference_us": differences(timing)}


def fmu_comparison(fmu: str, connect: str, duration: float, cpu: int | None) -> dict:
    """The real-time closed loop on the pty link without and with the co-simulated FMU."""
    runs = {"without": run_once("pty", duration, True, cpu),
            "with_fmu": run_once("pty", duration, True, cpu, ["--fmu", fmu, "--connect", connect])}
    timing = {name: r if "error" in r else r["timing"] for name, r in runs.items()}
    return {"fmu": fmu, "timing": timing, "step_us": runs["with_fmu"].get("fmu", {}).get("step"),
            "difference_us": difference(timing["without"], timing["with_fmu"])}


def fmu_rows(f: dict) -> list[str]:
    rows = comparison_rows(f["timing"], {})
    if f["difference_us"] is not None:
        d = f["difference_us"]
        rows.append(f"  {'with_fmu - without':22s} compute p50 {d['compute']['p50']:+7.1f} p99 {d['compute']['p99']:+7.1f}"
                    f" | total p50 {d['total']['p50']:+7.1f} p99 {d['total']['p99']:+7.1f}")
    if f["step_us"]:
        st = f["step_us"]
        rows.append(f"  the FMU's step per cycle: p50 {st['p50_us']:.1f} p99 {st['p99_us']:.1f} max {st['max_us']:.1f} "
                    f"({st['cycles']} steps)")
    return rows


def inprocess_comparison(cycles: int, bus_path: str = LINKS["pty"][0], arm: str = ARM) -> dict:
    """The emulators of each model set stepped in turn for WARMUP_CYCLES + `cycles` cycles; each
    one's timing (Emulator.stats, step_once's own clock) over the last `cycles`."""
    model, bus = load_model(ROOT / arm), BusMap.load(ROOT / bus_path)
    rigs = {name: holding_emulator(model, bus, name, WARMUP_CYCLES + cycles) for name in MODEL_SETS}
    for emu, _ in rigs.values():
        emu.stage_clock = StageClock(WARMUP_CYCLES + cycles)
    gc.collect()
    for _ in range(WARMUP_CYCLES + cycles):
        for emu, firmware in rigs.values():
            firmware.answer()
            emu.step_once()
    timing = {}
    for name, (emu, _) in rigs.items():
        data = dict(zip(SERIES, emu.stats.retained()[:, WARMUP_CYCLES:] / 1e3))
        timing[name] = {series: {"p50": float(np.percentile(data[series], 50)),
                                 "p99": float(np.percentile(data[series], 99)), "mean": float(data[series].mean())}
                        for series in ("compute", "total")}
        stages = emu.stage_clock.durations_us(skip=WARMUP_CYCLES)
        timing[name]["stages_us"] = {stage: {"p50": float(np.percentile(d, 50)), "p99": float(np.percentile(d, 99))}
                                     for stage, d in stages.items()}
        timing[name]["channels"] = len(emu.sensors.channel_names)
        timing[name]["faults_active"] = len(emu.faults.active())
    return {"arm": arm, "bus": bus_path, "cycles": cycles, "timing": timing, "difference_us": differences(timing)}


def comparison_rows(timing: dict, diffs: dict) -> list[str]:
    """Each model set, and its difference to "before": compute and total p50/p99 [us]; the budget's
    verdict on the whole cycle's median with the models (no fault active)."""
    def cells(t: dict, sign: str = "") -> str:
        return " | ".join(f"{series} p50 {t[series]['p50']:{sign}7.1f} p99 {t[series]['p99']:{sign}7.1f}"
                          for series in ("compute", "total"))
    rows = [f"  {name:22s} " + (f"failed: {t['error']}" if "error" in t else cells(t)) for name, t in timing.items()]
    rows += [f"  {name + ' - before':22s} " + cells(d, "+") for name, d in diffs.items() if d is not None]
    if diffs.get("models") is not None:
        added = diffs["models"]["total"]["p50"]
        rows.append(f"  the models add {added:+.1f} us to the median cycle: "
                    + ("within" if added <= BUDGET_US else "OVER") + f" the budget of {BUDGET_US:g} us"
                    + ("" if diffs.get("faulted") is None else
                       f"; the fault load {diffs['faulted']['total']['p50'] - added:+.1f} us more"))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="hil bench loop", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=60.0, help="seconds of closed loop per run (default 60)")
    p.add_argument("--links", default="pty", help=f"comma list of {', '.join(LINKS)} (default pty)")
    p.add_argument("--cpu", type=int, default=0, help="pin both processes to this CPU (default 0; -1: no pinning)")
    p.add_argument("--models", action="store_true",
                   help="instead of real time on/off: the real-time loop with ideal models, with the preset's "
                        "models, and with them under the benchmark's fault load (compute and total, each vs ideal)")
    p.add_argument("--inprocess", action="store_true",
                   help="the same comparison in this process, the emulators stepped in turn (no firmware process)")
    p.add_argument("--cycles", type=int, default=20000, help="--inprocess: timed cycles per emulator (default 20000)")
    p.add_argument("--arm", default=ARM, help=f"--inprocess: the preset (default {ARM}; e.g. {ARM_10KHZ})")
    p.add_argument("--bus", default=LINKS["pty"][0], help=f"--inprocess: the bus map (default {LINKS['pty'][0]})")
    p.add_argument("--rate10k", action="store_true",
                   help=f"ELLA at 10 kHz ({ARM_10KHZ}, {BUS_10KHZ}) in real time over udp_loopback for --duration: "
                        "overruns and lateness percentiles")
    p.add_argument("--rate10k-firmware", default="reference,c",
                   help="--rate10k: comma list of reference (Python) and c (the C example on the generated code); "
                        "default both, one after the other")
    p.add_argument("--firmware-cpu", type=int, default=None, help="--rate10k: pin the firmware here instead")
    p.add_argument("--log", default=None, help="--rate10k: write the run log here (.msgpack), count its dropped rows")
    p.add_argument("--lift-rt-throttling", action="store_true", help="--rate10k: RT throttling off for the run")
    p.add_argument("--fmu", default=None, help="the loop without and with this FMU co-simulated (needs --connect)")
    p.add_argument("--connect", default=None, help="--fmu: its connections (hil run --connect)")
    p.add_argument("--xcp", action="store_true", help="in process: what the XCP slave costs a cycle, idle and with a "
                                                      "DAQ of 20 channels running (tools.bench_xcp; --cycles)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if bool(args.fmu) != bool(args.connect):
        p.error("--fmu and --connect go together")
    cpu = None if args.cpu < 0 else args.cpu
    firmwares = args.rate10k_firmware.split(",")
    if not set(firmwares) <= set(FIRMWARES_10KHZ):
        p.error(f"--rate10k-firmware {args.rate10k_firmware!r}: expected a comma list of {', '.join(FIRMWARES_10KHZ)}")
    report = {"host": host(), "duration_s": args.duration, "cpu": cpu}
    if args.models:
        report["models"] = [models_comparison(link, args.duration, cpu) for link in args.links.split(",")]
    if args.inprocess:
        report["inprocess"] = inprocess_comparison(args.cycles, args.bus, args.arm)
    if args.rate10k:
        report["rate10k"] = {fw: rate_10khz(args.duration, cpu, args.firmware_cpu, args.log, args.lift_rt_throttling, fw)
                             for fw in firmwares}
    if args.fmu:
        report["fmu"] = fmu_comparison(args.fmu, args.connect, args.duration, cpu)
    if args.xcp:
        report["xcp"] = bench_xcp.measure(args.cycles, 100)
    if not (args.models or args.inprocess or args.rate10k or args.fmu or args.xcp):
        report["runs"] = {}
        for link in args.links.split(","):
            for realtime in (True, False):
                name = f"{link} {'realtime' if realtime else 'no-rt'}"
                report["runs"][name] = run_once(link, args.duration, realtime, cpu)
    if args.json:
        print(json.dumps(report))
        return 0
    print_report(report, args.duration)
    return 0


def print_report(report: dict, duration: float) -> None:
    h = report["host"]
    print(f"host: {h['cpu']}, {h['cores']} cores, kernel {h['kernel']}, rt_runtime_us {h['rt_runtime_us']}, "
          f"clocksource {h['clocksource']}; times in us")
    if "runs" in report:
        print(f"both processes on CPU {report['cpu']}; {duration:g} s per run")
    for name, s in report.get("runs", {}).items():
        print(row(name, s))
    if "models" in report or "inprocess" in report:
        print(f"models: before = ideal sensors, ideal torque drives, no faults; models = the preset's sensor and "
              f"drive models, fault engine idle; faulted = the same under {OVERHEAD}")
    for m in report.get("models", []):
        where = "not pinned" if report["cpu"] is None else f"both processes on CPU {report['cpu']}"
        print(f"closed loop on {m['link']}, real time, {duration:g} s per run, {where}:")
        timing = {name: r if "error" in r else r["timing"] for name, r in m["runs"].items()}
        print("\n".join(comparison_rows(timing, m["difference_us"])))
    if "fmu" in report:
        print(f"closed loop on pty, real time, {duration:g} s per run, without and with {report['fmu']['fmu']}:")
        print("\n".join(fmu_rows(report["fmu"])))
    if "xcp" in report:
        print("\n".join(bench_xcp.report_lines(report["xcp"])))
    if "rate10k" in report:
        for s in report["rate10k"].values():
            print("\n".join(rate_rows(s, duration)))
    if "inprocess" in report:
        ip = report["inprocess"]
        load = ", ".join(f"{name} {t['channels']} channels, {t['faults_active']} active faults"
                         for name, t in ip["timing"].items())
        print(f"in process, afap, {ip['arm']}, {ip['bus']}, {ip['cycles']} cycles each, stepped alternately ({load}):")
        print("\n".join(comparison_rows(ip["timing"], ip["difference_us"])))
        print("\n".join(stage_rows(ip["timing"])))


def stage_rows(timing: dict) -> list[str]:
    """Each stage's p50 (p99) [us] per model set, then decode through encode ("compute") and the whole
    cycle, each a percentile of the per-cycle sums (hil.runtime.stages)."""
    names = list(timing)
    rows = [f"  per stage, p50 (p99) [us]: {'':4s}" + "".join(f"{n:>23s}" for n in names)]
    for stage in (*STAGES, "compute", "cycle"):
        rows.append(f"  {stage:31s}" + "".join(
            f"{timing[n]['stages_us'][stage]['p50']:14.2f} ({timing[n]['stages_us'][stage]['p99']:6.1f})"
            for n in names))
    return rows


if __name__ == "__main__":
    sys.exit(main())
