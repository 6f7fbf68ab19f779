"""The run summary as text: what `hil run` prints (the same dict is `--json` and <log>.summary.json)."""
from __future__ import annotations

from hil.cli.integrity_summary import integrity_lines


def format_summary(s: dict, timing_only: bool = False) -> str:
    lines = [f"cycles {s['cycles']} ({s['t_s']:.3f} s simulated, mode {s['mode']})"
             + (f", stopped: {s['halted']}" if s["halted"] else "")]
    if s.get("start"):
        st = s["start"]
        resent = f" (sent again {st['resent']} times)" if st["resent"] else ""
        lines.append(f"start: first command {st['waited_s']:.3f} s after the first sensor frames{resent}"
                     if st.get("started", True) else
                     f"start: no valid command came in {st['waited_s']:.3f} s after the first sensor frames{resent}")
    lines += _failures(s)
    if not timing_only:         # what the run showed first, then how it ran
        lines += _verdicts(s) + _outcome(s) + _counters(s) + _integrator(s) + _fmu(s) + _xcp(s)
    lines += _timing(s) + integrity_lines(s)
    return "\n".join(lines)


def _fmu(s: dict) -> list[str]:
    if not s.get("fmu"):
        return []
    f, step = s["fmu"], s["fmu"]["step"]
    return [f"fmu {f['name']}: {step['cycles']} steps, cost per cycle us  p50 {step['p50_us']:.1f}  p99 "
            f"{step['p99_us']:.1f}  max {step['max_us']:.1f}"]


def _xcp(s: dict) -> list[str]:
    if not s.get("xcp"):
        return []
    x = s["xcp"]
    errors = ", ".join(f"{k.removeprefix('ERR_')} {v}" for k, v in x["errors"].items()) or "none"
    return [f"xcp {x['address']}: {x['connects']} connects, {x['commands']} commands, errors {errors}; DAQ packets "
            f"{x['daq_packets_sent']} sent, {x['daq_packets_lost']} lost; {x['calibrations_applied']} calibrations"]


def _timing(s: dict) -> list[str]:
    lines = []
    if s["realtime"]:
        lines.append("real-time setup: " + ", ".join(_feature(name, f) for name, f in s["realtime"]["features"].items()))
    tm = s["timing"]
    for key in ("lateness", "compute", "io", "total"):
        if key in tm and tm[key]["p50"] is not None:      # none without cycles
            v = tm[key]
            lines.append(f"  {key:9s} us  min {v['min']:8.1f}  p50 {v['p50']:8.1f}  p99 {v['p99']:8.1f}  "
                         f"p99.9 {v['p99.9']:8.1f}  max {v['max']:8.1f}")
    lat = s.get("read_to_send_us", {})
    if lat.get("count"):
        lines.append(f"  read->send us  p50 {lat['p50']:8.1f}  p99 {lat['p99']:8.1f}  p99.9 {lat['p99.9']:8.1f}  "
                     f"max {lat['max']:8.1f}  (over the {lat['count']} cycles that took in a new command)")
    ft = s.get("firmware_timing", {})
    if ft.get("cmd_age_us"):
        a = ft["cmd_age_us"]
        lines.append(f"firmware timing: command age us  p50 {a['p50']:8.1f}  p99 {a['p99']:8.1f}  max {a['max']:8.1f}"
                     f"  (sensor frames sent -> the plant using the command that answers them); missed cycles "
                     f"{ft['missed_cycles']} of {ft['cycles_with_command']}")
    lockstep = s.get("lockstep") or {}
    if lockstep.get("rejected_answers"):
        lines.append(f"lockstep: {lockstep['rejected_answers']} cycles answered only with command frames the emulator "
                     "rejected (stepped without a new command)")
    if lockstep.get("silent_cycles"):
        lines.append(f"lockstep: {lockstep['silent_cycles']} cycles stepped without an answer (firmware silent)")
    p = s["pacer"]
    lines.append(f"overruns {p['overruns']} (max consecutive {p['max_consecutive']}, skipped periods "
                 f"{p['skipped_periods']})")
    return lines


def _integrator(s: dict) -> list[str]:
    it = s.get("integrator")
    if not it:
        return []
    lines = [f"integrator: {it['plan']}"] + ([f"  {it['note']}"] if it["note"] else [])
    hold = s.get("input_hold")
    if hold:
        worst = max(hold["joints"].items(), key=lambda kv: kv[1]["angle_bound_rad"], default=None)
        if worst is not None:
            j, b = worst
            lines.append(f"input hold (zero-order, {hold['period_s'] * 1e3:g} ms): the held torque departs from the "
                         f"applied torques' linear interpolation by up to {b['largest_step_N_m']:.3g} N m ({j}): about "
                         f"{b['rate_bound_rad_s']:.1e} rad/s and {b['angle_bound_rad']:.1e} rad per period "
                         "(the hold's own error, not the integrator's)")
    return lines


