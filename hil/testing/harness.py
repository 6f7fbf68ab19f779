"""An emulator run for a test: the emulator in a background thread of this process (or in its own
process), a firmware in another process, live state and the fault API while it runs, the run
log and the verdicts afterwards. The pytest plugin (hil.testing.pytest_plugin) hands these out as
fixtures.

    run = EmulatorRun(duration_s=3.0, safe_state="brake").start()   # ELLA, serial pty, reference firmware
    run.wait_until(1.0)
    run.inject("dropout", "enc_elbow")                              # hil.faults.engine kinds and parameters
    result = run.finish()
    result.log.column("qd_elbow"), result.log.events, result.verdicts

Runs are lockstep by default (one plant step per command: deterministic, whatever the machine's
load); `mode="realtime"` tests the firmware's timing. Thread mode (default) gives the live plant, the
sensors and `faults` (hil.faults.engine.FaultEngine) while the loop runs; injections take effect at
the next cycle start. From the test's thread, change the run only through `inject` / `faults`
(inject, clear); read everything else, write nothing else. Subprocess mode runs `hil run` in its
own process: faults then come only from the scenario file, and the result is the same log and
summary. The firmware is the reference firmware by default, any command line (placeholders
{port}, {link}, {interface}, {channel}, {bus}: hil.runtime.firmware_process), or None for firmware
on real hardware that opens the link itself.

`finish()` raises RunFailed, never returns, when the run proves nothing: the firmware process
exited before the end, no valid command within the start timeout, no cycle ran, or the link
could not carry the frames (hil.runtime.outcome). With `targets` (a [verdict] file or shipped
name; else the scenario's [verdict]) the result carries the verdicts.
"""
from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hil.faults.spec import Duration, Fault, Trigger
from hil.logs.runlog import RunLog
from hil.logs.targets import LINK_HEALTH_ONLY, Targets, load_targets
from hil.model.presets import resolve
from hil.runtime.firmware_process import FirmwareProcess
from hil.runtime.launch import REFERENCE_PARAMS, await_host, build_emulator, reference_firmware, spawn_firmware
from hil.runtime.loop import RuntimeOptions
from hil.runtime.outcome import failures, judge
from hil.runtime.sysguard import temp_folder

REFERENCE = "reference"


class RunFailed(AssertionError):
    """The run proves nothing about the firmware (see the module doc); `summary` has the details."""

    def __init__(self, reasons: list[str], summary: dict | None, output: str = ""):
        self.summary = summary
        text = "; ".join(reasons)
        super().__init__(text + (f"\nfirmware output (last lines):\n{output}" if output else ""))


@dataclass
class RunResult:
    summary: dict                      # the emulator's summary (timing, counters, faults, verdicts, ...)
    firmware: dict | None              # the reference firmware's JSON result, None for other firmware
    log: RunLog
    firmware_output: str = ""          # the last lines the firmware printed

    @property
    def verdicts(self) -> list[dict]:
        """The verdicts against the run's targets ([] without targets)."""
        return self.summary.get("verdicts", [])

    def failed_verdicts(self) -> list[dict]:
        return [v for v in self.verdicts if not v["passed"]]


