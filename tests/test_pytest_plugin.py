"""The pytest plugin's settings (command line, marker) and a user firmware given as a command line."""
import sys

import numpy as np

from firmware_bridge.reference.controller import ELLA_SETPOINTS
from hil.runtime.launch import LINK_PLACEHOLDER

pytest_plugins = ["pytester"]


def test_settings_come_from_defaults_command_line_and_marker_in_rising_precedence(pytester):
    pytester.makepyfile("""
        import pytest
        from hil.testing.pytest_plugin import _settings

        @pytest.mark.hil(bus="marker.toml", duration_s=1.0)
        def test_inner(request):
            assert _settings(request) == {"arm": "a.toml", "bus": "marker.toml", "duration_s": 1.0,
                                          "firmware": ["./fw", "--port", "{link}"]}
    """)
    result = pytester.runpytest_inprocess("--hil-arm", "a.toml", "--hil-bus", "cli.toml",
                                          "--hil-firmware", "./fw --port {link}")
    result.assert_outcomes(passed=1)


def test_a_firmware_command_line_gets_the_link_spec_of_its_end(hil_start):
    """What `--hil-firmware "CMD {link}"` runs: here the reference firmware, started as a user's
    program would be (no ready line awaited, its output not parsed), over a slcan adapter on a pty pair."""
    firmware = [sys.executable, "-m", "hil", "firmware", "--params", "configs/firmware/ella_nominal.toml",
                "--bus", "configs/bus/compact_classic.toml", "--link", LINK_PLACEHOLDER, "--move-time", "1.0",
                "--duration", "2.0", "--json"]
    run = hil_start(firmware=firmware, bus="configs/bus/compact_classic.toml", link="slcan-pty", duration_s=2.0,
                    mode="lockstep")
    result = run.finish()
    goal = np.array([ELLA_SETPOINTS[j] for j in ("base_yaw", "shoulder_pitch", "elbow")])
    assert np.abs(np.array(result.summary["q"]) - goal).max() < 2e-3
    assert result.firmware is None and '"cycles": 2000' in result.firmware_output
    assert result.summary["cycles"] == 2000 and result.summary["halted"] is None


def test_a_misspelt_marker_setting_fails_the_test_in_one_line_with_a_suggestion(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.hil(durration_s=1.0)
        def test_inner(hil_run):
            pass
    """)
    result = pytester.runpytest_inprocess()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.hil: unknown setting 'durration_s' (did you mean 'duration_s'?)*"])
    assert "TypeError" not in result.stdout.str()
