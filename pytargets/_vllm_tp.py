"""vLLM with TP > 1 (test target): EngineCore in one process, the model runner in one worker
process per TP rank, as vLLM's multiprocess executor lays them out (vllm/v1/executor/
multiproc_executor.py at vllm-project/vllm 0036d38de46c: the workers are titled
VLLM::Worker_TP<r>; EngineCore keeps the scheduler, update_from_output included). Not vLLM's
code: only which process runs which stage is mirrored.

EngineCore (run_vllm.py --tp N) starts the workers (run_vllm.py --tp-worker R, argv[0] the
title), sends each step's calls to every rank over a pipe and takes rank 0's outputs. Each
process writes its own ground-truth log: LOG (EngineCore: accept lines) and LOG.tp<r> (the
worker's verify and draft lines). With --wait-signal every process prints "ready pid=N" and waits
for SIGUSR1 of its own."""
import os
import pickle
import struct
import subprocess
import sys
import time

from _groundtruth import ids, truth


def _send(f, obj):
    b = pickle.dumps(obj)
    f.write(struct.pack("<I", len(b)) + b)
    f.flush()


def _recv(f):
    n = f.read(4)
    if len(n) < 4:
        return None
    return pickle.loads(f.read(struct.unpack("<I", n)[0]))


class RemoteRunner:
    """EngineCore's view of the workers: the runner's calls, made on every rank."""

    def __init__(self, tp, argv):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_vllm.py")
        self.workers = []
        for rank in range(tp):
            to_r, to_w = os.pipe()
            from_r, from_w = os.pipe()
            p = subprocess.Popen(["VLLM::Worker_TP%d" % rank, script, "--tp-worker", str(rank),
                                  "--tp-fds", "%d,%d" % (to_r, from_w)] + argv,
                                 executable=os.readlink("/proc/self/exe"), pass_fds=(to_r, from_w))
            os.close(to_r)
            os.close(from_w)
            self.workers.append((p, os.fdopen(to_w, "wb"), os.fdopen(from_r, "rb")))

    def _call(self, name, *args):
        for _, w, _ in self.workers:
            _send(w, (name, args))
        outs = [_recv(r) for _, _, r in self.workers]
        return outs[0]

    def execute_model(self, scheduler_output):
        return self._call("execute_model", scheduler_output)

    def sample_tokens(self, grammar_output):
        return self._call("sample_tokens", grammar_output)

    def take_draft_token_ids(self):
        return self._call("take_draft_token_ids")

    def _dummy_run(self, num_tokens, **kw):
        return self._call("_dummy_run", num_tokens)

    def close(self):
        for p, w, _ in self.workers:
            w.close()
        for p, _, _ in self.workers:
            p.wait()


def serve(runner, fds, order):
    """A worker's loop: run each call EngineCore sends, logging the verify as a call of the
    runner on this process's thread, and answer with its result."""
    r, w = (os.fdopen(int(fd), mode) for fd, mode in zip(fds.split(","), ("rb", "wb")))
    while True:
        msg = _recv(r)
        if msg is None:
            return
        name, args = msg
        if name == "execute_model":
            so = args[0]
            t0 = time.time_ns()
            out = runner.execute_model(so)
            t1 = time.time_ns()
            req_ids = order(so) if order else list(so.num_scheduled_tokens)
            truth().stage("verify", t0, t1, ids(req_ids), so.step,
                          method=type(runner).__name__ + ".execute_model",
                          num_spec_reqs=len(so.scheduled_spec_decode_tokens),
                          new_rids=list(so.scheduled_new_req_ids))
        else:
            out = getattr(runner, name)(*args)
        _send(w, out)
