"""Plant faults: effects on the drives and on the plant's kernel arrays.

    ``payload``        attachment ``target`` gets ``mass_kg`` (and ``inertia_kg_m2``, principal
                       moments about its centre of mass; default: the nominal inertia scaled with
                       the mass); the model is re-assembled at binding and the kernel arrays are
                       swapped in place when it strikes and restored when it clears. Should the
                       lighter arm vibrate faster than the integrator's substeps can follow (ELLA
                       without its payload: link 2 torsion at 726 Hz), the plant's substeps are
                       raised while the fault is active, as the preset's own plan would choose; on
                       every change of substeps the joints' friction smoothing floors and the brake
                       ramps are recomputed for the new substep (DriveBank.restabilize).
                       Payload faults do not compose: the most recently struck one sets the arrays.
    ``payload_drop``   the same with mass 0: the payload falls off
    ``friction``       joint ``target``: the drive's friction scaled by ``friction_scale``
    ``kt_loss``        joint ``target``: the motor torque constant scaled by ``kt_scale``
                       (demagnetisation, a lost phase)
    ``stiffness_loss`` body ``target``: modal stiffness scaled by ``stiffness_scale`` in (0, 1]
                       (a crack or a loosened clamp) and the modal damping by its square root, so
                       the damping ratio stays; frequencies fall by sqrt(stiffness_scale)
    ``damping``        body ``target``: modal damping scaled by ``damping_scale`` (> 0; a worn or a
                       added damper, a calibration of the damping ratio: every mode's ratio scales
                       with it), stiffness untouched
    ``brake``          joint ``target``: the holding brake engaged

``encoder_disconnect`` acts on the encoder's channels: :mod:`hil.faults.signal_effects`. The
kinds are declared at the end (FAULT_KINDS, for :mod:`hil.faults.registry`).
"""
from __future__ import annotations

import copy
import math
import threading
from typing import Any, Callable

import numpy as np

from config_schema import suggest
from hil.dynamics.integrator_plan import accurate_substeps
from hil.dynamics.plant import Plant, apparent_inertias
from hil.faults.effects import Effect, EffectHost
from hil.faults.fault import Fault, FaultError
from hil.faults.kind import FRACTION, NONNEG, POSITIVE, BindContext, FaultKind, Param, principal_moments
from hil.faults.signal_effects import EncoderDisconnect
from hil.model.assembly import assemble
from hil.model.linearize import step_frequencies_hz


class DriveFault(Effect):
    def __init__(self, drives: DriveFaults, what: str, joint: int, factor: float):
        self.drives, self.what, self.joint, self.factor = drives, what, joint, factor

    def start(self, engine: EffectHost) -> None:
        self.drives.change(self, +1)

    def stop(self, engine: EffectHost) -> None:
        self.drives.change(self, -1)


class DriveFaults:
    """Active friction, torque-constant and brake faults per joint, pushed to the drive bank
    (friction and kt scales multiply when several act on one joint). A brake is closed while a
    brake fault or an outside holder (``held``: the watchdog's safe state) wants it closed."""

    def __init__(self, drives: Any):
        self.drives = drives
        self.active: list[DriveFault] = []
        self.held: set[int] = set()

    def change(self, fault: DriveFault, sign: int) -> None:
        if sign > 0:
            self.active.append(fault)
        else:
            self.active.remove(fault)
        mine = [f for f in self.active if f.what == fault.what and f.joint == fault.joint]
        k = fault.joint
        if fault.what == "brake":
            self.drives.set_brake(k, bool(mine) or k in self.held)
        elif fault.what == "friction":
            self.drives.set_friction_scale(k, math.prod(f.factor for f in mine))
        else:
            self.drives.kt_scale[k] = math.prod(f.factor for f in mine)

    def hold_brake(self, k: int, engaged: bool) -> None:
        if engaged:
            self.held.add(k)
        else:
            self.held.discard(k)
        faulted = any(f.what == "brake" and f.joint == k for f in self.active)
        self.drives.set_brake(k, engaged or faulted)


