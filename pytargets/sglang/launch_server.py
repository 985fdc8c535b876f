"""Mirrors python/sglang/launch_server.py's process layout (test target): the launcher
(python -m sglang.launch_server) runs the HTTP server and tokenizer manager and imports no
speculative worker module; it starts one scheduler process per TP rank (here run_sglang.py),
titled as upstream's configure_scheduler_process titles them (sgl-project/sglang 02a3cd954bab, the HYBRID branch (#37237) copy; main's newest not re-established: docs/upstream.md):
sglang::scheduler with TP=1, sglang::scheduler_TP<r> with TP > 1. The title is put in argv[0]
(a stand-in for setproctitle, which pytargets cannot use). Every rank runs the same requests.

usage: python -m sglang.launch_server [--tp-size N] [run_sglang.py arguments]
Prints "launcher pid=N" then each scheduler prints its own "ready pid=N" line; exits when they
all have, with the first non-zero exit code."""
import argparse
import os
import signal
import subprocess
import sys

from sglang.srt.server_args import ServerArgs  # noqa: F401  (the launcher parses server args)


def main(argv=None):
    p = argparse.ArgumentParser(description="SGLang-shaped launcher (pytargets)")
    p.add_argument("--tp-size", type=int, default=1)
    args, rest = p.parse_known_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = os.path.join(here, "run_sglang.py")
    print("launcher pid=%d" % os.getpid(), flush=True)
    children = []
    for rank in range(args.tp_size):
        title = "sglang::scheduler" + ("_TP%d" % rank if args.tp_size > 1 else "")
        extra = []
        if "--log" in rest and args.tp_size > 1:
            # one ground-truth log per rank: LOG.tp<r>
            i = rest.index("--log")
            extra = rest[:i] + ["--log", rest[i + 1] + ".tp%d" % rank] + rest[i + 2:]
        children.append(subprocess.Popen([title, script] + (extra or rest), executable=sys.executable))

    def forward(signum, frame):
        for c in children:
            c.send_signal(signum)
    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    rc = 0
    for c in children:
        code = c.wait()
        rc = rc or code
    return rc


if __name__ == "__main__":
    sys.exit(main())
