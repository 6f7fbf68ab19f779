"""An emulator run for a test: the emulator in a background thread of this process (or in its own
process), a firmware in another process, live state and the fault API while it runs, the run
log afterwards. The pytest plugin (hil.testing.pytest_plugin) hands these out as fixtures.

    run = EmulatorRun(duration_s=3.0, safe_state="brake").start()   # ELLA, serial pty, reference firmware
    run.wait_until(1.0)
    run.inject("dropout", "enc_elbow")                              # hil.faults.engine kinds and parameters
    result = run.finish()
    result.log.column("qd_elbow"), result.log.events, result.firmware["fault"]

Thread mode (default) gives the live plant, the sensors and `faults` (hil.faults.engine.FaultEngine) while
the loop runs; injections take effect at the next cycle start. From the test's thread, change the
run only through `inject` / `faults` (inject, clear); read everything else, write nothing else. Subprocess mode runs `hil run` in its
own process: faults then come only from the scenario file, and the result is the same log and
summary. In both modes the firmware is a command line (LINK_PLACEHOLDER stands for the link spec
its end opens), the reference firmware by default, or None for firmware on real hardware that
opens the link itself.
"""
from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hil.faults.spec import Duration, Fault, Trigger
from hil.runtime.launch import REFERENCE_PARAMS, await_host, build_emulator, reference_firmware, spawn_firmware
from hil.logs.runlog import read_run
from hil.runtime.loop import RuntimeOptions

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = "reference"


@dataclass
class RunLog:
    """A run log's rows by column name, and its events (fault injections and clearances,
    watchdog trips) as maps with "event", "cycle", "t" and, for faults, "fault" and "detail"."""

    header: dict
    rows: np.ndarray

    @property
    def columns(self) -> list[str]:
        return self.header["columns"]

    @property
    def events(self) -> list[dict]:
        return self.header.get("events", [])

    @property
    def t(self) -> np.ndarray:
        return self.column("t")

    def column(self, name: str) -> np.ndarray:
        try:
            return self.rows[:, self.columns.index(name)]
        except ValueError:
            raise KeyError(f"no column {name!r}; columns: {', '.join(self.columns)}") from None

    def event_time(self, event: str, fault: str | None = None) -> float:
        """Time [s] of the first event of this kind (and fault name); KeyError if none."""
        for e in self.events:
            if e["event"] == event and (fault is None or e.get("fault") == fault):
                return float(e["t"])
        raise KeyError(f"no {event!r} event" + (f" of fault {fault!r}" if fault else "") + f" in {self.events}")

    def window(self, t0: float, t1: float = np.inf) -> RunLog:
        """The rows with t0 <= t < t1."""
        t = self.t
        return RunLog(self.header, self.rows[(t >= t0) & (t < t1)])


@dataclass
class RunResult:
    summary: dict                      # the emulator's summary (timing, counters, faults, ...)
    firmware: dict | None              # the reference firmware's JSON result, None for other firmware
    log: RunLog
    firmware_output: str = ""          # everything the firmware printed


