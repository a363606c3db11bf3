"""Buy or rent: a device bought outright (straight-line over its useful life)
plus electricity while busy, against cloud hours paid only while busy.

Per year, at utilisation u (fraction of the 8,760 hours the device works):
  own(u)  = purchase / years + 8760 u x kW x PUE x USD/kWh
  rent(u) = 8760 u x rent USD/h
Break-even utilisation u* = (purchase / years) / (8760 (rent - kW x PUE x USD/kWh));
above u* buying is cheaper. Idle power, space, staff and resale are left out.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from core.catalog.accelerators import get_accelerator
from core.catalog.price_trust import billable_prices
from core.catalog.prices import PriceRow
from core.catalog.purchases import default_purchase
from core.money.pricing import rows_for

_OUT = ConfigDict(frozen=True)
HOURS_PER_YEAR = 8760.0
# Default useful life: NVIDIA data-center generations in data/accelerators.csv
# launch two years apart (V100 2017, A100 2020, H100 2022, B200 2024); three
# years is about one and a half generations. Override for your own accounting.
DEFAULT_AMORTISATION_YEARS = 3.0


class BuyVsRent(BaseModel):
    model_config = _OUT
    accelerator_id: str
    devices: int
    purchase_usd: float
    purchase_basis: str
    amortisation_years: float
    power_kw: float  # all devices, at the wall (PUE applied)
    usd_per_kwh: float
    rent_usd_per_hour: float  # all devices
    rent_basis: str
    utilisation: float
    own_usd_per_year: float
    rent_usd_per_year: float
    cheaper: Literal["buy", "rent"]
    break_even_utilisation: float | None  # None: rent per hour <= electricity per hour, buying never pays; > 1: not
    # even at every hour of the year
    payback_months: float | None  # at this utilisation: purchase / monthly (rent - electricity)

    def own_usd_per_year_at(self, utilisation: float) -> float:
        """Owning at another utilisation: the purchase spread over the amortisation years, plus electricity while busy."""
        return _own_per_year(self.purchase_usd, self.amortisation_years, self.power_kw * self.usd_per_kwh, HOURS_PER_YEAR * utilisation)

    def rent_usd_per_year_at(self, utilisation: float) -> float:
        """Renting at another utilisation: device-hours paid only while busy."""
        return HOURS_PER_YEAR * utilisation * self.rent_usd_per_hour


def _own_per_year(purchase_usd: float, years: float, power_usd_per_hour: float, busy_hours: float) -> float:
    return purchase_usd / years + busy_hours * power_usd_per_hour


def _cheapest_rental(accelerator_id: str, rows: tuple[PriceRow, ...] | None) -> tuple[PriceRow | None, str]:
    """The cheapest on-demand device-hour of this part; for a part no cloud rents (a consumer card), of the cheapest
    GPU with at least as much memory and bandwidth."""
    own = rows_for(accelerator_id, rows)
    if own:
        return min(own, key=lambda r: r.on_demand_usd_per_device_hour), accelerator_id
    acc = get_accelerator(accelerator_id)
    pool = [
        r
        for r in billable_prices(rows)
        if (a := get_accelerator(r.accelerator_id)).kind == "gpu"
        and a.usable_memory_gib >= acc.usable_memory_gib
        and a.memory_bandwidth_gbps >= acc.memory_bandwidth_gbps
    ]
    if not pool:
        return None, accelerator_id
    best = min(pool, key=lambda r: r.on_demand_usd_per_device_hour)
    return best, best.accelerator_id


def buy_vs_rent(
    accelerator_id: str,
    *,
    usd_per_kwh: float,
    utilisation: float,
    devices: int = 1,
    purchase_usd_per_device: float | None = None,
    rent_usd_per_device_hour: float | None = None,
    watts_per_device: float | None = None,
    pue: float = 1.0,
    amortisation_years: float = DEFAULT_AMORTISATION_YEARS,
    rows: tuple[PriceRow, ...] | None = None,
) -> BuyVsRent:
    """Defaults come from the catalogs: purchase = the part's newest whole-server price per accelerator
    (data/purchase_prices.csv), else its card price; power = that server's rated power per accelerator, else the
    card's TDP; rent = the cheapest on-demand device-hour of the part, or, for a part no cloud rents, of the cheapest
    GPU with as much memory and bandwidth. Raises ValueError when a needed figure is neither given nor found."""
    acc = get_accelerator(accelerator_id)
    if not 0 < utilisation <= 1:
        raise ValueError("utilisation must be in (0, 1]")
    if usd_per_kwh < 0 or pue < 1 or amortisation_years <= 0 or devices < 1:
        raise ValueError("need usd_per_kwh >= 0, pue >= 1, amortisation_years > 0 and devices >= 1")
    purchase, purchase_basis = purchase_usd_per_device, "given"
    bought = default_purchase(acc.id)
    if purchase is None:
        if bought is not None:
            purchase = bought.usd_per_accelerator
            host = "a whole server per accelerator" if bought.whole_system else "the card alone"
            purchase_basis = f"{bought.item}, {bought.kind} price {bought.as_of} ({host})"
        elif acc.purchase_usd is not None:
            purchase, purchase_basis = acc.purchase_usd, f"catalog ({acc.source.split(';')[0]})"
        else:
            raise ValueError(f"{acc.id} has no purchase price in the catalogs: give purchase_usd_per_device")
    watts = watts_per_device
    if watts is None:
        watts = bought.watts_per_accelerator if bought is not None and bought.watts_per_accelerator else acc.tdp_w
    if watts is None:
        raise ValueError(f"{acc.id} has no power figure in the catalogs: give watts_per_device")
    rent, rent_basis = rent_usd_per_device_hour, "given"
    if rent is None:
        best, like = _cheapest_rental(acc.id, rows)
        if best is None:
            raise ValueError(f"no cloud part with {acc.usable_memory_gib:g} GiB or more has a price: give rent_usd_per_device_hour")
        rent = best.on_demand_usd_per_device_hour
        rent_basis = f"{best.provider} {best.instance_type} on-demand"
        if like != acc.id:
            rent_basis += f" (no cloud rents a {acc.name}: the cheapest part with as much memory, {like})"
    if purchase <= 0 or rent <= 0 or watts < 0:
        raise ValueError("purchase and rent must be > 0 and watts >= 0")
    kw = devices * watts * pue / 1000.0
    busy_hours = HOURS_PER_YEAR * utilisation
    capital = devices * purchase / amortisation_years
    power_per_hour = kw * usd_per_kwh
    rent_per_hour = devices * rent
    own_year = _own_per_year(devices * purchase, amortisation_years, power_per_hour, busy_hours)
    rent_year = busy_hours * rent_per_hour
    margin = rent_per_hour - power_per_hour  # what each busy owned hour saves, before the purchase
    return BuyVsRent.model_construct(
        accelerator_id=acc.id,
        devices=devices,
        purchase_usd=devices * purchase,
        purchase_basis=purchase_basis,
        amortisation_years=amortisation_years,
        power_kw=kw,
        usd_per_kwh=usd_per_kwh,
        rent_usd_per_hour=rent_per_hour,
        rent_basis=rent_basis,
        utilisation=utilisation,
        own_usd_per_year=own_year,
        rent_usd_per_year=rent_year,
        cheaper="buy" if own_year < rent_year else "rent",
        break_even_utilisation=capital / (HOURS_PER_YEAR * margin) if margin > 0 else None,
        payback_months=devices * purchase / (margin * busy_hours / 12.0) if margin > 0 else None,
    )
