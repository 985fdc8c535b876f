# A Python process that, once running, covers the directory of its own
# interpreter with a tmpfs holding a symlink of the same name to a decoy
# (in a user and mount namespace of its own, which any user may make). The
# path /proc/PID/maps shows for the interpreter then leads, through
# /proc/PID/root, to the decoy. On a line on stdin it imports the module
# SGLang's spec matches, so that the daemon starts a session and opens the
# interpreter afresh.
# argv: DECOY MODULE_DIR. Prints "ready" once the symlink is in place.
import ctypes
import os
import sys

exe = os.path.realpath(sys.executable)
decoy, moddir = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
if libc.mount(b"none", os.path.dirname(exe).encode(), b"tmpfs", 0, None) != 0:
    raise OSError(ctypes.get_errno(), "mount tmpfs on " + os.path.dirname(exe))
os.symlink(decoy, exe)
print("ready", flush=True)
sys.stdin.readline()
sys.path.insert(0, moddir)
import sglang.srt.speculative.eagle_worker_v2  # noqa: E402,F401

print("imported", flush=True)
sys.stdin.read()
