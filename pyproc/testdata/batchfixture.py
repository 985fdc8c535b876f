"""pyproc batched Eval test target: lists of N requests of every instance
layout pyproc reads, and a dict keyed by their ids, read from outside.

Usage: python batchfixture.py OUT.json N
Writes {"batch": id(batch), "version": [...], "values": {path: value}}, where
each value is what Python reads at that path (pyproc.Eval's grammar; an
object that is no int, str, list, None or bool is {"Addr": id, "Type": name}),
then prints "ready". Each stdin line "mutate" changes the objects in the ways
a reader's caches must notice (see mutate), writes OUT.json again and prints
"ready". Exits when stdin closes.
"""
import dataclasses
import gc
import json
import random
import sys
import uuid

import evalpath


class Req:
    # SGLang's Req is a plain class: attributes set in __init__ share keys.
    kind = "plain"

    def __init__(self, rng, i):
        self.rid = uuid.UUID(int=rng.getrandbits(128), version=4).hex
        self.spec_verify_ct = rng.randrange(0, 1 << 40) - (1 << 39)
        self.output_ids = [rng.randrange(32000) for _ in range(1 + i % 3)]
        self.finished_reason = None


class BigReq:
    """As many attributes as SGLang's Req sets in __init__: past the 30 that
    3.11+ keep in values over shared keys, each instance has a dict of its
    own."""

    def __init__(self, i):
        self.rid = f"big-{i:04d}-" + uuid.UUID(int=i, version=4).hex
        for k in range(60):
            setattr(self, f"field_{k}", k * i)
        self.spec_verify_ct = i


class OtherReq:
    # Same attributes in another order: other shared keys, same layout, so
    # __class__ can be assigned between the two.
    kind = "other"

    def __init__(self, rid):
        self.finished_reason = None
        self.output_ids = [7]
        self.spec_verify_ct = 3
        self.rid = rid


@dataclasses.dataclass
class DReq:
    rid: str
    n: int


class SReq:
    __slots__ = ("rid", "n")

    def __init__(self, rid, n):
        self.rid, self.n = rid, n


@dataclasses.dataclass(slots=True)
class DSReq:
    rid: str
    n: int


class Group:
    def __init__(self, reqs):
        self.reqs = reqs


class Batch:
    pass


def ephemeral_class(generation):
    """A class made anew on each mutate, slotted one time and not the next:
    the old one is freed, and the new one may take its address."""
    if generation % 2:
        return type("Eph", (), {"__slots__": ("rid",), "__init__": lambda s, r: setattr(s, "rid", r)})
    return type("Eph", (), {"__init__": lambda s, r: setattr(s, "rid", r)})


def build(n):
    rng = random.Random(11)
    b = Batch()
    b.reqs = [Req(rng, i) for i in range(n)]
    b.dreqs = [DReq(f"d-{i}", i * 3) for i in range(n)]
    b.sreqs = [SReq(f"s-{i}", -i) for i in range(n)]
    b.dsreqs = [DSReq(f"ds-{i}", 2 ** 62 + i) for i in range(n)]
    b.nreqs = [DReq(f"réq-{i}-数据-🚀" + "é" * (i % 70), i) for i in range(n)]
    b.num_scheduled_tokens = {r.rid: i % 5 + 1 for i, r in enumerate(b.reqs)}
    kinds = [b.reqs, b.dreqs, b.sreqs, b.dsreqs]
    b.mixed = [kinds[i % 4][i] for i in range(n)]
    b.treqs = tuple(b.reqs)
    b.bigreqs = [BigReq(i) for i in range(n)]
    b.groups = [Group(b.reqs[i::4]) for i in range(4)]
    for r in b.reqs[1::5]:
        r.__dict__  # 3.11+: a dict object takes over the values
    b.eph_gen = 0
    b.Eph = ephemeral_class(0)
    b.eph = [b.Eph(f"e-{i}") for i in range(n)]
    return b


def mutate(b):
    rng = random.Random(len(b.reqs))
    Req.kind = "changed"  # a class attribute: the type's version tag resets
    if len(b.reqs) > 6:
        r = b.reqs[5]
        r.__class__ = OtherReq  # other shared keys: 3.11+ make a dict first
        b.reqs[6].rid = "rid-replaced"
        b.reqs[3].extra = 1  # one more key in the shared keys (or a dict)
    b.reqs.append(Req(rng, 99))
    b.reqs.pop(0)
    b.sreqs[len(b.sreqs) // 2].rid = "slot-new"
    b.num_scheduled_tokens.pop(next(iter(b.num_scheduled_tokens)))
    b.num_scheduled_tokens["new-" + "ü" * 3] = 9
    b.dreqs = [DReq(f"d2-{i}", i) for i in range(len(b.dreqs))]
    b.bigreqs[1].rid = "big-replaced"
    del b.bigreqs[2].field_3  # a deleted entry in one instance's dict
    b.bigreqs[3].__dict__["rid"] = "rid-" + "🚀" * 3
    b.eph_gen += 1
    b.eph = None
    b.Eph = None
    gc.collect()  # a class sits in reference cycles: only the collector frees it
    b.Eph = ephemeral_class(b.eph_gen)
    b.eph = [b.Eph(f"e{b.eph_gen}-{i}") for i in range(len(b.reqs))]


PATHS = [
    "reqs[*].rid", "reqs[*].spec_verify_ct", "reqs[*].output_ids", "reqs[*].output_ids[-1]",
    "reqs[*].finished_reason", "reqs[*].kind", "reqs[-1].rid", "dreqs[*].rid", "dreqs[*].n",
    "sreqs[*].rid", "sreqs[*].n", "dsreqs[*].rid", "dsreqs[*].n", "nreqs[*].rid",
    "num_scheduled_tokens[*]", "mixed[*].rid", "treqs[*].rid", "groups[*].reqs[*].rid",
    "eph[*].rid", "sreqs", "treqs[0]", "bigreqs[*].rid", "bigreqs[*].spec_verify_ct", "bigreqs[*].field_59",
]


def plain(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return {"Addr": id(v), "Type": type(v).__name__}


def write(out, b):
    with open(out, "w") as f:
        json.dump({"batch": id(b), "version": list(sys.version_info[:3]),
                   "values": {p: evalpath.ev(b, p, plain) for p in PATHS}}, f)


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    b = build(n)
    write(out, b)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "mutate":
            mutate(b)
            write(out, b)
            print("ready", flush=True)


main()
