"""Run log exports round-trip: CSV, MDF4 (asammdf), Parquet (pyarrow) and MCAP (mcap reader)
give back every sample, unit and event; the MCAP scene draws each link's deformed centre line.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from hil.cli.main import main
from hil.logs.runlog import read_run
from hil.logs.units import describe
from runlogs import EVENTS, write_synthetic_log


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    path = tmp_path_factory.mktemp("exports") / "run.msgpack"
    write_synthetic_log(path, duration_s=1.2, optional=True)
    header, rows = read_run(path)
    return path, header, rows


def test_every_column_has_a_unit_or_is_dimensionless_by_name(log):
    _, header, _ = log
    unknown = [c for c in header["columns"] if not describe(c)[1]]
    assert unknown == []
    assert describe("q_elbow")[0] == "rad" and describe("imu_gz_true") == ("rad/s", describe("imu_gz")[1] + " (ground truth)")
    assert describe("w_elbow_fx")[0] == "N" and describe("cmd_age_us")[0] == "us" and describe("nonsense") == ("", "")


def test_csv_round_trip(log, tmp_path):
    path, header, rows = log
    out = tmp_path / "run.csv"
    assert main(["log", "export", str(path), "--format", "csv", "--out", str(out)]) == 0
    h, back = read_run(out)
    assert h["columns"] == header["columns"] and np.array_equal(back, rows)
    assert len((tmp_path / "run.events.csv").read_text().splitlines()) == 1 + len(EVENTS)


def test_mdf4_round_trip_samples_units_events(log, tmp_path):
    asammdf = pytest.importorskip("asammdf")
    from hil.logs.export import read_mdf4_events
    path, header, rows = log
    out = tmp_path / "run.mf4"
    assert main(["log", "export", str(path), "--format", "mdf4", "--out", str(out)]) == 0
    mdf = asammdf.MDF(out)
    t = rows[:, header["columns"].index("t")]
    for i, name in enumerate(header["columns"]):
        if name == "t":
            continue
        sig = mdf.get(name)
        assert np.array_equal(sig.samples, rows[:, i]), name
        assert np.array_equal(sig.timestamps, t), name
        assert (sig.unit, sig.comment) == describe(name), name
    assert read_mdf4_events(mdf) == EVENTS
    assert [round(e.sync_base * e.sync_factor, 9) for e in mdf.events] == [e["t"] for e in EVENTS]
    assert mdf.groups[0].channels[mdf.masters_db[0]].name == "time"     # the master channel the manual names
    mdf.close()


def test_an_mdf4_export_asked_for_as_mdf4_prints_the_file_it_wrote(log, tmp_path, capsys):
    pytest.importorskip("asammdf")
    path, _, _ = log
    assert main(["log", "export", str(path), "--format", "mdf4", "--out", str(tmp_path / "run.mdf4")]) == 0
    printed = capsys.readouterr().out.split(" -> ")[1].split(" (")[0]
    assert printed == str(tmp_path / "run.mf4") and (tmp_path / "run.mf4").is_file()
    assert not (tmp_path / "run.mdf4").exists()


def test_parquet_round_trip_with_metadata(log, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    path, header, rows = log
    out = tmp_path / "run.parquet"
    assert main(["log", "export", str(path), "--format", "parquet", "--out", str(out)]) == 0
    table = pq.read_table(out)
    assert table.column_names == header["columns"]
    assert np.array_equal(np.column_stack([table[c].to_numpy() for c in table.column_names]), rows)
    field = table.schema.field("q_elbow")
    assert field.metadata[b"unit"] == b"rad"
    assert json.loads(table.schema.metadata[b"hil.events"]) == EVENTS
    assert json.loads(table.schema.metadata[b"hil.header"])["config"] == "configs/ella.toml"


def _mcap_messages(path):
    from mcap.reader import make_reader
    from mcap_protobuf.decoder import DecoderFactory
    out: dict[str, list] = {}
    with open(path, "rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for schema, channel, message in reader.iter_messages():
            out.setdefault(channel.topic, []).append((schema, channel, message))
        decoded = {}
        f.seek(0)
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        for _, channel, message, proto in reader.iter_decoded_messages(topics=["/arm/scene"]):
            decoded.setdefault(channel.topic, []).append((message.log_time, proto))
    return out, decoded


def test_mcap_round_trip_signals_scene_events(log, tmp_path):
    pytest.importorskip("mcap_protobuf")
    pytest.importorskip("foxglove")
    from hil.viz.scene import ArmScene, model_of_log
    path, header, rows = log
    cols = header["columns"]
    out = tmp_path / "run.mcap"
    assert main(["log", "export", str(path), "--format", "mcap", "--out", str(out)]) == 0
    raw, decoded = _mcap_messages(out)

    # every signal of every row, as logged (JSON floats round-trip exactly)
    values = {c: [] for c in cols if c != "t"}
    times = []
    for topic, messages in raw.items():
        if topic.startswith("/signals/"):
            assert messages[0][1].message_encoding == "json"
            assert messages[0][0].name == "hil.signals." + topic.removeprefix("/signals/")     # a readable name
            schema = json.loads(messages[0][0].data)
            for _, _, m in messages:
                row = json.loads(m.data)
                assert set(row) == set(schema["properties"])
                for k, v in row.items():
                    values[k].append(v)
                if topic == "/signals/joints":
                    times.append(m.log_time)
    for i, c in enumerate(cols):
        if c != "t":
            assert np.array_equal(values[c], rows[:, i]), c
    assert times == [round(t * 1e9) for t in rows[:, cols.index("t")]]
    assert "[rad]" in json.loads(raw["/signals/joints"][0][0].data)["properties"]["q_elbow"]["description"]

    # the scene at 50 Hz: one line strip per body, the link shapes from the modal coordinates
    scenes = decoded["/arm/scene"]
    assert len(scenes) == pytest.approx(50 * 1.2, abs=1)
    scene = ArmScene(model_of_log(header))
    pos, has_eta = scene.coordinates(cols, rows)
    assert has_eta
    i = int(np.argmin(np.abs(rows[:, cols.index("t")] - scenes[10][0] / 1e9)))
    expected = scene.frame(float(rows[i, 1]), pos[i])
    entity = scenes[10][1].entities[0]
    assert len(entity.lines) == len(expected.centre_lines)
    for line, points in zip(entity.lines, expected.centre_lines.values()):
        got = np.array([[p.x, p.y, p.z] for p in line.points])
        assert np.allclose(got, points, atol=1e-12)
    assert len(entity.spheres) == len(expected.attachments) and len(entity.arrows) == 3
    assert [json.loads(m.data) for _, _, m in raw["/events"]] == EVENTS
    assert raw["/events"][0][0].name == "hil.event" and raw["/events"][0][0].encoding == "jsonschema"
    assert len(raw["/arm/imu_imu"]) == len(scenes)


def test_mcap_signals_are_strict_json_with_nan_as_null(log, tmp_path):
    pytest.importorskip("foxglove")
    from hil.viz.mcap import export_mcap
    _, header, rows = log
    cols = header["columns"]
    bad = rows[:50].copy()
    bad[3, cols.index("imu_ax")] = np.nan                    # a NaN fault on a channel
    bad[4, cols.index("imu_ay")] = np.inf
    export_mcap({**header, "events": []}, bad, tmp_path / "nan.mcap", scene_rate_hz=50)
    raw, _ = _mcap_messages(tmp_path / "nan.mcap")

    def strict(text):
        def refuse(constant):
            raise ValueError(f"not JSON: {constant}")
        return json.loads(text, parse_constant=refuse)
    sensors = [strict(m.data) for _, _, m in raw["/signals/sensors"]]
    assert sensors[3]["imu_ax"] is None and sensors[4]["imu_ay"] is None
    assert sensors[5]["imu_ax"] == bad[5, cols.index("imu_ax")]
