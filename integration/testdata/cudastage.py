# A Python stage calling the CUDA driver stand-in (fakecuda.c, given as
# argv[1]) through ctypes: each stage() call launches kernels and waits for
# them, and the script logs what it did, by its own clock (CLOCK_BOOTTIME,
# the clock BPF reads), one JSON line a call to argv[2]. argv[3]: calls.
import ctypes
import json
import signal
import sys
import time

cuda = ctypes.CDLL(sys.argv[1])


class Req:
    def __init__(self, rid):
        self.rid = rid


def stage(req, n, log):
    for _ in range(n):
        cuda.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, None, None, None)
    cuda.cuGraphLaunch(None, None)
    t0 = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    cuda.cuStreamSynchronize(None)
    log["sync_ns"] = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - t0
    log.update(launches=n, graphs=1, syncs=1)


def main():
    calls = int(sys.argv[3])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    print("ready", flush=True)
    signal.sigwait({signal.SIGUSR1})
    with open(sys.argv[2], "w") as out:
        for i in range(calls):
            log = {"stage": "verify", "rid": "py-%d" % i}
            # A request the caller keeps, as servers do (a temporary is freed
            # before the call's pop: TestTemporaryArgument).
            req = Req(log["rid"])
            stage(req, 1 + i % 4, log)
            # Outside the stage: a copy that waits for nothing queued.
            cuda.cuMemcpyDtoH_v2(ctypes.create_string_buffer(8), ctypes.c_uint64(0), ctypes.c_size_t(8))
            out.write(json.dumps(log) + "\n")


main()
