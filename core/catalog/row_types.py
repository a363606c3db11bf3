"""Field types the catalogs' rows share: a regular expression on data/accelerators.csv's ids (a row that applies to
some parts), and a list of serving-engine ids."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from core.catalog.collective_bandwidth import regular_expression
from core.text import described_pattern

# a regular expression on data/accelerators.csv's id, checked to compile as the row loads
AcceleratorPattern = Annotated[str, Field(min_length=1), AfterValidator(regular_expression)]
# engine ids (core/memory/engines.py), space-separated
EngineIds = Annotated[
    str, Field(pattern=described_pattern(r"^[a-z0-9.-]+( [a-z0-9.-]+)*$", "engine ids (lower-case letters, digits, dots and dashes) separated by single spaces"))
]
