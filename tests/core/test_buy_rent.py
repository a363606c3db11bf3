"""Buy vs rent (core/money/buy_rent.py)."""

import pytest

from core.catalog.prices import prices_for
from core.money.buy_rent import HOURS_PER_YEAR, buy_vs_rent


def test_break_even_utilisation_is_where_costs_meet():
    r = buy_vs_rent("rtx-a6000", usd_per_kwh=0.15, utilisation=0.5)  # catalog: 4,650 USD, 300 W
    rent = min(p.on_demand_usd_per_device_hour for p in prices_for("rtx-a6000"))  # the cheapest device-hour
    assert r.purchase_usd == 4650 and r.power_kw == pytest.approx(0.3) and r.rent_usd_per_hour == pytest.approx(rent)
    assert r.own_usd_per_year == pytest.approx(4650 / 3 + HOURS_PER_YEAR * 0.5 * 0.3 * 0.15)
    assert r.rent_usd_per_year == pytest.approx(HOURS_PER_YEAR * 0.5 * rent)
    u = r.break_even_utilisation
    at = buy_vs_rent("rtx-a6000", usd_per_kwh=0.15, utilisation=u)
    assert at.own_usd_per_year == pytest.approx(at.rent_usd_per_year)
    below = buy_vs_rent("rtx-a6000", usd_per_kwh=0.15, utilisation=u * 0.9)
    above = buy_vs_rent("rtx-a6000", usd_per_kwh=0.15, utilisation=min(1.0, u * 1.1))
    assert below.cheaper == "rent" and above.cheaper == "buy"
    assert r.payback_months == pytest.approx(4650 / ((rent - 0.045) * HOURS_PER_YEAR * 0.5 / 12))


def test_costs_at_another_utilisation_follow_the_same_formulas():
    """The Training vs inference page draws both lines over utilisation from these: owning grows with the electricity
    paid while busy (its line was drawn flat), renting in proportion; at the scenario's own utilisation they are the
    scenario's figures, and they meet at the break-even utilisation."""
    r = buy_vs_rent("rtx-a6000", usd_per_kwh=0.15, utilisation=0.5)
    assert r.own_usd_per_year_at(0.5) == pytest.approx(r.own_usd_per_year)
    assert r.rent_usd_per_year_at(0.5) == pytest.approx(r.rent_usd_per_year)
    assert r.own_usd_per_year_at(1.0) - r.own_usd_per_year_at(0.0) == pytest.approx(HOURS_PER_YEAR * 0.3 * 0.15)
    u = r.break_even_utilisation
    assert r.own_usd_per_year_at(u) == pytest.approx(r.rent_usd_per_year_at(u))


def test_user_inputs_and_scaling():
    one = buy_vs_rent("h100-sxm", usd_per_kwh=0.1, utilisation=0.8, purchase_usd_per_device=30_000, pue=1.3)
    eight = buy_vs_rent("h100-sxm", usd_per_kwh=0.1, utilisation=0.8, purchase_usd_per_device=30_000, pue=1.3, devices=8)
    assert eight.own_usd_per_year == pytest.approx(8 * one.own_usd_per_year)
    assert eight.break_even_utilisation == pytest.approx(one.break_even_utilisation)
    # power: the DGX H100's 10.2 kW rated input over its 8 GPUs (host included), times the PUE
    assert one.power_kw == pytest.approx(10_200 / 8 / 1000 * 1.3)
    card = buy_vs_rent("h100-sxm", usd_per_kwh=0.1, utilisation=0.8, purchase_usd_per_device=30_000, pue=1.3, watts_per_device=700)
    assert card.power_kw == pytest.approx(0.7 * 1.3)


def test_never_pays_when_power_costs_more_than_rent():
    r = buy_vs_rent("t4", usd_per_kwh=10.0, utilisation=1.0, purchase_usd_per_device=2000)
    assert r.break_even_utilisation is None and r.payback_months is None and r.cheaper == "rent"


def test_defaults_work_for_datacenter_parts_and_consumer_cards():
    """Issue #11: buy vs rent answers by default. An H100 is priced as a whole DGX/HGX server per GPU (the newest
    dated listing in data/purchase_prices.csv); an RTX 4090, which no cloud in the catalog rents, is compared with the
    cheapest rentable GPU that has as much memory and bandwidth."""
    from core.catalog.purchases import default_purchase

    h100 = buy_vs_rent("h100-sxm", usd_per_kwh=0.1, utilisation=0.5)
    dgx = default_purchase("h100-sxm")
    assert dgx is not None and dgx.whole_system
    assert h100.purchase_usd == pytest.approx(dgx.usd / dgx.accelerators) and "server" in h100.purchase_basis
    assert h100.break_even_utilisation is not None and h100.payback_months is not None
    card = buy_vs_rent("rtx-3090", usd_per_kwh=0.1, utilisation=0.5)  # rented by GPU clouds: its own price
    assert "no cloud rents" not in card.rent_basis
    home = buy_vs_rent("rtx-3060-12gb", usd_per_kwh=0.1, utilisation=0.5)  # rented by none: the nearest part
    assert home.purchase_usd == 329 and "no cloud rents" in home.rent_basis
    assert buy_vs_rent("rtx-3060-12gb", usd_per_kwh=0.1, utilisation=0.5, rent_usd_per_device_hour=0.4).rent_basis == "given"


def test_missing_figures_raise():
    with pytest.raises(ValueError, match="power"):
        buy_vs_rent("tpu-v5e", usd_per_kwh=0.1, utilisation=0.5, purchase_usd_per_device=1)
    with pytest.raises(ValueError, match="purchase"):
        buy_vs_rent("tpu-v5e", usd_per_kwh=0.1, utilisation=0.5)
    with pytest.raises(ValueError, match="utilisation"):
        buy_vs_rent("rtx-a6000", usd_per_kwh=0.1, utilisation=0)
