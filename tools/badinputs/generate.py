"""Write tools/badinputs/preset_values.toml: every value of configs/ella.toml broken three ways, each a
case for `python -m tools.badinputs` that `hil modes` must refuse in one line. A number becomes text,
NaN and infinity (TOML's own nan and inf); a list of numbers becomes text, a bare number and a list
holding NaN; a string becomes a number, an empty string and a table. Keys of the [provenance] table
(free text) are left alone.

    python -m tools.badinputs.generate
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRESET = "configs/ella.toml"
OUT = Path(__file__).resolve().parent / "preset_values.toml"
ASSIGNMENT = re.compile(r"^(\s*)([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+?)\s*$")


def _variants(key: str, value: str) -> list[tuple[str, str]]:
    if value.startswith("["):
        return [("text", '"a list"'), ("a number for a list", "1.0"), ("NaN in a list", "[nan, 0.0, 0.0]")]
    if value.startswith('"'):
        empty = [] if key == "description" else [("empty", '""')]          # a description may be empty
        return [("a number for a name", "7"), ("a table for a name", "{ x = 1 }")] + empty
    if value in ("true", "false"):
        return [("text for a flag", '"yes"'), ("a number for a flag", "1")]
    return [("text", '"ten"'), ("NaN", "nan"), ("infinity", "inf")]


def cases() -> list[dict]:
    out = []
    table = ""
    for n, line in enumerate((ROOT / PRESET).read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.split("#", 1)[0].rstrip()
        if stripped.lstrip().startswith("["):
            table = stripped.strip()
            continue
        m = ASSIGNMENT.match(stripped)
        if not m or table == "[provenance]" or stripped.lstrip().startswith('"'):
            continue
        indent, key, value = m.groups()
        for what, broken in _variants(key, value):
            out.append({"name": f"{PRESET}:{n} {table} {key}: {what}", "args": ["modes", "{dir}/arm.toml"],
                        "expect": "error",
                        "files": {"arm.toml": {"copy": PRESET, "line": n, "text": f"{indent}{key} = {broken}"}}})
    return out


def toml_case(case: dict) -> str:
    f = case["files"]["arm.toml"]
    return (f"[[case]]\nname = {json.dumps(case['name'])}\nargs = {json.dumps(case['args'])}\n"
            f"expect = \"error\"\nfiles = {{ \"arm.toml\" = {{ copy = {json.dumps(f['copy'])}, line = {f['line']}, "
            f"text = {json.dumps(f['text'])} }} }}\n")


def main() -> int:
    made = cases()
    OUT.write_text("# Written by `python -m tools.badinputs.generate` from configs/ella.toml: do not edit.\n\n"
                   + "\n".join(toml_case(c) for c in made), encoding="utf-8")
    print(f"{OUT}: {len(made)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
