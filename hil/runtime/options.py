"""The emulator's run options (`RuntimeOptions`) and its command watchdog; hil.runtime.loop runs them."""
from __future__ import annotations

from dataclasses import dataclass, field

from config_schema import UserError

MODES = ("realtime", "afap", "lockstep")
STARTS = ("first_command", "immediately")
SAFE_STATES = ("zero_torque", "hold", "brake")


@dataclass
class RuntimeOptions:
    mode: str = "realtime"
    period_s: float | None = None       # the cycle period; None: the plant's step (they must agree)
    duration_s: float | None = None
    overrun_policy: str = "skip"
    halt_after: int = 0
    ignore_first_s: float = 0.5
    watchdog_s: float = 0.05            # no valid command for this long trips the watchdog
    safe_state: str = "zero_torque"
    hold_gains: tuple[float, float] = (2000.0, 100.0)   # kp [N m/rad], kd [N m s/rad] of the hold state
    brake_damping_N_m_s_rad: float = 100.0   # -c qd held over a step diverges once c dt > 2 J, J a joint's
                                             # apparent inertia 1/(M^-1)_jj: ELLA elbow 0.133 kg m^2, c < 265
    lockstep_timeout_s: float = 10.0    # lockstep: a sensor frame unanswered this long: the firmware is silent
                                        # (long: a firmware starved by a busy machine is not silent)
    lockstep_silent_poll_s: float = 2e-3    # lockstep, firmware silent: the wait for an answer per cycle
    lockstep_resend_s: float = 1.0      # lockstep: an unanswered sensor frame goes out again after this long
    start: str = "first_command"        # realtime/afap: the clock starts at the first valid command, or immediately
    start_timeout_s: float = 30.0       # no valid command within this long after the start fails the run
    resend_s: float = 0.1               # until the first command: the first sensor frames again after this
    realtime: bool = True               # realtime mode: try SCHED_FIFO, mlockall, gc freeze
    priority: int = 80
    cpu: int | None = None
    lift_rt_throttling: bool = False    # realtime with a pinned cpu: RT throttling off during the run (system-wide)
    announce_faults: bool = False       # FAULT_ACTIVE in the frames to the firmware (always in the log): off,
                                        # so a firmware under test reacts to a fault's effect, not to the bit
    seed: int | None = None             # sensor noise and fault seed (None: the model's sensor_seed,
                                        # the scenario's seed)
    log_path: str | None = None
    log_wrenches: bool = False          # the joint interaction wrenches w_<joint>_mx .. _fz in the run log
    sampled_stations: tuple[str, ...] = ()   # stations the plant's step samples beyond the tip and the IMUs'
                                             # (a co-simulated FMU reads them: hil.runtime.cosim)
    bus_record_path: str | None = None  # every frame sent and received, python-can format by suffix (.asc, .blf)
    stats_capacity: int = 600_000
    receive_frames: int = 64            # per cycle at most (hil.runtime.receive): the rest is dropped, counted
    receive_budget_s: float = 500e-6    # per cycle at most for receiving (realtime mode)

    def validate(self) -> None:
        if self.mode not in MODES:
            raise UserError(f"mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.safe_state not in SAFE_STATES:
            raise UserError(f"safe_state {self.safe_state!r}: expected one of {', '.join(SAFE_STATES)}")
        if self.period_s is not None and not self.period_s > 0:
            raise UserError(f"period_s = {self.period_s}: expected a positive period in s")
        if self.start not in STARTS:
            raise UserError(f"start {self.start!r}: expected one of {', '.join(STARTS)}")


@dataclass
class Watchdog:
    """Trips when no valid command arrived for `timeout_s`; a valid command clears it."""

    timeout_s: float
    last_valid_s: float = 0.0
    tripped: bool = False
    trips: int = 0
    events: list = field(default_factory=list)

    def check(self, now_s: float, fresh: bool) -> bool:
        if fresh:
            self.last_valid_s = now_s
            if self.tripped:
                self.tripped = False
                self.events.append(("cleared", now_s))
        elif not self.tripped and now_s - self.last_valid_s > self.timeout_s:
            self.tripped = True
            self.trips += 1
            self.events.append(("tripped", now_s))
        return self.tripped
