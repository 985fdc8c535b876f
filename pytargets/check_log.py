#!/usr/bin/env python3
"""Check a pytargets ground-truth log for internal consistency and print stage timings.

usage: check_log.py LOG [LOG...] [--draft-len K] [--quiet]

Several logs are the processes of one server, checked as one: vLLM with TP > 1 writes its
accepts in EngineCore's LOG and its verifies and drafts in the rank-0 worker's LOG.tp0.

Checks: every line is JSON with "stage" or "event"; stage lines have the documented fields and
start_ns <= end_ns; draft/verify/draft_extend(decode) of a step name the same requests in the
same order; every accept names a step that has a verify, with the same rids (SGLang) or a
subsequence of them (vLLM: prefilling requests have no drafts), counts in [0, K]; every verify
gets exactly one accept unless the log ends in a crash or has no "end" event; stage calls of one
thread never overlap, except the calls of a step inside that step's verify when the verify is the
frame that holds them (NGRAM, HYBRID, UNO, DSpark); a HYBRID nested verify lies inside its
step's verify; today's shape names the method of every stage line; per request, the sum of
accepted drafts never exceeds K x its verifies. Exit 0 when consistent, 1 otherwise."""
import argparse
import json
import statistics
import sys

STAGES = {"draft", "verify", "draft_extend", "accept"}


