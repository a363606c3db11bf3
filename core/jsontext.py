"""Parse JSON from an untrusted source into one kind of error with a reason
a person can read (the CLI, the pasted config.json and the scenario upload)."""

from __future__ import annotations

import json
from typing import Any


class JSONProblem(ValueError):
    """The text is not usable JSON; str() completes "<the input> ..."."""


MAX_CONFIG_DEPTH = 32  # real config.json files nest 2-4 levels


def depth(value: Any, limit: int = MAX_CONFIG_DEPTH) -> int:
    """Nesting depth of JSON-like data, without recursion; counting stops past `limit`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, d = stack.pop()
        deepest = max(deepest, d)
        if d > limit:
            break
        if isinstance(item, dict):
            stack.extend((v, d + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, d + 1) for v in item)
    return deepest


def loads(text: str, max_depth: int | None = None) -> Any:
    """The parsed JSON, or JSONProblem. With `max_depth`, data nested deeper is refused too: hundreds of levels parse,
    but then break whatever recurses over them (pickling into a cache, deepcopy, indented re-encoding: stop 50's
    hosting review, a 239-character link nesting a config 500 deep crashed every page)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONProblem(f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise JSONProblem("is nested too deeply") from None
    except ValueError:  # an integer with more digits than Python converts (sys.int_max_str_digits)
        raise JSONProblem("is not valid JSON (a number is too long)") from None
    if max_depth is not None and depth(value, max_depth) > max_depth:
        raise JSONProblem(f"is nested more than {max_depth} levels deep")
    return value
