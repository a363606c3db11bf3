"""A test row's model: a preset id, or `config:<name>` for a model that is no preset, its config.json shape in
tests/data/configs/<name>.config.json ({"source", "mapping", "config"}; tests/data/README.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def model_spec(name: str) -> Any:
    """What a Scenario's `model` takes for the row's name."""
    if name.startswith("config:"):
        return {"hf_config": json.loads((CONFIGS / f"{name.removeprefix('config:')}.config.json").read_text())["config"]}
    return name
