"""Parse JSON from an untrusted source into one kind of error with a reason
a person can read (the CLI, the pasted config.json and the scenario upload)."""

from __future__ import annotations

import json
from typing import Any


class JSONProblem(ValueError):
    """The text is not usable JSON; str() completes "<the input> ..."."""


def loads(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JSONProblem(f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:
        raise JSONProblem("is nested too deeply") from None
    except ValueError:  # an integer with more digits than Python converts (sys.int_max_str_digits)
        raise JSONProblem("is not valid JSON (a number is too long)") from None
