#!/usr/bin/env python3
"""Checks specprobe's spans (otlp-file JSON lines) against the GPU check
target's own log (pytargets/torch_spec_loop.py), and prints the costs.
Standard library only. Exit 1 when a check fails.

  check.py spans MODE LOG SPANS ATTACH_LOG   one traced run
  check.py costs COSTS_TSV                   step times: untraced / no NVML / NVML
"""
import collections
import json
import statistics
import sys

STAGES = {"spec_draft": "draft", "spec_verify": "verify", "spec_draft_extend": "draft_extend"}
# Tolerance of the CUDA sync duration against the target's own host-clock
# measurement around .tolist(): the probe's entry/exit bracket the driver call,
# the target's clock brackets the Python call around it.
SYNC_ABS_S = 200e-6
SYNC_REL = 0.10
failed = []


def ok(name, cond, detail):
    print("  %-4s %s: %s" % ("ok" if cond else "FAIL", name, detail))
    if not cond:
        failed.append(name)


def value(v):
    for k in ("stringValue", "doubleValue", "boolValue"):
        if k in v:
            return v[k]
    if "intValue" in v:
        return int(v["intValue"])
    if "arrayValue" in v:
        return [value(x) for x in v["arrayValue"].get("values", [])]
    return None


def spans_of(path):
    out = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            for rs in json.loads(line).get("resourceSpans", []):
                for ss in rs.get("scopeSpans", []):
                    for s in ss.get("spans", []):
                        s["attrs"] = {a["key"]: value(a["value"]) for a in s.get("attributes", [])}
                        s["start"], s["end"] = int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])
                        out.append(s)
    return out


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def check_spans(mode, log_path, spans_path, attach_log):
    print("== %s run" % mode)
    log = [json.loads(l) for l in open(log_path) if l.strip()]
    spans = spans_of(spans_path)
    # One call of a batch stage is one span per request, same bounds.
    calls = collections.OrderedDict()
    for s in sorted(spans, key=lambda s: s["start"]):
        st = STAGES.get(s["name"])
        if st is None:
            continue
        c = calls.setdefault((st, s["attrs"].get("thread.id"), s["start"], s["end"]), {"rids": [], "acc": {}, "spans": []})
        c["rids"].append(s["attrs"].get("rid"))
        c["spans"].append(s)
        if "num_correct_drafts" in s["attrs"]:
            c["acc"][s["attrs"]["rid"]] = s["attrs"]["num_correct_drafts"]
    by_stage = collections.defaultdict(list)
    for k, c in calls.items():
        by_stage[k[0]].append(c)
    logged = collections.defaultdict(list)
    for r in log:
        logged[r["stage"]].append(r)
    for st in ("draft", "verify", "draft_extend"):
        ok("%s calls" % st, len(by_stage[st]) == len(logged[st]),
           "%d spans' calls, %d logged" % (len(by_stage[st]), len(logged[st])))
    bad_rids = bad_acc = 0
    for st in ("draft", "verify", "draft_extend"):
        for c, r in zip(by_stage[st], logged[st]):
            if sorted(c["rids"]) != sorted(r["rids"]):
                bad_rids += 1
            if st == "verify" and c["acc"] != dict(zip(r["rids"], r["accepted"])):
                bad_acc += 1
    ok("request ids per call", bad_rids == 0, "%d calls differ" % bad_rids)
    ok("accepted counts", bad_acc == 0, "%d verify calls differ (%d verifies)" % (bad_acc, len(logged["verify"])))

    # Durations and the time each stage waited for the GPU, against the log.
    for st in ("draft", "verify", "draft_extend"):
        pairs = list(zip(by_stage[st], logged[st]))
        if not pairs:
            continue
        span_ms = [(c["spans"][0]["end"] - c["spans"][0]["start"]) / 1e6 for c, _ in pairs]
        log_ms = [(r["end_ns"] - r["start_ns"]) / 1e6 for _, r in pairs]
        gpu_ms = [r.get("gpu_ms") for _, r in pairs if r.get("gpu_ms") is not None]
        print("  info %s: span p50 %.3f ms, logged p50 %.3f ms, GPU (CUDA events) p50 %s ms" % (
            st, statistics.median(span_ms), statistics.median(log_ms),
            "%.3f" % statistics.median(gpu_ms) if gpu_ms else "n/a"))
        syncs = [(c["spans"][0]["attrs"].get("specprobe.cuda.sync.duration"), r.get("sync_ns", 0) / 1e9) for c, r in pairs]
        have = [(a, b) for a, b in syncs if a is not None]
        if not have:
            print("  SKIP %s cuda.sync.duration: absent from the spans (CUDA probes not in this binary, or no libcuda)" % st)
        else:
            within = sum(1 for a, b in have if abs(a - b) <= max(SYNC_ABS_S, SYNC_REL * b))
            diffs = [abs(a - b) * 1e3 for a, b in have]
            ok("%s cuda.sync.duration" % st, within >= 0.95 * len(have),
               "%d of %d within max(%.1f ms, %d%%) of the logged blocked time; |diff| p50 %.3f ms p99 %.3f ms; span p50 %.3f ms, logged p50 %.3f ms" % (
                   within, len(have), SYNC_ABS_S * 1e3, SYNC_REL * 100, pct(diffs, .5), pct(diffs, .99),
                   statistics.median(a for a, _ in have) * 1e3, statistics.median(b for _, b in have) * 1e3))
        launches = [(c["spans"][0]["attrs"].get("specprobe.cuda.launches"), r.get("launches")) for c, r in pairs]
        la = [a for a, _ in launches if a is not None]
        lb = [b for _, b in launches if b is not None]
        print("  info %s launches: spans p50 %s (%d spans carry it), target's own count p50 %s (known only to the dry-run stand-in, which calls no libcuda)" % (
            st, statistics.median(la) if la else "n/a", len(la), statistics.median(lb) if lb else "unknown"))
    # Step spans: what happened outside the stages.
    loops = [s for s in spans if s["name"] == "decode_loop"]
    ls = [s["attrs"].get("specprobe.cuda.sync.duration") for s in loops]
    ls = [x for x in ls if x is not None]
    print("  info decode_loop: %d spans, %d with cuda.sync.duration (p50 %s ms)" % (
        len(loops), len(ls), "%.3f" % (statistics.median(ls) * 1e3) if ls else "n/a"))

    # GPU fields: only with their window, only where it describes the span.
    with_gpu = bad = 0
    for s in spans:
        if s["name"] not in STAGES and s["name"] != "decode_loop":
            continue
        keys = [k for k in s["attrs"] if k.startswith("hw.") or (k.startswith("specprobe.gpu.") and not k.startswith("specprobe.gpu.window."))]
        if not keys:
            continue
        with_gpu += 1
        ws, wd = s["attrs"].get("specprobe.gpu.window.start"), s["attrs"].get("specprobe.gpu.window.duration")
        d = s["end"] - s["start"]
        if ws is None or wd is None or ws < s["start"] - d / 2 or ws + wd * 1e9 > s["end"] + d / 2:
            bad += 1
    ok("GPU fields' windows", bad == 0,
       "%d stage/step spans of %d carry GPU values; %d without a window that describes them "
       "(rule: the window within the span stretched by half its length each side)" % (with_gpu, len(spans), bad))
    wins = [s for s in spans if s["name"] == "gpu_window"]
    eps = [s["attrs"]["specprobe.gpu.energy_per_step"] for s in wins if "specprobe.gpu.energy_per_step" in s["attrs"]]
    ept = [s["attrs"]["specprobe.gpu.energy_per_accepted_token"] for s in wins if "specprobe.gpu.energy_per_accepted_token" in s["attrs"]]
    print("  info gpu_window: %d spans (p50 %.2f s); energy per step p50 %s J, per accepted token p50 %s J; power p50 %s W" % (
        len(wins), statistics.median((s["end"] - s["start"]) / 1e9 for s in wins) if wins else 0,
        "%.4f" % statistics.median(eps) if eps else "n/a", "%.5f" % statistics.median(ept) if ept else "n/a",
        "%.0f" % statistics.median(s["attrs"]["hw.power"] for s in wins if "hw.power" in s["attrs"])
        if any("hw.power" in s["attrs"] for s in wins) else "n/a"))
    for line in open(attach_log, errors="replace"):
        if "NVML cost:" in line or "GPU state" in line or "CUDA" in line or "libcuda" in line:
            print("  info specprobe: " + line.strip())


