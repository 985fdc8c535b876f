"""Stand-in for vLLM's package (pytargets): only the shapes specprobe traces. Not vLLM."""
