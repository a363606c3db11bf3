"""A goal's providers (Goal.providers; the Plan page's cloud filter, a seed-note topic: AWS, Azure and GCP GPU
instances): every plan rents from them, a name with no price rows is said with a suggestion, a hostile name is refused."""

import pytest
from pydantic import ValidationError

from core.catalog.price_trust import billable_prices
from core.plan import plan
from core.plan.goal import Goal

TRAIN = {"goal": "fine-tune", "model": "llama-3.1-70b", "tokens": 5e7}
SERVE = {"goal": "serve", "model": "llama-3.1-8b", "requests_per_day": 20_000}


@pytest.mark.parametrize("spec", [TRAIN, SERVE], ids=["fine-tune", "serve"])
@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_every_plan_rents_from_the_goals_provider(spec, cloud):
    anywhere, only = plan(Goal(**spec)), plan(Goal(**spec, providers=[cloud]))
    assert only.plans and only.cheapest is not None
    assert {p.provider for p in only.plans} == {cloud}
    # fewer rows to choose from never makes the cheapest plan cheaper
    cost = (lambda p: p.usd) if spec is TRAIN else (lambda p: p.usd_per_month)
    assert cost(only.cheapest) >= cost(anywhere.cheapest) - 1e-9
    assert any(f"Only the price rows of {cloud}" in a for a in only.assumptions)


def test_several_providers_and_their_case():
    r = plan(Goal(**TRAIN, providers=["AWS", " lambda ", "aws"]))
    assert r.plans and {p.provider for p in r.plans} <= {"aws", "lambda"}
    assert Goal(**TRAIN, providers=["AWS", " lambda ", "aws"]).providers == ("aws", "lambda")


def test_a_provider_with_no_rows_is_said_with_a_suggestion():
    r = plan(Goal(**TRAIN, providers=["awss"]))
    assert not r.plans and r.cheapest is None
    assert r.skipped[0].startswith("awss: no price rows from this provider (did you mean: aws")
    assert "awss" not in {p.provider for p in billable_prices()}


@pytest.mark.parametrize("bad", [[], ["=HYPERLINK(1)"], ["<b>x</b>"], ["a" * 65]])
def test_a_hostile_or_empty_provider_list_is_refused(bad):
    with pytest.raises(ValidationError):
        Goal(**TRAIN, providers=bad)
