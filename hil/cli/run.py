"""`hil run`: the emulator behind a CAN or serial link, optionally with a firmware process; its summary."""
from __future__ import annotations

import argparse
import json

import numpy as np

from hil.cli.integrity_summary import integrity_lines
from hil.cli.registry import (CliError, command, cpu_index, file_with_suffix, int_in, nonnegative_float,
                              nonnegative_int, positive_float)


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="arm preset (TOML)")
    p.add_argument("--bus", required=True, help="bus map (configs/bus/*.toml)")
    p.add_argument("--link", default="pty", help="serial:PATH | can:IF:CH[,KEY=VALUE...] | canfd:IF:CH[,...] | "
                                                 "slcan-adapter:PATH | pty (a new pty pair; use with --spawn-firmware) "
                                                 "| slcan-pty (a new pty pair, this side an slcan adapter, the "
                                                 "firmware python-can slcan)")
    p.add_argument("--spawn-firmware", action="store_true", help="start the reference firmware in a second process")
    p.add_argument("--firmware-link", help="link spec the spawned firmware opens (default: the pty's other end)")
    p.add_argument("--firmware-params", help="spawned firmware: its nominal arm parameter file "
                                             "(default: configs/firmware/ella_nominal.toml)")
    p.add_argument("--move-time", type=positive_float, default=2.0, help="spawned firmware: duration of the manoeuvre in s")
    p.add_argument("--vibration-suppression", action="store_true", help="spawned firmware: IMU vibration suppression")
    p.add_argument("--mode", choices=("realtime", "afap", "lockstep"), default="realtime",
                   help="realtime: fixed period; afap: as fast as possible; lockstep: one step per command "
                        "frame (CANopen map: per SYNC), deterministic")
    p.add_argument("--duration", type=positive_float, default=None, help="simulated time in s (default: until SIGINT)")
    p.add_argument("--period", type=positive_float, default=1e-3, help="cycle period in s (realtime mode)")
    p.add_argument("--log", type=file_with_suffix(".msgpack"), help="run log (.msgpack), readable up to its last flush if the process is killed")
    p.add_argument("--log-wrenches", action="store_true",
                   help="add the joint interaction wrenches w_<joint>_mx .. _fz to the run log (README \"Conventions\")")
    p.add_argument("--formulation", choices=("aba", "screw-dae"), default="aba",
                   help="the plant's kernel: articulated-body algorithm (default) or seed 000's screw-theoretic DAE")
    p.add_argument("--seed", type=nonnegative_int, default=None,
                   help="seed of the sensor noise generator and of the faults' random streams, replacing the "
                        "scenario's seed (default: noise from the preset's model.sensor_seed, faults from the "
                        "scenario's seed, else model.sensor_seed)")
    p.add_argument("--scenario", help="fault scenario (configs/scenarios/*.toml): faults injected during the run")
    p.add_argument("--ideal-sensors", action="store_true",
                   help="ideal encoders and tip IMU instead of the preset's sensor models (benchmark reference)")
    p.add_argument("--ideal-drives", action="store_true",
                   help="ideal torque drives instead of the preset's motor models (benchmark reference)")
    p.add_argument("--announce-faults", action="store_true",
                   help="set FAULT_ACTIVE in the status sent to the firmware while a fault is active (always logged)")
    p.add_argument("--record-bus", metavar="FILE", help="record every frame with python-can's writers (.asc, .blf)")
    p.add_argument("--no-realtime", action="store_true", help="skip SCHED_FIFO, mlockall and gc freezing")
    p.add_argument("--cpu", type=cpu_index, default=None, help="pin the loop (and a spawned firmware) to this CPU")
    p.add_argument("--firmware-cpu", type=cpu_index, default=None, help="pin a spawned firmware here instead of --cpu")
    p.add_argument("--firmware-priority", type=int_in(1, 99), default=None,
                   help="run a spawned firmware under SCHED_FIFO at this priority (below the loop's 80)")
    p.add_argument("--watchdog", type=positive_float, default=0.05, help="command timeout in s before the safe state")
    p.add_argument("--safe-state", choices=("zero_torque", "hold", "brake"), default="zero_torque",
                   help="torque after a command timeout (CANopen: also of a stopped drive)")
    p.add_argument("--heartbeat-ms", type=nonnegative_float, default=None,
                   help="CANopen map (NMT/SYNC, e.g. canopen_cst): heartbeat producer time of the emulated "
                        "nodes in ms, wall clock (default: the map's heartbeat period, 100 ms; 0: off)")
    p.add_argument("--overrun-policy", choices=("skip", "slip"), default="skip",
                   help="skip: keep the absolute grid; slip: re-anchor it after an overrun")
    p.add_argument("--halt-after", type=nonnegative_int, default=0, help="stop after N consecutive overruns (0: never)")
    p.add_argument("--ignore-first", type=nonnegative_float, default=0.5, help="overruns in the first S seconds never halt")
    p.add_argument("--live", type=int_in(0, 65535), nargs="?", const=8765, default=None, metavar="PORT",
                   help="serve the arm's 3D scene and signals over a Foxglove WebSocket on 127.0.0.1:PORT "
                        "(default 8765) while running, fed from the log writer's thread")
    p.add_argument("--live-rate", type=positive_float, default=50.0, help="--live: messages per second of simulated time")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


