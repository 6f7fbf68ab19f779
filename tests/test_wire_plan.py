"""The bus map compiled once into a plan (hil.runtime.wire_plan.WirePlan): the emulator `hil run` builds
compiles the map once and its parts (the cycle's decoder and encoder, the fault engine's encoding,
the lockstep cue, the link's fault layer) are the plan's; no runtime module but the plan's own
helpers reads a map (a static scan, shown failing on a planted read)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from hil.runtime import launch, wire_plan
from hil.runtime.options import RuntimeOptions

ROOT = Path(__file__).resolve().parent.parent
# the runtime modules that build the plan or compile a part of it from the map, each with its part
MAP_READERS = {
    "hil/runtime/launch.py": "the composition root: loads the map, checks the link, builds the plan",
    "hil/runtime/wire_plan.py": "the plan",
    "hil/runtime/command_frames.py": "the plan's decoder tables (CompiledCommandInput)",
    "hil/runtime/lockstep.py": "the plan's lockstep cue (FirmwareCue: the firmware side's reader on the map)",
}


def map_reads(source: str) -> list[int]:
    """Lines that read a bus map: the name BusMap or bus_map, or an attribute ``.bus`` of a command
    reader or codec input (``x.reader.bus``, ``commands.bus``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name) and node.id in ("BusMap", "bus_map"):
            lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr == "bus" and (
                isinstance(node.value, ast.Attribute) and node.value.attr == "reader"
                or isinstance(node.value, ast.Name) and node.value.id in ("commands", "sensors_out")):
            lines.append(node.lineno)
    return sorted(set(lines))


def test_no_runtime_module_reads_the_map_but_the_plans():
    found = {str(p.relative_to(ROOT)): map_reads(p.read_text(encoding="utf-8"))
             for p in sorted((ROOT / "hil" / "runtime").glob("*.py"))}
    readers = {path for path, lines in found.items() if lines}
    assert readers <= set(MAP_READERS), {p: found[p] for p in readers - set(MAP_READERS)}


def test_the_scan_finds_a_planted_read():
    assert map_reads("def f(emu):\n    return emu.commands.reader.bus.cycle_s\n") == [2]
    assert map_reads("from firmware_bridge.wire.messages import BusMap\nm = BusMap.load('x')\n") == [2]
    assert map_reads("def f(plan):\n    return plan.cycle_s\n") == []


def test_hil_run_compiles_the_map_once_and_the_emulator_works_on_the_plan(monkeypatch):
    plans = []

    class Counted(wire_plan.WirePlan):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            plans.append(self)
    monkeypatch.setattr(wire_plan, "WirePlan", Counted)
    built = launch.build_emulator("ella", "serial_frame", "pty", RuntimeOptions(mode="lockstep", realtime=False))
    emu = built.emulator
    try:
        assert len(plans) == 1
        plan = plans[0]
        assert emu.one_call.command_frames is plan.decoder and emu.one_call.sensor_frames is plan.encoder
        assert emu.sensor_frames == plan.encoder.frames and emu.feed == plan.decoder.feed
        assert emu.link.bus is not None and emu.link is emu.io.link
        assert emu.io.answer_expected and plan.cue is not None
        assert emu.commands is plan.commands and emu.sensors_out is plan.sensors_out
    finally:
        emu.link.close()


def test_a_plan_with_another_cycle_is_refused_before_the_run(model):
    """The period check reads the plan: a map whose cycle is not the plant step fails in one line."""
    from firmware_bridge.wire.messages import BusMap
    from hil.dynamics.plant import Plant
    from hil.runtime.loop import Emulator
    from links import memory_pair
    from config_schema import UserError
    text = (ROOT / "configs" / "bus" / "serial_frame.toml").read_text(encoding="utf-8")
    bus = BusMap.from_string(text.replace("cycle_s = 0.001", "cycle_s = 0.002"), "two_ms.toml")
    plant = Plant(model)
    plan = wire_plan.WirePlan(bus, plant.layout.joint_names)
    with pytest.raises(UserError, match="two_ms.toml: bus.cycle_s = 0.002 s differs from the plant step"):
        Emulator(plant, memory_pair()[0], plan.commands, plan.sensors_out, RuntimeOptions(mode="afap", realtime=False),
                 plan=plan)
