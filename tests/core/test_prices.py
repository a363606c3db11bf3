"""Price catalog and the forgiving price-CSV parser (bad uploads give messages, never exceptions)."""

import os

import pytest

from core.catalog.accelerators import CatalogError, load_accelerators
from core.catalog.prices import (
    COLUMNS,
    MAX_ROWS,
    PRICES_CSV,
    load_prices,
    parse_price_bytes,
    parse_price_csv,
    prices_for,
)

KNOWN = {a.id for a in load_accelerators()}
HEADER = ",".join(COLUMNS)
GOOD = "aws,p5.48xlarge,h100-sxm,8,55.04,17.63,us-east-1,false,2026-11-23,https://example.com/p,"


def csv_text(*rows, header=HEADER):
    return "\n".join([header, *rows]) + "\n"


def test_builtin_catalog_loads_and_every_accelerator_exists():
    rows = load_prices()
    assert len(rows) >= 60
    assert {r.accelerator_id for r in rows} <= KNOWN
    assert all(r.source and r.as_of for r in rows)
    assert load_prices() is rows  # cached


def test_builtin_catalog_covers_providers_and_families():
    rows = load_prices()
    providers = {r.provider for r in rows}
    assert {"aws", "gcp", "azure"} <= providers
    assert len(providers - {"aws", "gcp", "azure"}) >= 2
    types = " ".join(r.instance_type for r in rows)
    for family in (
        "p3.",
        "p4d.",
        "p4de.",
        "p5.",
        "p5e.",
        "g4dn.",
        "g5.",
        "g6.",
        "g6e.",
        "trn1.",
        "inf2.",
        "a2-highgpu",
        "a2-ultragpu",
        "a3-highgpu",
        "a3-mega",
        "g2-",
        "n1-",
        "as_T4_v3",
        "A100_v4",
        "ND96isr_H100_v5",
        "NC40ads_H100_v5",
        "NV12s_v3",
    ):
        assert family.lower() in types.lower(), family
    for tpu in ("tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"):
        tpu_rows = prices_for(tpu)
        per_chip = [r for r in tpu_rows if r.accelerators_per_instance == 1]
        assert per_chip, tpu  # one chip of a slice, besides the whole-slice rows


def test_gcp_gpu_part_only_rows_are_marked_estimates():
    for r in load_prices():
        if "host not extracted" in r.notes or "not in the" in r.notes:
            assert r.estimate, r.instance_type


def test_per_device_prices_and_sorting():
    h100 = prices_for("h100-sxm")
    assert h100
    per_device = [r.on_demand_usd_per_device_hour for r in h100]
    assert per_device == sorted(per_device)
    p5 = next(r for r in h100 if r.instance_type == "p5.48xlarge")
    assert p5.on_demand_usd_per_device_hour == pytest.approx(55.04 / 8)
    assert p5.spot_usd_per_device_hour == pytest.approx(p5.spot_usd_per_hour / 8)
    assert prices_for("rtx-4080") == ()


def test_good_csv_parses():
    rows, messages = parse_price_csv(csv_text(GOOD, "", GOOD.replace(",17.63,", ",,")), KNOWN)
    assert messages == []
    assert len(rows) == 2 and rows[1].spot_usd_per_hour is None and rows[1].spot_usd_per_device_hour is None


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (GOOD.replace(",55.04,", ",abc,"), "row 2 (line 3): on_demand_usd_per_hour: not a number: 'abc'"),
        (GOOD.replace(",55.04,", ",-1,"), "row 2 (line 3): on_demand_usd_per_hour: must be > 0"),
        (GOOD.replace(",55.04,", ",inf,"), "row 2 (line 3): on_demand_usd_per_hour: not a number"),
        (GOOD.replace("h100-sxm", "h100-xyz"), "row 2 (line 3): accelerator_id: unknown accelerator 'h100-xyz'"),
        (GOOD.replace(",8,", ",0,"), "row 2 (line 3): accelerators_per_instance: must be >= 1"),
        (GOOD + ",extra", "row 2 (line 3): expected 11 cells, found 12"),
    ],
)
def test_bad_row_gives_message_and_keeps_good_rows(bad, message):
    rows, messages = parse_price_csv(csv_text(GOOD, bad, GOOD), KNOWN)
    assert len(rows) == 2
    assert len(messages) == 1 and messages[0].startswith(message)


