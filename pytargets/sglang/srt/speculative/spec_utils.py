"""Mirrors python/sglang/srt/speculative/spec_utils.py (sgl-project/sglang 02a3cd954bab, the HYBRID branch (#37237) copy; main's newest not re-established: docs/upstream.md): the
helpers the workers share. spec_stage_span(name) is where upstream emits its own stage span
(a no-op here); draft_tp_context is the draft's tensor-parallel group context."""
import contextlib

import _groundtruth


@contextlib.contextmanager
def spec_stage_span(name):
    yield


@contextlib.contextmanager
def draft_tp_context(group=None):
    yield


def log_verify(worker, t0, t1, batch, method, **extra):
    """test-only: the ground truth of a verify call; nested in a HYBRID controller's verify
    frame it is an event (that spec watches the controller)."""
    t = _groundtruth.truth()
    if worker.nested:
        t.event("nested_verify", start_ns=t0, end_ns=t1, rids=[r.rid for r in batch.reqs],
                step=batch.forward_ct, method=method, **extra)
    else:
        t.stage("verify", t0, t1, batch.reqs, batch.forward_ct, method=method, **extra)
