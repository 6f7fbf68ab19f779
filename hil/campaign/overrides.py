"""Parameter overrides by model path: an arm preset with some of its values replaced.

A path names a parameter as the preset's [provenance] keys do, bodies, attachments, stations and
sensors by name: ``body.link2.attachment.payload.mass_kg``, ``body.link1.beam.E_Pa``,
``body.link1.joint.viscous_N_m_s_rad``, ``model.sensor_seed``, ``body.link2.initial_eta``; one
element of a list with ``[k]`` (from 0): ``sensor.imu.gyro.bias_rad_s[2]``,
``body.link2.beam.damping_ratio[1]`` (a per-mode value the preset gives as one number for all
modes becomes a list of that number first, PER_MODE_DEFAULT; an IMU triad's bias or scale error the
preset leaves out, [0, 0, 0]). The unit
is part of the key, so a path with a wrong unit (``E_GPa``) is an unknown path, with the closest
known one suggested. The changed preset is validated by the preset reader itself
(hil.model.config): a value out of its range is the same error, naming the file, key, value and unit.
"""
from __future__ import annotations

import re
from typing import Any

from config_schema import ConfigError, copy_toml, is_number, load_toml, suggest
from hil.model.config import load_model_from_string, parameter_paths
from hil.model.sensor_specs import sensor_labels
from hil.campaign.toml_text import dumps

NAMED_ARRAYS = ("body", "attachment", "station", "sensor")
PER_MODE_DEFAULT = {"damping_ratio": 0.0, "frequency_scale": 1.0}   # a beam's per-mode keys and their defaults
TRIADS, TRIAD_VECTORS = ("accel", "gyro"), ("bias_m_s2", "bias_rad_s", "scale_error")   # 3-vectors, default 0
ELEMENT = re.compile(r"(.+)\[(\d{1,4})\]")


class Preset:
    """A parsed arm preset and the parameter paths it may set."""

    def __init__(self, path: str):
        self.path = path
        self.data = load_toml(path)
        self.paths = parameter_paths(self.data, path)
        self._modes: dict[str, int] | None = None      # body -> its beam's mode count (per-mode elements)

    def check_path(self, source: str, key: str, path: str) -> None:
        """ConfigError (naming the campaign file `source` and its `key`) unless `path` names a
        parameter of this preset, or a number in a list of one ([k], module docstring)."""
        base, index = element(path)
        if base not in self.paths or _is_table(self.paths, base):
            raise ConfigError(source, key, path, f"expected a parameter path of {self.path}, e.g. "
                              f"'body.<body>.beam.E_Pa'{suggest(base, sorted(self.paths))}")
        if index is None:
            return
        values = self._list(self.data, base)
        if values is None or index >= len(values) or not is_number(values[index]):
            size = "no list of numbers" if values is None else f"{len(values)} values"
            raise ConfigError(source, key, path, f"expected an element of a list of numbers: {self.path} gives "
                              f"{base} {size}" + (f" (elements [0] .. [{len(values) - 1}])" if values else ""))

    def value(self, path: str) -> Any:
        """The value the preset gives `path` (KeyError when the file leaves it to its default)."""
        base, index = element(path)
        if index is not None:
            values = self._list(self.data, base)
            if values is None or index >= len(values):
                raise KeyError(path)
            return values[index]
        container, leaf = _locate(self.data, path, create=False)
        return container[leaf]

    def with_overrides(self, overrides: dict[str, Any], source: str, validate: bool = True) -> str:
        """The preset's TOML text with `overrides` (path -> value) applied, validated by the
        preset reader unless `validate` is False (the run that reads it validates it); `source`
        names the result in its errors."""
        data = copy_toml(self.data)
        for path, value in overrides.items():
            base, index = element(path)
            if index is None:
                container, leaf = _locate(data, path, create=True)
                container[leaf] = value
                continue
            values = self._list(data, base)
            if values is None or index >= len(values):
                raise ConfigError(source, path, value, f"expected an element of {base}, a list of numbers")
            container, leaf = _locate(data, base, create=True)
            container[leaf] = [*values[:index], value, *values[index + 1:]]
        text = dumps(data)
        if validate:
            load_model_from_string(text, source)
        return text


    def _list(self, data: dict, base: str) -> list | None:
        """The list `base` holds in `data` (a per-mode number as one per mode), None if no list."""
        try:
            container, leaf = _locate(data, base, create=False)
        except KeyError:
            container, leaf = {}, ""
        value = container.get(leaf)
        if isinstance(value, list):
            return value
        parts = base.split(".")
        if parts[-1] in PER_MODE_DEFAULT and parts[-2] == "beam" and (value is None or is_number(value)):
            n = self._mode_counts()[parts[1]]
            return [PER_MODE_DEFAULT[parts[-1]] if value is None else value] * n
        if value is None and parts[-2] in TRIADS and parts[-1] in TRIAD_VECTORS:
            return [0.0, 0.0, 0.0]
        return None

    def _mode_counts(self) -> dict[str, int]:
        if self._modes is None:
            model = load_model_from_string(dumps(self.data), self.path)
            self._modes = {b.name: b.beam.n_modes for b in model.bodies if b.beam is not None}
        return self._modes


def element(path: str) -> tuple[str, int | None]:
    """A path's parameter and the element it names (``bias_rad_s[2]``: 2; None: the whole value)."""
    match = ELEMENT.fullmatch(path)
    return (match[1], int(match[2])) if match else (path, None)


def _is_table(paths: set[str], path: str) -> bool:
    return any(p.startswith(path + ".") for p in paths)


def _locate(data: dict, path: str, create: bool) -> tuple[dict, str]:
    """The table that holds the parameter `path` and its key in it."""
    parts = path.split(".")
    node: Any = data
    i = 0
    while i < len(parts) - 1:
        part = parts[i]
        child = node.get(part)
        if part in NAMED_ARRAYS and isinstance(child, list):
            names = sensor_labels(child) if part == "sensor" else [t.get("name") for t in child]
            node = child[names.index(parts[i + 1])]
            i += 2
            continue
        if child is None:
            if not create:
                raise KeyError(path)
            child = node[part] = {}
        node = child
        i += 1
    if not create and parts[-1] not in node:
        raise KeyError(path)
    return node, parts[-1]
