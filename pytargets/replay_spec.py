#!/usr/bin/env python3
"""Replays a spec's reads in the target itself, without BPF: runs a pytargets script under a
profile hook that, at each return of a stage function, reads what the spec names the way
specprobe does (from the frame as it returns: its arguments and locals, the return value, or the
frame of read_from up the stack) and writes one JSON line per call:
{"stage", "rids", "kept", "counts", "error"}. "kept" is false for a call the stage's `when` leaves
out; "counts" (accept stages) maps each drafted request to its count. A test compares these with
the target's own ground-truth log, so the catalog's paths, `when`s and counts are checked against
each mirror where hardware watchpoints do not fire. It checks the spec and the mirror, not the
trap: how specprobe's BPF reader gets the same values is tested where watchpoints fire.

usage: replay_spec.py OUT STAGES.json -- SCRIPT [ARGS...]
STAGES.json: {"stages": [{"name", "module", "qualname", "requests", "when", "read_from",
"accepted", "drafted"}, ...], "boundary": {"module", "qualname"} or null}, each read as
docs/probe-spec.md says (arg: a name, a list of names or a position; path: .attr, [n], ["key"],
[*]). Where no stage names requests, each call serves its thread's stream as specprobe makes it:
"<boundary qualname>-<tid>-<n>" inside the n-th outermost boundary call on the thread, else
"thread-<tid>-1"; a stage call inside another stage call is part of it and makes no line."""
import json
import os
import re
import runpy
import sys
import threading

STEP = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[(-?[0-9]+)\]|\["([^"]*)"\]|(\[\*\])')


def resolve(module, qualname):
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        if obj is None:
            return None
        obj = getattr(obj, part, None)
    if isinstance(obj, property):
        obj = obj.fget
    while obj is not None and hasattr(obj, "__wrapped__"):
        obj = obj.__wrapped__
    return getattr(getattr(obj, "__func__", obj), "__code__", None)


def steps(path):
    if path and path[0] not in ".[":
        path = "." + path   # "reqs[*]": a leading attribute
    out, pos = [], 0
    while pos < len(path):
        m = STEP.match(path, pos)
        if m is None:
            raise ValueError("bad path %r at %d" % (path, pos))
        attr, index, key, star = m.groups()
        out.append(("attr", attr) if attr else ("index", int(index)) if index is not None
                   else ("key", key) if key is not None else ("star", None))
        pos = m.end()
    return out


def walk(value, path_steps):
    """The value at a path: a list where it has [*] (a dict's keys, in order), else one value."""
    for i, (kind, arg) in enumerate(path_steps):
        if kind == "attr":
            value = getattr(value, arg)
        elif kind in ("index", "key"):
            value = value[arg]
        else:
            items = list(value.keys()) if isinstance(value, dict) else list(value)
            return [walk(item, path_steps[i + 1:])[0] for item in items], True
    return value, False


def arg_name(code, arg):
    if isinstance(arg, int):
        return code.co_varnames[arg]
    if isinstance(arg, list):
        names = code.co_varnames + code.co_cellvars
        return next(n for n in arg if n in names)
    return arg


def read(frame, retval, spec, code):
    name = arg_name(code, spec["arg"])
    value = retval if name == "return" else frame.f_locals[name]
    return walk(value, steps(spec.get("path") or ""))


def as_text(value):
    if isinstance(value, bool):
        return ["True", "true"] if value else ["False", "false"]
    if isinstance(value, int):   # an IntEnum member reads as its int, as in specprobe
        return [str(int(value))]
    return [str(value)]


def requests(frame, retval, spec, code):
    value, is_list = read(frame, retval, {"arg": spec["arg"], "path": spec.get("path")}, code)
    items = value if is_list else (list(value) if isinstance(value, (list, tuple)) else [value])
    if spec.get("id"):
        items = [walk(item, steps(spec["id"]))[0] for item in items]
    return [str(item) for item in items]


