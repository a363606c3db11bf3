"""python -m core estimate FILE | plan FILE | models | accelerators | prices | schema
(estimate and plan take --prices CSV [--price-mode replace|only] to price from your own list, and
--include-flagged-prices to use the catalog rows it leaves out: placeholders, floors, stale rows)

A contract: scenarios written today keep working. Bad input exits 2 with one
line naming the field and the problem, never a traceback."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from core.jsontext import JSONProblem, loads
from core.scenario import MODEL_SPEC_TAGS, Scenario
from core.text import pattern_problem

MAX_INPUT_BYTES = 5_000_000


class InputError(Exception):
    pass


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_validation_error(exc: ValidationError, prefix: str = "", what: str = "scenario", names: Mapping[str, str] | None = None) -> str:
    """One line: the field and the problem of the first error. `names`: a top-level field's name as the reader
    knows it (a page: its input's label)."""
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"] if str(p) not in MODEL_SPEC_TAGS]
    field = _shorten(".".join(loc), 100) or what
    if names and len(loc) == 1 and loc[0] in names:
        field = names[loc[0]]
    if err["type"] == "string_pattern_mismatch":  # pydantic's message quotes the regex: the rule in words instead
        msg = pattern_problem((err.get("ctx") or {}).get("pattern"), err.get("input"))
    else:
        msg = _shorten(err["msg"].removeprefix("Value error, "), 300)  # a message may quote a hostile file's value
    count = len(exc.errors())
    more = f" (and {count - 1} more problem{'s' * (count > 2)})" if count > 1 else ""
    return f"{prefix}{field}: {msg}{more}"


def _read_json(path: str) -> Any:
    try:
        if path == "-":
            text = sys.stdin.read(MAX_INPUT_BYTES + 1).removeprefix("\ufeff")  # a BOM, as a file's utf-8-sig drops it
        else:
            with open(path, encoding="utf-8-sig") as fh:
                text = fh.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text") from None
    if len(text) > MAX_INPUT_BYTES:
        raise InputError(f"{path} is larger than {MAX_INPUT_BYTES:,} bytes")
    try:
        return loads(text)
    except JSONProblem as exc:
        raise InputError(f"{path} {exc}") from None


def _read_prices(path: str | None, mode: str, include_flagged: bool = False) -> Any:
    """Your own price CSV (data/cloud_prices.csv's columns) merged with the catalog by `mode`; None without one (the
    catalog's billable rows), or the whole catalog with `include_flagged`. Any bad row is an input error: a price list
    is either read whole or not used."""
    from core.catalog.accelerators import load_accelerators
    from core.catalog.price_trust import merge_prices
    from core.catalog.prices import MAX_BYTES, load_prices, parse_price_bytes

    catalog = load_prices() if include_flagged else None
    if path is None:
        return catalog

    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    rows, messages = parse_price_bytes(data, {a.id for a in load_accelerators()})
    if messages or not rows:
        more = f" (+{len(messages) - 3} more)" if len(messages) > 3 else ""
        raise InputError(f"{path}: " + ("; ".join(messages[:3]) + more if messages else "no price rows"))
    return merge_prices(rows, mode, catalog)  # type: ignore[arg-type]


def _estimate(path: str, prices: Any = None) -> Any:
    from core.estimate import estimate

    data = _read_json(path)
    results = [estimate(sc, prices).model_dump(mode="json") for _, sc in _validated(data, Scenario, "scenario")]
    return results if isinstance(data, list) else results[0]


def _validated(data: Any, model: Any, what: str) -> list[tuple[str, Any]]:
    """(prefix, validated object) for one JSON object or each of a list; InputError names the item and field."""
    items = data if isinstance(data, list) else [data]
    if not items:
        raise InputError(f"the {what} list is empty")
    out = []
    for i, item in enumerate(items):
        prefix = f"{what} {i}: " if isinstance(data, list) else ""
        if not isinstance(item, dict):
            raise InputError(f"{prefix}a {what} must be a JSON object")
        try:
            out.append((prefix, model.model_validate(item)))
        except ValidationError as exc:
            raise InputError(describe_validation_error(exc, prefix, what)) from None
        except (ValueError, TypeError, RecursionError) as exc:
            raise InputError(f"{prefix}{exc}") from None
    return out


def _plan(path: str, prices: Any = None) -> Any:
    from core.plan import Goal, plan

    data = _read_json(path)
    answers = [plan(goal, prices) for _, goal in _validated(data, Goal, "goal")]
    for i, answer in enumerate(answers):  # the one line a reader of the JSON would otherwise dig out of `skipped`
        if answer.verdict is not None:
            print(("" if len(answers) == 1 else f"goal {i + 1}: ") + answer.verdict, file=sys.stderr)
    results = [a.model_dump(mode="json") for a in answers]
    return results if isinstance(data, list) else results[0]


def _non_finite(value: Any, path: str = "") -> str | None:
    """The path of the first number in a result that is not finite (inf or nan), or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else path or "result"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if (found := _non_finite(item, f"{path}.{key}" if path else str(key))) is not None:
            return found
    return None


# Significant digits a result's floats are written with: binary rounding noise (3942.0000000000005) is not a figure
# anyone measured; every model input is known to far fewer digits.
RESULT_DIGITS = 12


def _tidy(value: Any) -> Any:
    """The result with each float written to RESULT_DIGITS significant digits (ints, strings and structure as they are)."""
    if isinstance(value, float):
        return float(f"{value:.{RESULT_DIGITS}g}")
    if isinstance(value, dict):
        return {k: _tidy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    return value


def _models() -> Any:
    from core.catalog.presets import load_presets

    return [
        {
            "id": p.id,
            "name": p.name,
            "family": p.family,
            "hf_repo": p.hf_repo,
            "params": p.architecture.total_params,
            "published_params": p.published_params,
            "source": p.source,
            "as_of": p.as_of,
        }
        for p in load_presets().values()
    ]


def _accelerators() -> Any:
    from core.catalog.accelerators import load_accelerators

    return [a.model_dump(mode="json") for a in load_accelerators()]


def _prices() -> Any:
    from core.catalog.prices import load_prices

    return [p.model_dump(mode="json") for p in load_prices()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core", description="LLM GPU Planner sizing core")
    sub = parser.add_subparsers(dest="command", required=True)
    est = sub.add_parser("estimate", help="estimate one scenario or a list (JSON file, - for stdin)")
    est.add_argument("file")
    pl = sub.add_parser("plan", help="the cheapest and fastest plans for a goal or a list of goals (JSON file, - for stdin)")
    pl.add_argument("file")
    for p in (est, pl):
        p.add_argument("--prices", metavar="CSV", help="price from your own CSV (the columns of data/cloud_prices.csv)")
        p.add_argument(
            "--price-mode",
            choices=["replace", "only"],
            default="replace",
            help="replace: your rows replace the catalog's for the accelerators they price (default); only: your rows alone",
        )
        p.add_argument(
            "--include-flagged-prices",
            action="store_true",
            help="also price from catalog rows flagged as placeholders, floors or a part of a machine (data/price_flags.csv) or stale (left out by default)",
        )
    for name in ("models", "accelerators", "schema"):
        sub.add_parser(name)
    pr = sub.add_parser("prices", help="the price catalog as JSON; 'prices import' rebuilds data/cloud_prices.csv from data/prices/")
    pr.add_argument("action", nargs="?", choices=["import"])
    pr.add_argument("--check", action="store_true", help="with import: exit 1 when data/cloud_prices.csv differs from a rebuild")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        if args.command == "estimate":
            out = _estimate(args.file, _read_prices(args.prices, args.price_mode, args.include_flagged_prices))
        elif args.command == "plan":
            out = _plan(args.file, _read_prices(args.prices, args.price_mode, args.include_flagged_prices))
        elif args.command == "models":
            out = _models()
        elif args.command == "accelerators":
            out = _accelerators()
        elif args.command == "prices" and args.action == "import":
            from core.catalog.price_import import run

            ok, summary = run(check=args.check)
            print(summary, file=sys.stderr)
            return 0 if ok else 1
        elif args.command == "prices":
            out = _prices()
        else:
            out = Scenario.model_json_schema()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if (where := _non_finite(out)) is not None:  # the inputs' bounds are meant to make this unreachable
        print(f"error: {where} came out as no finite number: the inputs are beyond what the model covers", file=sys.stderr)
        return 2
    text = json.dumps(_tidy(out), indent=2, allow_nan=False)
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # the reader stopped early (| head): no traceback; Python's own advice for it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # (docs.python.org, signal: "Note on SIGPIPE")
        return 1
    return 0
