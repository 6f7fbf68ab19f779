"""Plans kept on disk (hil.dynamics.plan_cache): taken back unchanged, made again whenever anything they
depend on changes, a damaged entry replanned, a warning repeated."""
from __future__ import annotations

import numpy as np
import pytest
from numba.core import config as numba_config

from hil.dynamics import integrator_plan, plan_cache
from hil.dynamics.integrator_plan import IntegratorAccuracyWarning, plan_integrator
from hil.model import spec as md
from hil.model.assembly import assemble

from chains import random_flexible_chain


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(numba_config, "CACHE_DIR", str(tmp_path))
    return tmp_path / "plans"


@pytest.fixture
def counted(monkeypatch):
    """Counts the plans actually made (not taken from the cache)."""
    made = []
    make = integrator_plan._make_plan

    def counting(*args):
        made.append(args[1:])
        return make(*args)
    monkeypatch.setattr(integrator_plan, "_make_plan", counting)
    return made


def chain():
    return random_flexible_chain(np.random.default_rng(4), 3)


def test_a_plan_is_made_once_and_taken_back_unchanged(cache, counted):
    first = plan_integrator(assemble(chain()))
    again = plan_integrator(assemble(chain()))
    assert len(counted) == 1 and len(list(cache.glob("*.json"))) == 1
    assert again == first and again.modes and again.method == "fitted_midpoint"


@pytest.mark.parametrize("change", ["setting", "model", "drive", "request"])
def test_any_change_the_plan_depends_on_makes_a_new_one(cache, counted, change):
    plan_integrator(assemble(chain()), evaluation_s=1e-6)
    model = chain()
    if change == "setting":
        model.integrator.bandwidth_hz = 100.0
    elif change == "model":
        model.bodies[-1].beam.E_Pa *= 1.01
    elif change == "drive":       # the probe's rate and torque limits come from the drives' specs, not the arrays
        model.bodies[0].joint.motor = md.DriveSpec(supply_V=24.0, back_emf_V_s_rad=0.05, torque_limit_N_m=5.0)
    asm = assemble(model)
    plan_integrator(asm, "rk4" if change == "request" else None, evaluation_s=1e-6)
    assert len(counted) == 2


def test_a_damaged_entry_is_planned_again(cache, counted):
    first = plan_integrator(assemble(chain()))
    (entry,) = cache.glob("*.json")
    entry.write_text('{"method": "rk4", "substeps"')
    assert plan_integrator(assemble(chain())) == first and len(counted) == 2


def test_a_plan_that_warned_warns_again_from_the_cache(cache, counted):
    model = chain()
    model.integrator.budget_fraction = 1e-6
    for _ in range(2):
        with pytest.warns(IntegratorAccuracyWarning, match="time budget"):
            plan_integrator(assemble(model))
    assert len(counted) == 1


def test_remembered_arrays_are_computed_once_per_request(cache):
    asm = assemble(chain())
    calls = []

    def compute():
        calls.append(1)
        return np.arange(4.0)
    a = plan_cache.remembered(asm, "x", compute, 0.5)
    b = plan_cache.remembered(asm, "x", compute, 0.5)
    c = plan_cache.remembered(asm, "x", compute, 0.25)
    assert len(calls) == 2 and np.array_equal(a, b) and np.array_equal(b, c)


def test_a_plan_never_reads_the_clock(cache, monkeypatch):
    """The plan is a function of the model, the settings and the code: planning with a clock that jumps
    by hours between readings gives the plan a steady clock gives (the evaluation cost comes from the
    model's size, integrator_plan.evaluation_cost_s, not from timing the machine)."""
    import itertools
    import time

    steady = plan_integrator(assemble(chain()))
    assert steady.motion is not None            # the measured judgements ran too
    for entry in cache.glob("*"):
        entry.unlink()
    jumps = itertools.count(0.0, 3600.0)
    for clock in ("perf_counter", "monotonic", "time", "process_time", "thread_time"):
        monkeypatch.setattr(time, clock, lambda: next(jumps))
        monkeypatch.setattr(time, f"{clock}_ns", lambda: int(next(jumps) * 1e9))
    assert plan_integrator(assemble(chain())) == steady


def test_the_evaluation_cost_follows_the_counted_operations():
    """evaluation_cost_s's closed form against the operations tools.op_count counts by running the
    articulated-body kernel in plain Python (numba off, in a subprocess): within 12 % on the shipped presets
    with torque-driven joints and on random chains of 2 to 5 bodies."""
    import json
    import os
    import subprocess
    import sys

    from hil.dynamics.integrator_plan import SECONDS_PER_OPERATION, evaluation_cost_s
    from hil.model.config import load_model

    script = ("import json, sys, numpy as np; sys.path.insert(0, 'tests')\n"
              "from tools.op_count import count\nfrom hil.model.config import load_model\n"
              "from chains import random_flexible_chain\n"
              "models = {p: load_model(f'configs/{p}.toml') for p in ('ella', 'seed001_arm')}\n"
              "models.update({f'chain{n}': random_flexible_chain(np.random.default_rng(n), n) for n in (2, 3, 5)})\n"
              "print(json.dumps({k: sum(count(m)['aba'][c] for c in ('mul', 'add')) for k, m in models.items()}))\n")
    out = subprocess.run([sys.executable, "-c", script], env=dict(os.environ, NUMBA_DISABLE_JIT="1"),
                         capture_output=True, text=True, timeout=300, check=True).stdout
    counted = json.loads(out.strip().splitlines()[-1])
    models = {p: load_model(f"configs/{p}.toml") for p in ("ella", "seed001_arm")}
    models.update({f"chain{n}": random_flexible_chain(np.random.default_rng(n), n) for n in (2, 3, 5)})
    for name, model in models.items():
        estimate = evaluation_cost_s(assemble(model)) / SECONDS_PER_OPERATION
        print(f"{name}: counted {counted[name]}, estimated {estimate:.0f} ({estimate / counted[name] - 1:+.1%})")
        assert abs(estimate / counted[name] - 1) < 0.12


def test_the_folder_keeps_the_newest_entries_up_to_its_limit(cache, monkeypatch):
    """A campaign of new payloads adds entries case after case: past MAX_ENTRIES the oldest written go
    (pruned every PRUNE_EVERY writes), the newest stay readable."""
    import os
    monkeypatch.setattr(plan_cache, "MAX_ENTRIES", 10)
    monkeypatch.setattr(plan_cache, "PRUNE_EVERY", 4)
    for k in range(40):
        plan_cache.store(f"entry{k:02d}", {"k": k})
        os.utime(cache / f"entry{k:02d}.json", ns=(k * 10**9, k * 10**9))     # written in this order
    kept = sorted(p.stem for p in cache.iterdir())
    assert len(kept) <= 10 + 4 and "entry39" in kept and "entry00" not in kept
    assert plan_cache.load("entry39") == {"k": 39}
