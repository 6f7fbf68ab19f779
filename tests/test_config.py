"""Tests of hil.model.config: the presets load, ELLA numbers match seed 000, broken files fail clearly."""
from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from hil.model.assembly import assemble
from config_schema import ConfigError
from hil.model.config import load_model, load_model_from_string
from hil.model.spec import DRIVE_PRESCRIBED, Model

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
PRESETS = ["ella", "seed001_arm", "canadarm", "spinup_beam"]


def _rpy(r, p, y):
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


# ---------------------------------------------------------------------------- presets
@pytest.mark.parametrize("name", PRESETS)
def test_preset_loads(name):
    path = CONFIGS / f"{name}.toml"
    m = load_model(path)
    assert isinstance(m, Model)
    assert m.source == str(path)
    assert m.bodies and m.stations
    for b in m.bodies:
        assert np.isclose(np.linalg.norm(b.joint.axis), 1.0)
        if b.beam is not None:
            assert b.beam.damping_ratio.shape == (b.beam.n_modes,)


def _bodies(m):
    return {b.name: b for b in m.bodies}


def test_ella_published_numbers():
    m = load_model(CONFIGS / "ella.toml")
    b = _bodies(m)
    assert [x.name for x in m.bodies] == ["yaw_carrier", "link1", "link2"]
    assert [x.parent for x in m.bodies] == ["base", "yaw_carrier", "link1"]
    l1, l2 = b["link1"].beam, b["link2"].beam
    assert l1.length_m == 0.95 and l2.length_m == 0.93
    for beam in (l1, l2):
        assert beam.area_m2 == 2.09e-4
        assert beam.E_Pa == 2.1e11
        assert beam.rho_kg_m3 == 7800.0
        assert beam.E_Pa * beam.Iz_m4 == pytest.approx(3.67e3, rel=1e-9)
        assert beam.E_Pa * beam.Iy_m4 == pytest.approx(2.12e3, rel=1e-9)
        assert beam.E_Pa * beam.area_m2 == pytest.approx(4.38e7, rel=0.01)
        assert (beam.n_bending_y, beam.n_bending_z, beam.n_torsion, beam.n_axial) == (2, 2, 1, 0)
        # the assumed tube: Bredt torsion constant below the polar moment
        assert 0 < beam.torsion_constant_m4 < beam.polar_moment_m4
    assert l1.family == "clamped_free" and l2.family == "clamped_mass"
    # axes: yaw about world z, pitch about y, elbow about link1's z at its tip
    assert np.allclose(b["yaw_carrier"].joint.axis, [0, 0, 1])
    assert np.allclose(b["link1"].joint.axis, [0, 1, 0])
    assert np.allclose(b["link2"].joint.axis, [0, 0, 1])
    assert b["link2"].joint.station_m == 0.95
    # masses: motors 3.3 kg (shoulder motor on the carrier, elbow motor at link1's tip), payload 2.1 kg
    att = {a.name: (bn, a) for bn, body in b.items() for a in body.attachments}
    assert att["shoulder_motor"][0] == "yaw_carrier" and att["shoulder_motor"][1].mass_kg == 3.3
    assert att["elbow_motor"][0] == "link1" and att["elbow_motor"][1].mass_kg == 3.3
    assert att["elbow_motor"][1].station_m == 0.95
    assert att["payload"][0] == "link2" and att["payload"][1].mass_kg == 2.1
    assert att["payload"][1].station_m == 0.93
    st = {s.name: s for s in m.stations}
    assert st["tip"].body == "link2" and st["tip"].station_m == 0.93
    assert m.integrator.method == "auto" and m.integrator.dt_s == 0.001
    assert np.allclose(m.gravity_m_s2, [0, 0, -9.81])


def _numeric(v) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)):
        return True
    return isinstance(v, list) and len(v) > 0 and all(_numeric(x) for x in v)


def _numeric_leaves(table: dict, prefix: str):
    for k, v in table.items():
        if isinstance(v, dict):
            yield from _numeric_leaves(v, f"{prefix}.{k}")
        elif _numeric(v):
            yield f"{prefix}.{k}"


