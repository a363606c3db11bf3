"""The planner's choosing rules: one definition, in core/money/picks.py (the Training page's runs use it too)."""

from core.money.picks import FAST_ENOUGH, LONGER_RUN_FACTOR, MIN_SCALING_EFFICIENCY, cheaper_if_longer, cheapest, eligible, fastest, frontier

__all__ = ["FAST_ENOUGH", "LONGER_RUN_FACTOR", "MIN_SCALING_EFFICIENCY", "cheaper_if_longer", "cheapest", "eligible", "fastest", "frontier"]
