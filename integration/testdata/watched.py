# Calls stage() a known number of times from two threads (one started after
# specprobe attaches), mixed with unrelated calls and with reads of
# stage.__code__ that move its reference count outside any call. Prints the
# counts it made so the test can compare.
import signal
import sys
import threading


def stage(n):
    total = 0
    for i in range(n):
        total += unrelated(i)
    return total


def unrelated(x):
    return x + 1


def worker(calls, out):
    for _ in range(calls):
        out.append(stage(50))


def main():
    calls = int(sys.argv[1])
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    print("ready", flush=True)
    signal.sigwait({signal.SIGUSR1})
    out = []
    code_reads = 0
    for i in range(calls):
        stage(50)
        if i % 7 == 0:
            c = stage.__code__  # +1 now, -1 when c is rebound: not a call
            code_reads += 1
            del c
    t = threading.Thread(target=worker, args=(calls, out))
    t.start()
    t.join()
    print("calls", calls + len(out), "code_reads", code_reads, flush=True)


main()