def test_ella_provenance_complete():
    path = CONFIGS / "ella.toml"
    raw = tomllib.loads(path.read_text())
    prov = load_model(path).provenance
    needed = []
    for body in raw["body"]:
        base = f"body.{body['name']}"
        for sect in ("joint", "beam", "rigid"):
            if sect in body:
                needed += list(_numeric_leaves(body[sect], f"{base}.{sect}"))
        for a in body.get("attachment", []):
            needed += list(_numeric_leaves(a, f"{base}.attachment.{a['name']}"))
        if "initial_eta" in body:
            needed.append(f"{base}.initial_eta")
    for s in raw.get("station", []):
        needed += list(_numeric_leaves(s, f"station.{s['name']}"))
    needed += list(_numeric_leaves(raw["model"], "model"))
    # sanity: the walk really covers the interesting keys
    assert "body.link1.beam.E_Pa" in needed
    assert "body.link2.attachment.payload.mass_kg" in needed
    assert "body.yaw_carrier.joint.rotor_inertia_kg_m2" in needed
    missing = [k for k in needed if k not in prov]
    assert not missing, f"ella.toml: no [provenance] entry for {missing}"
    bad = {k: v for k, v in prov.items() if not v.startswith(("published", "derived", "assumed"))}
    assert not bad, f"provenance must start with published/derived/assumed: {bad}"
    # published numbers are marked as such
    for k in ("body.link1.beam.length_m", "body.link2.beam.length_m", "body.link1.beam.E_Pa",
              "body.link1.beam.area_m2", "body.link1.beam.rho_kg_m3",
              "body.link2.attachment.payload.mass_kg", "body.link1.attachment.elbow_motor.mass_kg"):
        assert prov[k].startswith("published"), k
    assert prov["body.link1.beam.Iz_m4"].startswith("derived")
    assert prov["body.link1.beam.G_Pa"].startswith("assumed")


def test_seed001_frames_and_values():
    m = load_model(CONFIGS / "seed001_arm.toml")
    b = _bodies(m)
    assert [x.name for x in m.bodies] == ["link1", "link2", "link3", "link4"]
    assert b["link1"].beam is None and b["link4"].beam is None
    assert b["link1"].rigid.mass_kg == 15.5 and b["link4"].rigid.mass_kg == 3.56
    assert b["link1"].rigid.inertia_kg_m2[2, 2] == pytest.approx(18586e-6)
    assert np.allclose(np.diag(b["link4"].rigid.inertia_kg_m2), [1533e-6, 17386e-6, 17035e-6])
    assert np.allclose(b["link4"].rigid.com_m, [0.124, 0, 0])
    for name, L in (("link2", 2.0), ("link3", 1.8)):
        beam = b[name].beam
        assert beam.length_m == L
        assert beam.E_Pa == 210e9 and beam.G_Pa == 80.8e9 and beam.rho_kg_m3 == 7850
        assert beam.area_m2 == pytest.approx(707e-6)
        assert beam.Iy_m4 == beam.Iz_m4 == pytest.approx(181132e-12)
        assert beam.torsion_constant_m4 == pytest.approx(362265e-12)
        assert (beam.n_bending_y, beam.n_bending_z, beam.n_torsion, beam.n_axial) == (2, 2, 2, 0)
        assert beam.family == "clamped_mass"
        assert np.all(beam.damping_ratio == 0)
    q0 = [b[n].joint.q0_rad for n in ("link1", "link2", "link3", "link4")]
    assert np.allclose(q0, [0, math.pi / 6, 2 * math.pi / 3, math.pi / 6])
    # joint 2 frame = Rx(-pi/2) Rz(-pi/2) as in the seed
    R2 = _rpy(*b["link2"].joint.rpy_rad)
    Rx = _rpy(-math.pi / 2, 0, 0)
    Rz = _rpy(0, 0, -math.pi / 2)
    assert np.allclose(R2, Rx @ Rz, atol=1e-12)
    # joints 2..4 are parallel to a horizontal axis (world y at q1 = 0): the arm moves in
    # the vertical x-z plane. Joint frames of j3/j4 have rpy = 0 about local z, so the
    # axis in link1 coordinates is R2 @ z for all three.
    ax = R2 @ b["link2"].joint.axis
    assert np.allclose(ax, [0, 1, 0])
    for n in ("link3", "link4"):
        assert np.allclose(b[n].joint.axis, [0, 0, 1]) and np.allclose(b[n].joint.rpy_rad, 0)
    assert b["link3"].joint.station_m == 2.0 and b["link4"].joint.station_m == 1.8