class PlantArrays:
    """The plant's kernel arrays under payload and stiffness faults. The nominal arrays are those
    of the plant's model assembled afresh, not a copy of the live ones, which the drive bank
    rewrites at run time (friction, brakes): a variant touches only the arrays the model change
    alters, and every change rewrites just those in place, from the nominal arrays or the latest
    payload variant, then scales the modal stiffness and damping of weakened bodies. Under the fitted
    midpoint scheme a variant carries its own blocks (KernelModel.fitted, refitted for its modes); the
    implicit blocks follow a stiffness loss through Plant.kernel_arrays_changed.

    What depends on the substep h (each joint's Coulomb smoothing floor, the brakes' ramps) is
    recomputed whenever a change sets other substeps: with ``drives.restabilize()`` (hil.devices.drives
    .DriveBank: its inertias, its current friction scales), else Plant.stabilize_friction at the
    drive bank's ``inertia`` or, without one, the apparent inertias at the plant's pose now.

    Threads: prepare() and variant() run on the API thread (inject) or before the loop (a scenario),
    start/stop and refresh() on the loop's; only the loop thread changes ``payloads``, ``weakened`` and
    ``touched``."""

    def __init__(self, plant: Plant, drives: Any = None):
        self.plant = plant
        self.live = plant.km.arrays()            # named views into the kernel's flat arrays
        self.nominal: dict[str, np.ndarray] = {}
        self._preparing = threading.Lock()
        self.nominal_substeps = plant.plan.substeps
        self.payloads: list[Payload] = []
        self.weakened: list[ModalScale] = []
        self.touched: set[str] = set()
        restabilize = getattr(drives, "restabilize", None)
        if restabilize is None:
            inertia = getattr(drives, "inertia", None)
            inertia = apparent_inertias(plant) if inertia is None else np.array(inertia, float)
            restabilize = lambda: plant.stabilize_friction(inertia)   # noqa: E731
        self.restabilize: Callable[[], Any] = restabilize

    def prepare(self) -> None:
        """Make the nominal arrays (the assembly of the plant's model) at the first plant fault's binding,
        not for every run: a binding comes before its effect can start, off the loop's thread."""
        with self._preparing:
            if not self.nominal:
                nominal = assemble(self.plant.asm.model).km.arrays()
                nominal["fitted"] = self.plant.km.fitted.copy()      # the plan's, not the assembly's zeros
                self.nominal = nominal

    def variant(self, model: Any, fault: str) -> tuple[dict[str, np.ndarray], int]:
        """Kernel arrays of ``model`` that differ from the nominal ones, and the substeps it needs."""
        asm = assemble(model)
        substeps = self._substeps(asm)
        changed = {}
        if self.plant.plan.method == "fitted_midpoint":     # the variant's modes, fitted at its substep
            changed["fitted"] = self.plant.fitted_blocks(asm, substeps)
        for name, live in self.live.items():
            if name == "fitted":
                continue
            new = asm.km.view(name)
            if new.shape != live.shape or new.dtype != live.dtype:
                raise FaultError(fault, "target", name, f"a change that keeps the kernel arrays' shapes; {name} "
                                                        f"would change from {live.shape} to {new.shape}")
            if not np.array_equal(new, self.nominal[name]):
                changed[name] = new
        return changed, substeps

    def _substeps(self, asm: Any) -> int:
        """Substeps the variant needs with the plant's method, by the rule of the plant's own plan: its
        stability bound, and for a plan chosen by accuracy (auto) the fewest within the time budget that
        keep the variant's modes accurate (else the stability bound's)."""
        plan = self.plant.plan
        needed = step_frequencies_hz(asm).substeps(plan.method, plan.dt_s, asm.model.integrator.safety)
        if plan.accurate is not None:
            needed = accurate_substeps(asm, plan, needed) or needed
        return max(self.nominal_substeps, needed)

    def refresh(self) -> None:
        """Rewrite the touched arrays for the faults active now (loop thread)."""
        top = self.payloads[-1] if self.payloads else None
        arrays = top.arrays if top else {}
        for name in self.touched:
            np.copyto(self.live[name], arrays.get(name, self.nominal[name]))
        for w in self.weakened:
            self.live["Kmod"][w.body] *= w.stiffness
            self.live["Dmod"][w.body] *= w.damping
        plan = self.plant.plan
        substeps = top.substeps if top else self.nominal_substeps
        changed = substeps != plan.substeps
        plan.substeps = substeps
        self.plant.kernel_arrays_changed()      # for the substep in force
        if changed:
            self.restabilize()          # friction smoothing floors and brake ramps for the new substep


class Payload(Effect):
    def __init__(self, arrays: PlantArrays, changed: dict[str, np.ndarray], substeps: int):
        self.plant_arrays, self.arrays, self.substeps = arrays, changed, substeps

    def start(self, engine: EffectHost) -> None:
        self.plant_arrays.touched.update(self.arrays)      # here, on the loop thread that iterates it
        self.plant_arrays.payloads.append(self)
        self.plant_arrays.refresh()

    def stop(self, engine: EffectHost) -> None:
        self.plant_arrays.payloads.remove(self)
        self.plant_arrays.refresh()


class ModalScale(Effect):
    """A body's modal stiffness and damping matrices scaled (stiffness_loss, damping)."""

    def __init__(self, arrays: PlantArrays, body: int, stiffness: float, damping: float):
        self.plant_arrays, self.body, self.stiffness, self.damping = arrays, body, stiffness, damping

    def start(self, engine: EffectHost) -> None:
        self.plant_arrays.touched.update(("Kmod", "Dmod"))  # here, on the loop thread that iterates it
        self.plant_arrays.weakened.append(self)
        self.plant_arrays.refresh()

    def stop(self, engine: EffectHost) -> None:
        self.plant_arrays.weakened.remove(self)
        self.plant_arrays.refresh()