@command("run", "the emulator: real-time loop behind a CAN or serial link", _run_arguments)
def _cmd_run(args: argparse.Namespace) -> int:
    from firmware_bridge.canopen import is_canopen
    from firmware_bridge.messages import BusMap
    from hil.runtime.launch import (REFERENCE_PARAMS, await_host, build_emulator, reference_firmware, spawn_firmware,
                                    stop_process)
    from hil.logs.streaming import tip_residual_mm, tip_settling_s
    from hil.runtime.loop import RuntimeOptions

    if args.heartbeat_ms is not None and not is_canopen(BusMap.load(args.bus)):
        raise CliError(f"--heartbeat-ms needs a CANopen bus map; {args.bus} has no NMT and SYNC messages")
    opts = RuntimeOptions(mode=args.mode, period_s=args.period, duration_s=args.duration,
                          watchdog_s=args.watchdog, safe_state=args.safe_state, realtime=not args.no_realtime,
                          cpu=args.cpu, log_path=args.log, overrun_policy=args.overrun_policy,
                          halt_after=args.halt_after, ignore_first_s=args.ignore_first,
                          bus_record_path=args.record_bus, seed=args.seed,
                          announce_faults=args.announce_faults, log_wrenches=args.log_wrenches)
    built = build_emulator(args.config, args.bus, args.link, opts, args.scenario,
                           None if args.heartbeat_ms is None else args.heartbeat_ms * 1e-3, args.firmware_link,
                           ideal_sensors=args.ideal_sensors, ideal_drives=args.ideal_drives,
                           formulation=args.formulation)
    emulator = built.emulator
    firmware = live = None
    out = ""
    try:
        if args.live is not None:
            live = emulator.live = _live_view(emulator, args.live, args.live_rate)
        if args.spawn_firmware:
            command = reference_firmware(args.firmware_params or REFERENCE_PARAMS, args.bus, args.duration,
                                         args.move_time, args.vibration_suppression, realtime=not args.no_realtime,
                                         priority=args.firmware_priority)
            firmware = spawn_firmware(command, built.firmware_link,
                                      args.cpu if args.firmware_cpu is None else args.firmware_cpu,
                                      args.firmware_priority)
            await_host(emulator.link)
        summary = emulator.run()
        if firmware is not None:     # keep this end open until the firmware has closed its own
            out, _ = firmware.communicate(timeout=30)
    finally:
        try:
            emulator.link.close()
            if live is not None:
                live.close()
        finally:
            if firmware is not None:     # a failed start or run: kill and reap it (a no-op once it exited)
                stop_process(firmware)
    if live is not None:
        summary["live"] = {"port": live.port, "frames": live.frames, "dropped": live.dropped, "error": live.error}
    if firmware is not None:
        summary["firmware"] = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
    names = emulator.plant.layout.joint_names
    summary["final_joint_error_rad"] = _joint_errors(names, emulator.plant.q())
    if args.log:      # streamed over the log in constant memory (hil.logs.streaming)
        summary["tip_residual_mm"] = tip_residual_mm(args.log)
        summary["tip_settling_s"] = tip_settling_s(args.log, 0.2 + args.move_time)
        with open(args.log + ".summary.json", "w", encoding="utf-8") as f:   # stored beside the log
            json.dump(summary, f, default=float, indent=1)
    print(json.dumps(summary, default=float) if args.json else format_summary(summary))
    return 0


