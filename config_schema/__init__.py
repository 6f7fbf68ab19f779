"""Strict TOML schema reading, shared by every file the emulator and the wire package read.

One reader for arm presets, bus maps, fault scenarios and firmware parameter files, so that
every broken file gets the same kind of error: a :class:`ConfigError` (a ``ValueError``)
whose message names the file, the dotted key, the offending value as written and what was
expected with its unit, for example::

    configs/ella.toml: body[link1].beam.E_Pa = -2e11: expected a positive number in Pa
    configs/bus/x.toml: bus.cycel_s = 0.001: unknown key (did you mean 'cycle_s'?); allowed keys here: ...

A file is read with :func:`load_toml` (or :func:`parse_toml` for text), then walked with
:class:`Table` views: each checks its keys against an allowed list (suggesting the closest
name for a typo) and offers typed reads (``number``, ``integer``, ``boolean``, ``string``,
``name``, ``choice``, ``vector``, ``table``, ``array_of_tables``). A key left out is
``MISSING`` (a sentinel distinct from every TOML value). Importing this package loads
neither numpy nor numba (numpy is imported by the reads that return arrays).
"""
from __future__ import annotations

import difflib
import json
import math
import numbers
import os
import re
import stat
import threading
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Iterable, NamedTuple, Sequence, TypeVar

__all__ = ["MISSING", "NAME_RE", "ConfigError", "Document", "Problem", "Table", "TextMemo", "bare_key", "copy_toml",
           "fmt", "fmt_float", "in_unit", "is_integer", "is_number", "load_toml", "parse_toml", "raise_problem",
           "read_toml_text", "remember_written", "suggest"]


class _Missing:
    """The value of a key that is not in the file."""

    def __repr__(self) -> str:
        return "<missing>"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


class Problem(NamedTuple):
    """A value judged by a checker that is independent of the file (e.g. the drive checks of a
    model built in code): ``key`` relative to the table, ``value`` as judged, ``expected`` with
    its unit."""
    key: str
    value: Any
    expected: str


# ----------------------------------------------------------------------------- value checks
def is_number(v: Any) -> bool:
    """An int or float as TOML gives them, or a numpy scalar given in code (booleans are not numbers)."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def is_integer(v: Any) -> bool:
    """A TOML integer, or a numpy integer given in code (not a boolean, not a float)."""
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def in_unit(unit: str) -> str:
    """' in <unit>' for a unit name, ' (<note>)' for a parenthesised description of a dimensionless
    quantity (``"(fraction of the stability bound)"``), '' for none."""
    if not unit:
        return ""
    return f" {unit}" if unit.startswith("(") else f" in {unit}"


def suggest(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest of `choices`, '' if none is close."""
    hint = difflib.get_close_matches(str(word), list(choices), n=1)
    return f" (did you mean {hint[0]!r}?)" if hint else ""


# ----------------------------------------------------------------------------- rendering
def fmt_float(x: float) -> str:
    """A float as TOML would write it, shortest form that round-trips (2e11, 1e-5, 0.25)."""
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x != 0.0 and not 1e-4 <= abs(x) < 1e6:
        for p in range(1, 18):
            s = f"{x:.{p - 1}e}"
            if float(s) == x:
                break
        mant, exp = s.split("e")
        if "." in mant:
            mant = mant.rstrip("0").rstrip(".")
        return f"{mant}e{int(exp)}"
    return repr(x)


