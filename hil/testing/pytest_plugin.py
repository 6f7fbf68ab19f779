"""pytest plugin for firmware test authors: the emulator as a fixture.

Active wherever the package is installed (entry point ``pytest11``). A test asks for ``hil_run``
(a started hil.testing.harness.EmulatorRun, stopped after the test) or ``hil_start`` (a function that
starts runs with other settings); settings come from, in rising precedence, the defaults of
EmulatorRun, the command line and a ``hil`` marker::

    @pytest.mark.hil(duration_s=3.0, safe_state="brake", watchdog_s=0.02,
                     scenario="configs/scenarios/encoder_signal_loss.toml")
    def test_the_arm_is_braked_after_an_encoder_signal_loss(hil_run):
        result = hil_run.finish()
        t_fault = result.log.event_time("inject")
        assert result.log.event_time("watchdog_tripped") - t_fault <= 0.05

Command line: ``--hil-arm``, ``--hil-bus``, ``--hil-link``, ``--hil-firmware`` (a command line
with placeholders for its end of the link: ``{port}`` a plain device path or CAN channel,
``{link}`` a link spec, ``{interface}``, ``{channel}``, ``{bus}`` the bus map file), ``--hil-mode``
and ``--hil-targets`` (the firmware's own [verdict] file) run the same suite on another arm
preset, bus map, link, firmware, mode or targets: ``pytest --hil-firmware "./my_fw {port}"``.
``--hil-junit FILE`` writes every finished run's verdicts as JUnit XML (hil.logs.junit: one
testsuite per run, named by its test, one testcase per verdict with its requirement), beside
pytest's own ``--junitxml`` (one testcase per test).
A run that proves nothing (the firmware exited, never answered, no cycle, link errors) raises
hil.testing.harness.RunFailed in ``finish()``: the test fails, it never passes.
"""
from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:      # imported by the fixtures: a pytest run that uses none stays light
    from hil.testing.harness import EmulatorRun

OPTIONS = (("arm", "arm preset (a TOML file or a shipped name)"), ("bus", "bus map (a TOML file or a shipped name)"),
           ("link", "link spec: pty, slcan-pty, can:IF:CH, canfd:IF:CH, serial:PATH, ..."),
           ("firmware", "firmware command line; {port} (device path or CAN channel), {link} (link spec), "
                        "{interface}, {channel}, {bus} for its end of the link (default: the reference firmware)"),
           ("mode", "lockstep (default: deterministic) or realtime"),
           ("targets", "the firmware's targets: a TOML file with a [verdict] table, or a shipped name"))


RUN_SUITES = pytest.StashKey[list]()        # the JUnit suites of the runs finished so far (--hil-junit)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("hil", "ELLA hardware-in-the-loop emulator")
    for name, help_text in OPTIONS:
        group.addoption(f"--hil-{name}", dest=f"hil_{name}", default=None, help=help_text)
    group.addoption("--hil-junit", dest="hil_junit", default=None, metavar="FILE",
                    help="write every finished run's verdicts as JUnit XML (one testcase per verdict)")


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("hil_junit", None)
    if path:
        from hil.logs import junit
        junit.write(path, session.config.stash.get(RUN_SUITES, []))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "hil(**settings): settings of the hil_run fixture (hil.testing.harness.EmulatorRun "
                                       "fields: arm, bus, link, firmware, scenario, mode, duration_s, seed, ...)")


def command_line_settings(config: pytest.Config) -> dict:
    """The EmulatorRun settings given on the command line (--hil-...)."""
    out = {}
    for name, _ in OPTIONS:
        value = config.getoption(f"hil_{name}")
        if value is not None:
            out[name] = shlex.split(value) if name == "firmware" else value
    return out


def _settings(request: pytest.FixtureRequest) -> dict:
    out = command_line_settings(request.config)
    marker = request.node.get_closest_marker("hil")
    if marker is not None:
        check_settings(marker.kwargs, "@pytest.mark.hil")
        out.update(marker.kwargs)
    return out


def check_settings(settings: dict, where: str) -> None:
    """Fail the test in one line (not a TypeError from deep inside) for a setting EmulatorRun lacks, with the
    nearest one and the list."""
    from dataclasses import fields

    from config_schema import suggest
    from hil.testing.harness import EmulatorRun
    known = [f.name for f in fields(EmulatorRun) if f.init]
    for key in settings:
        if key not in known:
            pytest.fail(f"{where}: unknown setting {key!r}{suggest(key, known)}; settings: {', '.join(known)}",
                        pytrace=False)


@pytest.fixture
def hil_start(request: pytest.FixtureRequest) -> Iterator[Callable[..., EmulatorRun]]:
    """start(**settings) -> a started EmulatorRun (the test's settings, overridden by these);
    every run it started is stopped after the test."""
    from hil.testing.harness import EmulatorRun
    runs: list[EmulatorRun] = []

    def start(**settings) -> EmulatorRun:
        check_settings(settings, "hil_start()")
        run = EmulatorRun(**{**_settings(request), **settings})
        runs.append(run)
        return run.start()
    yield start
    for run in runs:
        if request.config.getoption("hil_junit", None) and run.judged is not None:
            from hil.logs import junit
            log = None if run.temporary_log else run.log_path
            request.config.stash.setdefault(RUN_SUITES, []).append(junit.run_suite(run.judged, request.node.nodeid, log))
        run.close()


@pytest.fixture
def hil_run(hil_start: Callable[..., EmulatorRun]) -> EmulatorRun:
    """A started emulator run with the test's settings (marker, command line, defaults)."""
    return hil_start()
