"""What the firmware measures: encoders, IMUs, strain gauges, torque and current sensors.

Every sensor is sampled from the plant state at the sample instant (right after a plant
step, from the same kernel call), in its own frame, every ``divider``-th step; between its
samples a channel holds its last value. The sensors are described by hil.model.sensor_specs (the
preset's ``[[sensor]]`` tables); dt is the plant step, f_int = 1/dt the sensors' internal rate.

Channels (names are the bus signal names, see firmware_bridge.wire.signals):

* ``enc_<joint>`` motor-side incremental encoder [counts]. Ideal value: the motor angle in
  counts, c = n theta cpr / (2 pi) (n the gear ratio, theta the joint angle q, or the rotor
  coordinate of a Spong joint referred to the link side; cpr = lines_per_rev x quadrature);
  the counter reads zero at motor angle zero. Measured: floor(c) in a signed two's-complement
  counter of counter_bits bits (wraps from 2^(b-1) - 1 to -2^(b-1)).
* ``index_<joint>`` the index channel [counts]: the index mark sits at count index_count of
  every motor revolution (counts index_count + k cpr), and, like the index latch of a drive's
  encoder interface (CiA 402 touch probe "latch on index"), the channel holds the counter value
  of the last mark the counter crossed, in the counter's width; 0 until the first crossing.
  A crossing is the counter moving between idx + k cpr - 1 and idx + k cpr in either
  direction; when several marks pass within one step, the last one passed is latched. The
  latch watches every plant step, whatever the divider. Ideal value: the unwrapped latch.
* ``vel_<joint>`` motor-shaft speed [counts/s]: n qd cpr / (2 pi), exact (as a drive with a
  velocity observer reports it; CiA 402 velocity actual value).
* ``abs_<joint>`` link-side single-turn absolute encoder [counts]: ideal value
  ((q - zero_rad) mod 2 pi) 2^bits / (2 pi); measured: its floor, 0 .. 2^bits - 1.
* ``imu_ax, imu_ay, imu_az`` [m/s^2], ``imu_gx, imu_gy, imu_gz`` [rad/s] of the first IMU
  (``<name>_ax`` ... of further ones). Ideal value: specific force f = a - g (gravity
  included: at rest the accelerometer reads +g upwards) and angular velocity of the deformed
  link's cross-section at the station, in the sensor frame: R_s = R_station Rm, Rm =
  Rz(yaw) Ry(pitch) Rx(roll) of the mounting rpy_rad, reading R_s^T f and R_s^T omega.
* ``strain_<name>`` axial strain [m/m] of a gauge on a flexible body at a station's x, at
  distance d = distance_m from the neutral axis along body y (plane bending_y) or body z
  (bending_z): eps = u' - d v'' or u' - d w'' (Euler-Bernoulli; v, w the deflections along y
  and z, u' the axial strain of the axial modes), from the modal coordinates and
  hil.model.modal.BeamModes.curvature at x. A positive curvature towards the gauge's side
  compresses it. Torsion shears the section and strains no axial fibre.
* ``torque_<joint>`` [N m]: the torque the joint transmits into the child body about its axis,
  axis . (moment of Plant.joint_wrench): for a stiff joint the drive torque minus friction
  minus n^2 J_r qdd (what a sensor on the gear's output shaft reads), for a Spong joint the
  spring torque k (phi - q) + d (phi_dot - qd).
* ``cur_<joint>`` [A]: the drive model's motor current, read from the array given as
  ``current_source`` (zeros without one).

The signal chain of the analog channels (IMU axes, strain, torque, current, vel), at f_int:
x_k = clip((1 + e) ((I + M) s_k) + b + w_k + sigma z_k, +-range), y_k = y_(k-1) + alpha (x_k - y_(k-1)),
and at a sample measured = clip(lsb round(y_k / lsb), +-range), truth = s_k. e is the scale error
(per axis of a triad), M the misalignment (IMU triads), b the constant bias, w_k = w_(k-1) + B sqrt(dt) z'_k the bias random
walk (density B per sqrt(s): Var w grows as B^2 t), z, z' standard normals. The white noise of
one-sided density N (unit/sqrt(Hz), the datasheet figure) has sigma = N sqrt(f_int / 2): its
power spread evenly over 0 .. f_int/2. The low-pass is the RC filter of corner f_c discretised
exactly for an input held over a step (step invariant): alpha = 1 - exp(-2 pi f_c dt), so a
step reaches 1 - exp(-t / tau), tau = 1 / (2 pi f_c), at every sample instant; it runs every
plant step, and the divider decimates its output (the anti-aliasing filter ahead of the output
data rate). Without a filter (lpf_hz = 0) alpha = 1. The saturation acts on the sensing
element (before the filter) and on the output word.

Order of a cycle, for the bus and the fault engine: ``step(tau)`` advances the plant and
writes ``truth`` and ``measured``; a fault engine may then change ``measured`` in place;
only then are frames encoded from it (firmware_bridge.wire.signals.SensorOutput). The sensors keep
their outputs in ``sampled`` (a channel sampled every n-th step holds its value there between
samples) and every step copies them to ``measured``, so a change made to ``measured`` lasts one
step and never feeds back into the next. One numpy Generator per suite draws all normals (2 per
channel per step, whether the channel samples or not), so a seed reproduces a run exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from hil.model.assembly import rpy_matrix
from hil.kernels import sensing as k
from hil.kernels.outputs import station_state
from hil.dynamics.plant import Plant
from hil.model.sensor_specs import (
    AbsEncoderSpec,
    CurrentSpec,
    EncoderSpec,
    ImuSpec,
    SensorSpec,
    SignalChain,
    StrainSpec,
    TorqueSpec,
    TriadChain,
    channel_names,
    default_sensors,
)
from config_schema import UserError

ANGULAR_VELOCITY = 15        # field offsets in that layout
SPECIFIC_FORCE = 18


@dataclass
class _Tables:
    """Per-channel rows of the kernel tables while they are built."""

    names: list[str] = field(default_factory=list)
    ints: list[np.ndarray] = field(default_factory=list)
    floats: list[np.ndarray] = field(default_factory=list)
    lin_idx: list[int] = field(default_factory=list)
    lin_coef: list[float] = field(default_factory=list)
    groups: list[tuple[int, int, int]] = field(default_factory=list)
    group_mats: list[np.ndarray] = field(default_factory=list)

    def add(self, name: str, kind: int, src: int, divider: int, terms=(), **kw) -> int:
        row_i = np.zeros(k.N_INT, np.int64)
        row_f = np.zeros(k.N_FLOAT)
        row_i[[k.I_KIND, k.I_SRC, k.I_DIV]] = kind, src, divider
        row_f[[k.F_RANGE, k.F_ALPHA, k.F_GAIN]] = math.inf, 1.0, 1.0
        row_i[k.I_LIN0] = len(self.lin_idx)
        for idx, coef in terms:
            self.lin_idx.append(idx)
            self.lin_coef.append(coef)
        row_i[k.I_LIN1] = len(self.lin_idx)
        for key, value in kw.items():
            if key.startswith("I_"):
                row_i[getattr(k, key)] = value
            else:
                row_f[getattr(k, key)] = value
        self.names.append(name)
        self.ints.append(row_i)
        self.floats.append(row_f)
        return len(self.names) - 1


class SensorSuite:
    """Every sensor of an arm on flat channel arrays (the models: see the module docstring).

    ``channel_names`` (bus signal names), ``truth`` (ideal value at each channel's last sample)
    ``sampled`` (the sensors' outputs) and ``measured`` (what goes on the bus: ``sampled`` as of the
    last step, then changed by faults) are preallocated and indexed alike;
    ``channel(name)`` gives the index. ``station_out`` (n, 24) holds the world kinematics of
    the sampled stations (Plant.station's fields), ``tip`` a view of the tip's position.
    """

    def __init__(self, plant: Plant, sensors: list[SensorSpec] | None = None, seed: int | None = None,
                 current_source: np.ndarray | None = None, noise: bool = True, sampled: tuple[str, ...] = ()):
        """`sensors`: the specs (default: the model's, else hil.model.sensor_specs.default_sensors);
        `seed` of the noise generator (default: the model's sensor_seed); `current_source`:
        the motor currents [A] per joint, read at every step (zeros if None); `noise` False: no
        normal is ever drawn, so that there is no white noise and no bias random walk (a replay's
        sensors: bias, misalignment, scale, filter, quantisation and saturation as configured); `sampled`: more
        stations to sample each step (rows of station_out after the tip's and the IMUs'; names the model lacks
        are not sampled: their user refuses them, hil.runtime.cosim.FmuPart.bind)."""
        self.noisy = noise
        self.plant = plant
        model = plant.asm.model
        self.specs = list(sensors) if sensors is not None else (model.sensors or default_sensors(model))
        self.seed = model.sensor_seed if seed is None else int(seed)
        self.rng = np.random.default_rng(self.seed)
        self.current_source = np.zeros(plant.layout.n_joints) if current_source is None else current_source
        self.dt = plant.dt
        self._sampled_stations(sampled)
        self._build()
        self._bind_tables()
        self.step_count = 0
        self.reset()

    def _sampled_stations(self, more: tuple[str, ...]) -> None:
        """The stations the kernel samples each step: the tip (for the log) first, then the IMUs', then `more`."""
        lay = self.plant.layout
        tip = ["tip"] if "tip" in lay.station_names else []
        imu = [s.station for s in self.specs if isinstance(s, ImuSpec)]
        self.station_names = list(dict.fromkeys(tip + imu + [s for s in more if s in lay.station_names]))
        for s in self.station_names:
            if s not in lay.station_names:
                raise UserError(f"{self.plant.asm.model.source}: no station {s!r} for an IMU; "
                                 f"stations: {', '.join(lay.station_names)}")
        self.station_index = np.array([lay.station_names.index(s) for s in self.station_names], np.int64)
        self.station_out = self.plant.output_stations(self.station_index)
        self.tip = self.station_out[0, 0:3] if tip else np.full(3, np.nan)

    def _build(self) -> None:
        """Channel names and the kernel's parameter and state tables from the specs."""
        t = _Tables()
        names = channel_names(self.specs)
        for spec, spec_names in zip(self.specs, names):
            getattr(self, f"_add_{spec.kind}")(t, spec, spec_names)
        if len(set(t.names)) != len(t.names):
            dup = sorted({n for n in t.names if t.names.count(n) > 1})
            raise UserError(f"{self.plant.asm.model.source}: sensor channels named twice: {', '.join(dup)}")
        self.channel_names: list[str] = t.names
        self._index = {n: i for i, n in enumerate(t.names)}
        n = len(t.names)
        self._ich = np.array(t.ints, np.int64).reshape(n, k.N_INT)
        self._fch = np.array(t.floats).reshape(n, k.N_FLOAT)
        self._sf = np.zeros((n, k.N_STATE))
        self._si = np.zeros((n, 2), np.int64)
        self._lin_idx = np.array(t.lin_idx, np.int64).reshape(-1)
        self._lin_coef = np.array(t.lin_coef, float).reshape(-1)
        self._gi = np.array(t.groups, np.int64).reshape(-1, 3)
        self._gm = np.array(t.group_mats, float).reshape(-1, 2, 3, 3)
        self.noise = np.zeros(2 * n)
        self.truth = np.zeros(n)
        self.sampled = np.zeros(n)
        self.measured = np.zeros(n)
        self._enc = np.nonzero(self._ich[:, k.I_KIND] == k.ENC)[0]
        self._imu = np.array([[self._index[c] for c in spec_names] for spec, spec_names in zip(self.specs, names)
                              if isinstance(spec, ImuSpec)], np.int64).reshape(-1, 6)

    # ------------------------------------------------------------------ the cycle
    def sample(self) -> None:
        """Run every sensor at the plant's new instant (after Plant.step, which computed the
        sensors' stations, the plant's output stations, in the same kernel call)."""
        self.step_count += 1
        self._sense(False)

    def reset(self) -> None:
        """(Re)start every sensor at the plant's current state, sampling all channels now:
        filters settled, random walks at zero, index latches cleared, divider phase zero."""
        plant = self.plant
        plant.evaluate()
        for i, s in enumerate(self.station_index):
            station_state(plant.km.mi, plant.km.mf, plant.work.w, s, self.station_out[i])
        self.step_count = 0
        self._sense(True)

    def _sense(self, first: bool) -> None:
        if self.noisy:
            self.rng.standard_normal(out=self.noise)
        p = self.plant
        k.sense(self.step_count, first, p.pos, p.vel, self.tables)
        self.measured[:] = self.sampled

    def _bind_tables(self) -> None:
        """The kernel's tables (hil.kernels.sensing.SensorTables), looked up once (the plant keeps its work and
        model arrays for its lifetime; pos and vel are passed per call: Plant.reset replaces them)."""
        p = self.plant
        self.tables = k.SensorTables(self.station_out, p.wrenches, self.current_source, self.noise, self._ich,
                                     self._fch, self._sf, self._si, self._gi, self._gm, self._lin_idx, self._lin_coef,
                                     p.km.axis, self.truth, self.sampled, self.measured)

    # ------------------------------------------------------------------ access
    def channel(self, name: str) -> int:
        """Index of a channel in channel_names, truth and measured."""
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"no sensor channel {name!r}; channels: {', '.join(self.channel_names)}") from None

    @property
    def counts(self) -> np.ndarray:
        """Measured encoder counters, in the order of the encoder specs."""
        return self.measured[self._enc].astype(np.int64)

    @property
    def imu(self) -> np.ndarray:
        """Measured IMU readings (n_imu, 6): specific force [m/s^2] and angular rate [rad/s], sensor axes."""
        return self.measured[self._imu]

    # ------------------------------------------------------------------ building the tables
    def _joint(self, name: str) -> int:
        lay = self.plant.layout
        if name not in lay.joint_names:
            raise UserError(f"{self.plant.asm.model.source}: no joint {name!r} for a sensor; "
                             f"joints: {', '.join(lay.joint_names)}")
        return lay.joint_names.index(name)

    def _motor_coordinate(self, j: int) -> int:
        """Index of the motor-side coordinate of joint j: the rotor of a Spong joint, else q_j."""
        lay = self.plant.layout
        return lay.motor_index(j) if lay.motor_of_joint[j] >= 0 else j

    def _chain(self, chain: SignalChain, axis: int = 0) -> dict:
        """Kernel parameters of a signal chain (per-step noise and walk sigma, filter alpha)."""
        bias = np.broadcast_to(np.asarray(chain.bias, float), (3,))[axis]
        gain = 1.0 + np.broadcast_to(np.asarray(chain.scale_error, float), (3,))[axis]
        alpha = 1.0 - math.exp(-2 * math.pi * chain.lpf_hz * self.dt) if chain.lpf_hz > 0 else 1.0
        return dict(F_SIGMA=chain.noise_density * math.sqrt(0.5 / self.dt), F_WALK=chain.bias_walk * math.sqrt(self.dt),
                    F_BIAS=bias, F_RANGE=chain.range, F_LSB=chain.lsb, F_ALPHA=alpha, F_GAIN=gain)

    def _add_encoder(self, t: _Tables, s: EncoderSpec, names: list[str]) -> None:
        j = self._joint(s.joint)
        gear = self.plant.asm.model.bodies[j].joint.gear_ratio
        cpr = s.counts_per_rev
        terms = [(self._motor_coordinate(j), gear * cpr / (2 * math.pi))]
        enc = t.add(names[0], k.ENC, k.SRC_POS, s.divider, terms, I_CPR=cpr, I_INDEX=s.index_count,
                    I_BITS=s.counter_bits)
        if s.index:
            t.add(names[1], k.INDEX, k.SRC_NONE, s.divider, I_REF=enc, I_CPR=cpr,
                  I_INDEX=s.index_count, I_BITS=s.counter_bits)
        t.add(names[-1], k.ANALOG, k.SRC_VEL, s.divider, terms)

    def _add_abs_encoder(self, t: _Tables, s: AbsEncoderSpec, names: list[str]) -> None:
        j = self._joint(s.joint)
        modulus = float(2 ** s.resolution_bits)
        scale = modulus / (2 * math.pi)
        t.add(names[0], k.ABS, k.SRC_POS, s.divider, [(j, scale)], F_CONST=-s.zero_rad * scale,
              F_MODULUS=modulus)

    def _add_imu(self, t: _Tables, s: ImuSpec, names: list[str]) -> None:
        row = self.station_names.index(s.station)
        sensor_from_station = rpy_matrix(np.asarray(s.rpy_rad, float)).T
        for part, field_offset, chain in ((0, SPECIFIC_FORCE, s.accel), (1, ANGULAR_VELOCITY, s.gyro)):
            first = len(t.names)
            for axis in range(3):
                t.add(names[3 * part + axis], k.ANALOG, k.SRC_STATION, s.divider, **self._chain(chain, axis))
            mis = chain.misalignment if isinstance(chain, TriadChain) else np.zeros((3, 3))
            t.groups.append((first, row, field_offset))
            t.group_mats.append(np.stack([sensor_from_station, np.eye(3) + mis]))

    def _add_strain(self, t: _Tables, s: StrainSpec, names: list[str]) -> None:
        lay = self.plant.layout
        model = self.plant.asm.model
        stations = {st.name: st for st in model.stations}
        if s.station not in stations:
            raise UserError(f"{model.source}: strain gauge {s.name!r}: no station {s.station!r}")
        station = stations[s.station]
        b = lay.body_names.index(station.body)
        modes = self.plant.asm.modes[b]
        if modes is None:
            raise UserError(f"{model.source}: strain gauge {s.name!r}: station {s.station!r} is on a rigid body")
        kappa, axial = modes.curvature(station.station_m)
        # kappa rows: [psi', -w'', v'']; eps = u' - d v'' (bending_y) or u' - d w'' (bending_z)
        bend = -s.distance_m * kappa[2] if s.plane == "bending_y" else s.distance_m * kappa[1]
        coef = axial + bend
        terms = [(lay.eta_index(b, m), float(c)) for m, c in enumerate(coef) if c != 0.0]
        t.add(names[0], k.ANALOG, k.SRC_POS, s.divider, terms, **self._chain(s.chain))

    def _add_torque(self, t: _Tables, s: TorqueSpec, names: list[str]) -> None:
        t.add(names[0], k.ANALOG, k.SRC_TORQUE, s.divider, I_REF=self._joint(s.joint),
              **self._chain(s.chain))

    def _add_current(self, t: _Tables, s: CurrentSpec, names: list[str]) -> None:
        t.add(names[0], k.ANALOG, k.SRC_CURRENT, s.divider, I_REF=self._joint(s.joint),
              **self._chain(s.chain))