def check_costs(path):
    print("== costs: step time, interleaved runs (medians of each run's median step)")
    runs = collections.defaultdict(list)
    tails = collections.defaultdict(list)  # p99 step: where a driver lock held by NVML would show
    for line in open(path):
        f = line.split()
        if len(f) == 4 and f[2] != "nan":
            runs[f[1]].append(float(f[2]))
            tails[f[1]].append(float(f[3]))
    base = statistics.median(runs["untraced"]) if runs["untraced"] else None
    for kind in ("untraced", "traced-no-nvml", "traced-nvml"):
        xs = runs[kind]
        if not xs:
            print("  FAIL %s: no runs" % kind)
            failed.append(kind)
            continue
        m = statistics.median(xs)
        print("  info %-15s %.4f ms/step (runs: %s)%s; p99 step %s ms" % (kind, m, " ".join("%.4f" % x for x in xs),
              "  x%.4f of untraced" % (m / base) if base else "", " ".join("%.3f" % x for x in tails[kind])))
    if runs["traced-no-nvml"] and runs["traced-nvml"]:
        a, b = statistics.median(runs["traced-no-nvml"]), statistics.median(runs["traced-nvml"])
        spread = max(runs["traced-no-nvml"]) - min(runs["traced-no-nvml"])
        print("  info NVML's cost: %+.2f%% (%.4f -> %.4f ms/step; run-to-run spread without NVML %.4f ms = %.2f%%)" % (
            100 * (b / a - 1), a, b, spread, 100 * spread / a))


def main():
    if sys.argv[1] == "spans":
        check_spans(*sys.argv[2:6])
    elif sys.argv[1] == "costs":
        check_costs(sys.argv[2])
    if failed:
        print("FAILED: " + ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
