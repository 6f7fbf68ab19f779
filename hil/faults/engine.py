"""The fault engine: binds faults to the emulator and runs their triggers and durations.

A fault (:mod:`hil.faults.spec`: what, when, how long) is bound by :meth:`FaultEngine.inject` to
an effect on a sensor channel (:mod:`hil.faults.signal_effects`), the plant or the drives
(:mod:`hil.faults.plant_effects`), the link or the cycle's timing (:mod:`hil.faults.effects`):
its kind's binder (:mod:`hil.faults.registry`) makes the effect in a
:class:`hil.faults.kind.BindContext` of this engine; its parameters are checked by
:mod:`hil.faults.params`. Scenario files (:mod:`hil.faults.scenario`) inject the faults they declare.

Hook API (what the real-time loop calls, in this order)
--------------------------------------------------------
Set-up, before the loop::

    link = FaultyLink(raw_link, bus)            # firmware_bridge.links.faults; the loop's link from now on
    engine = FaultEngine(sensors.channel_names, dt_s=plant.dt, seed=seed, encoding=bus_encoding(bus),
                         counter_bits=encoder_counter_bits(sensors), plant=plant, drives=drives, link=link)
    load_scenario(path).inject_into(engine)     # and/or engine.inject(fault, trigger, duration)

Each cycle::

    1. engine.begin_cycle(cycle, plant.t)       first, before link.recv(): inject/clear requests,
                                                durations that ended, triggers that fired; plant and
                                                drive faults are applied or undone here; the link
                                                releases delayed frames and sends babble frames
    2. link.recv() until None                   to_plant bus faults act on the received commands
    3. engine.stall()                           in the compute phase, before the plant step
    4. plant step + sensor sampling             fills sensors.truth and sensors.measured
    5. engine.apply_signals(measured, truth)    signal faults change ``measured`` in place; it must
                                                hold the values as sampled (SensorSuite.step copies
                                                its outputs into it every step, held channels too),
                                                or a fault would act on its own output again
    6. status |= StatusFlag.FAULT_ACTIVE if engine.any_active
    7. frames encoded from measured, link.send  to_firmware bus faults and the output delay act here
    8. engine.events_since(n_logged)            the injections and clearances of this cycle, for the log

``cycle`` is the loop's cycle counter and ``plant.t`` the plant time at the cycle start [s]; all
trigger and duration times are on this emulator clock, so lockstep and afap runs are reproducible
(compared with a tolerance of 1 % of a cycle for the round-off of a clock that sums its steps).
Injections and clearances requested through the API take effect at the next ``begin_cycle``
(``inject``, ``clear``, ``active`` and ``summary`` may be called from another thread; the hooks and
``hold_brake`` only from the loop's: see :class:`FaultEngine`). Binding a fault (``inject``) does
all the work that allocates: channel look-ups, random streams, the kernel arrays of a payload
change (a re-assembly, some 20 ms of Python that a live injection makes the loop share the
interpreter with); the per-cycle hooks only index preallocated state (but for a payload fault
that changes the substeps: the friction and brake floors are recomputed then, a few small
arrays). Nothing a fault does at run time raises into the
loop: a failing effect is skipped and counted in ``engine.error_count`` (the first messages in
``engine.errors``). In lockstep mode the commands are the clock: a to_plant fault that withholds
them (drop, silent, frame_delay, period) holds the loop until its lockstep timeout.

Every activation and clearance is recorded in ``engine.events`` as a :class:`FaultEvent`
``(cycle, t_s, "inject" | "clear", fault_name, description)``; ``engine.any_active`` is true while
any fault is active (a slip's persistent count offset is not an active fault).
"""
from __future__ import annotations

import math
import time
from collections import deque
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from firmware_bridge.links.faults import FaultyLink
from firmware_bridge.wire.messages import BusMap
from hil.dynamics.plant import Plant
from hil.faults import registry
from hil.faults.effects import Effect
from hil.faults.fault import Duration, Fault, FaultEvent, Trigger
from hil.faults.kind import BindContext
from hil.faults.params import check_fault
from hil.faults.plant_effects import DriveFaults, PlantArrays
from hil.faults.signal_effects import wrap_count
from hil.model.sensor_specs import EncoderSpec, channel_names

