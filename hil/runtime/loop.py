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

The Emulator keeps the cycle's state (the cycle number, a command held while the loop waited) and
owns the parts that do the rest: the wire (hil.runtime.wire_io: the link, the frames read and sent,
the recording, the firmware's answers), the supervisor (hil.runtime.supervisor), the compiled cycle
(hil.runtime.one_call), the run log's row (hil.runtime.cycle_record) and the statistics
(hil.runtime.loop_timing).

CANopen maps (firmware_bridge.canopen.network.DriveNodes as `protocol`): the nodes take NMT and SYNC
frames and drop RPDOs while not operational; lockstep steps once per SYNC (in any NMT state: the
SYNC is the bus's clock), realtime/afap step on their own period and a SYNC only marks which
cycle the operational nodes answer with their TPDOs (from the state after the step). Boot-up
messages and heartbeats go out from the loop (also while lockstep waits); the joints of stopped
drives, or drives that left operational, are in the safe state until NMT start.
"""
from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from firmware_bridge.links.base import Frame, Link
from firmware_bridge.links.recording import BusRecorder
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.devices.drives import DriveBank
from hil.faults.engine import FaultEngine, encoder_counter_bits
from hil.model.spec import INTERFACE_VOLTAGE
from hil.dynamics.plant import Plant
from hil.runtime.command_age import CommandAge
from hil.runtime.cycle_stats import CycleStats
from hil.runtime.loop_timing import LoopTiming
from hil.runtime.pacer import OverrunHalt, Pacer
from hil.runtime.realtime import RealtimeSetup
from hil.runtime.divergence import DivergenceGuard
from hil.runtime.options import RuntimeOptions, Watchdog
from hil.runtime.receive import ReceiveBudget
from hil.runtime.lockstep import wait_for_command
from hil.runtime.start import await_first_command, check_period
from hil.runtime.wire_io import WireIO
from hil.runtime.wire_plan import WirePlan
from hil.runtime.one_call import OneCall
from hil.runtime.stages import Stage, StageClock
from hil.runtime.supervisor import Supervisor
from hil.runtime.cycle_record import CycleRecord
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
                 sensors: list[SensorSpec] | None = None, plan: WirePlan | None = None):
        """`protocol`: the CANopen nodes (firmware_bridge.canopen.network.DriveNodes) for a CANopen map, else None.
        `scenario`: faults to inject (hil.faults.scenario); more can be injected at run time through
        `emulator.faults` (hil.faults.engine.FaultEngine), also from another thread. `drives`: default the
        model's motors (hil.devices.drives.DriveBank; ideal torque drives where a joint has none).
        `sensors`: the sensor specs, default the model's (hil.devices.sensors.SensorSuite). `plan`: the
        bus map compiled for `commands` and `sensors_out` (hil.runtime.wire_plan), compiled here if None."""
        options.validate()
        plan = plan or WirePlan.of(commands, sensors_out, plant.layout.joint_names, protocol)
        options = check_period(options, plant, plan)
        self.plant = plant
        # lockstep: which cycles a firmware answers (hil.runtime.lockstep); it sees what goes out on the wire
        cue = plan.cue if options.mode == "lockstep" else None
        budget = ReceiveBudget(options.receive_frames, options.receive_budget_s if options.mode == "realtime" else None)
        self.io = WireIO(plan.fault_layer(link), link, budget, cue)
        self.link = self.io.link            # the link through its fault layer
        self.commands = commands
        self.sensors_out = sensors_out
        self.opt = options
        self.drives = drives or DriveBank(plant)
        self.sensors = SensorSuite(plant, sensors, seed=options.seed, current_source=self.drives.current,
                                   sampled=options.sampled_stations)
        self.sensor_frames = plan.bind_sensors(self.sensors.channel_names).frames
        self.feed = commands.feed if plan.python_frames else plan.decoder.feed
        # the faults' seed: the run's, else the scenario's, else the model's
        seed = next(s for s in (options.seed, scenario and scenario.seed, plant.asm.model.sensor_seed) if s is not None)
        self.faults = FaultEngine(self.sensors.channel_names, dt_s=plant.dt, seed=seed,
                                  encoding=plan.sensor_encoding, plant=plant, drives=self.drives, link=self.link,
                                  counter_bits=encoder_counter_bits(self.sensors))
        self.scenario_faults = list(scenario.faults) if scenario is not None else []
        self.scenario_handles = scenario.inject_into(self.faults) if scenario is not None else []
        self.divergence_expected = bool(scenario is not None and scenario.expect_divergence)
        self.header = header or {}
        self.timing = LoopTiming(options.stats_capacity, options.period_s)
        self.cycle = 0
        self.stop_requested = False
        self.failure: str | None = None     # why the run failed (start timeout, the firmware exited, ...)
        self.finished = False               # the loop has ended (a firmware exit then fails nothing)
        self.n_cycles: int | None = None
        self.start_report: dict = {}       # how the run started: waited_s, resent
        self.held_fresh = False             # a command taken in while waiting (lockstep, start)
        self.divergence = DivergenceGuard(plant, self.drives)
        self.protocol = protocol
        self.supervisor = Supervisor(plant, self.drives, self.faults, options, protocol)
        commands.tau[:] = self.supervisor.hold_tau     # until the first command: as if the drives held the arm
        self._settle_drives()
        self.record = CycleRecord(plant, self.drives, self.sensors, self.faults, options.log_wrenches)
        self.logger: RunLogger | None = None
        self.stage_clock: StageClock | None = None    # per-stage timestamps (hil.runtime.stages), when set
        self.live = None        # a tap on the logger's thread (hil.viz.live.LiveView), set before run()
        self.cosim = None       # a co-simulated FMU (hil.runtime.cosim.FmuPart), started before run()
        self.xcp = None         # the XCP slave (hil.runtime.xcp_server.XcpBridge), started before run()
        self.on_progress: Callable[[str], None] | None = None   # told why the loop waits (`hil run`: stderr)
        self.expected_commands = plan.expected_commands      # for the start's map-mismatch hint
        self.one_call = OneCall(self, plan)    # the cycle's compute

    @property
    def stats(self) -> CycleStats:
        """The per-cycle timing (the loop timing's)."""
        return self.timing.cycles

    @property
    def age(self) -> CommandAge:
        """The firmware's command age (the loop timing's)."""
        return self.timing.age

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

    def attach_fmu(self, part) -> None:
        """Co-simulate `part` (hil.runtime.cosim.FmuPart, read; before run()): bound to the arm, the wrenches it
        applies at stations added to the run log's columns, started at the plant's time."""
        lay = self.plant.layout
        part.bind(lay.joint_names, lay.station_names, self.sensors.station_names, self.plant.dt)
        self.record = CycleRecord(self.plant, self.drives, self.sensors, self.faults, self.opt.log_wrenches,
                                  part.loaded_stations)
        part.start(self.plant.t)
        self.cosim = part

    def firmware_exited(self, status: int) -> None:
        """The firmware process ended: that fails the run (also one not yet started) unless it is done."""
        if not self.finished and (self.n_cycles is None or self.cycle < self.n_cycles):
            how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
            self.abort(f"the firmware {how} at t = {self.plant.t:.3f} s (cycle {self.cycle}), before the run's end")

    def progress(self, text: str) -> None:
        """Say why the loop waits (to on_progress, when set)."""
        if self.on_progress is not None:
            self.on_progress(text)

    def abort(self, reason: str) -> None:
        """Fail the run and stop the loop (any thread; the first reason stays)."""
        self.failure, self.stop_requested = self.failure or reason, True

    # ------------------------------------------------------------------ one cycle
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

    def encode(self, status: int, cycle: int) -> list[Frame]:
        """The frames of cycle `cycle` from the measured sensor channels (after any change a fault
        engine made to them)."""
        measured = self.sensors.measured
        if self.protocol is None:
            return self.sensor_frames(cycle, measured, status)
        # CANopen: boot-up, heartbeats due, TPDOs answering a SYNC
        return self.protocol.transmit(lambda k: self.sensor_frames(k, measured, status))

    def send_sensors(self, frames: list[Frame]) -> None:
        """The cycle's sensor frames (hil.runtime.wire_io), their send time kept for the command age."""
        self.io.send_sensors(frames)
        self.age.sent(time.monotonic_ns())

    def hold_command(self, frame: Frame) -> bool:
        """A frame taken in while the loop waits (lockstep, start): a valid command is held for the
        next cycle (its watchdog refresh); True if it was one."""
        fresh = self.take_command(frame)
        self.held_fresh |= fresh
        return fresh

    def hold_frame(self, frame: Frame) -> bool:
        """hold_command for any frame the loop takes in while it waits (CANopen: through the nodes)."""
        fresh = self.take_frame(frame)
        self.held_fresh |= fresh
        return fresh

    def take_held(self) -> bool:
        """Whether a valid command was held while the loop waited; the hold ends."""
        fresh, self.held_fresh = self.held_fresh, False
        return fresh

    def step_once(self, lateness_ns: int = 0) -> None:
        """One cycle: receive -> decode -> supervise -> drives -> plant step -> sense -> signal faults
        -> encode -> a co-simulated FMU's step -> send -> log -> XCP's DAQ (fault triggers first, after
        the calibrations written over XCP since the last cycle and the FMU's loads of the last cycle; a
        stall fault in the compute phase)."""
        t0 = time.monotonic_ns()
        clk = self.stage_clock
        xcp = self.xcp
        if xcp is not None and xcp.busy:
            xcp.cycle_start(self.cycle, self.plant.t)
        cosim = self.cosim
        if cosim is not None:
            cosim.apply(self.plant, self.drives)
        clk and clk.mark(Stage.FAULTS_BEGIN)
        self.faults.begin_cycle(self.cycle, self.plant.t)
        clk and clk.mark(Stage.RECEIVE)
        frames = self.io.receive()
        clk and clk.mark(Stage.DECODE)
        one = self.one_call
        one.run(frames, t0, clk)
        self.cycle += 1
        if cosim is not None and not cosim.step(self.plant.t, self.plant, self.drives, self.sensors.station_out):
            self.abort(cosim.failure)
        fresh, cmd_age_us, status, frames, t1, t2 = one.fresh, one.cmd_age_us, one.status, one.sent, one.t1, one.t2
        tau = self.drives.tau
        clk and clk.mark(Stage.SEND)
        if self.opt.mode != "lockstep":     # commands that arrived while the plant stepped answer older frames
            self.io.read_early()
        self.send_sensors(frames)
        t3 = time.monotonic_ns()
        clk and clk.mark(Stage.LOG)
        row = (self.cycle, self.commands.tau, tau, status, lateness_ns, t2 - t1, (t1 - t0) + (t3 - t2), cmd_age_us)
        logged = self.record.put(self.logger, *row) if self.logger is not None else None
        if xcp is not None and xcp.slave.connected:        # the row for XCP's measurements: the logged one
            if logged is None:
                self.record.fill(xcp.memory.row, *row)
            else:
                np.copyto(xcp.memory.row, logged)
            xcp.sample()
        self.timing.cycle_done(lateness_ns, t0, t1, t2, t3, self.commands.arrival_s if fresh else None)
        clk and clk.mark(Stage.END)

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
            self.io.recorder = BusRecorder(self.opt.bus_record_path)
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
        self.timing.start(heartbeat=self.opt.mode == "realtime" and pacer.sleeps)
        n_cycles = self.n_cycles = None if self.opt.duration_s is None else int(round(self.opt.duration_s / self.plant.dt))
        initial = self.encode(0, 0)            # first sensor frame (CANopen: boot-up): the firmware's cue
        self.send_sensors(initial)
        halted = None
        try:
            if self.opt.mode == "lockstep" or self.opt.start == "first_command":
                self.start_report = await_first_command(self, initial)
            while not self.stop_requested and (n_cycles is None or self.cycle < n_cycles):
                if self.opt.mode == "lockstep" and not wait_for_command(self):
                    if not self.stop_requested:
                        halted = "lockstep: no SYNC within the timeout"
                    break
                self.step_once(self.timing.paced_wait(pacer))
        except OverrunHalt as exc:
            halted = f"overrun halt: {exc}"
        finally:
            self.finished = True
            self.timing.stop()
            if rt:
                rt.restore()
            if self.logger:
                self.logger.close()
            self.io.close()
            for signum, handler in previous_handlers.items():
                signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        return self.summary(pacer, report, halted)

    def _log_in_process(self) -> bool:
        """The real-time loop logs through a writer process (hil.logs.writer_process: no interpreter lock
        shared with the loop), where the machine allows it and no live view taps the rows."""
        return (self.opt.mode == "realtime" and bool(self.opt.log_path) and self.live is None
                and writer_process.available())

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
            "pacer": pacer.counters(), **self.timing.summary(),
            "link": self.link.counters.as_dict(), "commands": self.commands.counters(),
            "receive": self.io.receive_budget.summary(),
            "diverged": self.divergence.event, "divergence_expected": self.divergence_expected,
            "watchdog": {"trips": self.supervisor.watchdog.trips, "events": self.supervisor.watchdog.events},
            "log_dropped": 0 if self.logger is None else self.logger.dropped,
            "log": None if self.logger is None else self.logger.report(),
            "faults": self.faults.summary(),
            "drives": {"torque_limited_cycles": self.supervisor.limited_cycles},
            "joints": list(self.plant.layout.joint_names), "q": self.plant.q().tolist(),
            "tip": self.sensors.tip.tolist(),
            "integrator": self.plant.plan.summary(),
            "start": self.start_report, "failed": self.failure,
        }
        if self.opt.mode == "lockstep":
            out["lockstep"] = self.io.lockstep_summary()
        if self.protocol is not None:
            out["canopen"] = self.protocol.counters()
        if self.cosim is not None:
            out["fmu"] = self.cosim.summary()
        if self.xcp is not None:
            out["xcp"] = self.xcp.summary()
        return out
