"""Per-process memo of what a page builds for a scenario (Plotly figures are
slow to construct: ~5-10 ms each). Sessions that look at the same scenario — a
shared link, a workshop room — reuse the figures; st.plotly_chart only reads
them (to_dict), so sharing is safe. Bounded, so memory stays flat."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from threading import Lock
from typing import Any

MAX_ENTRIES = 64
_memo: OrderedDict[tuple, Any] = OrderedDict()
_lock = Lock()


def memo(key: tuple, build: Callable[[], Any]) -> Any:
    with _lock:
        if key in _memo:
            _memo.move_to_end(key)
            return _memo[key]
    value = build()
    with _lock:
        _memo[key] = value
        while len(_memo) > MAX_ENTRIES:
            _memo.popitem(last=False)
    return value
