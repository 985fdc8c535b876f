# A stage that reads its own code object while it runs, as logging does
# (Logger.findCaller reads f.f_code of each frame up the stack) and code
# that inspects sys._getframe(): references to the watched code object that
# are no call. Each call serves one request; prints "calls N" at the end.
import logging
import signal
import sys


class Req:
    def __init__(self, rid):
        self.rid = rid


def stage(req):
    code = sys._getframe().f_code  # +1 in frame_getcode, -1 when rebound
    logging.getLogger("owncode").debug("stage %s", req.rid)
    code = None
    total = 0
    for i in range(2000):
        total += i
    return total


logging.basicConfig(stream=sys.stderr, level=logging.DEBUG, format="%(funcName)s %(message)s")
logging.getLogger().handlers[0].setLevel(logging.CRITICAL)  # findCaller runs; nothing printed
n = int(sys.argv[1])
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
print("ready", flush=True)
signal.sigwait({signal.SIGUSR1})
for i in range(n):
    stage(Req(f"req-{i}"))
print("calls", n, flush=True)
