"""The arm's shape from logged coordinates (hil.viz.scene): each link's centre line is its
deformed neutral axis, checked against the plant's own output stations and the mode shapes'
unit tip value."""
from __future__ import annotations

import numpy as np
import pytest

from hil.dynamics.plant import Plant
from hil.model.config import load_model
from hil.viz.scene import ArmScene


@pytest.fixture(scope="module")
def plant():
    p = Plant(load_model("configs/ella.toml"))
    p.equilibrium_eta()
    return p


def _state(plant, q, eta_scale):
    pos = plant.asm.pos0.copy()
    lay = plant.layout
    pos[:lay.n_joints] = q
    rng = np.random.default_rng(3)
    pos[lay.n_joints:lay.n_joints + lay.n_eta] = eta_scale * rng.standard_normal(lay.n_eta)
    return pos


def test_centre_line_ends_at_the_plants_tip_station(plant):
    scene = ArmScene(plant.asm)
    pos = _state(plant, [0.4, -0.3, 0.5], 0.02)
    plant.pos[:] = pos
    plant.evaluate()
    frame = scene.frame(0.0, pos)
    assert np.allclose(frame.centre_lines["link2"][-1], plant.station("tip")["position"], atol=1e-12)
    assert np.allclose(frame.attachments["payload"][0], plant.station("tip")["position"], atol=1e-12)
    p, R = frame.imu_frames["imu"]
    assert np.allclose(p, plant.station("tip")["position"]) and np.allclose(R @ R.T, np.eye(3), atol=1e-12)
    assert np.allclose(scene.station_positions("tip", np.zeros(1), pos[None])[0], plant.station("tip")["position"],
                       atol=1e-12)


def test_links_bend_with_their_modes_and_are_straight_without(plant):
    scene = ArmScene(plant.asm)
    lay = plant.layout
    rigid = scene.rigid(_state(plant, [0.2, -0.4, 0.3], 0.0)[None])[0]
    line = scene.frame(0.0, rigid).centre_lines["link1"]
    chord = line[-1] - line[0]
    off = line - line[0] - np.outer((line - line[0]) @ chord / (chord @ chord), chord)
    assert np.max(np.linalg.norm(off, axis=1)) < 1e-12               # undeformed: a straight link

    bent = rigid.copy()
    k = lay.body_names.index("link1")
    mode = lay.mode_labels[k].index("bending_y_1")
    eta = 0.01
    bent[lay.eta_index(k, mode)] = eta
    deformed = scene.frame(0.0, bent).centre_lines["link1"]
    R = scene.work.Rw[k]
    # mode shapes have unit tip value: the tip moves eta along the body's y axis (to first order;
    # foreshortening shortens it by O(eta^2))
    tip_shift = deformed[-1] - line[-1]
    assert np.allclose(tip_shift, eta * R[:, 1], atol=5 * eta ** 2)
    mid = len(line) // 2
    assert 0.2 * eta < np.linalg.norm(deformed[mid] - line[mid]) < eta     # a curve, not a rotated segment


def test_coordinates_from_log_columns(plant):
    scene = ArmScene(plant.asm)
    lay = plant.layout
    cols = ["t"] + [f"q_{j}" for j in lay.joint_names] + \
        [f"eta_{b}_{m}" for b, labels in zip(lay.body_names, lay.mode_labels) for m in labels]
    rows = np.arange(2 * len(cols), dtype=float).reshape(2, len(cols))
    pos, has_eta = scene.coordinates(cols, rows)
    assert has_eta and np.array_equal(pos[:, :lay.n_joints + lay.n_eta], rows[:, 1:])
    pos, has_eta = scene.coordinates(cols[:1 + lay.n_joints], rows[:, :1 + lay.n_joints])
    assert not has_eta and not pos[:, lay.n_joints:].any()