def counts(frame, retval, st, code, rids):
    acc = st["accepted"]
    values, _ = read(frame, retval, acc, code)
    sub = 0
    if acc.get("sub"):
        sub = read(frame, retval, acc["sub"], code)[0]
    out = {}
    drafted = None
    if st.get("drafted"):
        drafted = set(str(d) for d in read(frame, retval, st["drafted"], code)[0])
    if len(values) != len(rids):
        raise ValueError("%d requests but %d accepted counts" % (len(rids), len(values)))
    for rid, v in zip(rids, values):
        if drafted is not None and rid not in drafted:
            continue
        n = (len(v) if acc.get("len") else int(v)) + acc.get("add", 0)
        if acc.get("sub"):
            n = max(n - int(sub), 0)
        out[rid] = n
    return out


def read_frame(frame, qualname):
    f = frame.f_back
    while f is not None:
        qn = getattr(f.f_code, "co_qualname", None)   # 3.11+; 3.10 has the name only
        if qn == qualname or (qn is None and f.f_code.co_name == qualname.split(".")[-1]):
            return f
        f = f.f_back
    raise LookupError("no frame of %s up the stack" % qualname)


def record(st, frame, retval):
    line = {"stage": st["name"], "rids": [], "kept": True}
    code = st["code"]
    try:
        src, src_code = frame, code
        if st.get("read_from"):
            src = read_frame(frame, st["read_from"])
            src_code = src.f_code
        if st.get("requests"):
            line["rids"] = requests(src, retval, st["requests"], src_code)
        if st.get("when"):
            value, _ = read(src, retval, st["when"], src_code)
            line["kept"] = any(t in st["when"]["equals"] for t in as_text(value))
        if st.get("accepted"):
            line["counts"] = counts(src, retval, st, src_code, line["rids"])
    except Exception as e:  # a failed read: the call serves none, as specprobe counts it
        line.update(kept=False, error="%s: %s" % (type(e).__name__, e))
    return line


class Streams:
    """A thread's requests where no stage names them: its boundary calls, its open stage calls."""

    def __init__(self, boundary):
        self.boundary = boundary
        self.local = threading.local()

    def state(self):
        loc = self.local
        if not hasattr(loc, "stages"):
            loc.stages, loc.bounds, loc.n = 0, 0, 0
        return loc

    def enter(self, is_boundary):
        loc = self.state()
        if is_boundary:
            if loc.bounds == 0 and loc.stages == 0:   # the outermost, outside any stage call
                loc.n += 1
            loc.bounds += 1
        else:
            loc.stages += 1

    def leave(self, is_boundary):
        """For a stage call, its request, or None where it lies inside another stage call."""
        loc = self.state()
        if is_boundary:
            loc.bounds = max(loc.bounds - 1, 0)
            return None
        loc.stages = max(loc.stages - 1, 0)
        if loc.stages > 0:
            return None
        tid = threading.get_native_id()
        if loc.bounds > 0:
            return "%s-%d-%d" % (self.boundary["qualname"], tid, loc.n)
        return "thread-%d-1" % tid


def main():
    sep = sys.argv.index("--")
    out_path, stages_path, target = sys.argv[1], sys.argv[2], sys.argv[sep + 1:]
    with open(stages_path) as f:
        conf = json.load(f)
    stages, boundary = conf["stages"], conf.get("boundary")
    streams = None
    if not any(st.get("requests") for st in stages):
        streams = Streams(boundary or {"qualname": "thread"})
    watched = stages + ([dict(boundary, name="request_boundary")] if boundary else [])
    for st in watched:
        st["code"] = None
    out = open(out_path, "w")
    lock = threading.Lock()

    def write(line):
        with lock:
            out.write(json.dumps(line) + "\n")

    def hook(frame, event, arg):
        if event not in ("call", "return"):
            return
        for st in watched:
            if st["code"] is None:
                st["code"] = resolve(st["module"], st["qualname"])
            if st["code"] is None or frame.f_code is not st["code"]:
                continue
            is_boundary = st["name"] == "request_boundary"
            if streams is None:
                if event == "return":
                    write(record(st, frame, arg))
            elif event == "call":
                streams.enter(is_boundary)
            else:
                rid = streams.leave(is_boundary)
                if rid is not None:
                    write({"stage": st["name"], "rids": [rid], "kept": True})

    sys.argv = target
    sys.path.insert(0, os.path.dirname(os.path.abspath(target[0])))
    threading.setprofile(hook)
    sys.setprofile(hook)
    try:
        runpy.run_path(target[0], run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
        out.close()


if __name__ == "__main__":
    main()
