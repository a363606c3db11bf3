"""One rule for a measured row: within its tolerance, or a recorded miss that stays where it was recorded."""

from __future__ import annotations


def check_row(ours: float, measured: float, recorded: tuple[float, float, str], tolerance: float, band: float = 0.05) -> None:
    """`recorded` is (measured, our estimate when recorded, a miss's reason or ""): a row without a reason is within
    `tolerance`; a recorded miss stays within `band` of its recorded error and stays a miss (else promote it)."""
    recorded_measured, recorded_ours, reason = recorded
    err = ours / measured - 1
    if not reason:
        assert abs(err) <= tolerance, f"{err:+.1%}"
        return
    assert abs(err - (recorded_ours / recorded_measured - 1)) <= band, f"recorded miss moved to {err:+.1%}"
    assert abs(err) > tolerance, f"a recorded miss is now within {tolerance:.0%} ({err:+.1%}): promote it"
