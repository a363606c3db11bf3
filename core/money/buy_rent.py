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
from core.catalog.prices import PriceRow
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
    break_even_utilisation: float | None  # None: rent per hour <= electricity per hour, buying never pays
    payback_months: float | None  # at this utilisation: purchase / monthly (rent - electricity)


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
    """Defaults come from the catalogs: purchase = the accelerator's listed
    price (launch MSRP for consumer cards), power = its TDP, rent = the cheapest
    on-demand price per device among its cloud rows. Raises ValueError when a
    needed figure is neither given nor in the catalog."""
    acc = get_accelerator(accelerator_id)
    if not 0 < utilisation <= 1:
        raise ValueError("utilisation must be in (0, 1]")
    if usd_per_kwh < 0 or pue < 1 or amortisation_years <= 0 or devices < 1:
        raise ValueError("need usd_per_kwh >= 0, pue >= 1, amortisation_years > 0 and devices >= 1")
    purchase, purchase_basis = purchase_usd_per_device, "given"
    if purchase is None:
        if acc.purchase_usd is None:
            raise ValueError(f"{acc.id} has no purchase price in the catalog: give purchase_usd_per_device")
        purchase, purchase_basis = acc.purchase_usd, f"catalog ({acc.source.split(';')[0]})"
    watts = watts_per_device if watts_per_device is not None else acc.tdp_w
    if watts is None:
        raise ValueError(f"{acc.id} has no TDP in the catalog: give watts_per_device")
    rent, rent_basis = rent_usd_per_device_hour, "given"
    if rent is None:
        own_rows = rows_for(acc.id, rows)
        if not own_rows:
            raise ValueError(f"{acc.id} has no cloud price in the catalog: give rent_usd_per_device_hour")
        best = min(own_rows, key=lambda r: r.on_demand_usd_per_device_hour)
        rent, rent_basis = best.on_demand_usd_per_device_hour, f"{best.provider} {best.instance_type} on-demand"
    if purchase <= 0 or rent <= 0 or watts < 0:
        raise ValueError("purchase and rent must be > 0 and watts >= 0")
    kw = devices * watts * pue / 1000.0
    busy_hours = HOURS_PER_YEAR * utilisation
    capital = devices * purchase / amortisation_years
    power_per_hour = kw * usd_per_kwh
    rent_per_hour = devices * rent
    own_year = capital + busy_hours * power_per_hour
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
