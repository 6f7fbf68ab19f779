"""`hil run` and `hil latency`: the emulator behind a CAN or serial link, optionally with a firmware
process (the reference firmware, or any program: `--firmware "CMD {port}"`); its summary.

Exit status: 0, 1 when a verdict failed (with `--check`), 2 for a usage or configuration error,
3 when the run failed as a run (hil.runtime.outcome: the firmware exited early, no command
within the start timeout, no cycle, frames that could not be sent).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from hil.cli.registry import (EXIT_RECORDS_INCOMPLETE, CliError, command, cpu_index, duration_s, file_with_suffix,
                              int_in, nonnegative_float, nonnegative_int, positive_float)
from hil.cli.in_process import check_in_process, firmware_arguments, run_in_process
from hil.cli.summary import format_summary
from hil.cli.xcp import check_xcp_can, serve_xcp, xcp_address, xcp_can_ids

EXIT_VERDICT_FAILED = 1
EXIT_RUN_FAILED = 3


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("config", help="arm preset: a TOML file or a shipped name (ella, seed001_arm, ...)")
    p.add_argument("--bus", required=True, help="bus map: a TOML file or a shipped name (serial_frame, compact_fd, ...)")
    p.add_argument("--link", default="pty", help="serial:PATH | can:IF:CH[,KEY=VALUE...] | canfd:IF:CH[,...] | "
                                                 "slcan-adapter:PATH | pty (a new pty pair; the firmware opens the "
                                                 "other end) | slcan-pty (a new pty pair, this side an slcan adapter, "
                                                 "the firmware python-can slcan)")
    firmware_arguments(p)
    p.add_argument("--mode", choices=("realtime", "afap", "lockstep"), default="realtime",
                   help="realtime: fixed period; afap: as fast as possible; lockstep: one step per command "
                        "frame (CANopen map: per SYNC), deterministic")
    p.add_argument("--start", choices=("first-command", "immediately"), default="first-command",
                   help="realtime/afap: start the clock at the firmware's first valid command (default; the first "
                        "sensor frames are sent again until then) or at once")
    p.add_argument("--start-timeout", type=positive_float, default=30.0,
                   help="no valid command within this many s after the start fails the run (default 30)")
    p.add_argument("--lockstep-resend", type=positive_float, default=1.0,
                   help="lockstep: an unanswered sensor frame goes out again after this many s (default 1)")
    p.add_argument("--lockstep-timeout", type=positive_float, default=10.0,
                   help="lockstep: a sensor frame unanswered this many s marks the firmware silent; the plant then "
                        "steps on without commands (default 10)")
    p.add_argument("--duration", type=duration_s, default=None, help="simulated time in s (default: until SIGINT)")
    p.add_argument("--period", type=positive_float, default=None,
                   help="cycle period in s: must equal the preset's integrator.dt_s (the default) and the bus map's "
                        "cycle_s")
    p.add_argument("--log", type=file_with_suffix(".msgpack"), help="run log (.msgpack), readable up to its last flush if the process is killed")
    p.add_argument("--log-wrenches", action="store_true",
                   help="add the joint interaction wrenches w_<joint>_mx .. _fz to the run log (docs/model.md \"Conventions\")")
    p.add_argument("--formulation", choices=("aba", "screw-dae"), default="aba",
                   help="the plant's kernel: articulated-body algorithm (default) or seed 000's screw-theoretic DAE")
    p.add_argument("--targets", help="the firmware's targets: a TOML file with a [verdict] table (or a shipped name, "
                                     "e.g. seed000_setpoints); default: the scenario's [verdict], if any")
    p.add_argument("--check", action="store_true", help="exit with status 1 if a verdict fails")
    p.add_argument("--junit", metavar="FILE", help="write the verdicts as JUnit XML (hil.logs.junit): one testcase per "
                                                   "verdict with its requirement, value and limit; a run that proves "
                                                   "nothing is one error testcase")
    p.add_argument("--seed", type=nonnegative_int, default=None,
                   help="seed of the sensor noise generator and of the faults' random streams, replacing the "
                        "scenario's seed (default: noise from the preset's model.sensor_seed, faults from the "
                        "scenario's seed, else model.sensor_seed)")
    p.add_argument("--scenario", help="fault scenario (a file or a shipped name): faults injected during the run")
    p.add_argument("--ideal-sensors", action="store_true",
                   help="ideal encoders and tip IMU instead of the preset's sensor models (benchmark reference)")
    p.add_argument("--ideal-drives", action="store_true",
                   help="ideal torque drives instead of the preset's motor models (benchmark reference)")
    p.add_argument("--announce-faults", action="store_true",
                   help="set FAULT_ACTIVE in the status sent to the firmware while a fault is active (always logged)")
    p.add_argument("--record-bus", metavar="FILE", help="record every frame with python-can's writers (.asc, .blf)")
    _toolchain_arguments(p)
    p.add_argument("--no-realtime", action="store_true",
                   help="realtime mode: skip SCHED_FIFO, mlockall and gc freezing (afap and lockstep never use them)")
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
    p.add_argument("--lift-rt-throttling", action="store_true",
                   help="with --cpu, as root: RT throttling off during the run (sched_rt_runtime_us -1, restored "
                        "after, also if the emulator dies); a loop that never sleeps (10 kHz) is otherwise "
                        "stopped 50 ms every second, but the pinned CPU's kernel threads then wait for the run")
    _live_arguments(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def _toolchain_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--xcp", metavar="[HOST:]PORT", type=xcp_address, default=None,
                   help="serve XCP on UDP (hil.runtime.xcp_server): measure the log's columns (DAQ each cycle) and "
                        "calibrate plant and fault parameters while running; HOST default 127.0.0.1, PORT 0 picks "
                        "a free one (in the ready line); the A2L file: hil xcp a2l")
    p.add_argument("--xcp-can", metavar="MASTER_ID:SLAVE_ID", type=xcp_can_ids, default=None,
                   help="serve XCP on the run's CAN link instead, the master's commands on MASTER_ID, the answers "
                        "and DAQ packets on SLAVE_ID (e.g. 0x7F0:0x7F1; above 0x7FF extended); a CAN FD map for DAQ "
                        "of the float64 measurements")
    p.add_argument("--fmu", metavar="PART.fmu", help="co-simulate an FMI 2.0 co-simulation FMU in the loop, one step "
                                                  "per cycle (hil.runtime.cosim); named PART in --connect")
    p.add_argument("--connect", metavar="PAIRS", help="--fmu's connections, comma-separated SOURCE=TARGET: "
                                                      "PART.<output>=joint.<joint>.load_N_m or "
                                                      "=station.<station>.fx_N|fy_N|fz_N|mx_N_m|my_N_m|mz_N_m "
                                                      "(world axes), joint.<joint>.q_rad|qd_rad_s|tau_N_m=PART.<input>, "
                                                      "station.<station>.x_m|y_m|z_m|vx_m_s|vy_m_s|vz_m_s=PART.<input> "
                                                      "(tip.<key>: the tip's), t_s=PART.<input>")


def _live_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--live", type=int_in(0, 65535), nargs="?", const=8765, default=None, metavar="PORT",
                   help="serve the arm's 3D scene and signals over a Foxglove WebSocket on 127.0.0.1:PORT "
                        "(default 8765) while running, fed from the log writer's thread")
    p.add_argument("--live-rate", type=positive_float, default=50.0, help="--live: messages per second of simulated time")
    p.add_argument("--live-token", type=live_token, nargs="?", const="random", default=None, metavar="TOKEN",
                   help="--live: admit only viewers whose URL carries ?token=TOKEN (8 to 128 of A-Z a-z 0-9 - _ . ~; "
                        "without a value a random one, printed with the view's URL)")
    p.add_argument("--live-allow-origin", type=web_origin, action="append", default=[], metavar="ORIGIN",
                   help="--live: a web origin besides loopback whose pages may connect, e.g. https://app.foxglove.dev "
                        "(repeatable; desktop viewers send none and need none)")


def _latency_arguments(p: argparse.ArgumentParser) -> None:
    _run_arguments(p)
    p.set_defaults(duration=10.0)


@command("run", "the emulator: real-time loop behind a CAN or serial link", _run_arguments)
def _cmd_run(args: argparse.Namespace) -> int:
    summary = run(args)
    if args.json:
        print(json.dumps(summary, default=float))
    else:
        print(format_summary(summary))
    return _exit_status(summary, args.check)


@command("latency", "the firmware's timing: how old the command is that the plant uses, per cycle (any firmware; "
                    "the same arguments as `hil run`, default 10 s, the reference firmware unless --firmware)",
         _latency_arguments)
def _cmd_latency(args: argparse.Namespace) -> int:
    if args.firmware is None and args.link in ("pty", "slcan-pty"):
        args.spawn_firmware = True
    summary = run(args)
    print(json.dumps(summary, default=float) if args.json else format_summary(summary, timing_only=True))
    return _exit_status(summary, args.check)


def _exit_status(summary: dict, check: bool) -> int:
    from hil.runtime.outcome import all_passed
    if summary["run_failures"]:
        return EXIT_RUN_FAILED
    if records_incomplete(summary):
        return EXIT_RECORDS_INCOMPLETE
    if check and not summary.get("verdicts"):
        print("hil run: --check: nothing was checked (the targets give no verdict)", file=sys.stderr)
        return EXIT_VERDICT_FAILED
    return EXIT_VERDICT_FAILED if check and not all_passed(summary) else 0


def run(args: argparse.Namespace) -> dict:
    """Build, start (with the firmware), run, judge: the summary."""
    from firmware_bridge.canopen.network import is_canopen
    from hil.cli.bus import load_bus
    from hil.jit_cache import needs_compiling
    from hil.logs.targets import load_targets
    from hil.model.presets import resolve
    from numba.core import config

    from firmware_bridge.links.connect import check_link_fits
    from hil.runtime.sysguard import remove_stale_folders, restore_stale, temp_folder
    for line in restore_stale():        # settings a run that died with its guardian left changed
        print(f"hil: {line}", file=sys.stderr)
    bus_map = load_bus(resolve("bus", args.bus))
    if args.heartbeat_ms is not None and not is_canopen(bus_map):
        raise CliError(f"--heartbeat-ms needs a CANopen bus map; {args.bus} has no NMT and SYNC messages")
    if args.live is None and (args.live_token or args.live_allow_origin):
        raise CliError(f"{'--live-token' if args.live_token else '--live-allow-origin'} needs --live")
    targets = load_targets(resolve("targets", args.targets)) if args.targets else None
    if args.xcp and args.xcp_can:
        raise CliError("--xcp and --xcp-can: one XCP slave a run; choose UDP or the CAN link")
    if args.xcp_can:
        check_xcp_can(args.xcp_can, bus_map)
    if args.connect and not args.fmu:
        raise CliError("--connect is for --fmu")
    if args.fmu and not Path(args.fmu).is_file():
        raise CliError(f"--fmu {args.fmu}: no such file")
    if args.firmware_in_process:
        check_in_process(args)
    else:
        check_link_fits(bus_map, args.link)           # refused before anything is compiled or opened
    if (args.spawn_firmware or args.firmware_in_process) and args.firmware_params:
        from firmware_bridge.reference.nominal import load_nominal_arm
        load_nominal_arm(resolve("firmware", args.firmware_params))     # the firmware's file, checked here first
    for option, path in (("--log", args.log), ("--log", args.log and args.log + ".summary.json"),
                         ("--record-bus", args.record_bus), ("--junit", args.junit)):
        if path:
            _check_output(option, path)
    if needs_compiling(Path(config.CACHE_DIR)):
        print(f"hil: compiling kernels (first run only, two to three minutes; cached in {config.CACHE_DIR})",
              file=sys.stderr, flush=True)
    remove_stale_folders("run")                 # those of runs killed before they could remove them
    log_dir = None if args.log else temp_folder("run")
    try:
        summary = _build_and_run(args, targets, args.log or os.path.join(log_dir, "run.msgpack"))
    finally:
        if log_dir is not None:
            shutil.rmtree(log_dir, ignore_errors=True)
    if args.log:            # stored beside the log; a failure to write it is reported, not raised
        summary["summary_file_error"] = _write_summary(args.log + ".summary.json", summary)
    if args.junit:
        _write_junit(args, summary)
    return summary


def _write_junit(args: argparse.Namespace, summary: dict) -> None:
    """The run's verdicts as JUnit XML; a file that cannot be written is a one-line error (CI must not read an old one)."""
    from hil.logs import junit
    name = f"hil run {Path(args.config).stem}" + (f" {Path(args.scenario).stem}" if args.scenario else "")
    try:
        junit.write(args.junit, [junit.run_suite(summary, name, args.log)])
    except OSError as exc:
        raise CliError(f"--junit {args.junit}: {exc.strerror or exc}") from None


