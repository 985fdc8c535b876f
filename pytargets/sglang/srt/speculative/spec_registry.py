"""Mirrors python/sglang/srt/speculative/spec_registry.py (sgl-project/sglang 02a3cd954bab, the HYBRID branch (#37237) copy; main's newest not re-established: docs/upstream.md):
plugin algorithms. SpeculativeAlgorithm.register(name) records a factory that returns the
worker class; from_string falls back to this registry for names that are not built in."""

_REGISTRY = {}


class CustomSpecAlgo:
    def __init__(self, name, factory, supports_overlap=False, validate_server_args=None):
        self.name = name
        self._factory = factory
        self.supports_overlap = supports_overlap
        self.validate_server_args = validate_server_args

    def __getattr__(self, attr):
        # is_eagle(), is_ngram(), ...: a plugin is none of the built-in algorithms.
        if attr.startswith("is_"):
            return lambda: False
        raise AttributeError(attr)

    def is_some(self):
        return True

    def create_worker(self, server_args):
        return self._factory(server_args)


def register_algorithm(name, *, supports_overlap=False, validate_server_args=None,
                       spec_class=CustomSpecAlgo):
    def decorator(factory):
        _REGISTRY[name.upper()] = spec_class(name.upper(), factory, supports_overlap,
                                             validate_server_args)
        return factory
    return decorator


def get_spec(name):
    return _REGISTRY.get(name.upper())
