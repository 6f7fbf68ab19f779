"""Where the midpoint schemes' linearly implicit friction starts to chatter: a single rigid joint (no
gravity) with tanh-smoothed Coulomb friction, its smoothing written back into the kernel (no floor),
started at rates from 0.1 mrad/s to 1 rad/s either way under a constant load of 0, 0.5 and 0.9 of
its Coulomb torque, stepped 3 s at one substep per 1 ms step; the Coulomb torque set so that the
ratio r = F_c h / (J v_s) takes each value of the scan. A run chatters when, over its last 0.2 s,
its rate (above the smoothing) alternates direction at least 50 times. Prints the smallest r that
chattered, which hil.dynamics.integrator_plan.FRICTION_BOUND (15, times the safety fraction) stays
below (hil.kernels.joints).

    python -m tools.friction_chatter [--method fitted_midpoint|imex_midpoint] [--ratios 2:30] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from hil.dynamics.plant import Plant
from hil.kernels.layout import JP_COUL_VS
from hil.model import spec as md

J = 0.37            # kg m^2 about the joint
V_S = 1e-3          # the smoothing, rad/s
DT = 1e-3


def joint(coulomb: float, rate: float) -> md.Model:
    body = md.Body("b", md.BASE, md.Joint("j", axis=np.array([0.0, 0.0, 1.0]), qd0_rad_s=rate, coulomb_N_m=coulomb,
                                          coulomb_smoothing_rad_s=V_S),
                   rigid=md.RigidInertia(1.0, np.zeros(3), np.diag([1.0, 1.0, J])))
    return md.Model("friction_chatter", [body], gravity_m_s2=np.zeros(3))


def chatters(plant: Plant, rate: float, load: float) -> bool:
    """The joint released at `rate` under `load` times its Coulomb torque: does it chatter (module docstring)?"""
    plant.reset()
    plant.vel[0] = rate
    tau = np.array([load * plant.km.coulomb[0]])
    qd = np.zeros(3000)
    for s in range(qd.size):
        plant.step(tau)
        qd[s] = plant.vel[0]
    tail = np.diff(qd[-200:])
    big = np.abs(tail) > V_S
    return int(np.count_nonzero((np.signbit(tail[1:]) != np.signbit(tail[:-1])) & big[1:] & big[:-1])) >= 50


def scan(method: str, ratios, rates=np.geomspace(1e-4, 1.0, 9)) -> dict:
    rows = []
    for r in ratios:
        plant = Plant(joint(r * J * V_S / DT, 0.0), method=method, substeps=1)
        plant.km.jpar[:, JP_COUL_VS] = V_S             # the configured smoothing, no floor
        bad = sum(chatters(plant, s * v, load) for v in rates for s in (1, -1) for load in (0.0, 0.5, 0.9))
        rows.append({"ratio": float(r), "chattering_runs": int(bad), "runs": 2 * len(rates) * 3})
    onset = next((row["ratio"] for row in rows if row["chattering_runs"]), None)
    return {"method": method, "rows": rows, "onset_ratio": onset}


def _ratios(text: str) -> list[float]:
    lo, _, hi = text.partition(":")
    return list(np.arange(float(lo), float(hi) + 0.5, 1.0))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.friction_chatter", description=__doc__.split("\n\n")[0])
    p.add_argument("--method", choices=("fitted_midpoint", "imex_midpoint"), default="fitted_midpoint")
    p.add_argument("--ratios", type=_ratios, default=_ratios("2:30"), metavar="LO:HI", help="r from LO to HI in steps of 1")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    rep = scan(args.method, args.ratios)
    if args.json:
        print(json.dumps(rep))
    else:
        for row in rep["rows"]:
            print(f"r = {row['ratio']:5.1f}: {row['chattering_runs']:3d} of {row['runs']} runs chatter")
        print(f"{args.method}: chatter from r = {rep['onset_ratio']}" if rep["onset_ratio"] is not None
              else f"{args.method}: no chatter up to r = {args.ratios[-1]:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
