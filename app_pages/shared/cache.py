"""Process-wide caches bounded in bytes as well as in entries (issue #25).

st.cache_resource and st.cache_data bound a cache by its number of entries, but what one entry weighs depends on
what a link carries: a serving-options entry for a long price list was about 2.3 MB, a scenario whose key holds a
pasted config.json carries that text, and the app has about 40 such caches of 16 to 1,024 entries. So 120 hostile
sessions, each on a link of its own, took the server from 210 MB to 541 MB, and most of it stayed after they left.

shared_cache() is st.cache_resource (or st.cache_data with data=True), entry cap as before, plus one ledger for all
of them: the first time a call's arguments are seen, its value and arguments are weighed (weight_bytes: the memory
of every object reachable from them, once each, leaving out classes, functions, modules and the catalogs every
session shares; a 2.3 MB entry takes about 10 ms), and while the entries together weigh more than CACHE_BUDGET_BYTES the least recently used are dropped, with the
cached function's public clear(*args). A dropped entry is computed again when it is next asked for, like one
Streamlit dropped for its entry cap. The ledger mirrors each cache's entry cap (its oldest entries are forgotten
past it, as Streamlit drops them), so it holds at most the sum of the caps.

shared_cache() also marks its own computations (computing(): a per-thread depth, set while the wrapped function
computes a value that Streamlit then stores, so nested cached calls count too). The fair-share guard reads it: a
turn is never handed over while Streamlit holds a value's lock (guard.yield_turn), and every cache goes through here
(tests/app/test_cache.py), so the mark needs nothing from Streamlit's internals (issue #28).

LLMGP_CACHE_MB sets the budget (default 48: about twenty serving-options entries of the catalog, 2.2 MB each, or
three thousand estimates of 14 kB; docs/SERVER.md has the measurements).
"""

from __future__ import annotations

import functools
import gc
import inspect
import os
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import streamlit as st

from core.catalog.accelerators import load_accelerators
from core.catalog.presets import load_presets
from core.catalog.prices import load_prices

F = TypeVar("F", bound=Callable[..., Any])


def _env_mb(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


CACHE_BUDGET_BYTES = int(_env_mb("LLMGP_CACHE_MB", 48) * 2**20)
_NOT_WEIGHED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CodeType)


@functools.cache
def _shared_ids() -> frozenset[int]:
    """The objects of the catalogs every session shares (loaded once, never freed): a cached value that refers to
    them (a catalog price row in a serving plan) does not weigh them."""
    seen: set[int] = set()
    _walk((load_accelerators(), load_prices(), load_presets()), seen, frozenset())
    return frozenset(seen)


def _walk(values: tuple, seen: set[int], skip: frozenset[int]) -> int:
    total = 0
    stack = list(values)
    while stack:
        obj = stack.pop()
        key = id(obj)
        if key in seen or key in skip or isinstance(obj, _NOT_WEIGHED):
            continue
        seen.add(key)
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def weight_bytes(*values: Any) -> int:
    """What values weigh in a cache: the size of every object reachable from them, once (sys.getsizeof), leaving out
    classes, functions, modules and the shared catalogs."""
    return max(1, _walk(values, set(), _shared_ids()))


_lock = threading.Lock()
# (cache name, hashed arguments) -> (clear that entry, its weight); least recently used first, every cache together
_ledger: OrderedDict[tuple[str, Hashable], tuple[Callable[[], None], int]] = OrderedDict()
_per_cache: dict[str, OrderedDict[Hashable, None]] = {}  # each cache's keys, least recently used first
_total_bytes = 0


def ledger_bytes() -> int:
    """What the entries the ledger knows of weigh together."""
    return _total_bytes


def _forget(key: tuple[str, Hashable]) -> tuple[Callable[[], None], int] | None:
    global _total_bytes
    entry = _ledger.pop(key, None)
    if entry is not None:
        _total_bytes -= entry[1]
        _per_cache.get(key[0], OrderedDict()).pop(key[1], None)
    return entry