def _feature(name: str, f: dict) -> str:
    if name == "gc" and f["active"]:
        return "gc frozen and disabled" if "frozen" in f.get("detail", "") else "gc disabled"
    return f"{name} {'on' if f['active'] else 'off'}"


def _counters(s: dict) -> list[str]:
    c = s["commands"]
    rejected = {k: v for k, v in c["rejected"].items() if v}
    lines = [f"link {s['link']}",
             f"commands: {c['accepted']} accepted, {sum(rejected.values())} rejected"
             + (f" ({', '.join(f'{k} {v}' for k, v in rejected.items())})" if rejected else "")
             + f", {c['lost']} lost (rolling-counter gaps)"
             + (f", {c['resyncs']} counter resyncs" if c.get("resyncs") else "")
             + f", {c['ignored']} of the other direction ignored",
             f"watchdog trips {s['watchdog']['trips']}"
             + "".join(f", {what} at {t:.3f} s" for what, t in s["watchdog"]["events"])]
    fa = s["faults"]
    if fa["injections"] or fa["errors"]:
        lines.append(f"faults: {fa['injections']} injected, {fa['clearances']} cleared, still active "
                     f"{fa['active'] or 'none'}, {fa['errors']} failed effects")
    if s["drives"]["torque_limited_cycles"]:
        lines.append(f"drives: torque or current limited in {s['drives']['torque_limited_cycles']} cycles")
    if s.get("canopen"):
        co = s["canopen"]
        lines.append("canopen nodes " + ", ".join(f"{n} {st}" for n, st in co["nodes"].items())
                     + "; " + ", ".join(f"{k} {v}" for k, v in co.items() if k not in ("nodes", "heartbeat_ms")))
    return lines


def _outcome(s: dict) -> list[str]:
    lines = ["final joint angles [rad]: " + ", ".join(f"{k} {v:+.5f}" for k, v in zip(s["joints"], s["q"]))]
    tip = s.get("tip_metrics") or {}
    if tip:
        band = tip["band_m"] * 1e3
        settled = (f"within {band:g} mm of its final position from t = {tip['settled_at_s']:.3f} s on"
                   if tip["settled_at_s"] is not None else
                   f"not settled: it leaves {band:g} mm around its final position at t = {tip['last_outside_band_s']:.3f} s")
        lines.append(f"tip: {tip['residual_pp_mm']:.3f} mm peak to peak over the last 1 s; {settled}")
    fw = s.get("firmware")
    if fw:
        lines.append(f"reference firmware: {fw['cycles']} cycles, link {fw['link']}, sensor frames {fw['sensors']}")
        if fw.get("fault"):
            lines.append(f"reference firmware fault: {fw['fault']}")
        if fw.get("canopen"):
            lines.append(f"reference firmware CANopen master: {fw['canopen']}")
        lat = fw.get("command_to_sensor_us", {})
        if lat.get("count"):
            lines.append(f"reference firmware command->sensor us  p50 {lat['p50']:8.1f}  p99 {lat['p99']:8.1f}  "
                         f"p99.9 {lat['p99.9']:8.1f}  max {lat['max']:8.1f}")
    return lines


def _verdicts(s: dict) -> list[str]:
    lines = []
    if "verdicts" in s:
        lines.append(f"verdicts ({s['targets_file']}):")
        for v in s["verdicts"]:
            value = "-" if v["value"] is None else f"{v['value']:.6g}"
            limit = "" if v["limit"] is None else f" (limit {v['limit']:.6g} {v['unit']})".replace(" )", ")")
            req = f" [{v['requirement']['id']}]" if v.get("requirement") else ""
            lines.append(f"  {'PASS' if v['passed'] else 'FAIL'}  {v['name']:24s} {value} {v['unit']}{limit}{req}: "
                         f"{v['description']}")
        passed = sum(v["passed"] for v in s["verdicts"])
        lines.append(f"  {passed} of {len(s['verdicts'])} passed")
    return lines


def _failures(s: dict) -> list[str]:
    lines = [f"RUN FAILED: {reason}" for reason in s.get("run_failures", [])]
    proc = s.get("firmware_process")
    if lines and proc:
        tail = proc["stderr_tail"] or proc["stdout_tail"]
        lines += ["  firmware output (last lines):"] + [f"    {line}" for line in tail[-10:]] if tail else \
            ["  the firmware printed nothing"]
    return lines
