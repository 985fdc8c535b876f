# A stage passed its batch as a temporary, as real code writes it: nothing
# but the caller's stack holds the batch, so it is freed when the stage
# returns, before its frame's pop (3.11+). The stage is Worker.verify
# (argv[3] "method") or the function stage ("function"), called in turn
# with a new object, with the result of a call, through a name kept in a
# variable (a bound method: CPython rewrites its stack slots), by keyword,
# and with a batch kept in a variable (read at the return as usual). argv: calls, log
# path, form. Each call logs its requests (one JSON line) after it returned.
import json
import signal
import sys


class Req:
    def __init__(self, rid):
        self.rid = rid


class Batch:
    def __init__(self, reqs):
        self.reqs = reqs


def work():
    total = 0
    for i in range(300):
        total += i
    return total


class Worker:
    def verify(self, batch):
        return work()


def stage(batch):
    return work()


def make_batch(i):
    return Batch([Req("c%d-r%d" % (i, j)) for j in range(1 + i % 8)])


def main():
    calls, path = int(sys.argv[1]), sys.argv[2]
    w = Worker()
    call = w.verify if sys.argv[3] == "method" else stage
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    print("ready", flush=True)
    signal.sigwait({signal.SIGUSR1})
    with open(path, "w") as log:
        for i in range(calls):
            form = i % 5
            rids = ["c%d-r%d" % (i, j) for j in range(1 + i % 8)]
            if sys.argv[3] == "method":
                if form == 0:
                    w.verify(Batch([Req(r) for r in rids]))
                elif form == 1:
                    w.verify(make_batch(i))
                elif form == 2:
                    call(make_batch(i))
                elif form == 3:
                    w.verify(batch=make_batch(i))
                else:
                    kept = make_batch(i)
                    w.verify(kept)
            else:
                if form == 0:
                    stage(Batch([Req(r) for r in rids]))
                elif form == 1:
                    stage(make_batch(i))
                elif form == 2:
                    call(make_batch(i))
                elif form == 3:
                    stage(batch=make_batch(i))
                else:
                    kept = make_batch(i)
                    stage(kept)
            log.write(json.dumps({"call": i, "form": form, "rids": rids}) + "\n")


main()