def numbered_lines(paths):
    """The lines of the logs one after the other, numbered across them."""
    n = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                n += 1
                yield n, line


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("log", nargs="+", help="a log, or the logs of one server's processes")
    p.add_argument("--draft-len", type=int, default=None, help="K (default: from the start event, else 4)")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    errors = []

    def err(msg):
        if len(errors) < 50:
            errors.append(msg)

    stages, events = [], []
    for n, line in numbered_lines(a.log):
        try:
            obj = json.loads(line)
        except ValueError as e:
            err("line %d: not JSON (%s)" % (n, e))
            continue
        obj["_line"] = n
        if "stage" in obj:
            stages.append(obj)
        elif "event" in obj:
            events.append(obj)
        else:
            err("line %d: neither stage nor event" % n)

    start = next((e for e in events if e["event"] == "start"), None)
    shape = (start or {}).get("shape", "autumn2026")
    end = next((e for e in events if e["event"] == "end"), None)
    crashed = any(e["event"] == "crash" for e in events)
    engine = (start or {}).get("engine", "sglang")
    K = a.draft_len or (start or {}).get("draft_len") or 4

    for s in stages:
        n = s["_line"]
        if s["stage"] not in STAGES:
            err("line %d: unknown stage %r" % (n, s["stage"]))
        if not isinstance(s.get("rids"), list) or not s["rids"] or not all(isinstance(r, str) for r in s["rids"]):
            err("line %d: rids must be a non-empty list of strings" % n)
        if not isinstance(s.get("step"), int):
            err("line %d: step must be an int" % n)
        if shape == "today" and s["stage"] != "accept" and not isinstance(s.get("method"), str):
            err("line %d: a %s line of today's shape must name its method" % (n, s["stage"]))
        if s["stage"] == "accept":
            c = s.get("num_correct_drafts")
            if not isinstance(c, list) or len(c) != len(s["rids"]):
                err("line %d: num_correct_drafts not index-aligned with rids" % n)
            elif any((not isinstance(x, int)) or x < 0 or x > K for x in c):
                err("line %d: num_correct_drafts out of [0, %d]: %s" % (n, K, c))
        else:
            for k in ("tid", "start_ns", "end_ns"):
                if not isinstance(s.get(k), int):
                    err("line %d: %s must be an int" % (n, k))
            if isinstance(s.get("start_ns"), int) and isinstance(s.get("end_ns"), int) and s["start_ns"] > s["end_ns"]:
                err("line %d: start_ns > end_ns" % n)

    by_step = {}
    for s in stages:
        if s.get("error"):
            continue  # a verify that raised; the retry is the step's verify
        if s["stage"] in ("draft", "verify") or (s["stage"] == "draft_extend" and s.get("mode") != "prefill"):
            key = (s["step"], s["stage"])
            if key in by_step:
                err("line %d: second %s for step %d" % (s["_line"], s["stage"], s["step"]))
            by_step[key] = s
    for (step, st), s in by_step.items():
        if st != "verify":
            v = by_step.get((step, "verify"))
            if v is not None and v["rids"] != s["rids"]:
                err("step %d: %s rids differ from verify rids" % (step, st))

    accepts = [s for s in stages if s["stage"] == "accept"]
    acc_by_step = {}
    for acc in accepts:
        if acc["step"] in acc_by_step:
            err("line %d: second accept for step %d" % (acc["_line"], acc["step"]))
        acc_by_step[acc["step"]] = acc
        v = by_step.get((acc["step"], "verify"))
        if v is None:
            err("line %d: accept for step %d has no verify" % (acc["_line"], acc["step"]))
            continue
        if engine == "vllm":
            it = iter(v["rids"])
            if not all(r in it for r in acc["rids"]):
                err("line %d: accept rids are not a subsequence of verify rids (step %d)" % (acc["_line"], acc["step"]))
        elif acc["rids"] != v["rids"]:
            err("line %d: accept rids differ from verify rids (step %d)" % (acc["_line"], acc["step"]))
        if acc.get("ts_ns", 0) < v["end_ns"]:
            err("line %d: accept resolved before its verify ended (step %d)" % (acc["_line"], acc["step"]))
    verifies = sorted(s["step"] for (step, st), s in by_step.items() if st == "verify")
    # vLLM: a step whose batch verified no drafts (only prefills) has no accept line.
    missing = [st for st in verifies if st not in acc_by_step
               and by_step[(st, "verify")].get("num_spec_reqs", 1) != 0]
    for acc in accepts:
        v = by_step.get((acc["step"], "verify"))
        if v is not None and "num_spec_reqs" in v and v["num_spec_reqs"] != len(acc["rids"]):
            err("line %d: accept names %d requests, verify had %d with drafts" % (
                acc["_line"], len(acc["rids"]), v["num_spec_reqs"]))
    if missing and end is not None and not crashed:
        err("verify steps without an accept: %s" % missing[:10])

    # HYBRID: the routed worker's verify runs inside the controller's (the step's verify).
    for e in events:
        if e["event"] != "nested_verify":
            continue
        v = by_step.get((e["step"], "verify"))
        if v is None or not (v["start_ns"] <= e["start_ns"] <= e["end_ns"] <= v["end_ns"]) or v["rids"] != e["rids"]:
            err("line %d: nested verify of step %d is not inside that step's verify" % (e["_line"], e["step"]))

    # Late acceptance: resolved after a later step's verify began.
    verify_starts = sorted((s["start_ns"], s["step"]) for (step, st), s in by_step.items() if st == "verify")
    late = 0
    for acc in accepts:
        if any(t < acc.get("ts_ns", 0) and stp > acc["step"] for t, stp in verify_starts):
            late += 1

    # No overlapping stage calls on one thread (NGRAM verify contains its draft: allowed).
    calls = sorted((s for s in stages if s["stage"] != "accept"), key=lambda s: (s["tid"], s["start_ns"], -s["end_ns"]))
    prev = None
    for s in calls:
        if prev is not None and prev["tid"] == s["tid"] and s["start_ns"] < prev["end_ns"]:
            # A verify frame that holds its step's other stages (NGRAM, HYBRID, UNO, DSpark).
            nested = s["end_ns"] <= prev["end_ns"] and prev["stage"] == "verify" and s["stage"] != "verify" and prev["step"] == s["step"]
            if not nested:
                err("line %d: %s overlaps line %d (%s)" % (s["_line"], s["stage"], prev["_line"], prev["stage"]))
                prev = s
            continue
        prev = s

    per_req_acc, per_req_ver = {}, {}
    for acc in accepts:
        for r, c in zip(acc["rids"], acc["num_correct_drafts"]):
            per_req_acc[r] = per_req_acc.get(r, 0) + c
            per_req_ver[r] = per_req_ver.get(r, 0) + 1
    for r, tot in per_req_acc.items():
        if tot > K * per_req_ver[r]:
            err("request %s: %d accepted drafts in %d verifies" % (r, tot, per_req_ver[r]))

    if not a.quiet:
        print("log: %s  engine=%s K=%d lines=%d stage-lines=%d events=%d crashed=%s complete=%s" % (
            a.log, engine, K, len(stages) + len(events), len(stages), len(events), crashed, end is not None))
        for st in ("draft", "verify", "draft_extend"):
            d = [(s["end_ns"] - s["start_ns"]) / 1000.0 for s in stages if s["stage"] == st]
            if d:
                d.sort()
                print("  %-13s n=%-4d median=%7.0fus p90=%7.0fus max=%7.0fus" % (
                    st, len(d), statistics.median(d), d[int(0.9 * (len(d) - 1))], d[-1]))
        tot_acc = sum(sum(x["num_correct_drafts"]) for x in accepts)
        tot_slots = K * sum(len(x["rids"]) for x in accepts)
        rids = {r for s in stages for r in s["rids"]}
        sizes = [len(s["rids"]) for (step, st), s in by_step.items() if st == "verify"]
        print("  accept lines=%d late(after a later verify began)=%d acceptance=%.3f requests=%d max-batch=%d distinct-batches=%d" % (
            len(accepts), late, tot_acc / tot_slots if tot_slots else 0.0, len(rids), max(sizes or [0]),
            len({tuple(s["rids"]) for (step, st), s in by_step.items() if st == "verify"})))
        if start and end:
            print("  run: %.3f s (start->end event), %s" % ((end["ts_ns"] - start["ts_ns"]) / 1e9,
                  {k: v for k, v in end.items() if k not in ("event", "tid", "ts_ns", "_line")}))
        holds = [e for e in events if e["event"] == "hold_frame"]
        reads = [e for e in events if e["event"] == "read_code"]
        if holds or reads:
            print("  caveats: hold_frame=%d release_frame=%d read_code=%d" % (
                len(holds), sum(e["event"] == "release_frame" for e in events), len(reads)))
    for e in errors:
        print("ERROR:", e)
    print("OK" if not errors else "FAILED (%d errors)" % len(errors))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
