"""Fault and caveat switches for the test targets (set by the entry scripts' flags).

raise_in_verify(K): every K-th EAGLE V2 verify raises VerifyFailed after half its work; the
worker logs that verify with "error" and runs it again.
park_in_verify(K): the K-th verify call waits for SIGUSR2 first thing (a call in progress).
crash_in_verify(K): the K-th verify call dies halfway through (os._exit(3)) after flushing the
ground truth: the tracer sees the +1 of that call and never its -1.
hold(obj, ...): keeps a frame or traceback of a stage call alive after the call returned (as a
logger or an exception handler might), which delays that call's refcount decrement on the code
object until the holder is dropped a few calls later. Both moments are logged as events.
"""
import collections
import os
import sys
import time

import _groundtruth

CRASH_VERIFY_AT = 0
RAISE_VERIFY_EVERY = 0
_raise_calls = 0
HOLD_FRAMES = False
HOLD_EVERY = 4          # hold every 4th call of a stage method
HOLD_KEEP = 2           # release a held object when a third one is taken

_verify_calls = 0
_calls = collections.Counter()
_held = collections.deque()


class HeldFrame(Exception):
    """Raised and caught inside a stage method so its traceback keeps the frame."""


PARK_VERIFY_AT = 0


def verify_entered(work_fn):
    """Called first thing inside a verify stage method. On the K-th call: do half the
    stage's work, flush the log, and die like a crashing process. With --park-in-verify K
    the K-th call prints "parked pid=N" and waits for SIGUSR2 (a call that is running when a
    tool looks: probes check --pid reads its values)."""
    global _verify_calls
    _verify_calls += 1
    if PARK_VERIFY_AT and _verify_calls == PARK_VERIFY_AT:
        import signal
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
        print("parked pid=%d" % os.getpid(), flush=True)
        signal.sigwait({signal.SIGUSR2})
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR2})
    if CRASH_VERIFY_AT and _verify_calls == CRASH_VERIFY_AT:
        work_fn()
        t = _groundtruth.truth()
        t.event("crash", where="verify", verify_call=_verify_calls, exit_code=3)
        t.close()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(3)


class VerifyFailed(RuntimeError):
    """A verify that fails halfway (a transient error the worker retries)."""


def verify_may_raise(work_fn):
    """Every RAISE_VERIFY_EVERY-th call: do half the work and raise VerifyFailed,
    which propagates out of the verify frame."""
    global _raise_calls
    if not RAISE_VERIFY_EVERY:
        return
    _raise_calls += 1
    if _raise_calls % RAISE_VERIFY_EVERY == 0:
        work_fn()
        raise VerifyFailed("verify %d failed halfway" % _raise_calls)


def want_hold(method):
    if not HOLD_FRAMES:
        return False
    _calls[method] += 1
    return _calls[method] % HOLD_EVERY == 0


def hold(obj, method, step, kind):
    """Keep obj (a frame or traceback) alive; drop the oldest beyond HOLD_KEEP."""
    _held.append((obj, method, step, kind))
    _groundtruth.truth().event("hold_frame", method=method, step=step, kind=kind)
    while len(_held) > HOLD_KEEP:
        _release_one()


def _release_one():
    obj, method, step, kind = _held.popleft()
    del obj
    _groundtruth.truth().event("release_frame", method=method, step=step, kind=kind,
                               release_ns=time.time_ns())


def release_all():
    while _held:
        _release_one()
