"""Shared start-up for the entry scripts: sys.path, signals, --wait-signal, ground truth."""
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


SHAPES = ("today", "autumn2026")


def setup_path(shape="today"):
    # The local sglang/vllm stand-ins come first, and only from this directory: nothing else on
    # sys.path is shadowed except packages of the same name (not installable here anyway).
    # --shape autumn2026 puts the older shapes (shapes/autumn2026/{sglang,vllm}) in front.
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    if shape != "today":
        sys.path.insert(0, os.path.join(HERE, "shapes", shape))


class Stopper:
    """SIGTERM/SIGINT: finish the current step, flush, exit 0."""

    def __init__(self):
        self.stop = False

    def __call__(self):
        return self.stop

    def _handler(self, signum, frame):
        self.stop = True


def add_common_args(p):
    p.add_argument("--shape", choices=SHAPES, default="today",
                   help="the upstream shape mirrored: today's (default) or the autumn-2026 one")
    p.add_argument("--requests", type=int, default=20, help="requests to serve (default 20)")
    p.add_argument("--max-batch", type=int, default=4, help="max running requests (default 4)")
    p.add_argument("--max-new-tokens", type=int, default=24,
                   help="upper bound of each request's output length (drawn in [M/2, M])")
    p.add_argument("--draft-len", type=int, default=4, help="K: draft tokens per step (default 4)")
    p.add_argument("--accept-p", type=float, default=0.7,
                   help="per-draft acceptance probability until the first rejection (default 0.7)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log", default=None, help="ground-truth JSON-lines file")
    p.add_argument("--wait-signal", action="store_true",
                   help="print 'ready pid=N' then block until SIGUSR1 before serving")
    p.add_argument("--crash-in-verify", type=int, default=0, metavar="K",
                   help="die (exit 3) halfway through the K-th verify call")
    p.add_argument("--park-in-verify", type=int, default=0, metavar="K",
                   help="the K-th verify call prints 'parked pid=N' and waits for SIGUSR2 before its work")
    p.add_argument("--raise-in-verify", type=int, default=0, metavar="K",
                   help="every K-th EAGLE V2 verify raises VerifyFailed halfway; the worker logs it"
                        " (\"error\" on the verify line) and runs the verify again")
    p.add_argument("--hold-frame", action="store_true",
                   help="keep frames/tracebacks of some stage calls alive for a while (caveat test)")
    p.add_argument("--read-code", action="store_true",
                   help="read the verify method's __code__ in the loop each step (caveat test)")
    p.add_argument("--real-world", action="store_true",
                   help="what code around real engines does to a stage: logging with funcName, warnings,"
                        " caught exceptions and inspect.signature of the stages (_realworld.py; SGLang EAGLE V2)")
    p.add_argument("--watchdog", action="store_true",
                   help="with --real-world: a thread reading every stack every 2 ms (sys._current_frames)")
    p.add_argument("--noise-calls", type=int, default=20000,
                   help="unrelated small Python calls per step (default 20000)")
    p.add_argument("--work-scale", type=float, default=1.0,
                   help="multiply each stage's CPU work (default 1: stages of ~0.2-2 ms)")


def start(args, banner, engine):
    """Install signals, open the log, print ready, optionally wait for SIGUSR1.
    Returns (stopper, truthlog) or exits 0 if SIGTERM came while waiting."""
    import _faults
    import _groundtruth
    if args.requests < 0 or args.max_batch < 1 or args.draft_len < 1 or args.max_new_tokens < 2:
        sys.stderr.write("%s: bad arguments\n" % banner)
        sys.exit(2)
    log = _groundtruth.TruthLog(args.log)
    _groundtruth.set_truth(log)
    _faults.CRASH_VERIFY_AT = args.crash_in_verify
    _faults.PARK_VERIFY_AT = args.park_in_verify
    _faults.RAISE_VERIFY_EVERY = args.raise_in_verify
    import _workload
    _workload.SCALE = args.work_scale
    _faults.HOLD_FRAMES = args.hold_frame
    if args.real_world:
        import _realworld
        _realworld.enable(args.watchdog)
    stopper = Stopper()
    if args.wait_signal:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGTERM, signal.SIGINT})
    # One write: with PYTHONUNBUFFERED print writes the text and its newline
    # apart, and the processes of a TP server share this pipe.
    sys.stdout.write("ready pid=%d\n" % os.getpid())
    sys.stdout.flush()
    if args.wait_signal:
        sig = signal.sigwait({signal.SIGUSR1, signal.SIGTERM, signal.SIGINT})
        if sig != signal.SIGUSR1:
            log.close()
            sys.exit(0)
    signal.signal(signal.SIGTERM, stopper._handler)
    signal.signal(signal.SIGINT, stopper._handler)
    if args.wait_signal:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1, signal.SIGTERM, signal.SIGINT})
    log.event("start", pid=os.getpid(), python=sys.version.split()[0], argv=sys.argv[1:],
              engine=engine, draft_len=args.draft_len, shape=args.shape)
    return stopper, log


def finish(log, banner, stats):
    import _faults
    _faults.release_all()
    log.event("end", **stats)
    log.close()
    sys.stderr.write(banner + ": " + " ".join("%s=%s" % kv for kv in stats.items()) + "\n")
