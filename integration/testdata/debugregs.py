# A target for the debug-register tests: calls stage() until its stdin
# closes, then prints how many calls it made. Its first line gives four
# addresses nothing ever writes (inside a bytes object's data), for a
# debugger's hardware watchpoints.
import sys
import threading

spare = bytes(64)  # ob_sval starts 32 bytes in (8-aligned), never written


def stage(n):
    return sum(range(n))


def main():
    base = id(spare) + 32
    print("ready", " ".join(hex(base + 8 * k) for k in range(4)), flush=True)
    done = threading.Event()

    def wait_stdin():
        sys.stdin.read()
        done.set()

    threading.Thread(target=wait_stdin, daemon=True).start()
    calls = 0
    while not done.is_set():
        stage(100)
        calls += 1
    print("calls", calls, flush=True)


main()
