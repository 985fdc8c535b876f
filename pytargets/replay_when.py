#!/usr/bin/env python3
"""Replays a spec's `when`s in the target itself, without BPF: runs a pytargets script under a
profile hook that, at each return of a named stage function, reads the spec's `when` value and
the requests the way specprobe does (from the frame as it returns) and writes one JSON line per
call: {"stage", "rids", "value", "kept"}. A test compares the kept calls with the target's own
ground-truth log, so a spec's `when` is checked against a shape on machines where hardware
watchpoints do not fire.

usage: replay_when.py OUT STAGE=MODULE:QUALNAME:ARG:PATH:EQUALS... -- SCRIPT [ARGS...]
ARG may list names separated by "|" (the first the function has); PATH is dotted attributes;
EQUALS may list values separated by "|" (a call is kept if its value is any of them)."""
import json
import os
import runpy
import sys
import threading


def resolve(module, qualname):
    mod = sys.modules.get(module)
    if mod is None:
        return None
    obj = mod
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return getattr(obj, "__code__", None)


def read(frame, args, path):
    for name in args.split("|"):
        if name in frame.f_locals:
            value = frame.f_locals[name]
            break
    else:
        raise KeyError(args)
    for attr in filter(None, path.split(".")):
        value = getattr(value, attr)
    return value


def as_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):   # an IntEnum member reads as its int, as in specprobe
        return str(int(value))
    return str(value)


def main():
    sep = sys.argv.index("--")
    out_path, stage_args, target = sys.argv[1], sys.argv[2:sep], sys.argv[sep + 1:]
    stages = []
    for s in stage_args:
        name, rest = s.split("=", 1)
        module, qualname, arg, path, equals = rest.split(":")
        stages.append({"name": name, "module": module, "qualname": qualname, "arg": arg,
                       "path": path, "equals": equals.split("|"), "code": None})
    out = open(out_path, "w")

    def hook(frame, event, _arg):
        if event != "return":
            return
        for st in stages:
            if st["code"] is None:
                st["code"] = resolve(st["module"], st["qualname"])
            if st["code"] is not None and frame.f_code is st["code"]:
                value = as_text(read(frame, st["arg"], st["path"]))
                reqs = read(frame, st["arg"], "reqs")
                out.write(json.dumps({"stage": st["name"], "rids": [r.rid for r in reqs],
                                      "value": value, "kept": value in st["equals"]}) + "\n")

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
        out.close()


if __name__ == "__main__":
    main()
