"""The emulator's cycle: receive commands, step the plant, sample the sensors, answer.

One thread owns the loop on absolute deadlines (hil.runtime.realtime.Pacer); records go to a
logger thread through a bounded queue, so file I/O never runs in the loop. One cycle
(``Emulator.step_once``), in order: the fault engine's cycle start (triggers, plant and drive
faults); receive the frames (through the link's fault layer); decode the commands; supervise
(command watchdog, safe-state poses, holding brakes); drives (command -> link-side torque); a
stall fault; the plant step; sensor sampling; signal faults on the measured channels; encode the
sensor frames; send them (bus faults and output delay act there); log. Decode through encode are
one compiled call (hil.runtime.one_call), which returns to Python for what only Python does (a
watchdog trip or clear, a divergence, signal faults, CANopen's frames) and is then made again from
where it stopped (hil.runtime.stages times each stage).
Modes (hil.runtime.options): `realtime` (fixed period), `afap` (as fast as possible) and `lockstep`
(one step per received command frame, deterministic).

Start and silence (hil.runtime.start): until the first valid command the first sensor frames go
out again now and then; realtime and afap start their clock then (unless `start = "immediately"`),
no command within `start_timeout_s` fails the run. Lockstep (hil.runtime.lockstep): an unanswered
sensor frame goes out again every second and after `lockstep_timeout_s` marks the firmware silent;
a cycle whose sensor frames the firmware's receiver would not compute on (withheld or damaged by a
bus fault, the first after a bus-off) expects no answer. `abort(reason)` fails the run.

CANopen maps (firmware_bridge.canopen.network.DriveNodes as `protocol`): the nodes take NMT and SYNC
frames and drop RPDOs while not operational; lockstep steps once per SYNC (in any NMT state: the
SYNC is the bus's clock), realtime/afap step on their own period and a SYNC only marks which
cycle the operational nodes answer with their TPDOs (from the state after the step). Boot-up
messages and heartbeats go out from the loop (also while lockstep waits); the joints of stopped
drives, or drives that left operational, are in the safe state until NMT start.
"""
from __future__ import annotations

import select
import signal
import threading
import time
from pathlib import Path

import numpy as np

from firmware_bridge.links.base import Frame, Link
from firmware_bridge.links.faults import FaultyLink
from firmware_bridge.links.recording import BusRecorder
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.devices.drives import DriveBank
from hil.faults.engine import FaultEngine, bus_encoding, encoder_counter_bits
from hil.model.spec import INTERFACE_VOLTAGE
from hil.dynamics.plant import Plant
from hil.runtime.command_age import CommandAge
from hil.runtime.cycle_stats import CycleStats, series_summary
from hil.runtime.pacer import OverrunHalt, Pacer
from hil.runtime.realtime import RealtimeSetup
from hil.runtime.divergence import DivergenceGuard
from hil.runtime.options import RuntimeOptions, Watchdog
from hil.runtime.receive import ReceiveBudget
from hil.runtime.lockstep import firmware_cue, wait_for_command
from hil.runtime.start import await_first_command, check_period, link_poller
from hil.runtime.command_frames import CompiledCommandInput
from hil.runtime.one_call import OneCall
from hil.runtime.sensor_frames import CompiledSensorFrames
from hil.runtime.stages import Stage, StageClock
from hil.runtime.supervisor import Supervisor
from hil.runtime.cycle_record import CycleRecord
from hil.runtime.stalls import Heartbeat, OverrunCauses, thread_usage, usage_between
from hil.logs import writer_process
from hil.logs.run_logger import RunLogger
from hil.faults.scenario import Scenario
from hil.model.sensor_specs import SensorSpec
from hil.devices.sensors import SensorSuite



