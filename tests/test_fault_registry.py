"""Fault kinds are declared once, in hil.faults.registry: a kind declared here alone (its name,
family, parameters with units and its effect) is checked, read from scenario files and bound by
the engine like the built-in ones; a name taken twice or a kind nobody declared is refused."""
from __future__ import annotations

import numpy as np
import pytest

from config_schema import ConfigError
from firmware_bridge.links import faults as link_faults
from hil.faults import registry, spec
from hil.faults.effects import Effect
from hil.faults.engine import FaultEngine
from hil.faults.kind import POSITIVE, BindContext, FaultKind, Param
from hil.faults.params import check_fault
from hil.faults.scenario import scenario_from_string
from hil.faults.spec import Fault, FaultError

DT = 1e-3
CHANNELS = ["enc_elbow", "imu_ax", "imu_gz"]


class ScaleThenOffset(Effect):
    """The value times ``gain``, plus ``offset``."""

    def __init__(self, i: int, gain: float, offset: float):
        self.i, self.gain, self.offset = i, gain, offset

    def apply(self, m: np.ndarray, truth: np.ndarray) -> None:
        m[self.i] = m[self.i] * self.gain + self.offset


def _bind(c: BindContext) -> ScaleThenOffset:
    return ScaleThenOffset(c.channel(), c.p["gain"], c.p["offset"])


SCALE_THEN_OFFSET = FaultKind("scale_then_offset", "signal", (Param("gain", read=POSITIVE), Param("offset", "@")),
                              _bind)

SCENARIO = """
[[fault]]
name = "mis_scaled"
kind = "scale_then_offset"
target = "imu_ax"
gain = 2.0
offset_m_s2 = 0.5
[fault.trigger]
at_s = 0.005
[fault.duration]
for_s = 0.004
"""


@pytest.fixture
def scale_then_offset():
    registry.register(SCALE_THEN_OFFSET)
    try:
        yield SCALE_THEN_OFFSET
    finally:
        registry.unregister(SCALE_THEN_OFFSET.name)


def _run(engine: FaultEngine, cycles: int) -> np.ndarray:
    """imu_ax as measured in each cycle, the healthy value being the cycle number."""
    measured, truth, out = np.zeros(len(CHANNELS)), np.zeros(len(CHANNELS)), []
    for k in range(cycles):
        engine.begin_cycle(k, k * DT)
        measured[:] = truth[:] = float(k)
        engine.apply_signals(measured, truth)
        out.append(measured[1])
    return np.array(out)


def test_a_kind_declared_in_a_test_runs_from_a_scenario(scale_then_offset):
    engine = FaultEngine(CHANNELS, dt_s=DT)
    scenario_from_string(SCENARIO, "s.toml").inject_into(engine)
    out = _run(engine, 12)
    healthy = np.arange(12.0)
    expected = np.where((healthy >= 5) & (healthy < 9), 2.0 * healthy + 0.5, healthy)
    np.testing.assert_array_equal(out, expected)
    assert [(e.cycle, e.action) for e in engine.events] == [(5, "inject"), (9, "clear")]
    assert engine.events[0].description.startswith("scale_then_offset on imu_ax (gain = 2.0, offset_m_s2 = 0.5)")


def test_a_declared_kind_is_listed_and_its_parameters_are_checked(scale_then_offset):
    assert "scale_then_offset" in spec.KINDS and spec.SIGNAL_KINDS[-1] == "scale_then_offset"
    assert registry.kind("scale_then_offset") is scale_then_offset
    assert check_fault(Fault("f", "scale_then_offset", "imu_gz", {"gain": 3.0, "offset_rad_s": 1.0})) == \
        {"gain": 3.0, "offset": 1.0}
    with pytest.raises(FaultError, match=r"offset_m_s2 = 1\.0: unknown parameter of scale_then_offset faults "
                                         r"\(did you mean 'offset_rad_s'\?\); expected gain, offset_rad_s \[rad/s\]"):
        check_fault(Fault("f", "scale_then_offset", "imu_gz", {"gain": 3.0, "offset_m_s2": 1.0}))
    with pytest.raises(FaultError, match="gain = -1.0: expected a positive number"):
        check_fault(Fault("f", "scale_then_offset", "imu_gz", {"gain": -1.0, "offset_rad_s": 1.0}))
    with pytest.raises(FaultError, match="required: expected a channel name"):
        check_fault(Fault("f", "scale_then_offset", "", {"gain": 1.0, "offset_m_s2": 1.0}))


def test_a_kind_taken_back_is_gone():
    before = spec.KINDS
    registry.register(SCALE_THEN_OFFSET)
    assert spec.KINDS == (*spec.SIGNAL_KINDS, *spec.PLANT_KINDS, *spec.BUS_KINDS, *spec.TIMING_KINDS)
    assert len(spec.KINDS) == len(before) + 1
    registry.unregister(SCALE_THEN_OFFSET.name)
    assert spec.KINDS == before and "scale_then_offset" not in spec.KINDS


def test_a_name_registered_twice_is_refused(scale_then_offset):
    for name in ("scale_then_offset", "offset"):             # a kind of the test's, a built-in one
        with pytest.raises(ValueError) as info:
            registry.register(FaultKind(name, "signal", (), _bind))
        assert str(info.value) == f"fault kind {name!r} is already registered"
    assert registry.kind("offset").family == "signal"          # the built-in one stays
    with pytest.raises(ValueError, match="family 'sensor', expected one of signal, plant, bus, timing"):
        FaultKind("odd", "sensor", (), _bind)


def test_a_kind_nobody_declared_is_refused_naming_it():
    text = SCENARIO
    with pytest.raises(ConfigError) as info:
        scenario_from_string(text, "s.toml")
    message = str(info.value)
    assert message.startswith('s.toml: fault[mis_scaled].kind = "scale_then_offset": expected one of "stuck"')
    assert "\n" not in message
    with pytest.raises(FaultError, match=r"^fault 'f': kind = \"scale_then_offset\": expected one of stuck, "):
        FaultEngine(CHANNELS, dt_s=DT).inject(Fault("f", "scale_then_offset", "imu_ax", {"gain": 1.0}))
    with pytest.raises(KeyError, match="no fault kind 'scale_then_offset'"):
        registry.kind("scale_then_offset")


def test_the_built_in_kinds():
    assert spec.BUS_KINDS == link_faults.BUS_KINDS            # bound to the link's effects, in its order
    assert spec.SIGNAL_KINDS == ("stuck", "offset", "gain", "noise", "drift", "delay", "dropout", "nan",
                                 "saturation", "bitflip", "quantisation", "slip")
    assert spec.PLANT_KINDS == ("payload", "payload_drop", "friction", "kt_loss", "encoder_disconnect",
                                "stiffness_loss", "damping", "brake")
    assert spec.TIMING_KINDS == ("stall", "output_delay")
    assert [k.name for k in registry.kinds("timing")] == list(spec.TIMING_KINDS)