def _build_and_run(args: argparse.Namespace, targets, log_path: str) -> dict:
    """Build the emulator, run it with the firmware, judge the run: the summary."""
    from hil.logs.targets import LINK_HEALTH_ONLY, Targets
    from hil.runtime.launch import build_emulator
    from hil.runtime.loop import RuntimeOptions

    part = _fmu_part(args) if args.fmu else None
    opts = RuntimeOptions(mode=args.mode, period_s=args.period, duration_s=args.duration,
                          watchdog_s=args.watchdog, safe_state=args.safe_state, realtime=not args.no_realtime,
                          cpu=args.cpu, log_path=log_path, overrun_policy=args.overrun_policy,
                          halt_after=args.halt_after, ignore_first_s=args.ignore_first,
                          bus_record_path=args.record_bus, seed=args.seed, announce_faults=args.announce_faults,
                          log_wrenches=args.log_wrenches, start=args.start.replace("-", "_"),
                          start_timeout_s=args.start_timeout, lift_rt_throttling=args.lift_rt_throttling,
                          lockstep_resend_s=args.lockstep_resend, lockstep_timeout_s=args.lockstep_timeout,
                          sampled_stations=tuple(part.source_stations) if part else ())
    built = build_emulator(args.config, args.bus, "in-process" if args.firmware_in_process else args.link, opts,
                           args.scenario,
                           None if args.heartbeat_ms is None else args.heartbeat_ms * 1e-3, args.firmware_link,
                           ideal_sensors=args.ideal_sensors, ideal_drives=args.ideal_drives,
                           formulation=args.formulation)
    if targets is None and built.scenario_targets is not None:
        targets = built.scenario_targets
    if targets is None and args.check:
        targets = Targets(source=LINK_HEALTH_ONLY)
    xcp = None
    try:
        if part is not None:
            built.emulator.attach_fmu(part)
        if targets is not None:
            targets.check_joints(built.emulator.plant.layout.joint_names)     # before the run, not after it
            targets.check_columns(built.emulator.columns)
        if args.xcp or args.xcp_can:
            xcp = serve_xcp(args, built.emulator)
    except BaseException:
        built.emulator.link.close()
        if part is not None:
            part.close()
        raise
    try:
        summary = _run_with_firmware(args, built)
    finally:
        if part is not None:
            part.close()
        if xcp is not None:
            xcp.close()
    _judge(summary, built, log_path, targets)
    return summary