class Emulator:
    """The plant behind a link, speaking the bus map's protocol."""

    def __init__(self, plant: Plant, link: Link, commands: CommandInput, sensors_out: SensorOutput,
                 options: RuntimeOptions, header: dict | None = None, protocol=None,
                 scenario: Scenario | None = None, drives: DriveBank | None = None,
                 sensors: list[SensorSpec] | None = None):
        """`protocol`: the CANopen nodes (firmware_bridge.canopen.network.DriveNodes) for a CANopen map, else None.
        `scenario`: faults to inject (hil.faults.scenario); more can be injected at run time through
        `emulator.faults` (hil.faults.engine.FaultEngine), also from another thread. `drives`: default the
        model's motors (hil.devices.drives.DriveBank; ideal torque drives where a joint has none).
        `sensors`: the sensor specs, default the model's (hil.devices.sensors.SensorSuite)."""
        options.validate()
        bus = commands.reader.bus
        options = check_period(options, plant, bus)
        self.plant = plant
        self.link = FaultyLink(link, bus)
        self._poll = link_poller(link)
        self.commands = commands
        self.sensors_out = sensors_out
        self.opt = options
        self.drives = drives or DriveBank(plant)
        self.sensors = SensorSuite(plant, sensors, seed=options.seed, current_source=self.drives.current)
        sensors_out.bind(self.sensors.channel_names)
        compiled_out = CompiledSensorFrames(sensors_out, self.sensors.channel_names)
        self.sensor_frames = compiled_out.frames
        compiled_in = CompiledCommandInput(commands)
        # a CANopen map's RPDOs go through their node's PDO mapping (PdoCommandInput), in Python
        python_frames = type(commands) is not CommandInput
        self.feed = commands.feed if python_frames else compiled_in.feed
        # the faults' seed: the run's, else the scenario's, else the model's
        seed = next(s for s in (options.seed, scenario and scenario.seed, plant.asm.model.sensor_seed) if s is not None)
        self.faults = FaultEngine(self.sensors.channel_names, dt_s=plant.dt, seed=seed,
                                  encoding=bus_encoding(bus), plant=plant, drives=self.drives, link=self.link,
                                  counter_bits=encoder_counter_bits(self.sensors))
        if scenario is not None:
            scenario.inject_into(self.faults)
        self.header = header or {}
        self.stats = CycleStats(options.stats_capacity)
        # read-to-send latency: a command frame taken off the link -> the first sensor frame computed with it
        self.latency_ns = np.zeros(options.stats_capacity, np.int64)
        self.latency_count = 0
        self.age = CommandAge(options.stats_capacity)
        self.cycle = 0
        self.stop_requested = False
        self.failure: str | None = None     # why the run failed (start timeout, the firmware exited, ...)
        self.finished = False               # the loop has ended (a firmware exit then fails nothing)
        self.n_cycles: int | None = None
        self.start_report: dict = {}       # how the run started: waited_s, resent
        self._early: list[Frame] = []       # frames read just before the sensor frames went out
        self.answer_expected = True         # lockstep: the last cycle's sensor frames cue the firmware
        self.silent = False                 # lockstep: the firmware left a sensor frame unanswered
        self.silent_cycles = 0
        self.last_sensor_frames: list[Frame] = []
        self.resent_frames = 0              # lockstep: unanswered sensor frames sent again
        self.dropped_while_silent = 0
        self.held_fresh = False             # a command taken in while waiting (lockstep, start)
        self._received: list[Frame] = []    # this cycle's frames (reused)
        self.divergence = DivergenceGuard(plant, self.drives)
        self.overrun_causes = OverrunCauses(options.period_s, None)
        self._last_work: tuple[int, int, int] | None = None   # last cycle: start, compute, I/O ns
        self._wait_from: int | None = None          # when the latest pacer wait began (monotonic ns)
        self._usage_from = None                     # the loop thread's usage then (hil.runtime.stalls.thread_usage)
        self.receive_budget = ReceiveBudget(options.receive_frames,
                                            options.receive_budget_s if options.mode == "realtime" else None)
        self.recorder: BusRecorder | None = None
        self.protocol = protocol
        # lockstep: which cycles a firmware answers (hil.runtime.lockstep); it sees what goes out on the wire
        self._cue = firmware_cue(bus, plant.layout.joint_names) if options.mode == "lockstep" and protocol is None else None
        if self._cue is not None:
            self.link.tap = self._cue.see
        self.supervisor = Supervisor(plant, self.drives, self.faults, options, protocol)
        commands.tau[:] = self.supervisor.hold_tau     # until the first command: as if the drives held the arm
        self._settle_drives()
        self.record = CycleRecord(plant, self.drives, self.sensors, self.faults, options.log_wrenches)
        self.logger: RunLogger | None = None
        self.stage_clock: StageClock | None = None    # per-stage timestamps (hil.runtime.stages), when set
        self.live = None        # a tap on the logger's thread (hil.viz.live.LiveView), set before run()
        self.one_call = OneCall(self, compiled_in, compiled_out, python_frames)    # the cycle's compute

    @property
    def watchdog(self) -> Watchdog:
        """The command watchdog (the supervisor's)."""
        return self.supervisor.watchdog

    @property
    def columns(self) -> list[str]:
        """The run log's column names (hil.runtime.cycle_record)."""
        return self.record.columns

    @property
    def hold_tau(self) -> np.ndarray:
        """The joint torques holding the arm at its start pose (the supervisor's)."""
        return self.supervisor.hold_tau

    def _settle_drives(self, steps: int = 200) -> None:
        """The drives' electrical state holding the arm at rest before the first cycle (a voltage
        drive's command is a duty: it starts at 0); the plant does not move meanwhile."""
        voltage = np.array([i == INTERFACE_VOLTAGE for i in self.drives.interfaces])
        self.commands.tau[voltage] = 0.0
        for _ in range(steps):
            self.drives.update(self.commands.tau)

    def firmware_exited(self, status: int) -> None:
        """The firmware process ended: that fails the run (also one not yet started) unless it is done."""
        if not self.finished and (self.n_cycles is None or self.cycle < self.n_cycles):
            how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
            self.abort(f"the firmware {how} at t = {self.plant.t:.3f} s (cycle {self.cycle}), before the run's end")

    def idle(self, remaining_s: float) -> None:
        """Wait for input without spinning (lockstep, start): on the link's descriptor where it has
        one (at most 5 ms: a fault layer may hold frames of its own), else 20 us; a pty whose other
        end nobody has opened yet only hangs up, so then 1 ms."""
        if self._poll is None:
            time.sleep(20e-6)
        elif remaining_s > 0:
            events = self._poll.poll(min(remaining_s, 5e-3) * 1e3)
            if events and not events[0][1] & select.POLLIN:
                time.sleep(1e-3)

    def abort(self, reason: str) -> None:
        """Fail the run and stop the loop (any thread; the first reason stays)."""
        self.failure, self.stop_requested = self.failure or reason, True

    # ------------------------------------------------------------------ one cycle
    def _receive(self) -> list[Frame]:
        """Every frame waiting on the link (through its fault layer), recorded when recording;
        the frames read just before the last sensor frames went out come first."""
        frames = self._received
        frames.clear()
        if self._early:
            frames.extend(self._early)
            self._early.clear()
        self._read_into(frames)
        return frames

    def _read_into(self, frames: list[Frame]) -> None:
        """The link's waiting frames, within the receive budget (each read: hil.runtime.receive)."""
        self.receive_budget.take(self.link, frames, self.recorder.received if self.recorder else None)

    def take_frame(self, frame: Frame) -> bool:
        """Feed a received frame; True if it was a valid command (refreshes the watchdog)."""
        if self.protocol is not None and self.protocol.receive(frame):
            return False                    # NMT, SYNC, or an RPDO its node does not take now
        return self.take_command(frame)

    def take_command(self, frame: Frame) -> bool:
        """Feed a frame to the command reader; True if it was a valid command (its age tracked)."""
        if not self.feed(frame):
            return False
        self.age.taken(int(frame.timestamp * 1e9) if frame.timestamp > 0 else time.monotonic_ns())
        return True

    def encode(self, status: int) -> list[Frame]:
        """Frames from the measured sensor channels (after any change a fault engine made to them)."""
        measured = self.sensors.measured
        if self.protocol is None:
            return self.sensor_frames(self.cycle, measured, status)
        # CANopen: boot-up, heartbeats due, TPDOs answering a SYNC
        return self.protocol.transmit(lambda k: self.sensor_frames(k, measured, status))

    def send_frames(self, frames: list[Frame]) -> bool:
        """Send frames; True if any went out on the wire (a bus fault may withhold them)."""
        before = self.link.counters.tx_frames
        for frame in frames:
            self.link.send(frame)
            if self.recorder:
                self.recorder.put(frame, received=False)
        return self.link.counters.tx_frames > before

    def send_sensors(self, frames: list[Frame]) -> None:
        """The cycle's sensor frames, their send time kept for the command age; frames a silent
        firmware leaves unread are counted apart (no link error: it does not listen)."""
        dropped = self.link.counters.tx_dropped
        cue = self._cue
        if cue is not None:
            cue.cued = False
        went_out = self.send_frames(frames)
        self.answer_expected = went_out if cue is None else cue.cued
        if self.silent:
            self.dropped_while_silent += self.link.counters.tx_dropped - dropped
        self.last_sensor_frames = frames
        self.age.sent(time.monotonic_ns())

    def step_once(self, lateness_ns: int = 0) -> None:
        """One cycle: receive -> decode -> supervise -> drives -> plant step -> sense -> signal faults
        -> encode -> send -> log (fault triggers first; a stall fault in the compute phase)."""
        t0 = time.monotonic_ns()
        clk = self.stage_clock
        clk and clk.mark(Stage.FAULTS_BEGIN)
        self.faults.begin_cycle(self.cycle, self.plant.t)
        clk and clk.mark(Stage.RECEIVE)
        frames = self._receive()
        clk and clk.mark(Stage.DECODE)
        one = self.one_call
        one.run(frames, t0, clk)
        fresh, cmd_age_us, status, frames, t1, t2 = one.fresh, one.cmd_age_us, one.status, one.sent, one.t1, one.t2
        tau = self.drives.tau
        clk and clk.mark(Stage.SEND)
        if self.opt.mode != "lockstep":     # commands that arrived while the plant stepped answer older frames
            self._read_into(self._early)
        self.send_sensors(frames)
        t3 = time.monotonic_ns()
        clk and clk.mark(Stage.LOG)
        if fresh and self.commands.arrival_s > 0:
            self.latency_ns[self.latency_count % len(self.latency_ns)] = t3 - int(self.commands.arrival_s * 1e9)
            self.latency_count += 1
        if self.logger is not None:
            self.record.put(self.logger, self.cycle, self.commands.tau, tau, status, lateness_ns, t2 - t1,
                            (t1 - t0) + (t3 - t2), cmd_age_us)
        self.stats.record(lateness_ns, t2 - t1, (t1 - t0) + (t3 - t2), t3 - t0)
        clk and clk.mark(Stage.END)
        self._last_work = (t0, t2 - t1, (t1 - t0) + (t3 - t2))

    # ------------------------------------------------------------------ the loop
    def run(self) -> dict:
        """Run until the duration, a signal, or an overrun halt; returns the summary."""
        previous_handlers = self._install_signals()
        if self.opt.log_path:
            Path(self.opt.log_path).parent.mkdir(parents=True, exist_ok=True)
        if self.opt.log_path or self.live is not None:
            self.logger = RunLogger(self.opt.log_path, self.header, self.columns, tap=self.live,
                                    process=self._log_in_process())
        if self.opt.bus_record_path:
            self.recorder = BusRecorder(self.opt.bus_record_path)
        # only where time matters: SCHED_FIFO stepping afap/lockstep starves the firmware and tty workers
        rt = (RealtimeSetup(self.opt.priority, self.opt.cpu, lift_rt_throttling=self.opt.lift_rt_throttling)
              if self.opt.realtime and self.opt.mode == "realtime" else None)
        report = rt.apply() if rt else None
        if report is not None and self.logger is not None and self.logger.writer_pid is not None:
            report.features.append(rt.place_process(self.logger.writer_pid, "log_writer_cpus"))
        pacer = Pacer(self.opt.period_s, "afap" if self.opt.mode != "realtime" else "realtime",
                      overrun_policy=self.opt.overrun_policy, halt_after=self.opt.halt_after,
                      ignore_first_s=self.opt.ignore_first_s)
        # started after the real-time setup: the heartbeat shares the loop thread's CPU and class, where
        # it runs only while the loop sleeps (hil.runtime.stalls)
        beat = self.opt.mode == "realtime" and pacer.sleeps
        self.overrun_causes = OverrunCauses(self.opt.period_s, Heartbeat().start() if beat else None)
        n_cycles = self.n_cycles = None if self.opt.duration_s is None else int(round(self.opt.duration_s / self.plant.dt))
        initial = self.encode(0)               # first sensor frame (CANopen: boot-up): the firmware's cue
        self.send_sensors(initial)
        halted = None
        try:
            if self.opt.mode == "lockstep" or self.opt.start == "first_command":
                await_first_command(self, initial)
            while not self.stop_requested and (n_cycles is None or self.cycle < n_cycles):
                if self.opt.mode == "lockstep" and not wait_for_command(self):
                    if not self.stop_requested:
                        halted = "lockstep: no SYNC within the timeout"
                    break
                self.step_once(self._paced_wait(pacer))
        except OverrunHalt as exc:
            halted = f"overrun halt: {exc}"
        finally:
            self.finished = True
            if self.overrun_causes.heartbeat is not None:
                self.overrun_causes.heartbeat.stop()
            if rt:
                rt.restore()
            if self.logger:
                self.logger.close()
            if self.recorder:
                self.recorder.close()
            for signum, handler in previous_handlers.items():
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        return self.summary(pacer, report, halted)

    def _log_in_process(self) -> bool:
        """The real-time loop logs through a writer process (hil.logs.writer_process: no interpreter lock
        shared with the loop), where the machine allows it and no live view taps the rows."""
        return (self.opt.mode == "realtime" and bool(self.opt.log_path) and self.live is None
                and writer_process.available())

    def _paced_wait(self, pacer: Pacer) -> int:
        """pacer.wait(); an overrun it finds is attributed to its cause (hil.runtime.stalls) over the stretch
        since the previous wait began (a stop while that wait slept is found only at this one)."""
        before = pacer.overruns + pacer.ignored_overruns
        waited_from, self._wait_from = self._wait_from, time.monotonic_ns()
        usage_from, self._usage_from = self._usage_from, thread_usage()
        lateness = pacer.wait()
        if pacer.overruns + pacer.ignored_overruns > before and self._last_work is not None and waited_from is not None:
            cpu_ns, switches = usage_between(usage_from, thread_usage())
            self.overrun_causes.attribute(waited_from, time.monotonic_ns(), cpu_ns, *self._last_work[1:], switches)
        return lateness

    def _install_signals(self) -> dict:
        """SIGINT/SIGTERM stop the loop; returns the handlers they replace (run() restores them)."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def stop(signum, _frame):
            self.stop_requested = True
        return {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}

    def summary(self, pacer: Pacer, report, halted: str | None) -> dict:
        out = {
            "cycles": self.cycle, "t_s": self.plant.t, "mode": self.opt.mode, "halted": halted,
            "realtime": None if report is None else report.as_dict(),
            "pacer": pacer.counters(), "overrun_causes": self.overrun_causes.summary(), "timing": self.stats.summary(),
            "link": self.link.counters.as_dict(), "commands": self.commands.counters(),
            "receive": self.receive_budget.summary(),
            "diverged": self.divergence.event,
            "watchdog": {"trips": self.supervisor.watchdog.trips, "events": self.supervisor.watchdog.events},
            "log_dropped": 0 if self.logger is None else self.logger.dropped,
            "log": None if self.logger is None else self.logger.report(),
            "faults": self.faults.summary(),
            "drives": {"torque_limited_cycles": self.supervisor.limited_cycles},
            "joints": list(self.plant.layout.joint_names), "q": self.plant.q().tolist(),
            "tip": self.sensors.tip.tolist(),
            "read_to_send_us": self._latency_summary(),
            "integrator": self.plant.plan.summary(),
            "firmware_timing": self.age.summary(), "start": self.start_report, "failed": self.failure,
        }
        if self.opt.mode == "lockstep":
            out["lockstep"] = {"silent_cycles": self.silent_cycles, "resent_frames": self.resent_frames,
                               "dropped_while_silent": self.dropped_while_silent}
        if self.protocol is not None:
            out["canopen"] = self.protocol.counters()
        return out

    def _latency_summary(self) -> dict:
        n = min(self.latency_count, len(self.latency_ns))
        return {"count": self.latency_count} | (series_summary(self.latency_ns[:n]) if n else {})
