"""Ground-truth log shared by the test targets (not part of any mirrored engine).

One JSON object per line, flushed per line, so a crash (os._exit) loses nothing.
Stage lines: {"stage", "tid", "start_ns", "end_ns", "rids", "step"}; acceptance lines:
{"stage": "accept", "step", "rids", "num_correct_drafts", "tid", "ts_ns"}; everything that is
not a stage call the tracer should report uses the key "event" instead of "stage".
"""
import json
import threading
import time

_dumps = json.JSONEncoder(separators=(",", ":")).encode


class TruthLog:
    def __init__(self, path=None):
        self._f = open(path, "w", encoding="utf-8") if path else None

    @property
    def enabled(self):
        return self._f is not None

    def _write(self, obj):
        if self._f is None:
            return
        self._f.write(_dumps(obj) + "\n")
        self._f.flush()

    def stage(self, stage, start_ns, end_ns, reqs, step, **extra):
        obj = {"stage": stage, "tid": threading.get_native_id(), "start_ns": start_ns,
               "end_ns": end_ns, "rids": [r.rid for r in reqs], "step": step}
        obj.update(extra)
        self._write(obj)

    def accept(self, step, reqs, num_correct_drafts, **extra):
        obj = {"stage": "accept", "step": step, "rids": [r.rid for r in reqs],
               "num_correct_drafts": list(num_correct_drafts),
               "tid": threading.get_native_id(), "ts_ns": time.time_ns()}
        obj.update(extra)
        self._write(obj)

    def event(self, name, **fields):
        obj = {"event": name, "tid": threading.get_native_id(), "ts_ns": time.time_ns()}
        obj.update(fields)
        self._write(obj)

    def close(self):
        if self._f is not None:
            self._f.flush()
            self._f.close()
            self._f = None


class _Rid:
    __slots__ = ("rid",)

    def __init__(self, rid):
        self.rid = rid


def ids(req_ids):
    """Request ids as the objects TruthLog.stage/accept take (anything with .rid)."""
    return [_Rid(r) for r in req_ids]


# The one log of this process; the entry script replaces it after parsing --log.
TRUTH = TruthLog(None)


def set_truth(log):
    global TRUTH
    TRUTH = log


def truth():
    return TRUTH
