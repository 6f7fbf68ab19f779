"""The lines of the run summary on what could have gone unnoticed: overruns by cause, frames the
receive budget dropped, link-level rejections, rows the log lacks, a divergence, the spawned
firmware's real-time setup."""
from __future__ import annotations


def integrity_lines(s: dict) -> list[str]:
    lines = []
    oc = s.get("overrun_causes")
    if oc and s["pacer"]["overruns"] + s["pacer"].get("ignored_overruns", 0):
        beat = (f"heartbeat gaps {oc['heartbeat_gaps']}, longest {oc['max_heartbeat_gap_us'] / 1e3:.1f} ms"
                if oc.get("heartbeat", True) else "no heartbeat: the loop never sleeps, its own CPU time and switches tell")
        lines.append(f"overruns by cause: host stall {oc['host_stall']} ({beat}), compute {oc['compute']}, "
                     f"I/O {oc['io']}, late wake-up {oc['late_wakeup']}")
    rb = s.get("receive") or {}
    if rb.get("cycles_over_budget"):
        time = "" if rb["seconds_per_cycle"] is None else f", {rb['seconds_per_cycle'] * 1e6:g} us"
        lines.append(f"receive budget ({rb['frames_per_cycle']} frames{time} a cycle) "
                     f"spent in {rb['cycles_over_budget']} cycles; {rb['frames_dropped']} frames dropped unread")
    log = s.get("log") or {}
    if log.get("dropped_rows"):
        shown = ", ".join(f"{a}..{b}" for a, b in log["first_gaps"][:5])
        lines.append(f"run log: {log['dropped_rows']} rows dropped whole by the writer in {log['gaps']} gaps (cycles "
                     f"{shown}{', ...' if log['gaps'] > 5 else ''}), recorded in the log")
    if log.get("writer_error"):
        lines.append(f"RUN LOG INCOMPLETE: the {log['writer']} writer failed: {log['writer_error']}; "
                     f"{log.get('unwritten_rows', 0)} rows handed over not written, and the records after the "
                     "failure not in the log")
    if s.get("summary_file_error"):
        lines.append(f"SUMMARY FILE NOT WRITTEN: {s['summary_file_error']} (the summary printed here is whole)")
    if s.get("diverged"):
        d = s["diverged"]
        lines.append(f"PLANT DIVERGED at t = {d['t']:.3f} s (cycle {d['cycle']}): {d['detail']}; safe state held since")
    fw = s.get("firmware") or {}
    if fw.get("realtime"):
        feats = ", ".join(f"{n} {'on' if f['active'] else 'off'}" for n, f in fw["realtime"]["features"].items()
                          if f["detail"] != "not requested")
        lines.append(f"firmware real-time setup: {feats}")
    return lines