def _live_view(emulator, port: int, rate_hz: float):
    import sys
    try:
        from hil.viz.live import LiveView
        live = LiveView(emulator.header["config_text"], emulator.columns, port=port, rate_hz=rate_hz,
                        source=emulator.header["config"])
    except ImportError as exc:
        raise CliError(f"--live needs {exc.name}: pip install 'ella-hil[viz]'") from None
    print(f"live view: ws://127.0.0.1:{live.port} (Foxglove WebSocket)", file=sys.stderr)
    return live


def _joint_errors(names: list[str], q: np.ndarray) -> dict:
    from firmware_bridge.reference.controller import ELLA_SETPOINTS
    return {n: float(ELLA_SETPOINTS[n] - qi) for n, qi in zip(names, q) if n in ELLA_SETPOINTS}


def format_summary(s: dict) -> str:
    tm = s["timing"]
    lines = [f"cycles {s['cycles']} ({s['t_s']:.3f} s simulated, mode {s['mode']})"
             + (f", stopped: {s['halted']}" if s["halted"] else "")]
    if s["realtime"]:
        feats = ", ".join(f"{name} {'on' if f['active'] else 'off'}" for name, f in s["realtime"]["features"].items())
        lines.append(f"real-time setup: {feats}")
    for key in ("lateness", "compute", "io", "total"):
        if key in tm:
            v = tm[key]
            lines.append(f"  {key:9s} us  min {v['min']:8.1f}  p50 {v['p50']:8.1f}  p99 {v['p99']:8.1f}  "
                         f"p99.9 {v['p99.9']:8.1f}  max {v['max']:8.1f}")
    lat = s.get("read_to_send_us", {})
    if lat.get("count"):
        lines.append(f"  read->send us  p50 {lat['p50']:8.1f}  p99 {lat['p99']:8.1f}  p99.9 {lat['p99.9']:8.1f}  "
                     f"max {lat['max']:8.1f}  ({lat['count']} commands)")
    p = s["pacer"]
    lines.append(f"overruns {p['overruns']} (max consecutive {p['max_consecutive']}, skipped periods "
                 f"{p['skipped_periods']})")
    lines += integrity_lines(s)
    lines.append(f"integrator: {s['integrator']['plan']}" + (f"\n  {s['integrator']['note']}" if s["integrator"]["note"]
                                                               else ""))
    lines.append(f"link {s['link']}")
    lines.append(f"commands {s['commands']}")
    lines.append(f"watchdog trips {s['watchdog']['trips']}"
                 + "".join(f", {what} at {t:.3f} s" for what, t in s["watchdog"]["events"]))
    fa = s["faults"]
    if fa["injections"] or fa["errors"]:
        lines.append(f"faults: {fa['injections']} injected, {fa['clearances']} cleared, still active "
                     f"{fa['active'] or 'none'}, {fa['errors']} failed effects")
    if s["drives"]["torque_limited_cycles"]:
        lines.append(f"drives: torque or current limited in {s['drives']['torque_limited_cycles']} cycles")
    if s.get("canopen"):
        co = s["canopen"]
        lines.append("canopen nodes " + ", ".join(f"{n} {st}" for n, st in co["nodes"].items())
                     + "; " + ", ".join(f"{k} {v}" for k, v in co.items() if k not in ("nodes", "heartbeat_ms")))
    lines.append("final joint errors [rad]: " + ", ".join(f"{k} {v:+.5f}" for k, v in s["final_joint_error_rad"].items()))
    if s.get("tip_residual_mm") is not None:
        lines.append(f"tip residual vibration over the last 1 s: {s['tip_residual_mm']:.3f} mm peak to peak")
    if s.get("tip_settling_s") is not None:
        lines.append(f"tip settling time (oscillation within 0.2 mm) after the manoeuvre: {s['tip_settling_s']:.3f} s")
    if s.get("firmware"):
        fw = s["firmware"]
        lines.append(f"firmware: {fw['cycles']} cycles, link {fw['link']}, sensor frames {fw['sensors']}")
        if fw.get("fault"):
            lines.append(f"firmware fault: {fw['fault']}")
        if fw.get("canopen"):
            lines.append(f"firmware CANopen master: {fw['canopen']}")
        lat = fw.get("command_to_sensor_us", {})
        if lat.get("count"):
            lines.append(f"firmware command->sensor us  p50 {lat['p50']:8.1f}  p99 {lat['p99']:8.1f}  "
                         f"p99.9 {lat['p99.9']:8.1f}  max {lat['max']:8.1f}")
    return "\n".join(lines)
