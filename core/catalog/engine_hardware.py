"""Which serving engine runs on which hardware (data/engine_hardware.csv, one sourced row per engine, by vendor). A
scenario that serves with an engine on hardware it does not run on is refused in one line (core/scenario.py): vLLM
on an M2 Max was accepted without a word. Groq's and Cerebras' chips run their vendors' own serving stacks only: the
engine choice does not apply to them and is not checked; nor is hardware of one's own (vendor "other"), which can be
anything. An engine that reaches a vendor's parts only through another build or plugin says so in the same line
(vLLM on Apple silicon runs through the community vllm-metal plugin, whose model layers are mlx-lm's)."""

from __future__ import annotations

import functools
import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from core.catalog.accelerators import DATA_DIR, Accelerator, read_catalog_rows
from core.catalog.row_types import AcceleratorPattern

ENGINE_HARDWARE_CSV = DATA_DIR / "engine_hardware.csv"
UNCHECKED_VENDORS = frozenset({"groq", "cerebras", "other"})


class EngineHardware(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    engine: str
    vendors: frozenset[str]
    as_of: str
    source: str = Field(min_length=10)
    # Vendors the engine reaches only through a build or plugin that is not the engine modelled here, with what to
    # choose instead: "apple: <one sentence>", several separated by " | " (vLLM on Apple silicon: vllm-metal).
    elsewhere: dict[str, str] = {}
    # Parts of those vendors the engine's builds do not run on (a regular expression on data/accelerators.csv's id:
    # generations below its compute-capability floor), why in a few words, and the source
    refused_pattern: AcceleratorPattern | None = None
    refused_why: str = ""  # one sentence, or one per vendor: "nvidia: <why> | amd: <why>"
    refused_source: str = ""

    @model_validator(mode="after")
    def _refusal_explained(self) -> EngineHardware:
        if self.refused_pattern and (len(self.refused_why) < 10 or len(self.refused_source) < 10):
            raise ValueError("a refused_pattern needs refused_why and refused_source")
        return self

    def why_refused(self, vendor: str) -> str:
        """refused_why for a part of `vendor` (its own clause where the row gives one per vendor)."""
        parts = [p.split(":", 1) for p in self.refused_why.split(" | ")]
        if len(parts) > 1 and all(len(p) == 2 and p[0].strip() in self.vendors for p in parts):
            return next((text.strip() for v, text in parts if v.strip() == vendor), self.refused_why)
        return self.refused_why

    def refuses(self, acc: Accelerator) -> bool:
        return acc.vendor not in self.vendors or bool(self.refused_pattern and re.search(self.refused_pattern, acc.id))

    @field_validator("vendors", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        return frozenset(value.split(";")) if isinstance(value, str) else value

    @field_validator("elsewhere", mode="before")
    @classmethod
    def _notes(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        pairs = [part.split(":", 1) for part in value.split(" | ")]
        if any(len(p) != 2 or not p[0].strip() or not p[1].strip() for p in pairs):
            raise ValueError("write 'vendor: sentence', several separated by ' | '")
        return {vendor.strip(): text.strip() for vendor, text in pairs}


@functools.cache
def load_engine_hardware() -> dict[str, EngineHardware]:
    return {r.engine: r for r in read_catalog_rows(ENGINE_HARDWARE_CSV, EngineHardware)}


def engine_problem(engine: str, acc: Accelerator) -> str | None:
    """Why `engine` cannot serve on `acc`, in one line, or None."""
    row = load_engine_hardware().get(engine)
    if row is None or acc.vendor in UNCHECKED_VENDORS or not row.refuses(acc):
        return None
    others = sorted(e for e, r in load_engine_hardware().items() if not r.refuses(acc))
    choose = f"; on it: {', '.join(others)}" if others else ""
    if acc.vendor in row.vendors:  # a generation below the engine's floor
        return f"{engine} does not run on {acc.name}: {row.why_refused(acc.vendor)}{choose}"
    if (note := row.elsewhere.get(acc.vendor)) is not None:
        return f"{engine} as modelled here does not run on {acc.name} ({acc.vendor} hardware): {note}{choose}"
    return f"{engine} does not run on {acc.name} ({acc.vendor} hardware){choose}"
