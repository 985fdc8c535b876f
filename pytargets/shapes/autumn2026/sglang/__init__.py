"""Test stand-in for SGLang (specprobe pytargets): same module paths, class and method names as
the real engine's speculative-decoding path, pure standard library, no GPU. Not SGLang."""
