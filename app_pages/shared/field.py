"""One input of the dashboard: its widget, its URL key (a contract: links written today keep working), the Scenario
field it feeds and how (a scale such as billions or percent, "0 means unset"), when it applies, and how a link's text
or a scenario's value becomes the widget's value and back. The table of every input is app_pages/shared/fields.py."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Values = dict[str, Any]
Kind = Literal["choice", "int", "float", "bool"]
Widget = Literal["select", "segmented", "slider", "number", "toggle"]


def _always(values: Values) -> bool:
    return True


def training(values: Values) -> bool:
    return values.get("mode") == "training"


def inference(values: Values) -> bool:
    return values.get("mode") != "training"


def _bound(value: float | None) -> str:
    """A range's end in a message: 2,097,152 rather than 2.09715e+06."""
    return "" if value is None else f"{value:,.0f}" if float(value).is_integer() else f"{value:,g}"


@dataclass(frozen=True)
class Field:
    key: str  # widget key = URL query parameter
    label: str
    kind: Kind
    default: Any
    options: tuple = ()
    lo: float | None = None
    hi: float | None = None
    help: str = ""
    labels: dict = field(default_factory=dict)
    widget: Widget = "select"  # an "int" field with options and widget "slider": stops, any whole number in [lo, hi]
    section: str = "page"  # sidebar section, or "page" for inputs drawn by a page
    scenario: str | None = None  # the Scenario field it feeds
    scale: float = 1.0  # scenario value = widget value x scale
    zero_is_unset: bool = False  # 0 in the widget = the scenario field left out (None)
    lo_set: float | None = None  # zero_is_unset: the least value that sets the field (0 or lo_set..hi, the scenario's bound)
    unset: Any = None  # another widget value that leaves the scenario field out (e.g. -1 = all layers)
    applies: Callable[[Values], bool] = _always  # whether it shapes the scenario (and shows) for these values
    # Another input sets the same scenario field where this one does not apply (their `applies` never overlap): a
    # scenario value outside this input's options stands for its default (QLoRA's base: a format that is no QLoRA base
    # trains on the stack's NF4).
    others_as_default: bool = False

    def parse(self, raw: Any) -> Any:
        """The value a URL string stands for, or raise ValueError."""
        if not isinstance(raw, str):
            raise ValueError("expected text")
        if self.kind == "bool":
            if raw.lower() in ("true", "1", "yes", "on"):
                return True
            if raw.lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError("expected true or false")
        if self.kind == "choice":
            for opt in self.options:
                if str(opt) == raw:
                    return opt
            # a hand-typed link's capitals (obj=DPO): the one choice that matches but for case, never a guess
            folded = [opt for opt in self.options if str(opt).casefold() == raw.casefold()]
            if len(folded) == 1:
                return folded[0]
            raise ValueError("not one of the choices")
        try:
            value = float(raw)
        except (ValueError, OverflowError):
            raise ValueError("not a number") from None
        if not math.isfinite(value):
            raise ValueError("not a finite number")
        if self.kind == "int":
            if value != int(value):
                raise ValueError("expected a whole number")
            value = int(value)
        if (self.lo is not None and value < self.lo) or (self.hi is not None and value > self.hi):
            raise ValueError(f"must be between {_bound(self.lo)} and {_bound(self.hi)}")
        return value

    def refused(self, value: Any) -> str | None:
        """Why a value the input holds (typed, or from a link) cannot set the scenario field, or None: the input
        keeps it and the scenario is built without it (zero_is_unset: 0, or lo_set and more, the scenario's bound)."""
        if self.lo_set is not None and isinstance(value, int | float) and value and value < self.lo_set:
            return f"{self.label}: {self.fmt(value)} is not used (it must be 0 or at least {_bound(self.lo_set)}); 0 is used until it is changed."
        return None

    def serialize(self, value: Any) -> str:
        return str(value)

    def fmt(self, value: Any) -> str:
        if value in self.labels:
            return self.labels[value]
        return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)

    def shows(self, scenario_value: Any, widget_value: Any) -> bool:
        """Whether the widget value stands for the scenario value exactly (a slider snaps to its nearest stop)."""
        if scenario_value is None:
            return True
        if self.others_as_default and scenario_value not in self.options:
            scenario_value = self.default
        back = self.to_scenario(widget_value)
        if isinstance(scenario_value, float) and isinstance(back, int | float) and not isinstance(back, bool):
            return math.isclose(back, scenario_value, rel_tol=1e-9)
        return back == scenario_value

    def scenario_text(self, value: Any) -> str:
        """A scenario's value in this input's terms (its scale and labels), exactly: not snapped to a slider stop."""
        if value is None or (self.others_as_default and value not in self.options):
            return self.fmt(self.default)
        if self.scale != 1.0:
            value = value / self.scale
            value = int(value) if float(value).is_integer() and self.kind != "float" else value
        return self.fmt(value)

    def stops(self, value: Any) -> list[Any]:
        """A slider's stops: its options, plus the current value when a whole-number field holds one between them."""
        if self.kind == "int" and value not in self.options:
            return sorted({*self.options, value})
        return list(self.options)

    def to_scenario(self, value: Any) -> Any:
        if (self.zero_is_unset and not value) or (self.unset is not None and value == self.unset):
            return None
        if self.scale != 1.0:
            return value * self.scale
        return value

    def from_scenario(self, value: Any) -> Any:
        """The widget value that shows a scenario value (nearest slider stop for sliders)."""
        if value is None or (self.others_as_default and value not in self.options):
            return self.default
        if self.scale != 1.0:
            value = value / self.scale
        if self.widget == "slider" and self.options and self.kind == "choice":
            return min(self.options, key=lambda o: abs(o - value))
        return value


CUSTOM_ACC = "custom"  # the accelerator picker's "Any hardware I own": memory, bandwidth and TFLOPS typed below it


def custom_hardware(values: Values) -> bool:
    return values.get("acc") == CUSTOM_ACC


def llama_cpp(values: Values) -> bool:
    return inference(values) and values.get("engine") == "llama.cpp"
