"""The real-time loop's zero-order hold and the error its summary states (hil.runtime.outcome.input_hold):
the held torque departs from the linear interpolation of the applied torques by at most the step to the
next one, |dtau|; over one period T a joint of inertia J then gains about |dtau| T / (2 J) in rate and
|dtau| T^2 / (6 J) in angle. On a free rigid joint these are met exactly (the difference between the held
and the interpolated torque is the whole of it), so they are neither loose nor wrong there."""
from __future__ import annotations

import numpy as np
import pytest

from hil.dynamics.offline import OfflineStepper
from hil.dynamics.plant import Plant
from hil.dynamics.simulate import TorqueTable
from hil.logs.runlog import MsgpackRunWriter
from hil.model import spec as md
from hil.runtime.outcome import input_hold

T = 1e-3


def free_joint(inertia: float) -> md.Model:
    """One rigid body on a vertical axis, no gravity, no friction: J = inertia about the axis."""
    body = md.Body("b", md.BASE, md.Joint("j", axis=np.array([0.0, 0.0, 1.0])),
                   rigid=md.RigidInertia(1.0, np.zeros(3), np.diag([1.0, 1.0, inertia])))
    return md.Model("free_joint", [body], gravity_m_s2=np.zeros(3))


def test_the_bound_is_met_exactly_by_a_free_joint_over_one_period(tmp_path):
    J, tau0, tau1 = 0.25, 1.0, 4.0
    table = TorqueTable(np.array([0.0, T]), np.array([[tau0], [tau1]]))
    held = Plant(free_joint(J), "rk4", 4)
    held.step(np.array([tau0]))
    interpolated = Plant(free_joint(J), "rk4", 4)
    interpolated.tau[0] = tau0
    OfflineStepper(interpolated, "linear", table=table).step()
    bound = input_hold_of(tmp_path / "run.msgpack", [tau0, tau1], J)
    assert interpolated.vel[0] - held.vel[0] == pytest.approx(bound["rate_bound_rad_s"], rel=1e-12)
    assert interpolated.pos[0] - held.pos[0] == pytest.approx(bound["angle_bound_rad"], rel=1e-9)


def input_hold_of(path, torques, J: float) -> dict:
    with MsgpackRunWriter(path, {"columns": ["t", "tau_j"]}) as w:
        for i, tau in enumerate(torques):
            w.write(np.array([i * T, tau]))
    return input_hold(path, ["j"], np.array([J]), T)["joints"]["j"]


def test_the_largest_and_the_rms_step_over_a_log_written_in_blocks(tmp_path):
    """Steps across the reader's blocks count as any other (a log of 10000 rows, a spike in the middle)."""
    path = tmp_path / "run.msgpack"
    tau = np.sin(np.arange(10000) * 1e-3)
    tau[5000] += 2.0
    with MsgpackRunWriter(path, {"columns": ["t", "tau_a", "tau_b"]}) as w:
        for i, x in enumerate(tau):
            w.write(np.array([i * T, x, 7.0]))
    hold = input_hold(path, ["a", "b"], np.array([0.5, 2.0]), T)
    steps = np.abs(np.diff(tau))
    a, b = hold["joints"]["a"], hold["joints"]["b"]
    assert a["largest_step_N_m"] == pytest.approx(steps.max(), rel=1e-12)
    assert a["rms_step_N_m"] == pytest.approx(np.sqrt(np.mean(steps ** 2)), rel=1e-12)
    assert a["rate_bound_rad_s"] == pytest.approx(steps.max() * T / (2 * 0.5), rel=1e-12)
    assert b["largest_step_N_m"] == 0.0 and b["angle_bound_rad"] == 0.0          # a constant torque: no error


def test_the_run_summary_states_it():
    from hil.cli.summary import _integrator

    hold = {"period_s": T, "joints": {"a": {"largest_step_N_m": 0.1, "rms_step_N_m": 0.01, "rate_bound_rad_s": 1e-4,
                                             "angle_bound_rad": 3e-8},
                                       "b": {"largest_step_N_m": 0.35, "rms_step_N_m": 0.01, "rate_bound_rad_s": 1.3e-3,
                                             "angle_bound_rad": 4.4e-7}}}
    lines = _integrator({"integrator": {"plan": "fitted_midpoint x3", "note": ""}, "input_hold": hold})
    assert lines[0] == "integrator: fitted_midpoint x3"
    assert "0.35 N m (b)" in lines[1] and "4.4e-07 rad per period" in lines[1] and "not the integrator's" in lines[1]


def test_a_prescribed_joint_has_no_hold_error(tmp_path):
    """The spin-up beam's only joint is prescribed: its logged torque is the joint's reaction, which moves
    nothing, so the summary judges no joint."""
    from hil.dynamics.plant import Plant
    from hil.model.config import load_model
    from hil.runtime.outcome import judge

    plant = Plant(load_model("configs/spinup_beam.toml"))
    path = tmp_path / "run.msgpack"
    with MsgpackRunWriter(path, {"columns": ["t", "tau_hub", "tip_x", "tip_y", "tip_z"]}) as w:
        for i in range(5):
            w.write(np.array([i * T, 3.0 * i, 0.0, 0.0, 0.0]))
    summary = {}
    judge(summary, path, plant, T, None)
    assert summary["input_hold"]["joints"] == {}
