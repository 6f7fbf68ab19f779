"""Interaction wrenches as outputs (Plant.wrenches, `hil simulate --wrenches`, `hil run --log-wrenches`)
and the in-process controller of `hil simulate --controller`.

Frame and sign (docs/model.md "Conventions"): w_<joint> is the wrench [moment; force] the parent exerts on
the joint's child body, in the child body frame, moment about its origin (the joint point).
"""
from __future__ import annotations

import numpy as np
import pytest

from firmware_bridge.wire.messages import BusMap
from firmware_bridge.wire.signals import CommandInput, SensorOutput
from hil.cli.main import main
from hil.dynamics.plant import Plant, wrench_columns
from hil.dynamics.simulate import ControllerSource, InputError
from hil.logs.runlog import read_run
from hil.model.config import load_model
from hil.runtime.loop import Emulator, RuntimeOptions

from links import memory_pair
from test_cli import RIGID_IZZ, RIGID_TOML

ELLA = "configs/ella.toml"
FORMULATIONS = ("aba", "screw-dae")


def total_mass(plant: Plant) -> float:
    return float(plant.km.nd_m.sum())


@pytest.mark.parametrize("formulation", FORMULATIONS)
def test_static_wrenches_carry_the_weight_in_the_child_frame(formulation):
    """ELLA at rest in its static equilibrium: the yaw joint (child frame z = world z) carries the whole
    arm, force +m g upwards on the child and no moment about its axis beyond the holding torque; the
    elbow carries link 2 and the payload, rotated into link 2's frame."""
    plant = Plant(load_model(ELLA), formulation=formulation)
    plant.pos[:3] = [0.4, -0.3, 0.5]
    hold = plant.equilibrium_eta()
    w = plant.wrenches
    g = 9.81
    np.testing.assert_allclose(w[0, 3:], [0.0, 0.0, total_mass(plant) * g], rtol=1e-9, atol=1e-9)
    assert w[0, 2] == pytest.approx(hold[0], abs=1e-9)
    np.testing.assert_allclose(plant.joint_torques, hold, rtol=1e-9, atol=1e-9)
    k2 = plant.layout.body_names.index("link2")
    m2 = plant.km.nd_m[plant.km.node_off[k2]:plant.km.node_off[k2 + 1]].sum()
    R2 = plant.work.Rw[2]                          # link 2's axes in the world (evaluate() fills them)
    np.testing.assert_allclose(w[2, 3:], m2 * g * R2.T @ [0.0, 0.0, 1.0], rtol=1e-9, atol=1e-9)


def test_simulate_wrench_columns_and_controller(tmp_path, capsys, monkeypatch):
    """A controller module loaded by --controller drives the rigid disk with 2 N m: the wrench's
    moment about the spin axis is that torque, the force zero (no gravity), in both formulations."""
    cfg = tmp_path / "rigid.toml"
    cfg.write_text(RIGID_TOML)
    (tmp_path / "disk_controller.py").write_text(
        "import numpy as np\n"
        "def factory(plant):\n"
        "    return lambda t, measured: np.array([2.0])\n")
    monkeypatch.chdir(tmp_path)
    logs = {}
    for f in FORMULATIONS:
        out = tmp_path / f"{f}.msgpack"
        assert main(["simulate", str(cfg), "--duration", "0.2", "--controller", "disk_controller:factory",
                     "--wrenches", "--formulation", f, "--out", str(out)]) == 0
        header, rows = read_run(out)
        assert header["columns"][-6:] == wrench_columns(["spin"]) and header["formulation"] == f
        col = {c: rows[:, i] for i, c in enumerate(header["columns"])}
        np.testing.assert_allclose(col["w_spin_mz"], 2.0, rtol=1e-12)
        for a in ("mx", "my", "fx", "fy", "fz"):
            np.testing.assert_allclose(col[f"w_spin_{a}"], 0.0, atol=1e-12)
        np.testing.assert_allclose(col["qd_spin"], 2.0 / RIGID_IZZ * col["t"], rtol=1e-9, atol=1e-12)
        logs[f] = rows
    np.testing.assert_allclose(logs["screw-dae"], logs["aba"], rtol=1e-12, atol=1e-12)
    capsys.readouterr()


