"""The planner's picks: core/money/picks.py holds the one definition (the Training page uses it too)."""

from core.money.picks import FAST_ENOUGH, MIN_SCALING_EFFICIENCY, cheapest, eligible, fastest, frontier

__all__ = ["FAST_ENOUGH", "MIN_SCALING_EFFICIENCY", "cheapest", "eligible", "fastest", "frontier"]