def test_missing_or_extra_columns_give_one_message_and_no_rows():
    header = HEADER.replace(",spot_usd_per_hour", "")
    rows, messages = parse_price_csv(csv_text(GOOD, header=header), KNOWN)
    assert rows == () and messages == ["header: missing columns: spot_usd_per_hour"]
    rows, messages = parse_price_csv(csv_text(GOOD + ",x", header=HEADER + ",colour"), KNOWN)
    assert rows == () and messages == ["header: unexpected columns: colour"]


@pytest.mark.parametrize("text", ["", "   \n\n", "\ufeff"])
def test_empty_file(text):
    rows, messages = parse_price_csv(text, KNOWN)
    assert rows == () and len(messages) == 1 and messages[0].startswith("empty file")


@pytest.mark.parametrize(
    ("data", "start"),
    [
        (bytes(range(256)) * 4, "not a text file"),
        (b"\xff\xfe\x89PNG garbage \xc3\x28", "not UTF-8 text"),
        (os.urandom(2048).replace(b"\x00", b"\x01") + b"\xff", "not UTF-8 text"),
    ],
)
def test_binary_garbage_is_reported_not_raised(data, start):
    rows, messages = parse_price_bytes(data, KNOWN)
    assert rows == () and len(messages) == 1 and messages[0].startswith(start)


def test_bytes_with_bom_parse():
    rows, messages = parse_price_bytes(("\ufeff" + csv_text(GOOD)).encode(), KNOWN)
    assert len(rows) == 1 and messages == []


def test_row_cap():
    rows, messages = parse_price_csv(csv_text(*[GOOD] * 10_000), KNOWN)
    assert len(rows) == MAX_ROWS
    assert messages == [f"more than {MAX_ROWS:,} rows: only the first {MAX_ROWS:,} were read"]


def test_unterminated_quote_does_not_raise():
    rows, messages = parse_price_csv(csv_text(GOOD, 'aws,"broken,h100-sxm'), KNOWN)
    assert len(rows) == 1 and len(messages) == 1


def test_broken_builtin_style_file_raises_catalog_error(tmp_path):
    path = tmp_path / "prices.csv"
    path.write_text(PRICES_CSV.read_text().replace(",55.04,", ",-55.04,"))
    with pytest.raises(CatalogError, match=r"prices\.csv: .*on_demand_usd_per_hour: must be > 0"):
        load_prices(path)


def test_a_gpu_priced_without_its_host_never_prices_a_bill():
    """Review L8: GCP lists an attachable GPU apart from the N1 VM it needs (its 'GPU part only' rows: a T4 at 0.35 USD
    an hour, which no one can rent alone). data/price_flags.csv flags them as partial; the rows with a host (n1-standard-4
    + 1x T4 at 0.54) price the machine, and a T4 serving plan never rents a bare GPU."""
    from core.catalog.price_trust import billable_prices, flag_of
    from core.catalog.prices import load_prices
    from core.plan import plan
    from core.plan.goal import Goal

    partial = [r for r in load_prices() if "GPU part only" in r.instance_type]
    assert partial and all((flag_of(r) or "").startswith("partial: ") for r in partial)
    hosted = [r for r in billable_prices() if r.provider == "gcp" and r.accelerator_id == "t4"]
    assert hosted and all("+" in r.instance_type and "part only" not in r.instance_type for r in hosted)
    r = plan(Goal(goal="serve", model="llama-3.2-1b", requests_per_day=2000, accelerators=["t4"]))
    assert all("part only" not in p.instance for p in r.plans)