Encoding = Callable[[str], tuple[float, float, int, bool]]


class _Entry:
    """One injected fault and its trigger/duration state."""

    __slots__ = ("handle", "fault", "trigger", "duration", "effect", "rng", "text", "state", "due_t", "end_t",
                 "since_t", "source", "prev", "threshold", "rising", "falling", "stop_requested")

    def __init__(self, handle: int, fault: Fault, trigger: Trigger | None, duration: Duration | None,
                 effect: Effect, rng: np.random.Generator, text: str, source: tuple[Any, str, int] | None):
        self.handle, self.fault, self.trigger, self.duration = handle, fault, trigger, duration
        self.effect, self.rng, self.text, self.source = effect, rng, text, source
        self.state = "new"
        self.due_t = self.end_t = self.since_t = math.inf
        self.prev = math.nan
        crossing = trigger is not None and trigger.kind == "crossing"
        self.threshold = trigger.threshold if crossing else math.nan
        self.rising = crossing and trigger.direction in ("rising", "either")
        self.falling = crossing and trigger.direction in ("falling", "either")
        self.stop_requested = False


class FaultEngine:
    """Injects faults into the measured channels, the plant, the drives, the link and the cycle's
    timing; see the module docstring for the hook API, the effect modules for each fault's semantics.

    ``channel_names``: the sensor suite's channels, in the order of its ``measured``/``truth``
    arrays. ``encoding(name) -> (scale, offset, bits, signed)``: a channel's bus coding (for bit
    flips; :func:`bus_encoding` builds it from a bus map). ``counter_bits``: channel -> width in
    bits of the signed two's-complement counter an encoder channel reads (hil.model.sensor_specs
    .EncoderSpec.counter_bits; :func:`encoder_counter_bits` builds it from a sensor suite): the
    persistent count offsets of slips and encoder disconnections are added to the wrapped count
    and wrapped again, as the real counter wraps; a channel not in it is not wrapped. ``plant``
    (for q_<joint> triggers and plant faults), ``drives`` (a drive bank: ``kt_scale``,
    ``set_brake``, ``set_friction_scale``; ``restabilize()`` and ``inertia`` if it has them) and
    ``link`` (a FaultyLink, for bus and output-delay faults) are needed only by the faults that
    act on them.

    Threads: ``inject``, ``clear``, ``active`` and ``summary`` (and ``channel``) may be called from
    another thread than the loop's (a test's): inject binds there and queues the arming, clear
    queues the clearance, both taken up at the next begin_cycle; active and summary read copies.
    Everything else is for the loop's thread only: the hooks ``begin_cycle``, ``stall``,
    ``apply_signals`` and ``events_since``, and ``hold_brake``. Only the loop thread changes the
    plant, the drive bank, the link's active effects and the measured arrays.
    """

    MAX_ERRORS = 100

    def __init__(self, channel_names: Sequence[str], *, dt_s: float, seed: int = 0,
                 encoding: Encoding | None = None, plant: Plant | None = None, drives: Any = None,
                 link: FaultyLink | None = None, counter_bits: Mapping[str, int] | None = None):
        if not dt_s > 0:
            raise ValueError(f"dt_s = {dt_s!r}: expected the cycle period, a positive number in s")
        if link is not None and not isinstance(link, FaultyLink):
            raise TypeError(f"link {link!r}: expected a FaultyLink around the loop's link")
        self.channel_names = list(channel_names)
        self._channels = {n: i for i, n in enumerate(self.channel_names)}
        self._counter_half = np.zeros(len(self.channel_names))    # 2^(bits - 1) of a counter channel, else 0
        for name, bits in (counter_bits or {}).items():
            if name not in self._channels:
                raise ValueError(f"counter_bits: no channel {name!r}; channels: {', '.join(self.channel_names)}")
            if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 2 <= bits <= 62:
                raise ValueError(f"counter_bits[{name!r}] = {bits!r}: expected a counter width of 2 .. 62 bits")
            self._counter_half[self._channels[name]] = float(1 << (int(bits) - 1))
        self.dt = float(dt_s)
        self.seed = int(seed)
        self.encoding = encoding
        self.plant = plant
        self.drives = drives
        self.link = link
        self.events: list[FaultEvent] = []
        self.errors: list[tuple[int, str, str]] = []         # (cycle, fault, what failed), the first MAX_ERRORS
        self.error_count = 0
        self.invalid = np.zeros(len(self.channel_names), bool)   # dropouts: for tests, monitors (no bus bit)
        self.any_active = False
        self.cycle = 0
        self.t = 0.0
        self._eps = 0.01 * self.dt        # the plant clock is a running sum of steps: allow its round-off
        self._entries: list[_Entry] = []
        self._requests: deque[tuple[str, int]] = deque()
        self._armed: list[_Entry] = []
        self._active: list[_Entry] = []
        self._crossings: list[_Entry] = []
        self._next_t = math.inf
        self._chain: list[Callable[[np.ndarray, np.ndarray], None]] = []
        self._offsets: list[list] = []          # [channel index, persistent offset, 2^(counter bits - 1) or 0]
        self._dropouts = np.zeros(len(self.channel_names), np.int64)
        self.stall_ns = 0                 # busy-wait of the compute phase while stall faults are active
        self._time = [0.0]
        self._watch_m_idx: list[int] = []                    # channels crossing triggers read, and
        self._watch_t_idx: list[int] = []                    # their previous samples (NaN: none yet)
        self._watch_m: list[float] = []
        self._watch_t: list[float] = []
        self._watching = False
        # made here, not at the first fault that needs them: inject (API thread) and hold_brake
        # (loop thread) would race to create them. A plant without kernel arrays (a stand-in that
        # serves q_<joint> triggers only) takes no plant faults.
        self._drive_faults = DriveFaults(drives) if drives is not None else None
        self._plant_arrays = (PlantArrays(plant, drives) if getattr(plant, "km", None) is not None
                              else None)

    @property
    def drive_faults(self) -> DriveFaults | None:
        """The drive faults' state (with drives), for the binders of drive faults."""
        return self._drive_faults

    @property
    def plant_arrays(self) -> PlantArrays | None:
        """The plant's kernel arrays under faults (with a Plant), for the binders of plant faults."""
        return self._plant_arrays

    # ------------------------------------------------------------------ public API
    def channel(self, name: str) -> int:
        """Index of channel ``name`` in the measured/truth arrays."""
        try:
            return self._channels[name]
        except KeyError:
            raise KeyError(f"no channel {name!r}; channels: {', '.join(self.channel_names)}") from None

    def inject(self, fault: Fault, trigger: Trigger | None = None, duration: Duration | None = None) -> int:
        """Bind ``fault`` and arm it; returns the handle for clear(). It is armed at the next
        begin_cycle (with ``trigger=None`` it strikes there); ``duration=None`` is permanent.
        Raises FaultError for a fault that cannot act here (unknown channel, joint, message...)."""
        params = check_fault(fault)
        handle = len(self._entries)
        seq = np.random.SeedSequence(self.seed, spawn_key=(handle,))
        timing_rng, effect_rng = (np.random.default_rng(s) for s in seq.spawn(2))
        context = BindContext(self, fault, params, effect_rng)
        source = self._trigger_source(context, trigger)
        effect = registry.kind(fault.kind).bind(context)
        text = "; ".join([fault.describe(), trigger.describe() if trigger else "at once",
                          duration.describe() if duration else "permanent"])
        self._entries.append(_Entry(handle, fault, trigger, duration, effect, timing_rng, text, source))
        self._requests.append(("arm", handle))
        return handle

    def bind_effect(self, fault: Fault) -> Effect:
        """The effect of ``fault`` bound here but not armed: its owner starts and stops it on the loop's
        thread (``effect.start(engine)``, ``effect.stop(engine)``), outside the fault list, the
        events and the status word's FAULT_ACTIVE (a calibration through hil.runtime.xcp_server)."""
        params = check_fault(fault)
        return registry.kind(fault.kind).bind(BindContext(self, fault, params, np.random.default_rng(self.seed)))

    def clear(self, handle: int) -> None:
        """Clear the fault at the next begin_cycle (recorded if it was active) and disarm it."""
        if not 0 <= handle < len(self._entries):
            raise KeyError(f"no fault with handle {handle!r}")
        self._requests.append(("clear", handle))

    def active(self) -> list[tuple[int, Fault]]:
        """(handle, fault) of every active fault, in the order they struck."""
        return [(e.handle, e.fault) for e in list(self._active)]

    def hold_brake(self, joint: int, engaged: bool) -> None:
        """Close or open joint ``joint``'s brake for an owner other than the faults (the loop's
        watchdog, safe state "brake"): the brake is closed while that owner or an active brake
        fault wants it, so neither releases the other's brake. Call it from the loop's thread."""
        if self._drive_faults is None:
            raise ValueError("hold_brake needs the engine's drives (FaultEngine(..., drives=...))")
        self._drive_faults.hold_brake(joint, engaged)

    def events_since(self, index: int) -> list[FaultEvent]:
        """The events recorded after the first ``index`` ones (for a log written cycle by cycle)."""
        return self.events[index:]

    def summary(self) -> dict:
        """Counts for the run summary: events, active faults, errors, link fault counters."""
        out = {"injections": sum(e.action == "inject" for e in self.events),
               "clearances": sum(e.action == "clear" for e in self.events),
               "active": [f.name for _, f in self.active()], "errors": self.error_count,
               "events": [list(e) for e in self.events]}
        if self.link is not None:
            out["link"] = self.link.stats()
        return out

    # ------------------------------------------------------------------ hooks
    def begin_cycle(self, cycle: int, t_s: float) -> None:
        """Cycle start: requests, ended durations, fired triggers, link releases (see module doc)."""
        self.cycle = cycle
        self.t = t_s
        if self._requests or t_s >= self._next_t:
            self._update(cycle, t_s)
        elif self._crossings:
            self._check_crossings(cycle, t_s)
        link = self.link
        if link is not None and link.busy:
            link.begin_cycle(cycle)

    def apply_signals(self, measured: np.ndarray, truth: np.ndarray) -> None:
        """After sensor sampling: signal faults change ``measured`` in place."""
        if self._watching:
            # a loop beats np.take for the few channels triggers watch
            for slot, i in enumerate(self._watch_m_idx):
                self._watch_m[slot] = measured[i]
            for slot, i in enumerate(self._watch_t_idx):
                self._watch_t[slot] = truth[i]
        for i, offset, half in self._offsets:
            measured[i] = wrap_count(measured[i] + offset, half)      # the counter wraps as the real one does
        for apply in self._chain:
            try:
                apply(measured, truth)
            except Exception as exc:   # a fault must never stop the loop
                self._error(next((e.fault.name for e in self._active if e.effect.apply == apply), "?"), repr(exc))

    @property
    def signals_idle(self) -> bool:
        """apply_signals leaves the measured channels as they are: no signal fault is active and no
        count offset is kept (it still records the channels crossing triggers read, `watching`)."""
        return not (self._offsets or self._chain)

    @property
    def watching(self) -> bool:
        """Crossing triggers read the channels given to apply_signals."""
        return self._watching

    def stall(self) -> int:
        """In the compute phase: busy-wait while a stall fault is active; returns the ns waited."""
        ns = self.stall_ns
        if ns:
            end = time.perf_counter_ns() + ns
            while time.perf_counter_ns() < end:
                pass
        return ns

    # ------------------------------------------------------------------ scheduling
    def _update(self, cycle: int, t: float) -> None:
        self._time[0] = t
        while self._requests:
            what, handle = self._requests.popleft()
            entry = self._entries[handle]
            if what == "arm" and entry.state == "new":
                self._arm(entry, t)
            elif what == "clear":
                entry.stop_requested = True
                self._disarm(entry)
                if entry.state == "active":
                    self._deactivate(entry, cycle, t, "cleared by clear()")
                entry.state = "done"
        limit = t + self._eps
        for entry in [e for e in self._active if e.end_t <= limit]:
            self._deactivate(entry, cycle, t, self._clear_reason(entry, t))
            self._rearm_or_finish(entry, t)
        for entry in list(self._armed):
            if entry.source is not None and self._crossed(entry) or entry.due_t <= limit:
                self._activate(entry, cycle, t)
        self._reschedule()

    def _check_crossings(self, cycle: int, t: float) -> None:
        """The cycles with nothing else due: only the crossing triggers are evaluated."""
        self._time[0] = t
        fired = [e for e in self._crossings if self._crossed(e)]
        for entry in fired:
            self._activate(entry, cycle, t)
        if fired:
            self._reschedule()

    def _reschedule(self) -> None:
        self._next_t = min([e.due_t for e in self._armed] + [e.end_t for e in self._active],
                           default=math.inf) - self._eps

    def _arm(self, entry: _Entry, t: float) -> None:
        trig = entry.trigger
        entry.state = "armed"
        entry.due_t = math.inf
        if trig is None:
            entry.due_t = t
        elif trig.kind == "at":
            entry.due_t = trig.t_s
        elif trig.kind == "probability":
            entry.due_t = t + (entry.rng.geometric(trig.probability_per_cycle) - 1) * self.dt
        elif trig.kind == "mttf":
            entry.due_t = t + entry.rng.exponential(trig.mttf_s)
        else:
            entry.prev = math.nan
            self._crossings.append(entry)
        self._armed.append(entry)

    def _disarm(self, entry: _Entry) -> None:
        if entry in self._armed:
            self._armed.remove(entry)
        if entry in self._crossings:
            self._crossings.remove(entry)

    def _crossed(self, entry: _Entry) -> bool:
        owner, attr, i = entry.source
        cur = float(getattr(owner, attr)[i])
        prev, entry.prev = entry.prev, cur
        thr = entry.threshold
        return (entry.rising and prev < thr <= cur) or (entry.falling and prev > thr >= cur)

    def _activate(self, entry: _Entry, cycle: int, t: float) -> None:
        self._disarm(entry)
        try:
            entry.effect.start(self)
        except Exception as exc:   # a fault must never stop the loop
            self._error(entry.fault.name, f"start: {exc!r}")
            entry.state = "done"
            return
        entry.state = "active"
        entry.since_t = t
        dur = entry.duration
        if dur is None or dur.kind == "permanent":
            entry.end_t = math.inf
        elif dur.kind == "once":
            entry.end_t = t + 0.5 * self.dt
        elif dur.kind == "for":
            entry.end_t = t + dur.t_s
        else:
            entry.end_t = t + entry.rng.exponential(dur.mttr_s)
        self._active.append(entry)
        if entry.effect.apply is not None:
            self._chain.append(entry.effect.apply)
        self.any_active = True
        self.events.append(FaultEvent(cycle, t, "inject", entry.fault.name, entry.text))

    def _deactivate(self, entry: _Entry, cycle: int, t: float, reason: str) -> None:
        self._active.remove(entry)
        if entry.effect.apply is not None:
            self._chain.remove(entry.effect.apply)
        try:
            entry.effect.stop(self)
        except Exception as exc:   # a fault must never stop the loop
            self._error(entry.fault.name, f"stop: {exc!r}")
        self.any_active = bool(self._active)
        self.events.append(FaultEvent(cycle, t, "clear", entry.fault.name, reason))

    def _clear_reason(self, entry: _Entry, t: float) -> str:
        dur = entry.duration
        if dur.kind == "once":
            return "after one cycle"
        if dur.kind == "for":
            return f"after {dur.t_s:g} s"
        return f"repaired after {t - entry.since_t:.6g} s"

    def _rearm_or_finish(self, entry: _Entry, t: float) -> None:
        if entry.trigger is not None and entry.trigger.repeat and not entry.stop_requested:
            self._arm(entry, t)
        else:
            entry.state = "done"

    def _error(self, fault: str, what: str) -> None:
        self.error_count += 1
        if len(self.errors) < self.MAX_ERRORS:
            self.errors.append((self.cycle, fault, what))

    # ------------------------------------------------------------------ state the effects change (EffectHost)
    def add_count_offset(self, i: int, offset: float) -> None:
        """Add a persistent count offset to channel i (loop thread); on a counter channel it is
        kept within the counter's range (it acts modulo the counter's 2^bits anyway)."""
        half = float(self._counter_half[i])
        for entry in self._offsets:
            if entry[0] == i:
                break
        else:
            entry = [i, 0.0, half]
            self._offsets.append(entry)
        entry[1] = wrap_count(entry[1] + offset, half)

    def change_dropouts(self, i: int, change: int) -> None:
        """One more (+1) or one fewer (-1) active dropout on channel i (loop thread)."""
        self._dropouts[i] += change
        self.invalid[i] = self._dropouts[i] > 0

    # ------------------------------------------------------------------ binding
    def _trigger_source(self, c: BindContext, trigger: Trigger | None) -> tuple[Any, str, int] | None:
        """(owner, array attribute, index) a crossing trigger reads at each cycle start; looked up
        by attribute because the plant and the watch list may replace their arrays."""
        if trigger is None or trigger.kind != "crossing":
            return None
        sig = trigger.signal
        if sig == "t":
            return self, "_time", 0
        if sig.startswith("q_"):
            plant = c.need("plant", "a q_<joint> trigger")
            joints = plant.layout.joint_names
            if sig[2:] not in joints:
                raise c.error("trigger.signal", sig, "expected t, q_<joint> with joint in "
                                                     f"{', '.join(joints)}, <channel> or truth:<channel>")
            return plant, "pos", joints.index(sig[2:])
        truth = sig.startswith("truth:")
        i = c.channel(sig.removeprefix("truth:"), "trigger.signal")
        kind = "_t" if truth else "_m"
        getattr(self, f"_watch{kind}").append(math.nan)       # the slot first: the loop may be reading
        getattr(self, f"_watch{kind}_idx").append(i)
        self._watching = True
        return self, f"_watch{kind}", len(getattr(self, f"_watch{kind}")) - 1


def encoder_counter_bits(sensors: Any) -> dict[str, int]:
    """``{enc_<joint>: counter_bits}`` of the incremental encoders of a sensor suite
    (hil.devices.sensors.SensorSuite, or a list of its specs), for ``FaultEngine(counter_bits=...)``."""
    specs = list(getattr(sensors, "specs", sensors))
    return {names[0]: int(s.counter_bits) for s, names in zip(specs, channel_names(specs))
            if isinstance(s, EncoderSpec)}


def bus_encoding(bus: BusMap, direction: str = "to_firmware") -> Encoding:
    """``encoding(name) -> (scale, offset, bits, signed)`` of the integer-coded signals a bus map
    carries in ``direction`` (the first message wins for a signal sent in several)."""
    table: dict[str, tuple[float, float, int, bool]] = {}
    for codec in bus.messages(direction):
        for s in codec.spec.signals:
            if not s.is_float:
                table.setdefault(s.name, (s.scale, s.offset, s.length_bits, s.signed))

    def encoding(name: str) -> tuple[float, float, int, bool]:
        try:
            return table[name]
        except KeyError:
            raise KeyError(f"{bus.source}: no integer-coded {direction} signal {name!r}") from None
    return encoding