def test_canadarm_and_spinup():
    m = load_model(CONFIGS / "canadarm.toml")
    assert np.allclose(m.gravity_m_s2, 0)
    for body, L, mass, k, T in zip(m.bodies, (6, 7, 2), (140, 85, 95), (0.075, 0.05, 0.1), (10, 5, 5)):
        beam = body.beam
        assert beam.length_m == L
        assert beam.rho_kg_m3 * beam.area_m2 * beam.length_m == pytest.approx(mass, rel=1e-12)
        assert beam.E_Pa * beam.Iz_m4 == pytest.approx(1e5) and beam.Iy_m4 == beam.Iz_m4
        assert (beam.n_bending_y, beam.n_modes) == (2, 2) and beam.family == "clamped_free"
        assert body.joint.drive == DRIVE_PRESCRIBED
        assert body.joint.profile.kind == "cycloidal"
        assert (body.joint.profile.k_rad_s, body.joint.profile.T_s) == (k, T)
        assert np.allclose(body.joint.axis, [0, 0, 1])

    s = load_model(CONFIGS / "spinup_beam.toml")
    (body,) = s.bodies
    beam = body.beam
    assert (beam.length_m, beam.area_m2, beam.Iz_m4, beam.rho_kg_m3, beam.E_Pa) == (
        8.0, 7.2968e-5, 8.2189e-9, 2.7667e3, 6.8952e10)
    assert beam.Iy_m4 == beam.Iz_m4 and beam.n_bending_y == 2 and beam.n_modes == 2
    assert s.foreshortening is True and np.allclose(s.gravity_m_s2, 0)
    p = body.joint.profile
    assert body.joint.drive == DRIVE_PRESCRIBED and (p.kind, p.omega_rad_s, p.T_s) == ("spinup", 3.0, 15.0)
    # clamped-free first frequency ~ 0.464 Hz (seed 003)
    EI, mu, L = beam.E_Pa * beam.Iz_m4, beam.rho_kg_m3 * beam.area_m2, beam.length_m
    f1 = 1.8751040687 ** 2 * math.sqrt(EI / (mu * L ** 4)) / (2 * math.pi)
    assert f1 == pytest.approx(0.464, abs=0.002)


