"""What a run's outcome says about nonsense: a diverged plant fails the run unless its scenario expects
it, a checked run that judged nothing fails, an empty scenario is refused, and a firmware command's
braces are placeholders from a fixed list, never evaluated."""
from __future__ import annotations

import pytest

from config_schema import ConfigError, UserError
from hil.cli.run import _exit_status
from hil.faults.scenario import scenario_from_string
from hil.runtime.firmware_process import endpoint_of, expand
from hil.runtime.outcome import failures

DIVERGED = {"event": "diverged", "cycle": 12, "t": 0.012, "detail": "non-finite state"}


def summary(**extra) -> dict:
    return {"failed": None, "cycles": 100, "link": {"tx_dropped": 0}, "diverged": None, **extra}


def test_a_diverged_plant_fails_the_run_unless_the_scenario_expects_it():
    assert failures(summary()) == []
    reasons = failures(summary(diverged=DIVERGED))
    assert len(reasons) == 1 and reasons[0].startswith("the plant diverged at t = 0.012 s (cycle 12): non-finite")
    assert failures(summary(diverged=DIVERGED, divergence_expected=True)) == []


def test_the_scenario_says_whether_it_expects_divergence_and_an_empty_one_is_refused():
    text = '[scenario]\nexpect_divergence = true\n[[fault]]\nname = "f"\nkind = "nan"\ntarget = "imu_ax"\n'
    assert scenario_from_string(text, "s.toml").expect_divergence
    assert not scenario_from_string(text.replace("true", "false"), "s.toml").expect_divergence
    with pytest.raises(ConfigError, match="s.toml: .*at least one \\[\\[fault\\]\\] or a \\[verdict\\] table"):
        scenario_from_string('[scenario]\ndescription = "nothing"\n', "s.toml")


def test_check_fails_a_run_that_judged_nothing(capsys):
    assert _exit_status({"run_failures": [], "verdicts": []}, check=True) == 1
    assert "nothing was checked" in capsys.readouterr().err
    assert _exit_status({"run_failures": [], "verdicts": []}, check=False) == 0
    passed = [{"name": "x", "passed": True}]
    assert _exit_status({"run_failures": [], "verdicts": passed}, check=True) == 0


@pytest.mark.parametrize("word", ["{port.__class__.__mro__}", "{port:>99999999999}", "{0}", "{port!r}", "{", "}"])
def test_a_firmware_command_fills_only_the_listed_placeholders(word):
    end = endpoint_of("serial:/dev/pts/3", "m.toml")
    with pytest.raises(UserError, match="is not a placeholder"):
        expand(["fw", word], end)
    assert expand(["fw", "{port}", "{{literal}}"], end) == ["fw", "/dev/pts/3", "{literal}"]


def test_a_float_torque_command_without_a_range_is_refused_at_load():
    from bus_maps import float_map
    from firmware_bridge.wire.messages import BusMap
    from firmware_bridge.wire.signals import CommandInput
    joints = ["base_yaw", "shoulder_pitch", "elbow"]
    with pytest.raises(ConfigError, match=r"unranged.toml: message\[cmd_torque\]\.signal\[tau_base_yaw\]\.max = "
                                          r"<missing>: expected a range \(min and max in N m\)"):
        CommandInput(BusMap.from_string(float_map(limits=False), "unranged.toml"), joints)
    assert CommandInput(BusMap.from_string(float_map(), "ranged.toml"), joints).tau.shape == (3,)