def _fmu_part(args: argparse.Namespace):
    """The co-simulated FMU of --fmu, read and its connections' form checked (bound to the arm and started by
    Emulator.attach_fmu, before the run)."""
    from hil.runtime.cosim import FmuPart
    if not args.connect:
        raise CliError("--fmu needs --connect (which FMU outputs act on the arm, which plant values it reads)")
    return FmuPart(args.fmu, args.connect)


def _check_output(option: str, path: str) -> None:
    """CliError, before the run, for an output file the run must not write: a symbolic link (it would overwrite
    the link's target), something other than a regular file, or a file in a folder that does not exist."""
    where = Path(path)
    if where.is_symlink():
        raise CliError(f"{option} {path}: a symbolic link (to {os.readlink(where)}); give the file's own path")
    if where.exists() and not where.is_file():
        raise CliError(f"{option} {path}: not a regular file")
    if not where.parent.is_dir():
        raise CliError(f"{option} {path}: the folder {where.parent} does not exist; create it first")


def _write_summary(path: str, summary: dict) -> str | None:
    """Write the summary as JSON to `path`; None, or (disk full, ...) why it could not, the partial file removed."""
    text = json.dumps(summary, default=float, indent=1)
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        if Path(path).is_file():
            Path(path).unlink()
        return f"{path}: {exc.strerror or exc}"
    return None


