"""pyproc test target: reports where each shape's code object lives, then idles.

Usage: python target.py OUT.jsonl [N]   (with testdata/ on PYTHONPATH)
N extra empty modules go into sys.modules, to size it like a large server's.
Writes one JSON line per shape ({"qualname", "id", "code_qualname", "flags",
"firstline"}), one per thread ({"thread", "tid"}) and one {"version"}; prints
"ready"; then blocks reading stdin until killed or stdin closes.
"""
import json
import sys
import threading
import types

import specfixture.workers as workers


def worker(started, up, stop):
    started.append(threading.get_native_id())
    up.set()
    stop.wait()


def main():
    out = open(sys.argv[1], "w")
    for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 0):
        sys.modules[f"filler.mod{i}"] = types.ModuleType(f"filler.mod{i}")
    for qualname, fn in workers.shapes():
        code = fn.__code__
        out.write(json.dumps({
            "qualname": qualname, "id": id(code), "code_qualname": fn.__qualname__,
            "flags": code.co_flags, "firstline": code.co_firstlineno,
        }) + "\n")
    started, up, stop = [], threading.Event(), threading.Event()
    threading.Thread(target=worker, args=(started, up, stop), daemon=True).start()
    up.wait()
    out.write(json.dumps({"thread": "main", "tid": threading.get_native_id()}) + "\n")
    out.write(json.dumps({"thread": "worker", "tid": started[0]}) + "\n")
    out.write(json.dumps({"version": list(sys.version_info[:3])}) + "\n")
    out.close()
    print("ready", flush=True)
    sys.stdin.read()


main()
