"""Field patterns say their rule in words (issue #25, "internal messages"): a value that does not match a pydantic
field pattern is refused with what the field asks for, never with pydantic's "String should match pattern '<regex>'",
on the CLI and wherever the app shows a validation error (core.cli.describe_validation_error) or a catalog row's
problem (core.catalog.accelerators.validation_problems)."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

import core
from core.catalog.accelerators import ID_PATTERN, Accelerator, validation_problems
from core.cli import describe_validation_error
from core.text import PATTERN_RULES

ROOT = Path(__file__).resolve().parents[2]


def _pattern_fields() -> list[tuple[str, str, str]]:
    """(model, field, pattern) for every pydantic model field in core/ that declares a pattern."""
    found = []
    for info in pkgutil.walk_packages(core.__path__, "core."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == module.__name__:
                for name, f in obj.model_fields.items():
                    for meta in f.metadata:
                        pattern = getattr(meta, "pattern", None)
                        if pattern is not None:
                            found.append((obj.__name__, name, str(pattern)))
    return found


def test_every_field_pattern_in_core_has_its_rule_in_words():
    fields = _pattern_fields()
    assert len(fields) >= 5, fields  # accelerators, prices, purchases, presets (2), ecosystem
    missing = [f for f in fields if f[2] not in PATTERN_RULES]
    assert not missing, f"declare these with core.text.described_pattern: {missing}"


def _bad_accelerator() -> ValidationError:
    row = {"id": "h100-sxm\n", "name": "x", "vendor": "nvidia", "memory_gib": 80, "memory_bandwidth_gbps": 3350, "bf16_tflops": 989}
    with pytest.raises(ValidationError) as info:
        Accelerator(**row)
    return info.value


def test_a_pattern_mismatch_is_described_by_the_rule_not_the_regex():
    exc = _bad_accelerator()
    assert exc.errors()[0]["type"] == "string_pattern_mismatch"
    for text in (describe_validation_error(exc), "; ".join(p for _, p in validation_problems(exc))):
        assert "should match pattern" not in text and "^[a-z0-9]" not in text, text
        assert PATTERN_RULES[ID_PATTERN] in text, text
        assert "'h100-sxm\\n'" in text and "\n" not in text, "the value is shown escaped, on one line"


def test_cli_custom_accelerator_with_a_trailing_newline_gets_the_custom_id_rules():
    """The issue's example: before, `$` in the custom-id regex matched before the newline, the id reached the
    accelerator catalog's model and the CLI exited with "accelerator.id: String should match pattern '^[a-z0-9]...'"."""
    payload = json.dumps({"model": "llama-3.1-8b", "accelerator": "custom-24gib-936gbps-71tflops\n"})
    proc = subprocess.run([sys.executable, "-m", "core", "estimate", "-"], input=payload, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "should match pattern" not in lines[0]
    assert "custom-<GiB>gib-<GB/s>gbps-<TFLOPS>tflops" in lines[0] and "accelerator" in lines[0], lines[0]
