"""launchtui: is the GPU waiting on the CPU's kernel launches?"""
__version__ = "0.1.0"


def __getattr__(name):
    # `launchtui.open(path)`: the pandas API, imported on first use so the CLI never loads pandas
    if name in ("open", "open_ranks", "TraceFrames"):
        from launchtui import api
        return getattr(api, name)
    raise AttributeError(f"module 'launchtui' has no attribute {name!r}")
