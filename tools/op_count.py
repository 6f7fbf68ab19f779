"""Floating-point operations of one forward-dynamics evaluation, counted by running the kernels.

Seed 004 (docs/references.md) tabulates multiplications and additions per link of its DeNOC
forward dynamics (Table 1; m = 2 bending modes, m^ = 1 + 2m: M = 1332 n - 782, A = 1048 n - 685)
and of Jain and Rodriguez's (seed 002) algorithm. This tool counts ours instead of deriving them by
hand: it runs hil.kernels.aba.forward_dynamics and hil.kernels.screw_dae.forward_dynamics as plain
Python (numba's NUMBA_DISABLE_JIT; the tool re-runs itself in a subprocess with it) on arrays of
``Counted`` numbers, which tally every executed operation: multiplications and divisions,
additions and subtractions, and calls of sqrt, sin, cos, tanh, exp. Operations on constants of the
model count too (they run in every evaluation); comparisons do not.

Models: the Canadarm preset (configs/canadarm.toml, seed 004 Sec. 7: in-plane bending, 2 modes per
link) with its joints torque-driven (forward dynamics, as Table 1 counts), as is and with a second
bending plane (2 + 2 modes per link, the m^ = 5 of Table 1), for its first 1, 2 and 3 links; the
cost per added link is the increment from 2 to 3 links.

``python -m tools.op_count [--json]``
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CANADARM = ROOT / "configs" / "canadarm.toml"
SEED004_PER_LINK = {"multiplications": 1332, "additions": 1048}        # Table 1, M_1p and A_1p at m = 2
SEED004_TOTAL = {"multiplications": (1332, -782), "additions": (1048, -685)}   # M_1p n + M_2p, A_1p n + A_2p


class Counted:
    """A float that counts the operations done with it (class-wide tallies)."""

    tally = {"mul": 0, "add": 0, "fn": 0}
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v.v if isinstance(v, Counted) else float(v)

    @classmethod
    def reset(cls) -> None:
        for k in cls.tally:
            cls.tally[k] = 0

    def _op(self, other, kind, f):
        Counted.tally[kind] += 1
        return Counted(f(self.v, other.v if isinstance(other, Counted) else other))

    def __add__(self, o): return self._op(o, "add", lambda a, b: a + b)
    def __radd__(self, o): return self._op(o, "add", lambda a, b: b + a)
    def __sub__(self, o): return self._op(o, "add", lambda a, b: a - b)
    def __rsub__(self, o): return self._op(o, "add", lambda a, b: b - a)
    def __mul__(self, o): return self._op(o, "mul", lambda a, b: a * b)
    def __rmul__(self, o): return self._op(o, "mul", lambda a, b: b * a)
    def __truediv__(self, o): return self._op(o, "mul", lambda a, b: a / b)
    def __rtruediv__(self, o): return self._op(o, "mul", lambda a, b: b / a)
    def __pow__(self, o): return self._op(o, "mul", lambda a, b: a ** b)
    def __neg__(self): return Counted(-self.v)
    def __abs__(self): return Counted(abs(self.v))
    def __float__(self): return self.v
    def __bool__(self): return self.v != 0.0

    def _cmp(self, o):
        return o.v if isinstance(o, Counted) else o

    def __lt__(self, o): return self.v < self._cmp(o)
    def __le__(self, o): return self.v <= self._cmp(o)
    def __gt__(self, o): return self.v > self._cmp(o)
    def __ge__(self, o): return self.v >= self._cmp(o)
    def __eq__(self, o): return self.v == self._cmp(o)
    def __ne__(self, o): return self.v != self._cmp(o)
    __hash__ = None

    def _fn(self, f):
        Counted.tally["fn"] += 1
        return Counted(f(self.v))

    def sqrt(self): return self._fn(np.sqrt)
    def sin(self): return self._fn(np.sin)
    def cos(self): return self._fn(np.cos)
    def tanh(self): return self._fn(np.tanh)
    def exp(self): return self._fn(np.exp)


def counted(a):
    """An object array of Counted numbers in place of a float array (other arrays unchanged)."""
    if isinstance(a, np.ndarray) and a.dtype == np.float64:
        out = np.empty(a.shape, dtype=object)
        flat, src = out.reshape(-1), a.reshape(-1)
        for i in range(src.size):
            flat[i] = Counted(src[i])
        return out
    return a


def canadarm(links: int, planes: int):
    from hil.model.config import load_model
    model = copy.deepcopy(load_model(CANADARM))
    model.bodies = model.bodies[:links]
    model.stations = [s for s in model.stations if s.body in {b.name for b in model.bodies}]
    for b in model.bodies:
        b.joint.drive = "torque"
        b.joint.profile = None
        if planes == 2:
            b.beam.n_bending_z = b.beam.n_bending_y
        b.beam.damping_ratio = np.zeros(b.beam.n_modes)
    return model


def count(model) -> dict:
    """Operations of one ABA and one DAE evaluation of `model` at a generic state."""
    from hil.kernels import aba, screw_dae
    from hil.model.assembly import assemble, make_work
    asm = assemble(model)
    lay = asm.layout
    rng = np.random.default_rng(1)
    pos = asm.pos0 + rng.normal(size=lay.nq) * 0.01
    vel = rng.normal(size=lay.nq) * 0.1
    tau = rng.normal(size=lay.n_joints)
    km = asm.km
    out = {"nq": lay.nq, "nodes": int(km.node_off[lay.n_joints]), "modes_per_link": int(km.nm[0])}
    kernels = {name: (fd, (km.mi, counted(km.mf), counted(make_work(km).w)))
               for name, fd in (("aba", aba.forward_dynamics), ("dae", screw_dae.forward_dynamics))}
    for name, (fd, model) in kernels.items():
        acc = counted(np.zeros(lay.nq))
        args = [counted(x) for x in (pos, vel, tau)]
        Counted.reset()
        assert fd(*model, 0.0, args[0], args[1], args[2], args[0], args[1], 0.0, 0.0, acc)
        out[name] = dict(Counted.tally)
    return out


def measure() -> dict:
    rows = []
    for planes in (1, 2):
        for n in (1, 2, 3):
            rows.append({"links": n, "bending_planes": planes, **count(canadarm(n, planes))})
    return {"rows": rows, "seed004_per_link": SEED004_PER_LINK}


def per_link(rows: list[dict], planes: int, kernel: str) -> dict:
    r2, r3 = (next(r for r in rows if r["links"] == n and r["bending_planes"] == planes) for n in (2, 3))
    return {k: r3[kernel][k] - r2[kernel][k] for k in ("mul", "add", "fn")}


def format_report(rep: dict) -> str:
    rows = rep["rows"]
    lines = ["one forward-dynamics evaluation, operations executed (mul = multiplications and divisions, "
             "add = additions and subtractions, fn = sqrt/sin/cos/tanh/exp)",
             f"{'links':>5}{'planes':>7}{'nq':>5}{'nodes':>7}{'ABA mul':>10}{'ABA add':>10}{'DAE mul':>10}{'DAE add':>10}"]
    for r in rows:
        lines.append(f"{r['links']:>5}{r['bending_planes']:>7}{r['nq']:>5}{r['nodes']:>7}{r['aba']['mul']:>10}"
                     f"{r['aba']['add']:>10}{r['dae']['mul']:>10}{r['dae']['add']:>10}")
    for planes in (1, 2):
        a, d = per_link(rows, planes, "aba"), per_link(rows, planes, "dae")
        lines.append(f"per added link, {planes} bending plane(s): ABA {a['mul']} mul / {a['add']} add, "
                     f"DAE {d['mul']} mul / {d['add']} add")
    s = SEED004_PER_LINK
    n3 = {k: c * 3 + d for k, (c, d) in SEED004_TOTAL.items()}
    lines.append(f"seed 004 Table 1 (DeNOC, m = 2, two planes): {s['multiplications']} mul / {s['additions']} add "
                 f"per link; {n3['multiplications']} / {n3['additions']} for 3 links")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.op_count", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if os.environ.get("NUMBA_DISABLE_JIT") != "1":
        env = dict(os.environ, NUMBA_DISABLE_JIT="1")
        cmd = [sys.executable, "-m", "tools.op_count"] + (["--json"] if args.json else [])
        return subprocess.run(cmd, cwd=ROOT, env=env).returncode
    rep = measure()
    print(json.dumps(rep, indent=1) if args.json else format_report(rep))
    return 0


if __name__ == "__main__":
    sys.exit(main())
