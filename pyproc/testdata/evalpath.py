"""Python's own reading of a pyproc.Eval path, for the fixtures' expected
values: ev(obj, path, last) walks path from obj and returns last(value)."""
import re


def ev(obj, path, last):
    for tok in re.findall(r"\[[^\]]*\]|\.?\w+", path):
        if tok == "[*]":
            rest = path[path.index("[*]") + 3:]
            return [ev(x, rest, last) for x in obj]
        if tok.startswith("["):
            inner = tok[1:-1]
            obj = obj[inner[1:-1]] if inner[0] in "'\"" else obj[int(inner)]
        else:
            obj = getattr(obj, tok.lstrip("."))
    return last(obj)