def _record(key: tuple[str, Hashable], clear: Callable[[], None], weight: int, max_entries: int | None) -> list[Callable[[], None]]:
    """Add an entry; return the clears of the entries to drop (called outside the lock)."""
    global _total_bytes
    name, args = key
    mine = _per_cache.setdefault(name, OrderedDict())
    if key in _ledger:
        return []
    _ledger[key] = (clear, weight)
    mine[args] = None
    _total_bytes += weight
    if max_entries is not None:
        while len(mine) > max_entries:  # Streamlit dropped its oldest entry for the entry cap
            _forget((name, next(iter(mine))))
    drops = []
    while _total_bytes > CACHE_BUDGET_BYTES and len(_ledger) > 1:
        oldest = next(iter(_ledger))
        entry = _forget(oldest)
        if entry is not None:
            drops.append(entry[0])
    return drops


def _touch(key: tuple[str, Hashable]) -> bool:
    with _lock:
        if key not in _ledger:
            return False
        _ledger.move_to_end(key)
        _per_cache[key[0]].move_to_end(key[1])
        return True


_computing = threading.local()


def computing() -> bool:
    """Whether this thread is computing a value of a shared_cache function (at any depth)."""
    return getattr(_computing, "depth", 0) > 0


def _marked(func: F, current: list[Callable[..., Any]]) -> F:
    """A function that calls current[0] (the latest function object decorated with func's code: see shared_cache),
    marked as computing (computing()) while it runs; functools.wraps keeps what Streamlit hashes for the cache's
    identity (module, qualified name, the source it reads through __wrapped__, the signature)."""

    @functools.wraps(func)
    def computed(*args: Any, **kwargs: Any) -> Any:
        _computing.depth = getattr(_computing, "depth", 0) + 1
        try:
            return current[0](*args, **kwargs)
        finally:
            _computing.depth -= 1

    return computed  # type: ignore[return-value]


# (code object, its file, the decorator's arguments) -> (the latest function object with that code, the wrapper)
_decorated: dict[tuple[Any, ...], tuple[list[Callable[..., Any]], Callable[..., Any]]] = {}
_decorated_lock = threading.Lock()


def shared_cache(max_entries: int | None = None, *, show_spinner: bool | str = False, data: bool = False) -> Callable[[F], F]:
    """st.cache_resource(max_entries, show_spinner) (st.cache_data with data=True) whose entries also count against
    the process-wide CACHE_BUDGET_BYTES. Arguments whose names start with "_" are not part of the key (Streamlit's
    rule) and are not weighed.

    A page's file runs again on every rerun (rerun.exec_page), so a cached function defined in it is decorated
    again each time; Streamlit then names the new cache by reading and tokenizing the function's source (1-2 ms each
    time, issue #25). A function whose code was decorated before (the same code object: a page's code is compiled
    once) gets the wrapper made then, which calls this latest function object. That is what Streamlit does with
    the cached values already: one cache for every re-definition of the same source, whoever's run computed them,
    so a cached function must depend on its arguments only."""

    def decorate(func: F) -> F:
        code = getattr(func, "__code__", None)
        seen_as = (code, getattr(code, "co_filename", None), func.__qualname__, max_entries, show_spinner, data)
        with _decorated_lock:
            known = _decorated.get(seen_as) if code is not None else None
            if known is not None:
                known[0][0] = func
                return known[1]  # type: ignore[return-value]
        current: list[Callable[..., Any]] = [func]
        store = st.cache_data if data else st.cache_resource
        cached = store(max_entries=max_entries, show_spinner=show_spinner)(_marked(func, current))
        name = f"{func.__module__}.{func.__qualname__}"
        signature = inspect.signature(func)
        hashed = [p for p in signature.parameters if not p.startswith("_")]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            value = cached(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            key_args = tuple(bound.arguments[p] for p in hashed if p in bound.arguments)
            key = (name, key_args)
            if _touch(key):
                return value
            clear_args = {p: (v if not p.startswith("_") else None) for p, v in bound.arguments.items()}
            weight = weight_bytes(value, key_args)
            with _lock:
                drops = _record(key, functools.partial(cached.clear, **clear_args), weight, max_entries)
            for drop in drops:
                drop()
            return value

        wrapper.clear = cached.clear  # type: ignore[attr-defined]
        if code is not None:
            with _decorated_lock:
                _decorated.setdefault(seen_as, (current, wrapper))
        return wrapper  # type: ignore[return-value]

    return decorate


def reset_ledger() -> None:
    """Forget every entry (tests; st.cache_resource.clear() empties the caches themselves)."""
    global _total_bytes
    with _lock:
        _ledger.clear()
        _per_cache.clear()
        _total_bytes = 0
