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
    with pytest.raises(ConfigError, match=r"^s.toml: no \[\[fault\]\] and no \[verdict\] table"):
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


def test_nothing_to_judge_is_an_error_not_a_verdict(tmp_path, capsys):
    """A replay of an empty log, or of one whose time is NaN, and a plot of an empty window are refused; a FIFO
    or a device given as a configuration file is refused instead of blocking."""
    import os

    import numpy as np

    from hil.cli.main import main
    from hil.logs.runlog import open_writer
    from hil.logs.targets import load_targets
    empty = tmp_path / "empty.msgpack"
    with open_writer(str(empty), {"columns": ["cycle", "t", "q_elbow"], "config": "configs/ella.toml"}):
        pass
    assert main(["replay", str(empty)]) == 2
    assert "the log has no rows: nothing to replay" in capsys.readouterr().err
    nan = tmp_path / "nan.msgpack"
    with open_writer(str(nan), {"columns": ["cycle", "t", "q_elbow"], "config": "configs/ella.toml"}) as w:
        for k in range(3):
            w.write(np.array([k, np.nan, 0.0]))
    assert main(["replay", str(nan)]) == 2
    assert "not finite or not increasing" in capsys.readouterr().err
    assert main(["plot", str(nan), "q_*", "--t0", "0.9", "--t1", "0.1"]) == 2
    assert "an empty window" in capsys.readouterr().err
    fifo = tmp_path / "targets.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        load_targets(fifo)
    with pytest.raises(ConfigError, match="/dev/null: not a regular file"):
        load_targets("/dev/null")


def test_temporary_folders_of_dead_runs_are_removed_and_live_ones_kept(tmp_path):
    import subprocess
    import sys

    from hil.runtime.sysguard import remove_stale_folders
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"hil-run-{dead.stdout.strip()}-abc"
    live = tmp_path / f"hil-run-{__import__('os').getpid()}-def"
    for folder in (stale, live):
        folder.mkdir()
        (folder / "run.msgpack").write_bytes(b"x")
    assert remove_stale_folders("run", tmp_path) == 1
    assert not stale.exists() and live.exists()


@pytest.mark.parametrize("make, message", [
    (lambda d: (d / "link.msgpack").symlink_to(d / "target"), "a symbolic link"),
    (lambda d: (d / "link.msgpack").mkdir(), "not a regular file"),
])
def test_a_log_path_that_would_write_elsewhere_is_refused_before_the_run(tmp_path, make, message, capsys):
    from hil.cli.main import main
    make(tmp_path)
    argv = ["run", "ella", "--bus", "serial_frame", "--mode", "lockstep", "--no-realtime", "--duration", "0.1"]
    assert main([*argv, "--log", str(tmp_path / "link.msgpack")]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "target").exists()
    assert main([*argv, "--log", str(tmp_path / "no" / "such" / "run.msgpack")]) == 2
    assert "does not exist; create it first" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_a_fifo_run_log_and_a_corruption_longer_than_the_frame_are_refused(tmp_path):
    import os

    from firmware_bridge.links.faults import FaultyLink
    from firmware_bridge.wire.messages import BusMap
    from hil.logs.run_format import RunLogError
    from hil.logs.runlog import read_run
    from links import memory_pair
    fifo = tmp_path / "run.msgpack"
    os.mkfifo(fifo)
    with pytest.raises(RunLogError, match="not a regular file"):
        read_run(fifo)
    import numpy as np
    link = FaultyLink(memory_pair()[0], BusMap.load("configs/bus/serial_frame.toml"))
    rng = np.random.default_rng(0)
    with pytest.raises(UserError, match="bytes = 8: more than the 7 payload bytes of the frames it damages"):
        link.bind("c", "corrupt", "to_plant", {"bytes": 8, "probability_per_frame": 1.0}, rng, 1e-3)
    link.bind("c", "corrupt", "to_plant", {"bytes": 7, "probability_per_frame": 1.0}, rng, 1e-3)
