"""MCAP export of a run log for Foxglove: every signal at full rate, the arm's 3D scene, the events.

Topics and encodings: ``hil.viz.foxglove_scene``. The signals are written for every row (JSON,
non-finite values as null; the MCAP chunks zstd-compressed); the scene at ``scene_rate_hz`` (default 50 Hz: a 3D view
needs no more, and a scene message is ~100 times a signal row). Written with the Foxglove SDK
(``foxglove-sdk``); read back with the ``mcap`` reader (protobuf scene messages through
``mcap-protobuf-support``).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from hil.viz.foxglove_scene import (EVENT_SCHEMA, EVENT_TOPIC, SCENE_TOPIC, group_schema, imu_transforms,
                                    named_schema, ns, scene_update, signal_groups)
from hil.viz.scene import ArmScene, model_of_log

__all__ = ["export_mcap", "scene_rows"]

_CHUNK = 10_000     # rows turned into Python floats at a time


def scene_rows(t: np.ndarray, rate_hz: float) -> np.ndarray:
    """Indices of the rows at which a scene is drawn: the first row at or after each 1/rate tick."""
    if len(t) == 0:
        return np.zeros(0, np.int64)
    ticks = np.arange(t[0], t[-1] + 1e-12, 1.0 / rate_hz)
    return np.unique(np.searchsorted(t, ticks - 1e-9))


def export_mcap(header: dict[str, Any], rows: np.ndarray, out: str | Path, scene_rate_hz: float = 50.0) -> list[Path]:
    """Write the run log as MCAP (module docstring); returns the path written."""
    import foxglove
    from foxglove.channels import FrameTransformChannel, SceneUpdateChannel

    cols = header["columns"]
    t = rows[:, cols.index("t")]
    scene = ArmScene(model_of_log(header))
    pos, _ = scene.coordinates(cols, rows)
    ctx = foxglove.Context()
    writer = foxglove.open_mcap(str(out), allow_overwrite=True, context=ctx)
    try:
        groups = {name: (foxglove.Channel(f"/signals/{name}", schema=named_schema(f"hil.signals.{name}",
                                                                                 group_schema(cols, idx)),
                                          message_encoding="json", context=ctx), idx)
                  for name, idx in signal_groups(cols).items()}
        scene_channel = SceneUpdateChannel(SCENE_TOPIC, context=ctx)
        imu_channels = {name: FrameTransformChannel(f"/arm/imu_{name}", context=ctx) for name in scene.imu_names}
        events = foxglove.Channel(EVENT_TOPIC, schema=named_schema("hil.event", EVENT_SCHEMA), message_encoding="json",
                                  context=ctx)
        formats = [(channel, idx, "{" + ",".join(f'"{cols[j]}":%r' for j in idx) + "}")
                   for channel, idx in groups.values()]
        finite = np.isfinite(rows).all(axis=1)
        for start in range(0, len(rows), _CHUNK):
            block = rows[start:start + _CHUNK].tolist()
            for i, values in enumerate(block, start):
                stamp = ns(t[i])
                if not finite[i]:               # JSON has no NaN or infinity: null
                    values = [v if np.isfinite(v) else None for v in values]
                for channel, idx, fmt in formats:
                    text = fmt % tuple(values[j] for j in idx) if finite[i] else \
                        json.dumps({cols[j]: values[j] for j in idx})
                    channel.log(text.encode(), log_time=stamp)
        for i in scene_rows(t, scene_rate_hz):
            frame = scene.frame(float(t[i]), pos[i])
            scene_channel.log(scene_update(frame), log_time=ns(t[i]))
            for name, transform in imu_transforms(frame).items():
                imu_channels[name].log(transform, log_time=ns(t[i]))
        for e in header.get("events", []):
            events.log(json.dumps(e, default=str).encode(), log_time=ns(float(e["t"])))
    finally:
        writer.close()
    return [Path(out)]
