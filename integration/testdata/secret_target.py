# Runs a pytargets script (argv[1]) with the rest of the arguments, leaving
# out --api-key=...: a server whose command line carries a secret.
import os
import runpy
import sys

script = sys.argv[1]
sys.path.insert(0, os.path.dirname(script))
sys.argv = [script] + [a for a in sys.argv[2:] if not a.startswith("--api-key")]
runpy.run_path(script, run_name="__main__")
