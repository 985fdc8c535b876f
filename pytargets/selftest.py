#!/usr/bin/env python3
"""Run both targets under every interpreter found (or those given) with a few settings (today's
shapes and the autumn-2026 ones) and check each log with check_log.py. usage: selftest.py [PYTHON...]  Exit 0 when all pass."""
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_PYTHONS = [
    "/root/.pyenv/versions/3.10.13/bin/python3", "/root/.pyenv/versions/3.11.7/bin/python3",
    "/root/.pyenv/versions/3.12.1/bin/python3", "/root/.pyenv/versions/3.13.0/bin/python3",
    "/usr/bin/python3.11",
    "/var/lib/specprobe-test/trixie-python3.13",   # Debian trixie's, chrooted (scripts/trixie-python.sh)
]
CASES = [
    ("run_sglang.py", ["--worker", "eagle_v2"], 0),
    ("run_sglang.py", ["--worker", "frozen_kv_mtp", "--seed", "2"], 0),
    ("run_sglang.py", ["--worker", "standalone", "--max-batch", "6"], 0),
    ("run_sglang.py", ["--worker", "multi_layer_eagle", "--hold-frame"], 0),
    ("run_sglang.py", ["--worker", "ngram", "--read-code"], 0),
    ("run_sglang.py", ["--worker", "hybrid", "--seed", "5"], 0),
    ("run_sglang.py", ["--worker", "uno"], 0),
    ("run_sglang.py", ["--worker", "dflash", "--disable-overlap"], 0),
    ("run_sglang.py", ["--worker", "dspark"], 0),
    ("run_sglang.py", ["--worker", "plugin"], 0),
    ("run_sglang.py", ["--worker", "eagle_v2", "--disable-overlap", "--seed", "3"], 0),
    ("run_sglang.py", ["--worker", "eagle_v2", "--hold-frame", "--read-code", "--raise-in-verify", "4"], 0),
    ("run_sglang.py", ["--worker", "eagle_v2", "--crash-in-verify", "5"], 3),
    ("run_sglang.py", ["--worker", "eagle_v2", "--max-batch", "512", "--requests", "600", "--work-scale", "0.02", "--noise-calls", "100"], 0),
    ("run_sglang.py", ["--shape", "autumn2026", "--worker", "eagle_v2"], 0),
    ("run_sglang.py", ["--shape", "autumn2026", "--worker", "ngram", "--disable-overlap"], 0),
    ("run_sglang.py", ["--shape", "autumn2026", "--worker", "multi_layer_eagle"], 0),
    ("run_vllm.py", [], 0),
    ("run_vllm.py", ["--speculator", "mtp", "--dummy-every", "3"], 0),
    ("run_vllm.py", ["--speculator", "dspark", "--hold-frame", "--read-code", "--seed", "4"], 0),
    ("run_vllm.py", ["--speculator", "multi_module_mtp"], 0),
    ("run_vllm.py", ["--runner", "v1", "--crash-in-verify", "5"], 3),
    ("run_vllm.py", ["--shape", "autumn2026"], 0),
    ("run_vllm.py", ["--crash-in-verify", "5"], 3),
    ("run_vllm.py", ["--tp", "2", "--speculator", "mtp", "--dummy-every", "4"], 0),
]


def run_case(py, script, extra, want_rc, tmp, wait_signal=False, term_after=None):
    log = os.path.join(tmp, "truth.jsonl")
    cmd = [py, os.path.join(HERE, script), "--log", log] + extra
    if wait_signal:
        cmd.append("--wait-signal")
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # With --tp N the workers print their own ready lines, in any order with EngineCore's.
    tp = int(extra[extra.index("--tp") + 1]) if "--tp" in extra else 1
    ok = any(p.stdout.readline().startswith("ready pid=%d" % p.pid) for _ in range(tp + 1 if tp > 1 else 1))
    if wait_signal:
        time.sleep(0.2)
        if p.poll() is not None or os.path.exists(log) and os.path.getsize(log) > 0:
            ok = False   # must not serve (nor log) before SIGUSR1
        p.send_signal(signal.SIGUSR1)
    if term_after is not None:
        time.sleep(term_after)
        p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    wall = time.monotonic() - t0
    ok = ok and p.returncode == want_rc
    # TP > 1: EngineCore logs the accepts, the rank-0 worker the verifies and drafts.
    logs = [log] + ([log + ".tp0"] if tp > 1 else [])
    chk = subprocess.run([sys.executable, os.path.join(HERE, "check_log.py")] + logs,
                         capture_output=True, text=True)
    ok = ok and chk.returncode == 0
    summary = [l for l in chk.stdout.splitlines() if l.startswith("  ")]
    return ok, wall, p.returncode, err.strip().splitlines()[-1:] , chk.stdout if not ok else "\n".join(summary)


def main():
    pythons = sys.argv[1:] or [p for p in DEFAULT_PYTHONS if os.path.exists(p)]
    failures = 0
    for py in pythons:
        ver = subprocess.run([py, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True).stdout.strip()
        cases = [(s, e, rc, False, None) for s, e, rc in CASES]
        cases += [("run_sglang.py", ["--requests", "200"], 0, True, 0.4),
                  ("run_vllm.py", ["--requests", "200"], 0, True, 0.4)]
        for script, extra, rc, ws, term in cases:
            with tempfile.TemporaryDirectory() as tmp:
                ok, wall, got, tail, detail = run_case(py, script, extra, rc, tmp, ws, term)
            failures += not ok
            label = "%s %s %s%s%s" % (ver, script, " ".join(extra), " --wait-signal" if ws else "",
                                      " +SIGTERM@%.1fs" % term if term else "")
            print("%-4s %-80s rc=%d %.2fs" % ("ok" if ok else "FAIL", label, got, wall))
            if not ok or os.environ.get("VERBOSE"):
                print(detail)
    print("all passed" if not failures else "%d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