@dataclass
class EmulatorRun:
    """One emulator run; settings as `hil run` takes them (see hil.runtime.launch.build_emulator)."""

    arm: str = "configs/ella.toml"
    bus: str = "configs/bus/serial_frame.toml"
    link: str = "pty"
    firmware: Sequence[str] | str | None = REFERENCE   # REFERENCE, a command line (str or argv), None
    scenario: str | None = None
    mode: str = "realtime"
    duration_s: float = 3.0
    seed: int | None = None
    watchdog_s: float = 0.05
    safe_state: str = "zero_torque"
    move_time_s: float = 1.0
    vibration_suppression: bool = False
    realtime: bool = False             # SCHED_FIFO, mlockall, gc freeze for the loop thread
    subprocess: bool = False           # run `hil run` in its own process instead of a thread
    log_path: str | None = None        # default: a file in a temporary folder, removed by close()
    cwd: str = str(ROOT)               # relative config paths start here
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _emulator: Any = field(default=None, init=False, repr=False)
    _process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _firmware: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _summary: dict | None = field(default=None, init=False, repr=False)
    _error: BaseException | None = field(default=None, init=False, repr=False)
    _link_closed: bool = field(default=False, init=False, repr=False)
    _temp_dir: str | None = field(default=None, init=False, repr=False)

    # ------------------------------------------------------------------ start
    def start(self) -> EmulatorRun:
        if self.log_path is None:
            self._temp_dir = tempfile.mkdtemp(prefix="hil-run-")
            self.log_path = str(Path(self._temp_dir) / "run.msgpack")
        if self.subprocess:
            self._start_process()
        else:
            self._start_thread()
        return self

    def _path(self, p: str | None) -> str | None:
        return None if p is None else str(Path(self.cwd, p))

    def _firmware_command(self) -> list[str] | None:
        if self.firmware is None:
            return None
        if self.firmware == REFERENCE:
            return reference_firmware(REFERENCE_PARAMS, self._path(self.bus), self.duration_s, self.move_time_s,
                                      self.vibration_suppression)
        return shlex.split(self.firmware) if isinstance(self.firmware, str) else list(self.firmware)

    def _start_thread(self) -> None:
        options = RuntimeOptions(mode=self.mode, duration_s=self.duration_s, watchdog_s=self.watchdog_s,
                                 safe_state=self.safe_state, realtime=self.realtime, seed=self.seed,
                                 log_path=self.log_path)
        built = build_emulator(self._path(self.arm), self._path(self.bus), self.link, options,
                               self._path(self.scenario))
        self._emulator = built.emulator
        command = self._firmware_command()
        try:
            if command is not None:
                self._firmware = spawn_firmware(command, built.firmware_link,
                                                ready_line="ready" if self.firmware == REFERENCE else None,
                                                cwd=self.cwd)
                await_host(self._emulator.link)
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
        cmd = [sys.executable, "-m", "hil", "run", self._path(self.arm), "--bus", self._path(self.bus),
               "--link", self.link, "--mode", self.mode, "--duration", str(self.duration_s), "--log", self.log_path,
               "--watchdog", str(self.watchdog_s), "--safe-state", self.safe_state, "--json"]
        cmd += ["--scenario", self._path(self.scenario)] if self.scenario else []
        cmd += ["--seed", str(self.seed)] if self.seed is not None else []
        cmd += [] if self.realtime else ["--no-realtime"]
        if self.firmware == REFERENCE:
            cmd += ["--spawn-firmware", "--move-time", str(self.move_time_s)]
            cmd += ["--vibration-suppression"] if self.vibration_suppression else []
        elif self.firmware is not None:
            raise ValueError("subprocess mode starts the reference firmware or none (firmware=None); "
                             "run other firmware in thread mode")
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
        """Wait for the run's end (its duration) and return summary, firmware result and log."""
        timeout_s = 10 * self.duration_s + 60 if timeout_s is None else timeout_s
        if self._process is not None:
            return self._finish_process(timeout_s)
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._emulator.stop_requested = True
            self._thread.join(5.0)
        firmware_output = self._collect_firmware()
        if not self._thread.is_alive():
            self._close_link()
        if self._error is not None:
            raise self._error
        return RunResult(self._summary, _last_json(firmware_output), RunLog(*read_run(self.log_path)),
                         firmware_output)

    def _collect_firmware(self) -> str:
        if self._firmware is None:
            return ""
        try:
            out, _ = self._firmware.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self._firmware.kill()
            out, _ = self._firmware.communicate()
        return out or ""

    def _finish_process(self, timeout_s: float) -> RunResult:
        try:
            out, err = self._process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            out, err = self._process.communicate()
        if self._process.returncode != 0:
            raise RuntimeError(f"hil run exited with {self._process.returncode}: {err.strip()[-2000:]}")
        summary = _last_json(out)
        return RunResult(summary, summary.get("firmware"), RunLog(*read_run(self.log_path)), "")

    def close(self) -> None:
        """Stop whatever still runs (a test that failed before finish()) and remove the temporary
        log folder (a RunResult keeps the log it read)."""
        if self._thread is not None and self._thread.is_alive():
            self._emulator.stop_requested = True
            self._thread.join(5.0)
        for proc in (self._firmware, self._process):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
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
