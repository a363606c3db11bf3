"""Sentences with numbers left unformatted, so that whoever shows them (the CLI,
a page with its GiB/GB switch, the Markdown report) formats the quantities and
escapes the text that came from the user.

A `Text` is a trusted template written in core/ plus named arguments:
`Bytes` (formatted in the reader's memory units), plain numbers (formatted by
the template's own format spec) and `str` (which may come from a config.json
or a link, and is handed to the caller's escaping function).

    Text.of("Needs {total} per device", total=Bytes(3.2e9)).render()
    -> "Needs 2.98 GiB per device"
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from core.units import BYTES_PER_GB, BYTES_PER_GIB


class Bytes(float):
    """A quantity of bytes inside a Text; rendered in the reader's units."""


def format_bytes(n_bytes: float, units: str = "GiB", digits: int = 1) -> str:
    divisor = BYTES_PER_GB if units == "GB" else BYTES_PER_GIB
    return f"{n_bytes / divisor:,.{digits}f} {'GB' if units == 'GB' else 'GiB'}"


_FORMATTER = string.Formatter()


@dataclass(frozen=True)
class Text:
    template: str
    args: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, template: str, **args: Any) -> Text:
        return cls(template, args)

    def render(self, units: str = "GiB", escape: Callable[[str], str] | None = None, digits: int = 1) -> str:
        """The sentence with bytes in `units` and every str argument passed through `escape`."""
        out: list[str] = []
        for literal, name, spec, _ in _FORMATTER.parse(self.template):
            out.append(literal)
            if name is None:
                continue
            value = self.args[name]
            if isinstance(value, Bytes):
                d = int(spec) if spec and spec.isdigit() else digits
                out.append(format_bytes(float(value), units, d))
            elif isinstance(value, str):
                out.append(escape(value) if escape else value)
            else:
                out.append(format(value, spec or ""))
        return "".join(out)

    def __str__(self) -> str:
        return self.render()


def joined(parts: list[Text | str] | tuple[Text | str, ...], sep: str = "") -> Text:
    """One Text from Texts and strings joined with `sep` (core's own words): each string goes in as an argument (so
    it is escaped as any str argument is), each Text's arguments are renamed so that two parts never share one."""
    template: list[str] = []
    args: dict[str, Any] = {}
    for i, part in enumerate(parts):
        if i:
            template.append(sep.replace("{", "{{").replace("}", "}}"))
        if isinstance(part, str):
            template.append("{" + f"s{i}" + "}")
            args[f"s{i}"] = part
            continue
        for literal, name, spec, _ in _FORMATTER.parse(part.template):
            template.append(literal.replace("{", "{{").replace("}", "}}"))
            if name is not None:
                template.append("{" + f"p{i}_{name}" + (f":{spec}" if spec else "") + "}")
                args[f"p{i}_{name}"] = part.args[name]
    return Text("".join(template), args)


def texts(items: list[Text] | tuple[Text, ...], units: str = "GiB", escape: Callable[[str], str] | None = None) -> list[str]:
    return [t.render(units, escape) for t in items]


_MARK = "\x00"


def bytes_mark(n_bytes: float) -> str:
    """A byte quantity inside an f-string that `marked()` turns into a Text (for long composed sentences)."""
    return f"{_MARK}{float(n_bytes)!r}{_MARK}"


def marked(text: str) -> Text:
    """A Text from a string with bytes_mark() quantities in it."""
    parts = text.split(_MARK)
    template, args = [], {}
    for i, part in enumerate(parts):
        if i % 2:
            name = f"b{i // 2}"
            template.append("{" + name + "}")
            args[name] = Bytes(float(part))
        else:
            template.append(part.replace("{", "{{").replace("}", "}}"))
    return Text("".join(template), args)


# ------------------------------------------------------------------ rules of text fields, in words
PATTERN_RULES: dict[str, str] = {}  # a regex a pydantic field must match -> what it asks for, in words


def described_pattern(pattern: str, rule: str) -> str:
    """`pattern` for `Field(pattern=...)`, with the words a person reads when a value does not match it (`rule`,
    completing "must be ..."): pydantic's own message quotes the regex ("String should match pattern '^[a-z0-9]...'"),
    which says nothing to most people. Every field pattern in core/ is declared through here
    (tests/core/test_cli.py checks)."""
    PATTERN_RULES[pattern] = rule
    return pattern


def pattern_problem(pattern: object, value: object) -> str:
    """The problem of a value that did not match a field pattern, in words, with the value shown escaped (a trailing
    line break shows as \\n) and cut short."""
    rule = PATTERN_RULES.get(str(pattern), "written with the characters that field allows")
    shown = repr(str(value)[:40]) + ("…" if len(str(value)) > 40 else "")
    return f"{shown} is not allowed here: it must be {rule}"


def listed(names: list[str], noun: str, first: int = 4) -> str:
    """`names` in a sentence, the first `first` of them and how many more `noun`: 'vLLM, SGLang and 3 more engines'."""
    if len(names) <= first:
        return ", ".join(names[:-1]) + (" and " if len(names) > 1 else "") + names[-1] if names else ""
    return f"{', '.join(names[:first])} and {len(names) - first} more {noun}"
