# A process that makes its own interpreter state hostile to a reader from
# outside (any process may write its own memory): argv[1] fake sys.modules
# entries, the cached hash of the first argv[2] keys overwritten with a
# wrong value, and with argv[3] == "cycle" the interpreter list made to
# loop back on itself. Prints "ready" and waits on stdin.
import ctypes
import sys

# Offsets of _PyRuntime.interpreters.head and PyInterpreterState.next.
INTERP = {(3, 10): (0x20, 0), (3, 11): (0x28, 0), (3, 12): (0x28, 0), (3, 13): (0x278, 0x1C60)}


def main(ctypes, sys, n, corrupt, cycle):
    # Locals only from here: the forged strings are also global names, and a
    # dict lookup of one fails once its cached hash is wrong.
    mods = sys.modules
    for i in range(n):
        mods["fake_mod_%d" % i] = sys
    at = ctypes.c_ssize_t.from_address
    out, inp = sys.stdout, sys.stdin
    if cycle:
        head_off, next_off = INTERP[sys.version_info[:2]]
        runtime = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
        interp = at(runtime + head_off).value
        at(interp + next_off).value = interp
    # PyASCIIObject.hash sits at +0x18 on 3.10-3.13 (ob_refcnt, ob_type, length).
    for key in list(mods)[:corrupt]:
        at(id(key) + 0x18).value = 12345
    out.write("ready\n")
    out.flush()
    inp.read()


main(ctypes, sys, int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:] == ["cycle"])
