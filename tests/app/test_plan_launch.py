"""The Plan page shows the command that runs its cheapest plan (issue #27, part 5): core's launch text, in st.code
(plain text, never Markdown), for a training goal and a serving goal."""

from core.plan import Goal, plan

from .conftest import no_exception, open_link


def test_fine_tune_page_shows_the_cheapest_plans_command():
    at = open_link("plan", {"model": "llama-3.1-70b", "goal": "fine-tune", "ptok": "20"})
    no_exception(at)
    best = plan(Goal(goal="fine-tune", model="llama-3.1-70b", tokens=20e6)).cheapest
    assert best is not None and best.launch
    codes = [c.value for c in at.code]
    assert best.launch in codes
    assert all(c.language == "bash" for c in at.code if c.value == best.launch)


def test_serve_page_shows_the_engine_command():
    at = open_link("plan", {"goal": "serve", "rpd": "2000", "tin": "1000", "tout": "300"})
    no_exception(at)
    best = plan(Goal(goal="serve", model="llama-3.1-8b", requests_per_day=2000, input_tokens=1000, output_tokens=300)).cheapest
    assert best is not None and best.launch
    assert best.launch in [c.value for c in at.code]
    assert any(c.value.lstrip("# \n").startswith("Serve with") for c in at.code)


def test_an_axolotl_link_plans_under_axolotl_and_shows_its_config():
    """A link that picks Axolotl in the sidebar (training, stack=axolotl) gets Axolotl's plan: its QLoRA keeps no fp32 upcast, so the plan is
    the core's for that stack, and the command is `axolotl train` on a YAML config with the plan's micro-batch."""
    at = open_link("plan", {"model": "llama-3.1-70b", "goal": "fine-tune", "ptok": "20", "mode": "training", "stack": "axolotl"})
    no_exception(at)
    best = plan(Goal(goal="fine-tune", model="llama-3.1-70b", tokens=20e6, training_stack="axolotl")).cheapest
    assert best is not None and best.scenario["training_stack"] == "axolotl"
    assert best.launch in [c.value for c in at.code]
    assert "axolotl train axolotl_config.yaml" in best.launch and f"micro_batch_size: {best.micro_batch}" in best.launch
    assert "CutCrossEntropyPlugin" not in best.launch
    # with the sidebar's fused cross-entropy on, the plan is sized and launched with it
    at = open_link("plan", {"model": "llama-3.1-70b", "goal": "fine-tune", "ptok": "20", "mode": "training", "stack": "axolotl", "fce": "True"})
    no_exception(at)
    fused = plan(Goal(goal="fine-tune", model="llama-3.1-70b", tokens=20e6, training_stack="axolotl", fused_cross_entropy=True)).cheapest
    assert fused is not None and fused.launch in [c.value for c in at.code] and "CutCrossEntropyPlugin" in fused.launch
