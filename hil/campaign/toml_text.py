"""Parsed TOML (a dict as tomllib returns it) written back as TOML text.

A campaign case runs an arm preset with some parameters changed; the changed preset is written as
a file so that the run log's header holds the exact model the case ran (`hil replay` re-simulates
from it). Tables, arrays of tables, strings, numbers, booleans and (nested) arrays: what presets hold.
"""
from __future__ import annotations

import math
import re

from config_schema import remember_written

_BARE = re.compile(r"^[A-Za-z0-9_\-]+$")
_ESCAPED = re.compile(r'["\\\x00-\x1f\x7f]')       # what a TOML basic string may not hold as it is
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def dumps(data: dict) -> str:
    """TOML text that tomllib parses back to `data` (config_schema.parse_toml takes `data` for it: remember_written)."""
    lines: list[str] = []
    _table(lines, [], data)
    text = "\n".join(lines).lstrip("\n") + "\n"
    remember_written(text, data)
    return text


def _key(k: str) -> str:
    return k if _BARE.match(k) else _string(k)


def _string(text: str) -> str:
    """A TOML basic string (any other character, beyond the BMP too, as it is: the file is UTF-8)."""
    return '"' + _ESCAPED.sub(lambda m: _ESCAPES.get(m[0]) or f"\\u{ord(m[0]):04x}", text) + '"'


def _is_table_array(v: object) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _table(lines: list[str], path: list[str], data: dict) -> None:
    for k, v in data.items():
        if not isinstance(v, dict) and not _is_table_array(v):
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in data.items():
        name = ".".join(_key(p) for p in [*path, k])
        if isinstance(v, dict):
            lines += ["", f"[{name}]"]
            _table(lines, [*path, k], v)
        elif _is_table_array(v):
            for item in v:
                lines += ["", f"[[{name}]]"]
                _table(lines, [*path, k], item)


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} {v!r} as TOML")