# ---------------------------------------------------------------------------- broken files
BASE = """\
[model]
name = "t"

[[body]]
name = "hub"
parent = "base"
  [body.joint]
  name = "j0"
  axis = [0.0, 0.0, 1.0]
  [body.rigid]
  mass_kg = 1.0
  inertia_kg_m2 = [0.01, 0.01, 0.01]

[[body]]
name = "link1"
parent = "hub"
  [body.joint]
  name = "j1"
  axis = [0.0, 1.0, 0.0]
  drive = "torque"
  [body.beam]
  length_m = 1.0
  E_Pa = 2.1e11
  G_Pa = 8.1e10
  rho_kg_m3 = 7800.0
  area_m2 = 2e-4
  Iy_m4 = 1e-8
  Iz_m4 = 2e-8
  torsion_constant_m4 = 2e-8
  damping_ratio = 0.01
    [body.beam.modes]
    bending_y = 2
    bending_z = 2

[[station]]
name = "tip"
body = "link1"
station_m = 1.0
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "broken.toml"
    p.write_text(text)
    return p


def _replace(old: str, new: str) -> str:
    assert BASE.count(old) == 1, old
    return BASE.replace(old, new)


def test_base_config_is_valid(tmp_path):
    m = load_model(_write(tmp_path, BASE))
    assert m.bodies[1].beam.damping_ratio.tolist() == [0.01] * 4


PROFILE_TABLE = """
  drive = "prescribed"
    [body.joint.profile]
    kind = "table"
    t_s = [0.0, 1.0, 1.0, 2.0]
    q_rad = [0.0, 0.1, 0.2, 0.3]"""

BROKEN = {
    # id: (text, key, value, fragments of the expectation, e.g. the unit)
    "negative_E": (_replace("E_Pa = 2.1e11", "E_Pa = -2e11"),
                   "body[link1].beam.E_Pa", "-2e11", ["positive", "Pa"]),
    "unknown_key": (_replace("rho_kg_m3 = 7800.0", "rho_kg_m3 = 7800.0\n  E_pa = 1.0"),
                    "body[link1].beam.E_pa", "1.0", ["unknown key", "E_Pa", "length_m"]),
    "zero_axis": (_replace("axis = [0.0, 1.0, 0.0]", "axis = [0.0, 0.0, 0.0]"),
                  "body[link1].joint.axis", "[0.0, 0.0, 0.0]", ["non-zero", "3-vector"]),
    "damping_length": (_replace("damping_ratio = 0.01", "damping_ratio = [0.01, 0.02, 0.03]"),
                       "body[link1].beam.damping_ratio", "[0.01, 0.02, 0.03]",
                       ["list of 4", "one per mode"]),
    "unknown_parent": (_replace('parent = "hub"', 'parent = "hubb"'),
                       "body[link1].parent", '"hubb"', ["earlier body", "'hub'"]),
    "station_outside": (_replace("station_m = 1.0", "station_m = 1.2"),
                        "station[tip].station_m", "1.2", ["in m", "[0, 1.0]"]),
    "non_increasing_table": (_replace('  drive = "torque"', PROFILE_TABLE),
                             "body[link1].joint.profile.t_s", "[0.0, 1.0, 1.0, 2.0]",
                             ["strictly increasing", "in s"]),
    "rigid_and_beam": (_replace("  [body.beam]", "  [body.rigid]\n  mass_kg = 1.0\n  [body.beam]"),
                       "body[link1]", "{name, parent, joint, rigid, beam}",
                       ["exactly one", "rigid", "beam"]),
    "child_before_parent": (BASE.replace('parent = "base"', 'parent = "link1"', 1),
                            "body[hub].parent", '"link1"', ["topological order"]),
    "negative_friction": (_replace('  drive = "torque"', "  viscous_N_m_s_rad = -0.5"),
                          "body[link1].joint.viscous_N_m_s_rad", "-0.5", ["non-negative", "N m s/rad"]),
    "bad_inertia": (_replace("inertia_kg_m2 = [0.01, 0.01, 0.01]",
                             "inertia_kg_m2 = [[0.01, 0.002, 0.0], [0.0, 0.01, 0.0], [0.0, 0.0, 0.01]]"),
                    "body[hub].rigid.inertia_kg_m2", "[[0.01, 0.002, 0.0]", ["symmetric", "kg m^2"]),
    "non_psd_inertia": (_replace("inertia_kg_m2 = [0.01, 0.01, 0.01]",
                                 "inertia_kg_m2 = [0.01, 0.01, -0.01]"),
                        "body[hub].rigid.inertia_kg_m2", "[0.01, 0.01, -0.01]", ["semidefinite", "kg m^2"]),
    "duplicate_joint": (_replace('name = "j1"', 'name = "j0"'),
                        "body[link1].joint.name", '"j0"', ["unique joint name"]),
    "bad_drive": (_replace('drive = "torque"', 'drive = "velocity"'),
                  "body[link1].joint.drive", '"velocity"', ['"torque"', '"prescribed"']),
    "prescribed_elastic": (_replace('  drive = "torque"',
                                    '  drive = "prescribed"\n    [body.joint.elasticity]\n'
                                    '    stiffness_N_m_rad = 1e4'),
                           "body[link1].joint.elasticity", "{stiffness_N_m_rad}", ["prescribed"]),
    "rigid_station_nonzero": (_replace('  name = "j1"', '  name = "j1"\n  station_m = 0.1'),
                              "body[link1].joint.station_m", "0.1", ["0 m", "offset_m"]),
    "gravity_not_3": (_replace('name = "t"', 'name = "t"\ngravity_m_s2 = [0.0, -9.81]'),
                      "model.gravity_m_s2", "[0.0, -9.81]", ["3-vector", "m/s^2"]),
    "missing_required": (_replace("  G_Pa = 8.1e10\n", ""),
                         "body[link1].beam.G_Pa", "<missing>", ["required", "Pa"]),
    "bad_provenance_key": (BASE + '\n[provenance]\n"body.link1.beam.E_pa" = "published: x"\n',
                           'provenance."body.link1.beam.E_pa"', '"published: x"',
                           ["body.link1.beam.E_Pa"]),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_config_raises(tmp_path, case):
    text, key, value, fragments = BROKEN[case]
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_model(path)
    msg = str(info.value)
    assert isinstance(info.value, ValueError)
    assert msg.startswith(f"{path}: {key} = "), msg
    assert value in msg, msg
    for frag in fragments:
        assert frag in msg, (frag, msg)
    assert info.value.file == str(path) and info.value.key == key


JOINT_LINES = {
    # id: (lines added to link1's [body.joint], the same values set on the Joint in code)
    "negative_viscous": ("  viscous_N_m_s_rad = -0.5", dict(viscous_N_m_s_rad=-0.5)),
    "zero_coulomb_smoothing": ("  coulomb_smoothing_rad_s = 0.0", dict(coulomb_smoothing_rad_s=0.0)),
    "stribeck_at_zero_velocity": ("  stribeck_N_m = 0.2\n  stribeck_velocity_rad_s = 0.0",
                                  dict(stribeck_N_m=0.2, stribeck_velocity_rad_s=0.0)),
    "backlash_without_elasticity": ("  backlash_rad = 0.01", dict(backlash_rad=0.01)),
    "negative_backlash": ("  backlash_rad = -0.01", dict(backlash_rad=-0.01)),
}


@pytest.mark.parametrize("case", sorted(JOINT_LINES))
def test_broken_joint_friction_gives_the_same_message_from_toml_and_from_code(case):
    lines, change = JOINT_LINES[case]
    with pytest.raises(ConfigError) as from_toml:
        load_model_from_string(_replace('  drive = "torque"', lines), "broken.toml")
    model = load_model_from_string(BASE, "broken.toml")
    for key, value in change.items():
        setattr(model.bodies[1].joint, key, value)
    with pytest.raises(ValueError) as from_code:
        assemble(model)
    assert str(from_code.value) == str(from_toml.value)
    assert from_toml.value.key == f"body[link1].joint.{list(change)[-1]}"


def test_axis_is_normalised_and_scalar_damping_broadcasts(tmp_path):
    text = _replace("axis = [0.0, 1.0, 0.0]", "axis = [0.0, 2.0, 0.0]")
    m = load_model(_write(tmp_path, text))
    assert np.allclose(m.bodies[1].joint.axis, [0, 1, 0])


def test_inertia_forms(tmp_path):
    text = _replace("inertia_kg_m2 = [0.01, 0.01, 0.01]",
                    "inertia_kg_m2 = [0.02, 0.03, 0.04, 0.001, 0.002, 0.003]")
    I = load_model(_write(tmp_path, text)).bodies[0].rigid.inertia_kg_m2
    assert np.allclose(I, [[0.02, 0.001, 0.002], [0.001, 0.03, 0.003], [0.002, 0.003, 0.04]])


def test_table_profile_and_initial_eta(tmp_path):
    text = _replace('  drive = "torque"', PROFILE_TABLE.replace("1.0, 1.0", "1.0, 1.5"))
    text = text.replace('parent = "hub"', 'parent = "hub"\ninitial_eta = [0.001, 0.0, 0.0, 0.0]')
    m = load_model(_write(tmp_path, text))
    j = m.bodies[1].joint
    assert j.profile.kind == "table" and np.allclose(j.profile.t_s, [0, 1, 1.5, 2])
    assert np.allclose(m.initial_eta["link1"], [0.001, 0, 0, 0])
    bad = text.replace("initial_eta = [0.001, 0.0, 0.0, 0.0]", "initial_eta = [0.001]")
    with pytest.raises(ConfigError, match=r"body\[link1\]\.initial_eta = \[0.001\]: expected a list of 4"):
        load_model(_write(tmp_path, bad))


def test_toml_syntax_error_names_file(tmp_path):
    path = _write(tmp_path, BASE + "\nthis is not toml\n")
    with pytest.raises(ConfigError, match="broken.toml: not valid TOML"):
        load_model(path)
