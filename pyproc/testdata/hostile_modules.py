# A process that makes its own sys.modules hostile to a reader from outside:
# argv[1] fake entries, and the cached hash of the first argv[2] keys
# overwritten with a wrong value (any process may write its own memory).
# Prints "ready" and waits on stdin.
import ctypes
import sys


def main(ctypes, sys, n, corrupt):
    # Locals only from here: the forged strings are also global names, and a
    # dict lookup of one fails once its cached hash is wrong.
    mods = sys.modules
    for i in range(n):
        mods["fake_mod_%d" % i] = sys
    at = ctypes.c_ssize_t.from_address
    out, inp = sys.stdout, sys.stdin
    # PyASCIIObject.hash sits at +0x18 on 3.10-3.13 (ob_refcnt, ob_type, length).
    for key in list(mods)[:corrupt]:
        at(id(key) + 0x18).value = 12345
    out.write("ready\n")
    out.flush()
    inp.read()


main(ctypes, sys, int(sys.argv[1]), int(sys.argv[2]))
