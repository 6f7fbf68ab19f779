"""The ideal sensors and the static holding torque, against hand and Pinocchio values."""
import numpy as np
import pytest

from hil.model.config import load_model
from hil.dynamics.plant import Plant
from hil.model.sensor_specs import ImuSpec, default_sensors
from hil.devices.sensors import SensorSuite

from chains import pinocchio_model, rigid_equivalent


def test_encoder_counts_are_the_quantised_wrapped_motor_angle():
    model = load_model("configs/ella.toml")
    plant = Plant(model)
    sensors = SensorSuite(plant)
    gear = np.array([b.joint.gear_ratio for b in model.bodies])
    cpr = 4096 * 4
    plant.pos[:3] = [0.3, -1.7, 2.0]
    sensors.reset()
    expected = np.floor(gear * plant.pos[:3] * cpr / (2 * np.pi)).astype(np.int64)
    np.testing.assert_array_equal(sensors.counts, expected)
    plant.pos[0] = 2 ** 31 / (gear[0] * cpr / (2 * np.pi)) + 0.01     # past the signed 32-bit range
    sensors.reset()
    raw = int(np.floor(gear[0] * plant.pos[0] * cpr / (2 * np.pi)))
    assert sensors.counts[0] == raw - 2 ** 32 and sensors.counts[0] < 0


def test_imu_at_rest_reads_gravity_up_in_its_own_frame():
    plant = Plant(load_model("configs/ella.toml"))
    plant.pos[:3] = [0.4, -0.3, 0.6]
    hold = plant.equilibrium_eta()
    sensors = SensorSuite(plant, default_sensors(plant.asm.model))
    sensors.plant.step(hold)
    sensors.sample()
    R = sensors.station_out[0, 3:12].reshape(3, 3)
    np.testing.assert_allclose(sensors.imu[0, 0:3], R.T @ np.array([0.0, 0.0, 9.81]), atol=1e-6)
    np.testing.assert_allclose(sensors.imu[0, 3:6], 0.0, atol=1e-6)


def test_holding_torque_equals_pinocchio_gravity_in_the_rigid_limit():
    import pinocchio as pin

    model = rigid_equivalent(load_model("configs/ella.toml"))
    q = np.array([0.5, -0.4, 0.9])
    for body, qi in zip(model.bodies, q):
        body.joint.q0_rad = qi
    hold = Plant(model).equilibrium_eta()
    pm = pinocchio_model(model)
    ref = pin.computeGeneralizedGravity(pm, pm.createData(), q)
    np.testing.assert_allclose(hold, ref, rtol=0, atol=1e-10 * np.abs(ref).max())


def test_holding_torque_keeps_the_flexible_arm_at_rest():
    plant = Plant(load_model("configs/ella.toml"))
    plant.pos[:3] = [0.2, -0.5, 0.3]
    plant.equilibrium_eta()
    acc = plant.evaluate()
    assert np.abs(acc).max() < 1e-8
    assert np.abs(plant.eta("link1")).max() > 1e-4          # the links do sag under gravity
    with pytest.raises(ValueError):
        SensorSuite(plant, [ImuSpec(station="nowhere")])
