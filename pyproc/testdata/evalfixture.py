"""pyproc FindFrame/Local/Eval test target: SGLang-shaped objects, then a
stage call that blocks while the test reads them from outside.

Usage: python evalfixture.py OUT.json [NREQS]
Writes one JSON object: {"tid", "batch", "stage_code", "wait_code",
"unused_code", "version", "values": {path: expected value}} where each
value is what Python itself reads at that path (same grammar as
pyproc.Eval); prints "ready"; then runs stage(batch) in a loop. stage
calls wait_line(batch, 7), which blocks reading one stdin line; on a line
the loop adds 1 to reqs[0].spec_verify_ct, prints {"spec_verify_ct": n} and
calls stage again. Exits when stdin closes.
"""
import dataclasses
import enum
import json
import random
import sys
import threading
import uuid
from collections import namedtuple

import evalpath

CONSTANT = 42


class Req:
    # SGLang's Req is a plain class: attributes set in __init__ share keys.
    kind = "plain"  # a class attribute no instance overrides

    def __init__(self, rng, i):
        self.rid = uuid.UUID(int=rng.getrandbits(128), version=4).hex
        self.origin_input_ids = [rng.randrange(32000) for _ in range(4)]
        self.output_ids = [rng.randrange(32000) for _ in range(1 + i % 3)]
        self.spec_verify_ct = rng.randrange(0, 50) if i else 0
        self.spec_num_correct_drafts = rng.randrange(0, 200)
        self.finished_reason = None


class SlotReq:
    __slots__ = ("rid", "n", "unset")

    def __init__(self):
        self.rid = "slot-" + "x" * 3
        self.n = -7


@dataclasses.dataclass
class SamplingInfo:
    temperatures: list
    top_p: float = 1.0


@dataclasses.dataclass(slots=True)
class Frozen:
    a: int
    b: str


class Mode(enum.IntEnum):
    DECODE = 2


class Wide:
    def __init__(self):
        for i in range(40):  # more than SHARED_KEYS_MAX_SIZE (30): a combined dict
            setattr(self, f"a{i}", i * 1000)


class Node:
    def __init__(self, **kw):
        self.__dict__.update(kw)


Named = namedtuple("Named", "x y")


@dataclasses.dataclass
class ScheduleBatch:
    reqs: list
    forward_mode: str = "decode"
    seq_lens: tuple = ()
    sampling_info: SamplingInfo = None
    num_correct_drafts_per_req_cpu: list = None
    nums: list = None
    huge: int = 2 ** 100
    texts: list = None
    flags: list = None
    ratio: float = 3.25
    extra: dict = None
    empty: dict = None
    emptied: dict = None
    slot_req: SlotReq = None
    frozen: Frozen = None
    wide: Wide = None
    nested: Node = None
    odd: Node = None
    mode: Mode = Mode.DECODE
    named: Named = None
    module_ref: object = None
    req_cls: type = Req

    @property
    def is_empty(self):
        return not self.reqs


def build(nreqs):
    rng = random.Random(7)
    reqs = [Req(rng, i) for i in range(nreqs)]
    reqs[1].__dict__  # materialises a dict object (3.11+: no longer values only)
    reqs[2].late = 5  # a key added after the others
    odd = Node(kept=1, gone=2)
    del odd.gone
    return ScheduleBatch(
        reqs=reqs,
        seq_lens=(17, 18, 1 << 40),
        sampling_info=SamplingInfo([0.0, 0.5, 1.0]),
        num_correct_drafts_per_req_cpu=[rng.randrange(5) for _ in reqs],
        nums=[0, 1, -1, 2**30 - 1, 2**30, -(2**30), 2**60, 2**62 + 1, 2**63 - 1,
              -(2**63), 2**64 - 1, -12345678901234, 255],
        texts=["ascii", "", "héllo wörld", "π≈3.14 数据", "rocket 🚀", "x" * 500, "é" * 300, "数" * 100],
        flags=[True, False, None],
        extra={"spec": "eagle", "steps": 3},
        empty={},
        emptied=_emptied(),
        slot_req=SlotReq(),
        frozen=Frozen(11, "frozen"),
        wide=Wide(),
        nested=Node(y=[Node(z=0), Node(z=1), Node(z="two")]),
        odd=odd,
        named=Named(1, "b"),
        module_ref=sys.modules[__name__],
    )


PATHS = [
    "reqs[*].rid", "reqs[*].spec_verify_ct", "reqs[*].spec_num_correct_drafts",
    "reqs[0].rid", "reqs[-1].rid", "reqs[1].rid", "reqs[1].spec_num_correct_drafts",
    "reqs[2].late", "reqs[*].output_ids[-1]", "reqs[*].finished_reason", "reqs[3].origin_input_ids",
    "reqs[0].kind", "num_correct_drafts_per_req_cpu", "num_correct_drafts_per_req_cpu[*]",
    "nums", "nums[*]", "nums[10]", "texts", "texts[3]", "flags", "ratio", "forward_mode",
    "seq_lens", "seq_lens[2]", "sampling_info.temperatures[*]", "sampling_info.top_p",
    "slot_req.rid", "slot_req.n", "frozen.a", "frozen.b", "wide.a0", "wide.a39",
    'extra["spec"]', "extra['steps']", "extra[*]", "empty[*]", "emptied[*]", "nested.y[2].z", "nested.y[*].z", "odd.kept", "mode",
    "named", "named[1]", "module_ref.CONSTANT", "req_cls.kind",
]


def _emptied():
    d = {"a": 1, "b": 2}
    del d["a"]  # a deleted entry stays in the table
    d["c"] = 3
    return d


def ev(obj, path):
    """The Python reading of a path, for the expected values."""
    return evalpath.ev(obj, path, lambda v: list(v) if isinstance(v, tuple) else v)


def wait_line(batch, k):
    peek = lambda: (batch, k)  # batch and k become cell variables
    line = sys.stdin.readline()
    return line, peek


def stage(batch):
    line, _ = wait_line(batch, 7)
    return line


def unused(batch):
    return batch


def main():
    batch = build(int(sys.argv[2]) if len(sys.argv) > 2 else 32)
    with open(sys.argv[1], "w") as out:
        json.dump({
            "tid": threading.get_native_id(), "batch": id(batch),
            "stage_code": id(stage.__code__), "wait_code": id(wait_line.__code__),
            "unused_code": id(unused.__code__), "version": list(sys.version_info[:3]),
            "values": {p: ev(batch, p) for p in PATHS},
        }, out)
    print("ready", flush=True)
    while True:
        line = stage(batch)
        if not line:
            return
        batch.reqs[0].spec_verify_ct += 1
        print(json.dumps({"spec_verify_ct": batch.reqs[0].spec_verify_ct}), flush=True)


main()
