"""--real-world: what code around a real engine does to its stages (pytargets' caveat hooks).

None of it is a stage call, and every piece of it touches a stage's code object or frames the
way real programs do (transformers' generate() calls inspect.signature of the model's forward;
logging and warnings walk frames; hang detectors and samplers read every thread's stack):

inside(method)  first thing inside a stage method: a log record through a handler whose format
                names the function (logging's findCaller reads each frame's f_code up the
                stack), a warning with stacklevel=2 (warnings reads the caller's frame and code),
                and an exception raised and caught there (its traceback holds the frame).
around(fns)     in the scheduler loop, between stages: inspect.signature of each stage function
                (transformers' generate() does this every call; it holds func.__code__ in a
                local) and each stage's __code__ read for a metric.
watchdog        (--watchdog) a thread that, every 2 ms, takes sys._current_frames() and extracts
                the main thread's stack, as hang detectors and samplers do: it takes references
                to a running stage's frame and code from another thread, and a stage that
                returns while it holds them leaves a frame object behind (on 3.10 and 3.11 the
                return then writes nothing a watchpoint sees: docs/python-notes.md).

Each call logs nothing (the ground truth is the stages' own lines); the counts go to the
summary line (_entry.finish).
"""
import inspect
import io
import logging
import sys
import threading
import time
import traceback
import warnings

ON = False
COUNTS = {"log_records": 0, "warnings": 0, "caught": 0, "signatures": 0, "code_reads": 0,
          "watchdog_scans": 0}

_log = logging.getLogger("pytargets.realworld")
_sink = io.StringIO()


def enable(watchdog):
    global ON
    ON = True
    handler = logging.StreamHandler(_sink)
    handler.setFormatter(logging.Formatter("%(funcName)s:%(lineno)d %(message)s"))
    _log.addHandler(handler)
    _log.setLevel(logging.INFO)
    _log.propagate = False
    warnings.simplefilter("always", RuntimeWarning)
    warnings.showwarning = lambda *a, **k: None  # formatted and dropped
    if watchdog:
        threading.Thread(target=_watchdog, name="watchdog", daemon=True).start()


def inside(method):
    if not ON:
        return
    _log.info("%s running", method)
    COUNTS["log_records"] += 1
    warnings.warn("%s: deprecated path" % method, RuntimeWarning, stacklevel=2)
    COUNTS["warnings"] += 1
    try:
        raise KeyError(method)
    except KeyError:
        COUNTS["caught"] += 1
    if _sink.tell() > 1 << 16:
        _sink.seek(0)
        _sink.truncate()


def around(fns):
    if not ON:
        return
    for fn in fns:
        inspect.signature(fn)
        COUNTS["signatures"] += 1
        if fn.__code__.co_argcount < 0:  # a metric's read of the code object
            raise AssertionError
        COUNTS["code_reads"] += 1


def _watchdog():
    main = threading.main_thread().ident
    while True:
        frames = sys._current_frames()
        if main in frames:
            traceback.extract_stack(frames[main], limit=16)
        del frames
        COUNTS["watchdog_scans"] += 1
        time.sleep(0.002)
