"""Stand-in for SGLang's package (pytargets): only the shapes specprobe traces. Not SGLang."""