def records_incomplete(summary: dict) -> list[str]:
    """What of the run's records (its log, its summary file) could not be written whole."""
    out = []
    log = summary.get("log") or {}
    if log.get("writer_error"):
        out.append(f"run log: {log['writer_error']}")
    if summary.get("summary_file_error"):
        out.append(f"summary file: {summary['summary_file_error']}")
    return out


def _judge(summary: dict, built, log_path: str, targets) -> None:
    from hil.runtime.outcome import failures, judge
    summary["run_failures"] = failures(summary)
    judge(summary, log_path, built.emulator.plant, built.emulator.opt.period_s,
          None if summary["run_failures"] else targets)


def _run_with_firmware(args: argparse.Namespace, built) -> dict:
    """Print the ready line, start the firmware, run the loop; the firmware's exit fails the run."""
    from hil.runtime.launch import await_host, spawn_firmware

    from hil.runtime.firmware_process import expand

    if args.firmware_in_process:
        return run_in_process(args, built)
    emulator = built.emulator
    firmware = live = None
    ran = False
    if args.firmware is not None:                   # refused before the ready line, not after it
        _check_program(expand(_split(args.firmware), built.endpoint)[0])
    ready = built.ready_line()
    if emulator.xcp is not None:
        ready["xcp"] = emulator.xcp.address
    print("ready " + json.dumps(ready), flush=True)
    emulator.on_progress = lambda text: print(f"hil: {text}", file=sys.stderr, flush=True)
    if not args.spawn_firmware and args.firmware is None:
        emulator.progress(f"waiting for your firmware on {built.endpoint.link} (no --firmware given; --firmware CMD "
                          "starts it, --spawn-firmware starts the reference firmware)")
    try:
        if args.live is not None:
            live = emulator.live = _live_view(emulator, args)
        if args.spawn_firmware or args.firmware is not None:
            command = _reference_firmware(args, built) if args.spawn_firmware else _split(args.firmware)
            echo = None if args.spawn_firmware else (lambda line: print(f"[firmware] {line}", file=sys.stderr))
            firmware = spawn_firmware(command, built.endpoint,
                                      args.cpu if args.firmware_cpu is None else args.firmware_cpu,
                                      args.firmware_priority, ready_line="ready" if args.spawn_firmware else None,
                                      echo=echo)
            firmware.watch(emulator.firmware_exited)
            await_host(emulator.link, args.start_timeout)
        summary = emulator.run()
        ran = True
    finally:
        try:        # after a run the reference firmware ends by itself; another is terminated
            grace = (30.0 if args.spawn_firmware else 1.0) if ran else 0.0
            status = None if firmware is None else firmware.stop(grace)
        finally:
            emulator.link.close()
            if live is not None:
                live.close()
    if live is not None:
        summary["live"] = {"port": live.port, "frames": live.frames, "dropped": live.dropped, "error": live.error,
                           "viewers": live.gate}
    if firmware is not None:
        summary["firmware_process"] = {"command": firmware.argv, "exit_status": status,
                                       "stderr_tail": list(firmware.stderr), "stdout_tail": list(firmware.stdout)}
        if args.spawn_firmware:
            summary["firmware"] = _last_json(firmware.output())
    return summary