def fmt(value: Any) -> str:
    """A (TOML) value rendered compactly for an error message."""
    if value is MISSING:
        return "<missing>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "tolist"):          # numpy scalars and arrays
        value = value.tolist()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return fmt_float(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        items = [fmt(v) for v in value[:8]]
        if len(value) > 8:
            items.append(f"... ({len(value)} items)")
        return "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        keys = list(value)
        return "{" + ", ".join(str(k) for k in keys[:8]) + (", ..." if len(keys) > 8 else "") + "}"
    return repr(value)


def bare_key(key: str) -> str:
    """A key as TOML writes it (quoted unless it is a bare key)."""
    return key if re.fullmatch(r"[A-Za-z0-9_\-]+", key) else json.dumps(key)


class UserError(ValueError):
    """A refusal the user can act on: a configuration, an option, an input file or request that cannot be
    taken, its message naming what and why. ``hil`` prints it in one line; any other exception is a bug
    and shows its traceback."""


class ConfigError(UserError):
    """An invalid file or value. ``str(err)`` is ``"<file>: <key> = <value>: <expected>"``.

    Attributes ``file``, ``key``, ``value`` (the offending value as read) and ``expected``
    (what was expected, with the unit) are kept for programmatic use.
    """

    def __init__(self, file: str, key: str | None, value: Any, expected: str,
                 *, message: str | None = None):
        self.file = str(file)
        self.key = key
        self.value = value
        self.expected = expected
        if message is None:
            message = f"{self.file}: {key} = {fmt(value)}: {expected}"
        super().__init__(message)


def raise_problem(source: str, where: str, problems: Sequence[Problem]) -> None:
    """Raise the first of `problems` as a ConfigError naming `source` and ``<where>.<key>``."""
    if problems:
        key, value, expected = problems[0]
        raise ConfigError(source, f"{where}.{key}" if where else key, value, expected)


# ----------------------------------------------------------------------------- files
WRITTEN_TOML = 4       # texts a TOML writer made this process (remember_written): their data, not parsed again
_written: dict[str, dict] = {}
_writing = threading.Lock()


def copy_toml(value):
    """A copy of parsed TOML, as deep as its tables and arrays (the rest, strings, numbers and dates,
    cannot change); several times faster than copy.deepcopy."""
    if isinstance(value, dict):
        return {k: copy_toml(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_toml(v) for v in value]
    return value


def remember_written(text: str, data: dict) -> None:
    """`text` is the TOML a writer made of `data` in this process, to be read back soon (a campaign case's
    model file): parse_toml gives a copy of `data` for it instead of parsing it (a preset takes ms)."""
    data = copy_toml(data)
    with _writing:
        while len(_written) >= WRITTEN_TOML:
            _written.pop(next(iter(_written)))
        _written[text] = data


def parse_toml(text: str, source: str) -> dict:
    """TOML text as a dict; a syntax error becomes a ConfigError naming ``source``."""
    written = _written.get(text)
    if written is not None:
        return copy_toml(written)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(source, None, MISSING, "valid TOML",
                          message=f"{source}: not valid TOML: {exc}") from exc


MAX_CONFIG_BYTES = 64 * 1024 * 1024     # a configuration file larger than this is not one


def regular_file(path: str | Path, what: str = "a file") -> None:
    """ConfigError unless `path` is a regular file (a FIFO, a device or a folder would block or mislead a
    reader) of at most MAX_CONFIG_BYTES."""
    source = str(path)
    try:
        st = os.stat(path)
    except OSError as exc:
        raise ConfigError(source, None, MISSING, "a readable file",
                          message=f"{source}: cannot read: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(source, None, MISSING, what, message=f"{source}: not a regular file; expected {what}")
    if st.st_size > MAX_CONFIG_BYTES:
        raise ConfigError(source, None, MISSING, what, message=f"{source}: {st.st_size} bytes, more than the "
                                                               f"{MAX_CONFIG_BYTES} of any configuration file")


def load_toml(path: str | Path) -> dict:
    """A TOML file as a dict; an unreadable, binary, malformed or non-regular file (a FIFO, a device) is a
    ConfigError naming it."""
    return parse_toml(read_toml_text(path), str(path))


def read_toml_text(path: str | Path) -> str:
    """The text of a TOML file, unparsed; an unreadable, binary or non-regular file is a ConfigError naming it."""
    source = str(path)
    regular_file(path, "a TOML file")
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(source, None, MISSING, "a readable file",
                          message=f"{source}: cannot read: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(source, None, MISSING, "UTF-8 text",
                          message=f"{source}: not a text file (byte {exc.start} is not UTF-8); "
                                  "expected TOML") from exc


Made = TypeVar("Made")


class TextMemo(Generic[Made]):
    """What a reader made of a TOML file, kept by the file's name and text, the last `size` of them: a file
    read again unchanged (as each case of a campaign worker reads its bus map) costs a read and a
    comparison. What the reader makes must never be changed by its users: they share it."""

    def __init__(self, size: int, make: Callable[[str, str], Made]):
        self.size = size
        self.make = make            # (text, source) -> what the reader makes of it
        self._made: dict[tuple[str, str], Made] = {}
        self._lock = threading.Lock()

    def load(self, path: str | Path) -> Made:
        source = str(path)
        key = (source, read_toml_text(path))
        with self._lock:
            found = self._made.get(key)
        if found is None:
            found = self.make(key[1], source)
            with self._lock:
                while len(self._made) >= self.size:
                    self._made.pop(next(iter(self._made)))
                self._made[key] = found
        return found

    def __len__(self) -> int:
        return len(self._made)


# ----------------------------------------------------------------------------- tables
class Document:
    """The file being read: its name for errors, and every schema key seen (``known``, dotted
    paths such as ``body.link1.beam.E_Pa``) for checks that refer to keys, like provenance."""

    def __init__(self, source: str):
        self.source = str(source)
        self.known: set[str] = set()

    def error(self, key: str | None, value: Any, expected: str) -> ConfigError:
        return ConfigError(self.source, key, value, expected)

    def root(self, data: Any, allowed: Sequence[str], what: str = "a table") -> "Table":
        """The top-level table of the file."""
        return Table(self, data, "", "", allowed, what)


class Table:
    """One table of a file: unknown keys are rejected with a suggestion, reads are typed.

    ``where`` is the path shown in errors (``body[link1].beam``), ``path`` the dotted schema
    path recorded in ``Document.known`` (``body.link1.beam``).
    """

    def __init__(self, doc: Document, data: Any, where: str, path: str, allowed: Sequence[str],
                 what: str = "a table"):
        self.doc = doc
        self.where = where
        self.path = path
        self.allowed = tuple(allowed)
        if not isinstance(data, dict):
            raise doc.error(where or "(file)", data, f"expected {what}")
        self.data = data
        for k, v in data.items():
            if k not in self.allowed:
                raise doc.error(self.key(k), v, f"unknown key{suggest(k, self.allowed)}; "
                                                f"allowed keys here: {', '.join(self.allowed)}")
        for k in self.allowed:
            doc.known.add(f"{path}.{k}" if path else k)

    # -- helpers
    def key(self, k: str) -> str:
        """The key as shown in errors."""
        return f"{self.where}.{bare_key(k)}" if self.where else bare_key(k)

    def error(self, k: str, value: Any, expected: str) -> ConfigError:
        return self.doc.error(self.key(k), value, expected)

    def has(self, k: str) -> bool:
        return k in self.data

    def raw(self, k: str, default: Any = MISSING) -> Any:
        return self.data.get(k, default)

    def _get(self, k: str, default: Any, expected: str) -> Any:
        if k in self.data:
            return self.data[k]
        if default is MISSING:
            raise self.error(k, MISSING, f"required; expected {expected}")
        return default

    def reject(self, problems: Sequence[Problem]) -> None:
        """Raise the first of `problems` (judged by an independent checker) naming its key and the
        value as written; a key left out is reported as required."""
        if not problems:
            return
        key, _, expected = problems[0]
        if self.has(key):
            raise self.error(key, self.raw(key), expected)
        raise self.error(key, MISSING, f"required; {expected}")

    # -- typed reads
    def number(self, k: str, default: Any = MISSING, *, unit: str, positive: bool = False,
               nonneg: bool = False, lower: float | None = None, upper: float | None = None,
               what: str | None = None) -> float:
        """A finite number (optionally > 0, >= 0, >= lower, <= upper); `default` when absent.
        ``what`` replaces the generated description of the bounds (``"a probability in (0, 1]"``)."""
        if what is not None:
            expected = f"{what}{in_unit(unit)}"
        else:
            expected = f"{'a positive' if positive else 'a non-negative' if nonneg else 'a finite'} number{in_unit(unit)}"
            if lower is not None:
                expected += f", at least {fmt_float(lower)}"
            if upper is not None:
                expected += f", at most {fmt_float(upper)}"
        v = self._get(k, default, expected)
        if k not in self.data:
            return float(v) if v is not None else None
        if not is_number(v) or not math.isfinite(float(v)):
            raise self.error(k, v, f"expected {expected}")
        x = float(v)
        if ((positive and not x > 0) or (nonneg and x < 0) or (lower is not None and x < lower)
                or (upper is not None and x > upper)):
            raise self.error(k, v, f"expected {expected}")
        return x

    def checked_later(self, k: str, default: Any) -> float | None:
        """The value at k as a float (`default` when absent) for an independent checker to judge
        (then reported with ``reject``); nan for anything but a finite number."""
        if k not in self.data:
            return default
        v = self.data[k]
        return float(v) if is_number(v) and math.isfinite(float(v)) else math.nan

    def integer(self, k: str, default: Any = MISSING, *, minimum: int | None = 0, maximum: int | None = None,
                unit: str = "", what: str = "") -> int:
        """An integer in [minimum, maximum] (None: unbounded)."""
        if minimum is not None and maximum is not None:
            expected = f"an integer in {minimum}..{maximum}"
        elif minimum is not None:
            expected = f"an integer >= {minimum}"
        elif maximum is not None:
            expected = f"an integer <= {maximum}"
        else:
            expected = "an integer"
        expected += in_unit(unit) + (f" ({what})" if what else "")
        v = self._get(k, default, expected)
        if k not in self.data:
            return v if v is None else int(v)
        if not is_integer(v) or (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
            raise self.error(k, v, f"expected {expected}")
        return int(v)

    def boolean(self, k: str, default: Any = MISSING) -> bool:
        v = self._get(k, default, "true or false")
        if k in self.data and not isinstance(v, bool):
            raise self.error(k, v, "expected true or false")
        return v

    def string(self, k: str, default: Any = MISSING, *, what: str = "a string") -> str:
        v = self._get(k, default, what)
        if k in self.data and not isinstance(v, str):
            raise self.error(k, v, f"expected {what}")
        return v

    def name(self, k: str = "name", *, pattern: re.Pattern = NAME_RE,
             what: str = "a name (letters, digits, '_' or '-', not starting with a digit)") -> str:
        """An identifier-like string."""
        v = self.string(k, what=what)
        if not pattern.match(v):
            raise self.error(k, v, f"expected {what}")
        return v

    def choice(self, k: str, default: Any, choices: Sequence[str]) -> str:
        """One of `choices`; a near miss gets a suggestion."""
        expected = "one of " + ", ".join(json.dumps(c) for c in choices)
        v = self._get(k, default, expected)
        if not isinstance(v, str) or v not in choices:
            did = suggest(v, choices) if isinstance(v, str) else ""
            raise self.error(k, v, f"expected {expected}{did}")
        return v

    def vector(self, k: str, default: Any = MISSING, *, n: int | None = 3, unit: str, nonneg: bool = False,
               min_length: int = 0):
        """A list of finite numbers (of length n, or any length >= min_length) as a float array."""
        import numpy as np

        size = f"{n}-vector" if n is not None else "list"
        expected = f"a {size} of {'non-negative ' if nonneg else ''}numbers{in_unit(unit)}"
        v = self._get(k, default, expected)
        if k not in self.data:
            return np.array(v, dtype=float)
        if (not isinstance(v, list) or (n is not None and len(v) != n) or len(v) < min_length
                or not all(is_number(x) and math.isfinite(float(x)) for x in v)
                or (nonneg and any(x < 0 for x in v))):
            raise self.error(k, v, f"expected {expected}")
        return np.array([float(x) for x in v], dtype=float)

    def table(self, k: str, allowed: Sequence[str], *, where: str | None = None, path: str | None = None,
              required: bool = False, what: str = "a table") -> "Table | None":
        """The sub-table at k (None when absent and not required)."""
        if k not in self.data:
            if required:
                raise self.error(k, MISSING, f"required; expected {what}")
            return None
        return Table(self.doc, self.data[k], where or self.key(k),
                     path or (f"{self.path}.{k}" if self.path else k), allowed, what)

    def array_of_tables(self, k: str, *, required: bool = False, what: str) -> list:
        """The raw tables of ``[[k]]`` (a list of dicts; [] when absent and not required)."""
        if k not in self.data:
            if required:
                raise self.error(k, MISSING, f"required; expected {what}")
            return []
        v = self.data[k]
        if not isinstance(v, list) or not all(isinstance(t, dict) for t in v) or (required and not v):
            raise self.error(k, v, f"expected {what}")
        return v
