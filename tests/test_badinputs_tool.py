"""tools/badinputs: its classes can fail: a refusal is a clean error, an exit 0 where an error was due a silent
accept, a traceback a traceback, no end a hang; and two cases run end to end."""
from __future__ import annotations

import pytest

from tools import badinputs
from tools.badinputs.__main__ import classify, main, run_case


@pytest.mark.parametrize("expect, status, stderr, cls", [
    ("error", 2, "hil run: error: --duration ...", "clean error"),
    ("error", 3, "RUN FAILED", "clean error"),
    ("error", 0, "", "silent accept"),
    ("error", 70, "Traceback (most recent call last):\n ...", "traceback"),
    ("error", 2, "Traceback (most recent call last):\n ...", "traceback"),
    ("error", None, "", "hang"),
    ("ok", 0, "", "ok"),
    ("ok", 2, "hil modes: error: ...", "unexpected error"),
])
def test_each_outcome_gets_its_class(expect, status, stderr, cls):
    assert classify(expect, status, stderr) == cls


def test_a_refused_case_and_a_silently_accepted_one_end_to_end():
    refused = run_case({"name": "misspelt option", "args": ["run", "ella", "--bus", "serial_frame", "--durration", "3"],
                        "expect": "error"}, timeout_s=120)
    assert refused["class"] == "clean error" and "did you mean '--duration'" in refused["message"]
    accepted = run_case({"name": "a planted silent accept", "args": ["bus", "export", "--help"], "expect": "error"},
                        timeout_s=120)
    assert accepted["class"] == "silent accept"


def test_the_shipped_cases_parse_and_their_files_can_be_made(tmp_path):
    import tomllib
    with open(badinputs.__path__[0] + "/cases.toml", "rb") as f:
        cases = tomllib.load(f)["case"]
    assert len(cases) >= 30 and {c["expect"] for c in cases} == {"error", "ok"}
    from tools.badinputs.__main__ import make_files
    for i, case in enumerate(cases):
        folder = tmp_path / str(i)
        folder.mkdir()
        make_files(folder, case.get("files", {}))
    assert main(["--only", "no case has this name"]) == 0