def _reference_firmware(args: argparse.Namespace, built) -> list[str]:
    """The reference firmware's command line: its own nominal parameter file, the run's bus map; the
    emulator's real-time treatment in realtime mode."""
    from hil.model.presets import resolve
    from hil.runtime.launch import REFERENCE_PARAMS, reference_firmware

    params = resolve("firmware", args.firmware_params) if args.firmware_params else REFERENCE_PARAMS
    return reference_firmware(params, built.endpoint.bus, args.duration, args.move_time, args.vibration_suppression,
                              realtime=args.mode == "realtime" and not args.no_realtime,
                              priority=args.firmware_priority)


def _check_program(program: str) -> None:
    """CliError if the firmware's program is neither on PATH nor an executable file."""
    import shutil
    if shutil.which(program) is None:
        raise CliError(f"--firmware: {program!r} is not a program on PATH nor an executable file "
                       f"(from {os.getcwd()})")


def _split(command_line: str) -> list[str]:
    import shlex
    try:
        words = shlex.split(command_line)
    except ValueError as exc:
        raise CliError(f"--firmware {command_line!r}: {exc}") from None
    if not words:
        raise CliError("--firmware '': an empty command; give the firmware's command line, or leave --firmware out "
                       "and start the firmware yourself after the ready line")
    return words


def _last_json(text: str) -> dict | None:
    lines = [line for line in text.strip().splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def live_token(text: str) -> str:
    """A --live-token value: "random", or 8 to 128 URL-safe characters."""
    if text == "random" or (8 <= len(text) <= 128 and all(c.isascii() and (c.isalnum() or c in "-_.~") for c in text)):
        return text
    raise argparse.ArgumentTypeError("expected 8 to 128 of A-Z a-z 0-9 - _ . ~ (or no value: a random token)")


def web_origin(text: str) -> str:
    """A --live-allow-origin value: http(s)://HOST[:PORT], nothing after it."""
    from urllib.parse import urlsplit
    try:
        parts = urlsplit(text)
        ok = (parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
              and not (parts.path.strip("/") or parts.query or parts.fragment or parts.username))
    except ValueError:          # a port that is no number
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError("expected an origin, http(s)://HOST[:PORT], e.g. https://app.foxglove.dev")
    return text.rstrip("/")


def _live_view(emulator, args: argparse.Namespace):
    import secrets
    token = secrets.token_urlsafe(18) if args.live_token == "random" else args.live_token
    try:
        from hil.viz.live import LiveView
        live = LiveView(emulator.header["config_text"], emulator.columns, port=args.live, rate_hz=args.live_rate,
                        source=emulator.header["config"], token=token, allowed_origins=tuple(args.live_allow_origin))
    except ImportError as exc:
        raise CliError(f"--live needs {exc.name}: pip install 'ella-hil[viz]'") from None
    query = f"/?token={token}" if token else ""
    print(f"live view: ws://127.0.0.1:{live.port}{query} (Foxglove WebSocket)", file=sys.stderr)
    return live
