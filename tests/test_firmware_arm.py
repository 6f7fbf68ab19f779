"""The reference firmware's own arm: its nominal parameter file, its rigid-chain gravity feed-forward
(checked against Pinocchio and against the emulator plant's holding torques) and its independence
from the emulator package."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from config_schema import ConfigError
from firmware_bridge.reference.nominal import ImuMount, NominalArm, NominalJoint, NominalLink, load_nominal_arm
from firmware_bridge.reference.rigid_chain import RigidChain
from hil.dynamics.plant import Plant
from hil.model.assembly import assemble
from hil.model.config import load_model
from hil.model.linearize import static_forces

ROOT = Path(__file__).resolve().parent.parent
PARAMS = ROOT / "configs" / "firmware" / "ella_nominal.toml"
PRESET = ROOT / "configs" / "ella.toml"
SETPOINT_POSE = np.array([0.6922, -0.4928, 0.4270])
# The file's masses are rounded to 1 g and its centres of mass to 0.1 mm, so the links' first
# moments about the pitch axis differ from the exact lumping by at most 0.5 g x 0.80 m + 4.85 kg x
# 0.05 mm = 0.64 g m (link 1) and 0.5 g x 1.69 m + 3.62 kg x 0.05 mm = 1.02 g m (link 2), and the
# holding torques by at most 1.66e-3 kg m x 9.81 m/s^2 = 0.016 N m.
ROUNDING_N_M = 0.016


@pytest.fixture(scope="module")
def arm() -> NominalArm:
    return load_nominal_arm(PARAMS)


@pytest.fixture(scope="module")
def preset():
    return load_model(PRESET)


# ----------------------------------------------------------------------------- the parameter file
def _lumped(body) -> tuple[float, np.ndarray]:
    """Mass and centre of mass of a preset body as one rigid body (the undeformed beam, its rigid
    part and its attachments)."""
    parts = []
    if body.rigid is not None:
        parts.append((body.rigid.mass_kg, body.rigid.com_m))
    if body.beam is not None:
        b = body.beam
        parts.append((b.rho_kg_m3 * b.area_m2 * b.length_m, np.array([b.length_m / 2, 0.0, 0.0])))
    parts += [(a.mass_kg, np.array([a.station_m, 0.0, 0.0]) + a.offset_m) for a in body.attachments]
    mass = sum(m for m, _ in parts)
    return mass, sum(m * c for m, c in parts) / mass


def test_the_nominal_file_states_the_preset_arm_as_rigid_links(arm, preset):
    """Stated independently, the firmware's numbers agree with the emulator's preset: the same chain,
    gears and encoders, and each link's lumped mass and centre of mass to the file's rounding."""
    bodies = preset.bodies
    assert arm.joint_names == [b.joint.name for b in bodies]
    assert [j.link.name for j in arm.joints] == [b.name for b in bodies]
    encoders = {s.joint: s.lines_per_rev * s.quadrature for s in preset.sensors if s.kind == "encoder"}
    station_of = {b.name: 0.0 if b.beam is None else b.beam.length_m for b in bodies}
    for j, b in zip(arm.joints, bodies):
        np.testing.assert_array_equal(j.axis, b.joint.axis / np.linalg.norm(b.joint.axis))
        np.testing.assert_allclose(j.offset_m, b.joint.offset_m + [b.joint.station_m, 0, 0], atol=1e-12)
        np.testing.assert_array_equal(j.rpy_rad, b.joint.rpy_rad)
        assert (j.gear_ratio, j.encoder_counts_per_rev, j.home_rad) == (b.joint.gear_ratio, encoders[b.joint.name],
                                                                        b.joint.q0_rad)
        mass, com = _lumped(b)
        assert abs(j.link.mass_kg - mass) <= 0.5e-3, (j.name, j.link.mass_kg, mass)
        np.testing.assert_allclose(j.link.com_m, com, atol=0.5e-4)
        assert j.link.length_m == station_of[b.name]
    imu = next(s for s in preset.sensors if s.kind == "imu")
    station = next(s for s in preset.stations if s.name == imu.station)
    assert (arm.imu.link, arm.imu.station_m) == (station.body, station.station_m)
    np.testing.assert_array_equal(arm.imu.rpy_rad, imu.rpy_rad)
    np.testing.assert_array_equal(arm.gravity_m_s2, preset.gravity_m_s2)
    assert all(v.startswith(("published:", "derived:", "assumed:")) for v in arm.provenance.values())


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    text = PARAMS.read_text(encoding="utf-8")
    assert old in text, old
    path = tmp_path / "arm.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize("old, new, message", [
    ("mass_kg = 4.849", "mass_kg = -4.849",
     'joint[shoulder_pitch].link.mass_kg = -4.849: expected a non-negative number in kg'),
    ("gear_ratio = 100.0", "gear_ration = 100.0",
     "joint[elbow].gear_ration = 100.0: unknown key (did you mean 'gear_ratio'?)"),
    ("encoder_counts_per_rev = 16384\n  [joint.link]\n  name = \"link2\"",
     "encoder_counts_per_rev = 16384.5\n  [joint.link]\n  name = \"link2\"",
     "joint[elbow].encoder_counts_per_rev = 16384.5: expected an integer >= 1 in counts per motor revolution"),
    ("axis = [0.0, 1.0, 0.0]", "axis = [0.0, 0.0, 0.0]",
     "joint[shoulder_pitch].axis = [0.0, 0.0, 0.0]: expected a non-zero 3-vector"),
    ('link = "link2"', 'link = "link3"', 'imu.link = "link3": expected one of the links yaw_carrier, link1, link2 '
                                         "(did you mean 'link2'?)"),
    ("station_m = 0.93", "station_m = 9.3", "imu.station_m = 9.3: expected a finite number in m, at least 0.0, "
                                            "at most 0.93"),
    ('name = "elbow"', 'name = "shoulder_pitch"', 'joint[shoulder_pitch].name = "shoulder_pitch": expected a joint '
                                                  "name not used before"),
    ('"imu.rpy_rad" = "assumed:', '"imu.rpy_radd" = "assumed:',
     "provenance.\"imu.rpy_radd\" = \"assumed: IMU axes aligned with link 2's frame (mounting drawing)\": expected "
     "the key to name a value of this file (did you mean 'imu.rpy_rad'?)"),
    ('"imu.rpy_rad" = "assumed:', '"imu.rpy_rad" = "guessed:', 'expected a string starting with published:'),
    ('"joint.elbow.gear_ratio" = "assumed:', '# "joint.elbow.gear_ratio" = "assumed:',
     'provenance."joint.elbow.gear_ratio" = <missing>: required: every nominal value states its source'),
])
def test_a_bad_parameter_file_names_file_key_value_and_unit(tmp_path, old, new, message):
    path = _edited(tmp_path, old, new)
    with pytest.raises(ConfigError) as err:
        load_nominal_arm(path)
    assert str(err.value).startswith(f"{path}: "), str(err.value)
    assert message in str(err.value), str(err.value)


# ----------------------------------------------------------------------------- gravity feed-forward
def _pinocchio(arm: NominalArm) -> pin.Model:
    """The same rigid chain as a Pinocchio model (rotational inertias do not enter gravity)."""
    model = pin.Model()
    parent = 0
    for j in arm.joints:
        placement = pin.SE3(pin.rpy.rpyToMatrix(*j.rpy_rad), np.asarray(j.offset_m, float))
        parent = model.addJoint(parent, pin.JointModelRevoluteUnaligned(j.axis), placement, j.name)
        model.appendBodyToJoint(parent, pin.Inertia(j.link.mass_kg, j.link.com_m, 1e-3 * np.eye(3)), pin.SE3.Identity())
    model.gravity.linear = np.asarray(arm.gravity_m_s2, float)
    return model


def _random_arm(rng: np.random.Generator, n: int = 5) -> NominalArm:
    """A chain with skew axes, turned and shifted joint frames, off-axis centres of mass, tilted gravity."""
    axes = rng.normal(size=(n, 3))
    joints = tuple(NominalJoint(f"j{k}", axes[k] / np.linalg.norm(axes[k]), rng.uniform(-0.5, 0.5, 3),
                                rng.uniform(-np.pi, np.pi, 3), 0.0, 100.0, 16384,
                                NominalLink(f"l{k}", rng.uniform(0.5, 5.0), rng.uniform(-0.4, 0.4, 3), 0.5))
                   for k in range(n))
    return NominalArm("random", "<test>", rng.normal(size=3) * 5.0, joints, ImuMount(f"l{n - 2}", 0.3,
                                                                                   rng.uniform(-1, 1, 3)), {})


@pytest.mark.parametrize("which", ["ella", "random"])
def test_gravity_torque_matches_pinocchio(arm, which):
    rng = np.random.default_rng(7)
    subject = arm if which == "ella" else _random_arm(rng)
    chain, model = RigidChain(subject), _pinocchio(subject)
    data = model.createData()
    for q in [np.zeros(chain.n)] + list(rng.uniform(-np.pi, np.pi, (20, chain.n))):
        expected = pin.computeGeneralizedGravity(model, data, q)
        np.testing.assert_allclose(chain.gravity_torque(q), expected, atol=1e-10 * max(1.0, np.abs(expected).max()))


def test_imu_orientation_and_joint_axes_match_pinocchio():
    rng = np.random.default_rng(3)
    subject = _random_arm(rng)
    chain, model = RigidChain(subject), _pinocchio(subject)
    data = model.createData()
    k_imu = chain.imu_link
    for q in rng.uniform(-np.pi, np.pi, (10, chain.n)):
        pin.forwardKinematics(model, data, q)
        R, axes = chain.imu_rotation_and_axes(q)
        np.testing.assert_allclose(R, data.oMi[k_imu + 1].rotation @ pin.rpy.rpyToMatrix(*subject.imu.rpy_rad),
                                   atol=1e-12)
        for k, j in enumerate(subject.joints):
            expected = data.oMi[k + 1].rotation @ j.axis if k <= k_imu else np.zeros(3)
            np.testing.assert_allclose(axes[:, k], expected, atol=1e-12)


def _plant_holding_torques(preset, poses: np.ndarray) -> np.ndarray:
    asm = assemble(preset)
    pos = np.zeros(asm.layout.nq)
    out = []
    for q in poses:
        pos[: len(q)] = q                     # eta = 0: the undeformed arm
        out.append(static_forces(asm, pos)[: len(q)].copy())
    return np.array(out)


def test_gravity_torque_holds_the_undeformed_plant(arm, preset):
    """At eta = 0 a link's gravity load depends only on its mass and centre of mass, so lumping each
    flexible link with its attachments is exact there: the difference is the file's rounding."""
    poses = np.vstack([np.zeros(3), SETPOINT_POSE, np.random.default_rng(11).uniform(-np.pi, np.pi, (10, 3))])
    plant = _plant_holding_torques(preset, poses)
    chain = RigidChain(arm)
    nominal = np.array([chain.gravity_torque(q) for q in poses])
    print(f"\nlargest |rigid - plant| holding torque at eta = 0: {np.abs(nominal - plant).max():.2e} N m "
          f"(pitch holds {np.abs(plant[:, 1]).max():.1f} N m)")
    np.testing.assert_allclose(nominal, plant, atol=ROUNDING_N_M)

    # the comparison sees a lumping mistake: link 2 without its payload
    link2 = arm.joints[2].link
    without_payload = replace(link2, mass_kg=link2.mass_kg - 2.1,
                              com_m=(link2.mass_kg * link2.com_m - 2.1 * np.array([0.93, 0, 0])) / (link2.mass_kg - 2.1))
    wrong = RigidChain(replace(arm, joints=arm.joints[:2] + (replace(arm.joints[2], link=without_payload),)))
    assert np.abs(np.array([wrong.gravity_torque(q) for q in poses]) - plant).max() > 100 * ROUNDING_N_M


def test_the_static_sag_is_what_the_rigid_feedforward_misses(arm, preset):
    """In the deflected equilibrium the beams' sag shifts the holding torques by up to ~1 % (the
    integral of the firmware's PID takes it up)."""
    chain = RigidChain(arm)
    plant = Plant(preset)
    for q in (np.zeros(3), SETPOINT_POSE):
        plant.pos[:] = 0.0
        plant.pos[:3] = q
        plant.equilibrium_eta()
        hold = plant.tau[:3]
        miss = chain.gravity_torque(q) - hold
        print(f"q = {q}: plant holds {np.round(hold, 3)} N m, rigid feed-forward misses {np.round(miss, 3)} N m")
        assert np.abs(miss).max() < 0.012 * np.abs(hold).max()


# ----------------------------------------------------------------------------- a firmware of its own
def _loaded_packages(module: str) -> list[str]:
    code = (f"import json, sys; import {module}; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'hil', 'numba'})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_the_reference_firmware_loads_neither_the_emulator_nor_numba():
    assert _loaded_packages("firmware_bridge.reference.firmware") == []
    assert _loaded_packages("hil.model.assembly") == ["hil", "numba"]      # the probe sees them when they load
