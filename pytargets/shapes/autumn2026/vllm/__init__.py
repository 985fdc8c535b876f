"""Test stand-in for vLLM (specprobe pytargets): Model Runner V2 module paths, class and method
names of the speculative-decoding path, pure standard library, no GPU. Not vLLM."""
