"""Offline accuracy of `hil simulate` (hil.dynamics.offline, hil.kernels.offline).

* input hold: a torque table interpolated within the step removes the zero-order hold's error (a fast
  3-DOF chain driven by a table, 2 s at 1 ms, against a 0.1 ms reference);
* error control: RK4's embedded estimate is fourth order, raises the substeps where the rigid motion
  is fast and brings the error down with the tolerance;
* the CLI's options and their refusals.
"""
from __future__ import annotations

import numpy as np
import pytest

from hil.cli.main import main
from hil.dynamics.offline import OfflineStepper
from hil.dynamics.plant import Plant
from hil.dynamics.simulate import TorqueTable, simulate
from hil.kernels import offline
from hil.kernels.layout import METHOD_RK4

from chains import random_rigid_chain

DURATION = 2.0


def fast_chain(spin: bool = False):
    """A random rigid 3-DOF chain without friction; spinning at 20 / -35 / 50 rad/s, or at rest."""
    model = random_rigid_chain(np.random.default_rng(4), 3)
    for b, rate in zip(model.bodies, (20.0, -35.0, 50.0)):
        b.joint.viscous_N_m_s_rad = b.joint.coulomb_N_m = 0.0
        b.joint.qd0_rad_s = rate if spin else 0.0
    return model


def torque_table() -> TorqueTable:
    t = np.arange(0.0, DURATION + 5e-4, 1e-3)
    tau = np.column_stack([5 * np.sin(2 * np.pi * 3 * t), 3 * np.sin(2 * np.pi * 5 * t + 1),
                           2 * np.cos(2 * np.pi * 7 * t)])
    return TorqueTable(t, tau)


def final_angles(model, method="rk4", substeps=None, dt=1e-3, hold="zoh", tol=None, source=None):
    model.integrator.dt_s = dt
    plant = Plant(model, method=method, substeps=substeps)
    stepper = OfflineStepper(plant, hold, tol, source) if hold != "zoh" or tol else None
    summary = simulate(plant, DURATION, source, stepper=stepper)
    return plant.pos[:3].copy(), summary, stepper


# measured final-angle errors after 2 s against linear hold at 0.1 ms (RK4 x4): RK4 zoh 3.2e-3 rad, linear
# 1.3e-11 rad; fitted midpoint zoh 3.2e-3, linear 1.0e-5 (what remains is its own second-order error)
@pytest.mark.parametrize("method", ["rk4", "fitted_midpoint", "imex_midpoint"])
def test_linear_input_hold_removes_the_zero_order_hold_error(method):
    reference, _, _ = final_angles(fast_chain(), substeps=4, dt=1e-4, hold="linear", source=torque_table())
    held, _, _ = final_angles(fast_chain(), method, source=torque_table())
    interpolated, summary, _ = final_angles(fast_chain(), method, hold="linear", source=torque_table())
    e_held, e_lin = np.abs(held - reference).max(), np.abs(interpolated - reference).max()
    print(f"\n{method}: zero-order hold {e_held:.2e} rad, linear {e_lin:.2e} rad ({summary.plan})")
    assert e_held > 1e-3                          # the torque lags half a step on average
    assert e_lin < (1e-6 if method == "rk4" else 1e-2) * e_held
    assert "input hold linear" in summary.plan


def test_embedded_error_estimate_is_fourth_order():
    """The estimate h/6 (k4 - k5) of one step from the same state shrinks 2^4 = 16x per halved substep."""
    plant = Plant(fast_chain(spin=True), method="rk4")
    scratch = offline.make_scratch(plant.layout.nq, plant.tau.size)
    estimates = []
    for n in (2, 4, 8):
        pos, vel = plant.pos.copy(), plant.vel.copy()
        offline.advance(plant.km.mi, plant.km.mf, plant.work.w, 0.0, pos, vel,
                        offline.TorqueInput(plant.tau, np.zeros(0), np.zeros((0, plant.tau.size))), plant.dt, n,
                        METHOD_RK4, 1.0, scratch)
        estimates.append(scratch[offline.OUT, 0])
    ratios = np.array(estimates[:-1]) / np.array(estimates[1:])
    print(f"\nscaled estimates {estimates}, ratios {ratios}")
    assert np.all(ratios > 12) and np.all(ratios < 20)