def test_controller_sees_joint_angles_and_rates_and_bad_output_is_an_error():
    plant = Plant(load_model(ELLA))
    plant.vel[:3] = [0.1, 0.2, 0.3]
    seen = []
    source = ControllerSource(lambda t, m: seen.append(m.copy()) or np.ones(3), plant)
    tau = np.zeros(3)
    source(0.0, tau)
    np.testing.assert_array_equal(seen[0], np.r_[plant.pos[:3], plant.vel[:3]])
    np.testing.assert_array_equal(tau, 1.0)
    for bad in (np.ones(2), np.array([1.0, np.nan, 0.0])):
        with pytest.raises(InputError, match="expected 3 finite drive torques"):
            ControllerSource(lambda t, m, b=bad: b, plant)(0.0, tau)


@pytest.mark.parametrize("spec, message", [("nocolon", "MODULE:FACTORY"), ("no_such_module_x:f", "cannot import"),
                                           ("math:no_such", "no callable"), ("math:floor", "")])
def test_bad_controller_spec_is_a_one_line_error(spec, message, capsys):
    code = main(["simulate", ELLA, "--duration", "0.01", "--controller", spec])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and spec in err and message in err


def test_run_log_carries_the_wrenches(tmp_path):
    """`hil run --log-wrenches`: the columns follow the schema and the last row holds the plant's wrenches."""
    plant = Plant(load_model(ELLA), formulation="screw-dae")
    plant.equilibrium_eta()
    bus = BusMap.load("configs/bus/serial_frame.toml")
    names = plant.layout.joint_names
    link, _ = memory_pair()
    log = tmp_path / "run.msgpack"
    emu = Emulator(plant, link, CommandInput(bus, names), SensorOutput(bus, names),
                   RuntimeOptions(mode="afap", realtime=False, duration_s=0.02, log_path=str(log), log_wrenches=True,
                                  start="immediately"))
    emu.run()
    header, rows = read_run(log)
    cols = header["columns"]
    assert cols[-18:] == wrench_columns(names)
    np.testing.assert_array_equal(rows[-1, -18:], plant.wrenches[:3].reshape(-1))
    assert rows[-1, cols.index("w_base_yaw_fz")] == pytest.approx(total_mass(plant) * 9.81, rel=1e-3)
    plain = Emulator(Plant(load_model(ELLA)), memory_pair()[0], CommandInput(bus, names), SensorOutput(bus, names),
                     RuntimeOptions(mode="afap", realtime=False))
    assert not any(c.startswith("w_") for c in plain.columns)


def test_hil_run_with_the_dae_formulation_matches_the_aba_in_lockstep(tmp_path):
    """The emulator end to end (reference firmware over a pty, lockstep) on each kernel: the same
    manoeuvre, joint angles equal to 1e-6 rad, and the DAE run's log carries the wrenches."""
    from test_closed_loop import CYCLES, _run as run_closed_loop

    logs = {}
    for f in FORMULATIONS:
        log = tmp_path / f"{f}.msgpack"
        s = run_closed_loop("serial_frame", "pty", "--formulation", f, "--log", str(log),
                            *(["--log-wrenches"] if f == "screw-dae" else []))
        assert s["cycles"] == CYCLES and s["run_failures"] == []
        errors = [v["value"] for v in s["verdicts"] if v["name"].startswith("setpoint_")]
        assert len(errors) == 3 and max(errors) < 1e-3, s["verdicts"]
        logs[f] = read_run(log)
    (ha, ra), (hd, rd) = logs["aba"], logs["screw-dae"]
    assert hd["formulation"] == "screw-dae" and hd["columns"][-18:] == wrench_columns(["base_yaw", "shoulder_pitch",
                                                                                       "elbow"])
    for j in ("base_yaw", "shoulder_pitch", "elbow"):
        np.testing.assert_allclose(rd[:, hd["columns"].index(f"q_{j}")], ra[:, ha["columns"].index(f"q_{j}")],
                                   atol=1e-6)
    assert np.all(np.isfinite(rd[:, -18:]))
