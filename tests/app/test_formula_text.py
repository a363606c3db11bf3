"""Formula text has no control characters: a `\\t` or `\\b` written in a non-raw Python string turns `\\text` and
`\\times` (or `\\beta`) into a tab or a backspace, which KaTeX reads as whitespace and renders as "ext" and "imes"
without an error. Every string constant under app_pages/ and core/ that holds a `$...$` formula is checked, and the
Method page's formula list by value."""

import ast
import re
from pathlib import Path

from app_pages.shared.method_text import FORMULAS

ROOT = Path(__file__).resolve().parents[2]
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")  # every control character but the newline
FORMULA = re.compile(r"\$[^$]+\$")


def _formula_strings():
    for folder in ("app_pages", "core"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    for m in FORMULA.finditer(node.value):
                        yield f"{path.relative_to(ROOT)}:{node.lineno}", m.group(0)


def test_method_formulas_hold_no_control_character():
    assert FORMULAS
    for title, body in FORMULAS:
        assert not CONTROL.search(title), title
        bad = [m.group(0) for m in FORMULA.finditer(body) if CONTROL.search(m.group(0))]
        assert not bad, (title, bad)


def test_no_formula_string_holds_a_control_character():
    found = list(_formula_strings())
    assert len(found) > 20  # the scan reaches the formulas (Method, Explain)
    bad = [(where, text) for where, text in found if CONTROL.search(text)]
    assert not bad, bad
