"""Parameter overrides by model path: an arm preset with some of its values replaced.

A path names a parameter as the preset's [provenance] keys do, bodies, attachments, stations and
sensors by name: ``body.link2.attachment.payload.mass_kg``, ``body.link1.beam.E_Pa``,
``body.link1.joint.viscous_N_m_s_rad``, ``model.sensor_seed``, ``body.link2.initial_eta``. The unit
is part of the key, so a path with a wrong unit (``E_GPa``) is an unknown path, with the closest
known one suggested. The changed preset is validated by the preset reader itself
(hil.model.config): a value out of its range is the same error, naming the file, key, value and unit.
"""
from __future__ import annotations

import copy
from typing import Any

from config_schema import ConfigError, load_toml, suggest
from hil.model.config import load_model_from_string, parameter_paths
from hil.campaign.toml_text import dumps

NAMED_ARRAYS = ("body", "attachment", "station", "sensor")


class Preset:
    """A parsed arm preset and the parameter paths it may set."""

    def __init__(self, path: str):
        self.path = path
        self.data = load_toml(path)
        self.paths = parameter_paths(self.data, path)

    def check_path(self, source: str, key: str, path: str) -> None:
        """ConfigError (naming the campaign file `source` and its `key`) unless `path` names a
        parameter of this preset."""
        if path not in self.paths or _is_table(self.paths, path):
            raise ConfigError(source, key, path, f"expected a parameter path of {self.path}, e.g. "
                              f"'body.<body>.beam.E_Pa'{suggest(path, sorted(self.paths))}")

    def value(self, path: str) -> Any:
        """The value the preset gives `path` (KeyError when the file leaves it to its default)."""
        container, leaf = _locate(self.data, path, create=False)
        return container[leaf]

    def with_overrides(self, overrides: dict[str, Any], source: str, validate: bool = True) -> str:
        """The preset's TOML text with `overrides` (path -> value) applied, validated by the
        preset reader unless `validate` is False (the run that reads it validates it); `source`
        names the result in its errors."""
        data = copy.deepcopy(self.data)
        for path, value in overrides.items():
            container, leaf = _locate(data, path, create=True)
            container[leaf] = value
        text = dumps(data)
        if validate:
            load_model_from_string(text, source)
        return text


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
            node = next(t for t in child if t.get("name") == parts[i + 1])
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