@dataclass
class EmulatorRun:
    """One emulator run; settings as `hil run` takes them (see hil.runtime.launch.build_emulator)."""

    arm: str = "ella"                  # a preset file or a shipped name
    bus: str = "serial_frame"          # a bus map file or a shipped name
    link: str = "pty"
    firmware: Sequence[str] | str | None = REFERENCE   # REFERENCE, a command line (str or argv), None
    scenario: str | None = None
    targets: str | None = None         # a [verdict] file or a shipped name (default: the scenario's)
    mode: str = "lockstep"
    duration_s: float = 3.0
    seed: int | None = None
    watchdog_s: float = 0.05
    safe_state: str = "zero_torque"
    move_time_s: float = 1.0
    vibration_suppression: bool = False
    realtime: bool = False             # SCHED_FIFO, mlockall, gc freeze for the loop thread
    start_timeout_s: float = 30.0
    subprocess: bool = False           # run `hil run` in its own process instead of a thread
    log_path: str | None = None        # default: a file in a temporary folder, removed by close()
    cwd: str = "."                     # relative config paths and the firmware start here
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _emulator: Any = field(default=None, init=False, repr=False)
    _built: Any = field(default=None, init=False, repr=False)
    _process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _firmware: FirmwareProcess | None = field(default=None, init=False, repr=False)
    _summary: dict | None = field(default=None, init=False, repr=False)
    _error: BaseException | None = field(default=None, init=False, repr=False)
    _link_closed: bool = field(default=False, init=False, repr=False)
    _temp_dir: str | None = field(default=None, init=False, repr=False)
    _targets: Targets | None = field(default=None, init=False, repr=False)

    # ------------------------------------------------------------------ start
    def start(self) -> EmulatorRun:
        if self.log_path is None:
            self._temp_dir = temp_folder("run")
            self.log_path = str(Path(self._temp_dir) / "run.msgpack")
        if self.subprocess:
            self._start_process()
        else:
            self._start_thread()
        return self

    def _path(self, kind: str, p: str | None) -> str | None:
        """A file relative to cwd, or a shipped name."""
        if p is None:
            return None
        local = Path(self.cwd, p)
        return str(local) if local.exists() else resolve(kind, p)

    def _firmware_command(self, bus: str) -> list[str] | None:
        if self.firmware is None:
            return None
        if self.firmware == REFERENCE:
            return reference_firmware(REFERENCE_PARAMS, bus, self.duration_s, self.move_time_s,
                                      self.vibration_suppression)
        return shlex.split(self.firmware) if isinstance(self.firmware, str) else list(self.firmware)

    def _start_thread(self) -> None:
        options = RuntimeOptions(mode=self.mode, duration_s=self.duration_s, watchdog_s=self.watchdog_s,
                                 safe_state=self.safe_state, realtime=self.realtime, seed=self.seed,
                                 log_path=self.log_path, start_timeout_s=self.start_timeout_s)
        self._built = built = build_emulator(self._path("preset", self.arm), self._path("bus", self.bus), self.link,
                                             options, self._path("scenario", self.scenario))
        self._emulator = built.emulator
        command = self._firmware_command(built.endpoint.bus)
        try:
            self._targets = (load_targets(self._path("targets", self.targets)) if self.targets
                             else built.scenario_targets) or Targets(source=LINK_HEALTH_ONLY)
            self._targets.check_joints(self._emulator.plant.layout.joint_names)    # before the run, not after it
            self._targets.check_columns(self._emulator.columns)
            if command is not None:
                self._firmware = spawn_firmware(command, built.endpoint,
                                                ready_line="ready" if self.firmware == REFERENCE else None,
                                                cwd=self.cwd)
                self._firmware.watch(self._emulator.firmware_exited)
                await_host(self._emulator.link, self._emulator.opt.start_timeout_s)
        except BaseException:
            self.close()
            raise
        self._thread = threading.Thread(target=self._loop, name="hil-loop", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            self._summary = self._emulator.run()
        except BaseException as exc:       # re-raised in the test's thread by finish()
            self._error = exc

    def _start_process(self) -> None:
        cmd = [sys.executable, "-m", "hil", "run", self._path("preset", self.arm), "--bus", self._path("bus", self.bus),
               "--link", self.link, "--mode", self.mode, "--duration", str(self.duration_s), "--log", self.log_path,
               "--watchdog", str(self.watchdog_s), "--safe-state", self.safe_state,
               "--start-timeout", str(self.start_timeout_s), "--json", "--check"]
        cmd += ["--scenario", self._path("scenario", self.scenario)] if self.scenario else []
        cmd += ["--targets", self._path("targets", self.targets)] if self.targets else []
        cmd += ["--seed", str(self.seed)] if self.seed is not None else []
        cmd += [] if self.realtime else ["--no-realtime"]
        if self.firmware == REFERENCE:
            cmd += ["--spawn-firmware", "--move-time", str(self.move_time_s)]
            cmd += ["--vibration-suppression"] if self.vibration_suppression else []
        elif self.firmware is not None:
            cmd += ["--firmware", self.firmware if isinstance(self.firmware, str) else shlex.join(self.firmware)]
        self._process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=self.cwd)

    # ------------------------------------------------------------------ while it runs
    def _live(self):
        if self._emulator is None:
            raise RuntimeError("live state and faults need a started run in thread mode")
        return self._emulator

    @property
    def emulator(self):
        """The Emulator (hil.runtime.loop): plant, sensors, drives, faults, link, watchdog."""
        return self._live()

    @property
    def faults(self):
        return self._live().faults

    @property
    def t(self) -> float:
        return self._live().plant.t

    @property
    def q(self) -> np.ndarray:
        return self._live().plant.q().copy()

    def inject(self, kind: str, target: str = "", *, name: str | None = None, trigger: Trigger | None = None,
               duration: Duration | None = None, **params: Any) -> int:
        """Inject a fault (hil.faults.engine kinds; parameters with their unit in the key, as in scenario
        files); returns its handle for faults.clear(). Without a trigger it strikes next cycle."""
        fault = Fault(name or f"{kind}_{target or 'cycle'}", kind, target, params)
        return self.faults.inject(fault, trigger, duration)

    def wait_until(self, t_s: float, timeout_s: float | None = None) -> None:
        """Block until the emulator's time reaches t_s (or the run ended); TimeoutError after
        `timeout_s` of wall time (default: 10 x t_s + 30 s)."""
        deadline = time.monotonic() + (10 * t_s + 30 if timeout_s is None else timeout_s)
        emulator = self._live()
        while emulator.plant.t < t_s - 0.5 * emulator.plant.dt and self._thread.is_alive():
            if time.monotonic() > deadline:
                raise TimeoutError(f"emulator time {emulator.plant.t:.3f} s has not reached {t_s} s")
            time.sleep(1e-3)

    # ------------------------------------------------------------------ end
    def stop(self) -> RunResult:
        """Stop the loop now (as SIGINT would) and collect the result."""
        if self._emulator is not None:
            self._emulator.stop_requested = True
        elif self._process is not None:
            self._process.terminate()
        return self.finish()

    def finish(self, timeout_s: float | None = None) -> RunResult:
        """Wait for the run's end (its duration) and return summary, firmware result, log and
        verdicts; RunFailed if the run proves nothing."""
        timeout_s = 10 * self.duration_s + 60 + self.start_timeout_s if timeout_s is None else timeout_s
        if self._process is not None:
            return self._finish_process(timeout_s)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._emulator.stop_requested = True
            self._thread.join(5.0)
        output = self._stop_firmware()
        if not self._thread.is_alive():
            self._close_link()
        if self._error is not None:
            raise self._error
        summary = self._summary
        summary["run_failures"] = failures(summary)
        if summary["run_failures"]:
            raise RunFailed(summary["run_failures"], summary, output)
        emulator = self._built.emulator
        judge(summary, self.log_path, emulator.plant, emulator.opt.period_s, self._targets)
        reference = _last_json("\n".join(self._firmware.stdout)) if self.firmware == REFERENCE else None
        return RunResult(summary, reference, RunLog.read(self.log_path), output)

    def _stop_firmware(self) -> str:
        """Let the firmware end (the reference firmware stops by itself; another is terminated);
        its last lines of output."""
        if self._firmware is None:
            return ""
        self._firmware.stop(30.0 if self.firmware == REFERENCE else 1.0)
        return "\n".join(list(self._firmware.stderr) or list(self._firmware.stdout))

    def _finish_process(self, timeout_s: float) -> RunResult:
        try:
            out, err = self._process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            out, err = self._process.communicate()
        summary = self._summary = _last_json(out)
        if self._process.returncode not in (0, 1) or summary is None:
            raise RunFailed([f"hil run exited with {self._process.returncode}"] + (summary or {}).get("run_failures", []),
                            summary, err.strip()[-2000:])
        return RunResult(summary, summary.get("firmware"), RunLog.read(self.log_path), err.strip()[-2000:])

    @property
    def judged(self) -> dict | None:
        """The run's summary once finish() has judged it (its verdicts, or run_failures for a run that proves
        nothing); None before."""
        return self._summary if self._summary is not None and "run_failures" in self._summary else None

    @property
    def temporary_log(self) -> bool:
        """Whether the log lives in a temporary folder that close() removes (no log_path was given)."""
        return self._temp_dir is not None

    def close(self) -> None:
        """Stop whatever still runs (a test that failed before finish()) and remove the temporary
        log folder (a RunResult keeps the log it read)."""
        if self._thread is not None and self._thread.is_alive():
            self._emulator.stop_requested = True
            self._thread.join(5.0)
        if self._firmware is not None:
            self._firmware.stop(0.0)
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.communicate()
        if self._thread is None or not self._thread.is_alive():
            self._close_link()
        if self._temp_dir is not None:
            shutil.rmtree(self._temp_dir, ignore_errors=True)
            self._temp_dir = None

    def _close_link(self) -> None:
        if self._emulator is not None and not self._link_closed:
            self._link_closed = True
            self._emulator.link.close()


def _last_json(text: str) -> dict | None:
    lines = [line for line in text.strip().splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None
