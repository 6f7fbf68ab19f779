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


# the layers a map may pass through, outermost last: a call from one into an outer one is a climb back up
LAYER_RANK = {"config_schema": 0, "firmware_bridge.wire": 1, "firmware_bridge.links": 2, "firmware_bridge.canopen": 3,
              "hil.kernels": 4, "hil.logs": 4, "hil.model": 5, "hil.dynamics": 6, "hil.devices": 7, "hil.faults": 8,
              "hil.runtime": 9}


def layer_rank(module: str) -> int | None:
    for layer in sorted(LAYER_RANK, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return LAYER_RANK[layer]
    return None


def map_route(monkeypatch, build) -> tuple[set[str], set[tuple[str, str]]]:
    """The modules on the call paths from build_emulator to every read of the bus map's attributes (outside
    the map's own module) while `build` runs, and the calls on those paths from a layer into an outer one."""
    import sys
    from firmware_bridge.wire.messages import BusMap
    modules, climbs = set(), set()
    read = BusMap.__getattribute__

    def traced(self, name):
        frame, path = sys._getframe(1), []
        while frame is not None and frame.f_code.co_name != "build_emulator":
            path.append(frame.f_globals.get("__name__", "?"))
            frame = frame.f_back
        if frame is not None and path[0] != BusMap.__module__:
            path.append(frame.f_globals["__name__"])
            modules.update(path)
            for inner, outer in zip(path, path[1:]):
                if None not in (layer_rank(inner), layer_rank(outer)) and layer_rank(inner) > layer_rank(outer):
                    climbs.add((outer, inner))
        return read(self, name)
    monkeypatch.setattr(BusMap, "__getattribute__", traced)
    build()
    monkeypatch.undo()
    return modules, climbs


@pytest.mark.parametrize("bus, link", [("serial_frame", "pty"), ("canopen_cst", "can:virtual:route"),
                                       ("compact_fd", "canfd:virtual:route")])
def test_the_map_is_followed_through_at_most_12_modules_without_climbing_back(monkeypatch, bus, link):
    """From build_emulator to every read of the map: at most 12 modules, and no call from a layer into an
    outer one (a fault-engine or wire module calling back into the runtime to read the map again)."""
    emulators = []
    modules, climbs = map_route(monkeypatch, lambda: emulators.append(launch.build_emulator(
        "ella", bus, link, RuntimeOptions(mode="lockstep", realtime=False)).emulator))
    emulators[0].link.close()
    assert "hil.runtime.wire_plan" in modules and "firmware_bridge.wire.signals" in modules
    assert len(modules) <= 12, sorted(modules)
    assert climbs == set()


def test_the_route_finds_a_climb_back_up(monkeypatch):
    """The route's check fails on a planted climb: a wire-layer function that calls the runtime to read the map."""
    import types
    from firmware_bridge.wire.messages import BusMap
    bus = BusMap.load("configs/bus/serial_frame.toml")
    runtime = types.ModuleType("hil.runtime.planted")
    exec("def reread(bus):\n    return bus.cycle_s\n", runtime.__dict__)
    wire = types.ModuleType("firmware_bridge.wire.planted")
    wire.__dict__["reread"] = runtime.reread
    exec("def compile_part(bus):\n    return reread(bus)\n", wire.__dict__)
    composition = {"compile_part": wire.compile_part, "bus": bus, "__name__": "hil.runtime.launch"}
    exec("def build_emulator():\n    return compile_part(bus)\n", composition)
    modules, climbs = map_route(monkeypatch, composition["build_emulator"])
    assert climbs == {("firmware_bridge.wire.planted", "hil.runtime.planted")}
    assert modules == {"hil.runtime.launch", "firmware_bridge.wire.planted", "hil.runtime.planted"}
