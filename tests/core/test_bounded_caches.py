"""Every functools cache in core/ keyed on arguments is bounded (stop 50's hosting review, LOW 6: engine_time_s and
four other lookups keyed on a custom accelerator's id, which a link sets to any of unboundedly many values, grew by
about 2.3 kB per distinct link and never shrank). A cache of a loader called with a path only in tests is listed."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import core

# loaders whose one argument is a catalog file's path (the app and the CLI call them without it)
PATH_LOADERS = {"load_presets", "load_measured", "load_accelerators"}


def _cached_functions():
    for info in pkgutil.walk_packages(core.__path__, "core."):
        if info.name == "core.__main__":  # runs the CLI on import
            continue
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if callable(value) and hasattr(value, "cache_info") and getattr(value, "__module__", None) == info.name:
                yield f"{info.name}.{name}", value


def test_every_cache_keyed_on_arguments_has_a_bound():
    found = list(_cached_functions())
    assert len(found) > 20
    unbounded = [
        name for name, fn in found if fn.cache_parameters()["maxsize"] is None and inspect.signature(fn).parameters and name.rsplit(".", 1)[1] not in PATH_LOADERS
    ]
    assert not unbounded, unbounded
    from core.catalog.engine_timing import engine_time_s

    assert engine_time_s.cache_parameters()["maxsize"] is not None