# measured against RK4 x64, final angles after 2 s spinning at up to 50 rad/s: fixed RK4 x1 3.5e-5 rad; tol 1e-6:
# 6.6e-5 (1-2 substeps, mean 1.16), 1e-8: 2.1e-6 (1-7, mean 2.85), 1e-10: 3.0e-8 (3-21, mean 8.03)
def test_error_control_refines_where_the_rigid_motion_is_fast():
    reference, _, _ = final_angles(fast_chain(spin=True), substeps=64)
    errors, means = [], []
    for tol in (1e-6, 1e-8, 1e-10):
        q, summary, stepper = final_angles(fast_chain(spin=True), tol=tol)
        st = stepper.stats
        errors.append(np.abs(q - reference).max())
        means.append(st.substeps / st.steps)
        print(f"\ntol {tol:g}: error {errors[-1]:.2e} rad; {summary.plan}")
        assert st.steps == 2000 and st.worst_error <= 1.0 and st.most > st.fewest
    assert errors[0] > 30 * errors[1] > 900 * errors[2]
    assert means[0] < means[1] < means[2]
    at_rest, _, stepper = final_angles(fast_chain(), tol=1e-8)             # nothing fast: the plan's substeps
    assert stepper.stats.most == 1


def test_stepper_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="rk4"):
        OfflineStepper(Plant(fast_chain(), method="fitted_midpoint"), tol=1e-8)
    with pytest.raises(ValueError, match="input hold"):
        OfflineStepper(Plant(fast_chain(), method="rk4"), "cubic")
    with pytest.raises(ValueError, match="torque table"):
        OfflineStepper(Plant(fast_chain(), method="rk4"), "linear")
    with pytest.raises(ValueError, match="euler"):
        with pytest.warns(UserWarning):
            OfflineStepper(Plant(fast_chain(), method="euler"), "linear", table=torque_table())


def test_simulate_cli_options(tmp_path, capsys):
    cfg = "configs/ella.toml"
    table = tmp_path / "tau.csv"
    table.write_text("t,tau_shoulder_pitch\n0,-98\n0.05,-90\n")
    assert main(["simulate", cfg, "--duration", "0.05", "--tol", "1e-8", "--input-hold", "linear",
                 "--input", str(table)]) == 0
    assert "error-controlled RK4 (tol 1e-08)" in capsys.readouterr().out
    assert main(["simulate", cfg, "--duration", "0.05", "--input-hold", "linear"]) == 2
    assert "torque table" in capsys.readouterr().err
    assert main(["simulate", cfg, "--duration", "0.05", "--tol", "1e-8", "--method", "imex_midpoint"]) == 2
    assert "RK4's embedded error estimate" in capsys.readouterr().err
    assert main(["simulate", cfg, "--duration", "0.05", "--input-hold", "linear",
                 "--controller", "tools.seed000_experiment:controller"]) == 2
    assert "controller" in capsys.readouterr().err


def sampled_table(spacing: float) -> TorqueTable:
    """Point samples every `spacing` of smooth torques with a 230 Hz part (finer than a 1 ms step shows)."""
    t = np.arange(0.0, DURATION + spacing / 2, spacing)
    tau = np.column_stack([5 * np.sin(2 * np.pi * 3 * t) + 2 * np.sin(2 * np.pi * 230 * t),
                           3 * np.sin(2 * np.pi * 5 * t + 1), 2 * np.cos(2 * np.pi * 7 * t)])
    return TorqueTable(t, tau)


# measured at 1 ms, tol 1e-10, against RK4 at 12.5 us with the same table: 1 ms table 9.6e-9 rad; 0.1 ms table
# 1.3e-12 rad (RK4 steps each 0.1 ms stretch on its own: 10 substeps per step), while the two tables' solutions
# differ by 7.9e-4 rad (the interpolation between the step's ends alone does not see the finer table's shape;
# the stage times without splitting the step at the table's times: 7.4e-6 rad, the kinks inside substeps)
@pytest.mark.parametrize("spacing", [1e-3, 1e-4])
def test_error_control_keeps_a_table_within_1e6_rad_at_the_default_step_whatever_its_resolution(spacing):
    """The plant sees the table at every stage's time (hil.kernels.offline.torque_at): with error control at
    the default 1 ms step a rigid chain ends within 1e-6 rad of a converged solution of the same table,
    also for a table ten times finer than the step, whose shape the plant then feels."""
    table = sampled_table(spacing)
    converged, _, _ = final_angles(fast_chain(), substeps=80, hold="linear", source=table)   # knots at substeps
    controlled, summary, stepper = final_angles(fast_chain(), hold="linear", tol=1e-10, source=table)
    coarse, _, _ = final_angles(fast_chain(), substeps=80, hold="linear", source=sampled_table(1e-3))
    error = np.abs(controlled - converged).max()
    print(f"\ntable every {spacing * 1e3:g} ms: error {error:.2e} rad ({summary.plan}); the tables' solutions differ "
          f"by {np.abs(converged - coarse).max():.2e} rad")
    assert error < 1e-6
    if spacing < 1e-3:
        assert np.abs(converged - coarse).max() > 100 * error
        assert stepper.stats.fewest >= 10                # a substep per stretch between the table's times