def find_attachment(model: Any, fault: Fault) -> Any:
    """The attachment named by the fault's target: ``<attachment>`` or ``<body>/<attachment>``."""
    found = [(b.name, a) for b in model.bodies for a in b.attachments
             if fault.target in (a.name, f"{b.name}/{a.name}")]
    if len(found) != 1:
        names = [f"{b.name}/{a.name}" for b in model.bodies for a in b.attachments]
        why = "is ambiguous" if found else "names no attachment" + suggest(fault.target, names)
        raise FaultError(fault.name, "target", fault.target, f"{why}; expected one of {', '.join(names)}")
    return found[0][1]


# ----------------------------------------------------------------------------- the plant kinds
def _drive_fault(what: str, scale: str | None) -> Callable[[BindContext], DriveFault]:
    """The binder of a fault on a joint's drive: ``what`` (friction, kt, brake) scaled by the
    parameter ``scale`` (a brake: engaged)."""
    def bind(c: BindContext) -> DriveFault:
        drives = c.need("drives")
        factor = 1.0 if scale is None else c.p[scale]
        joint = c.joint()
        holding = getattr(drives, "brake_torque", None)      # a bank that says which joints have brakes
        if what == "brake" and holding is not None and not holding[joint] > 0:
            raise c.error("target", c.fault.target, "expected a joint with a holding brake "
                                                    "(brake_torque_N_m > 0 in its motor table)")
        return DriveFault(c.engine.drive_faults, what, joint, factor)
    return bind


def _plant_and_arrays(c: BindContext) -> tuple[Plant, PlantArrays]:
    plant = c.need("plant")
    arrays = c.engine.plant_arrays
    if arrays is None:
        raise c.error("kind", c.fault.kind, f"a {c.fault.kind} fault needs a hil.dynamics.plant.Plant "
                                            "(its kernel arrays) as the engine's plant")
    arrays.prepare()
    return plant, arrays


def _bind_modal_scale(c: BindContext) -> ModalScale:
    """stiffness_loss: stiffness s, damping sqrt(s) (the ratio stays); damping: the damping only."""
    plant, arrays = _plant_and_arrays(c)
    bodies = plant.layout.body_names
    flexible = [b for k, b in enumerate(bodies) if plant.km.nm[k] > 0]
    if c.fault.target not in flexible:
        raise c.error("target", c.fault.target,
                      f"expected a flexible body{suggest(c.fault.target, flexible)}: " + ", ".join(flexible))
    body = bodies.index(c.fault.target)
    if c.fault.kind == "damping":
        return ModalScale(arrays, body, 1.0, c.p["damping_scale"])
    return ModalScale(arrays, body, c.p["stiffness_scale"], math.sqrt(c.p["stiffness_scale"]))


def _bind_payload(c: BindContext) -> Payload:
    """A payload change (payload_drop: to mass 0), the model re-assembled now."""
    plant, arrays = _plant_and_arrays(c)
    model = copy.deepcopy(plant.asm.model)
    attachment = find_attachment(model, c.fault)
    mass = 0.0 if c.fault.kind == "payload_drop" else c.p["mass_kg"]
    inertia = c.p.get("inertia_kg_m2")
    if inertia is None:
        ratio = mass / attachment.mass_kg if attachment.mass_kg > 0 else 0.0
        attachment.inertia_kg_m2 = np.asarray(attachment.inertia_kg_m2, float) * ratio
    else:
        attachment.inertia_kg_m2 = np.diag(inertia)
    attachment.mass_kg = mass
    changed, substeps = arrays.variant(model, c.fault.name)
    return Payload(arrays, changed, substeps)


def _bind_encoder_disconnect(c: BindContext) -> EncoderDisconnect:
    joint = c.fault.target.removeprefix("enc_")
    return EncoderDisconnect(c.channel(f"enc_{joint}"), c.optional_channel(f"vel_{joint}"))


FAULT_KINDS = (
    FaultKind("payload", "plant", (Param("mass_kg", "kg", read=NONNEG),
                                   Param("inertia_kg_m2", "kg m^2", default=None, read=principal_moments)),
              _bind_payload),
    FaultKind("payload_drop", "plant", (), _bind_payload),
    FaultKind("friction", "plant", (Param("friction_scale", read=POSITIVE),),
              _drive_fault("friction", "friction_scale")),
    FaultKind("kt_loss", "plant", (Param("kt_scale", read=NONNEG),), _drive_fault("kt", "kt_scale")),
    FaultKind("encoder_disconnect", "plant", (), _bind_encoder_disconnect),
    FaultKind("stiffness_loss", "plant", (Param("stiffness_scale", read=FRACTION),), _bind_modal_scale),
    FaultKind("damping", "plant", (Param("damping_scale", read=POSITIVE),), _bind_modal_scale),
    FaultKind("brake", "plant", (), _drive_fault("brake", None)),
)
