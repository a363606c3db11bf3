"""What would help, priced (core/money/help_options.py; issue 26, item 6): each change that makes a scenario fit,
with its time and cost from the same core the planner and `estimate` use, cheapest first."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.catalog.accelerators import get_accelerator
from core.catalog.stack_layouts import layout_problem
from core.estimate import estimate
from core.layout import Layout
from core.memory.estimate import estimate_memory
from core.money.help_options import help_options
from core.money.run_bill import SETUP_HOURS, run_time
from core.scenario import Scenario
from core.units import BYTES_PER_GIB
from tests.core.test_run_bill import _row

# One H100 at $2.00 an hour, or eight on one instance at $16.00 an hour.
# "handco" is not in data/providers.csv: a person's own rows, no order bound, may span nodes.
ROWS = (_row("handco", 1, 2.00, instance="1x-h100"), _row("handco", 8, 16.00, instance="8x-h100"))
FULL_70B = Scenario(model="llama-3.1-70b", mode="training", method="full", accelerator="h100-sxm", seq_len=4096, train_tokens=50e6)


def test_70b_full_fine_tune_on_one_h100_cheapest_fix_money_by_hand():
    """70B full fine-tuning needs ~1 TiB per device; on one H100 it does not fit. The cheapest fix the speed core can
    time is LoRA on 8 H100s (tensor parallel 8: the bf16 base is 131 GiB, so LoRA alone does not fit one card)."""
    assert not estimate_memory(FULL_70B).fits
    options = help_options(FULL_70B, ROWS)
    best = options[0]
    # LoRA on the 8 GPUs of one instance: tensor parallel within it, the frozen base sharded by ZeRO-3 over what is left
    assert best.update["method"] == "lora" and best.update["tensor_parallel"] * best.update["data_parallel"] == 8
    assert best.devices == 8 and best.instances == 1 and best.time_modelled
    layout = Layout(best.update["data_parallel"], best.update["tensor_parallel"], best.update["pipeline_parallel"])
    # The bill by hand (core/money/run_bill.py's rule): whole instances x price per instance-hour x (setup + the
    # computation with its communication). One 8-GPU instance at $16.00/h; the computation from the speed core.
    compute_hours = run_time(FULL_70B.replace(**best.update), get_accelerator("h100-sxm"), layout).compute_hours
    assert 0.5 < compute_hours < 5  # 50M tokens of 70B LoRA (~2 x 70e9 x 50e6 FLOPs forward + backward-for-inputs) on 8 H100s
    assert best.hours == pytest.approx(SETUP_HOURS + compute_hours, rel=1e-12)
    assert best.usd == pytest.approx(1 * 16.00 * (0.25 + compute_hours), rel=1e-12)
    assert best.usd_per_hour == 16.00
    # QLoRA fits on the one H100 (62 GiB): 1 instance x $2.00/h x (0.25 h + its longer computation), dearer here.
    qlora = next(o for o in options if o.update == {"method": "qlora"})
    qlora_hours = run_time(FULL_70B.replace(method="qlora"), get_accelerator("h100-sxm"), Layout(1, 1, 1)).compute_hours
    assert qlora.devices == 1 and qlora.usd == pytest.approx(1 * 2.00 * (0.25 + qlora_hours), rel=1e-12)
    assert qlora.usd > best.usd
    # The same run priced as `estimate` prices the changed scenario: one answer everywhere.
    same = estimate(FULL_70B.replace(**best.update), ROWS).training
    assert same is not None and same.run_usd == pytest.approx(best.usd, rel=1e-12) and same.run_hours == pytest.approx(best.hours, rel=1e-12)


def test_offload_moves_gradients_too_and_is_timed_with_its_copies_and_cpu_step():
    """ZeRO-Offload on one GPU (stage 2) and ZeRO-Infinity are offered; with them the gradients and optimizer states
    live in CPU memory, which the option names. Their time includes the PCIe copies and the CPU optimizer step
    (core/speed/offload.py), so they are ordered by cost with the others, and each is slower than the same layout
    would be without the offload."""
    options = help_options(FULL_70B, ROWS)
    offloads = [o for o in options if o.update.get("offload", "none") != "none"]
    assert offloads and all(o.time_modelled and o.host_memory_gib > 50 for o in offloads)
    assert all(any("system RAM" in n for n in o.notes) and any("PCIe" in n for n in o.notes) for o in offloads)
    one_gpu = next(o for o in offloads if o.devices == 1)
    alt = estimate_memory(FULL_70B.replace(**one_gpu.update))
    assert alt.memory_per_device_bytes.optimizer == 0 and alt.memory_per_device_bytes.gradients < 0.01 * alt.cpu_memory_per_device_bytes
    acc = get_accelerator("h100-sxm")
    for o in offloads:
        alt_sc = FULL_70B.replace(**o.update)
        layout = Layout(alt_sc.data_parallel, alt_sc.tensor_parallel, alt_sc.pipeline_parallel)
        with_copies = run_time(alt_sc, acc, layout)
        assert with_copies.time.offload_fraction > 0
        assert with_copies.compute_hours > run_time(alt_sc.replace(offload="none"), acc, layout).compute_hours


NOT_FITTING = [
    FULL_70B,
    FULL_70B.replace(train_tokens=None),
    Scenario(model="llama-3.1-8b", mode="training", method="full", accelerator="rtx-4090", seq_len=2048),
    Scenario(model="llama-3.1-70b", accelerator="h100-sxm", seq_len=4096),
    Scenario(model="llama-3.1-70b", accelerator="a100-sxm-40gb", seq_len=8192, batch_size=8),
    Scenario(model="llama-3.1-70b", serving_engine="llama.cpp", gpu_layers=0, accelerator="rtx-4090", host_memory_gib=64),
    Scenario(model="qwen2.5-7b", mode="training", method="lora", accelerator="rtx-4090", seq_len=16384, batch_size=4, training_stack="torchtune"),
]


@pytest.mark.parametrize("sc", NOT_FITTING, ids=lambda s: f"{s.model}-{s.mode}-{s.accelerator}")
def test_every_option_fits_is_runnable_and_the_list_is_cheapest_first(sc):
    assert not estimate_memory(sc).fits
    options = help_options(sc)
    assert options, "a scenario this size has some fix"
    for o in options:
        alt = sc.replace(**o.update)
        mem = estimate_memory(alt)
        assert mem.fits, o.change
        assert mem.memory_per_device_bytes.total == o.memory_per_device_bytes
        assert mem.devices_in_layout == o.devices
        if sc.mode == "training":
            assert layout_problem(alt.training_stack, alt.method, alt.zero_stage, alt.tensor_parallel, alt.pipeline_parallel, alt.data_parallel) is None
        else:
            assert alt.gpu_layers is None or sc.serving_engine == "llama.cpp"
            assert o.host_memory_gib * BYTES_PER_GIB <= alt.host_memory_gib * BYTES_PER_GIB
        assert o.tokens_per_s is not None and o.tokens_per_s > 0
    # cheapest first among the options whose time the core models, then the offloads (at least their time), each
    # group with the unpriced last
    for group in ([o for o in options if o.time_modelled], [o for o in options if not o.time_modelled]):
        priced = [o.cost for o in group if o.cost is not None]
        assert priced == sorted(priced)
        assert [o.cost is None for o in group] == sorted(o.cost is None for o in group)
    assert [o.time_modelled for o in options] == sorted((o.time_modelled for o in options), reverse=True)


def test_nothing_when_it_fits():
    sc = Scenario(model="llama-3.1-8b", accelerator="h100-sxm")
    assert estimate_memory(sc).fits and help_options(sc) == [] and estimate(sc).help_options == []


def test_llama_cpp_without_enough_system_ram_names_the_ram():
    """70B in BF16 with -ngl 0 on a 24 GB card and 64 GiB of RAM: the device holds its part, the 132.7 GiB of layers
    kept off it do not fit the RAM. The advice says so, and the options include the RAM that would hold them, the
    -ngl that leaves RAM enough, and a smaller GGUF file; none offers more devices alone (the layers stay in RAM)."""
    sc = Scenario(model="llama-3.1-70b", serving_engine="llama.cpp", gpu_layers=0, accelerator="rtx-4090", host_memory_gib=64, seq_len=4096)
    result = estimate(sc)
    assert not result.fits and result.host_memory_fits is False
    why = " ".join(str(t) for t in result.why_texts)
    assert "System RAM is what is short" in why and "132.7 GiB" in why
    options = result.help_options
    ram = next(o for o in options if "system RAM" in o.change)
    assert ram.update == {"host_memory_gib": 133.0} and ram.host_memory_gib == pytest.approx(132.7, abs=0.05)
    assert ram.host_memory_bytes == pytest.approx(132.7 * 2**30, rel=4e-4) and ram.host_memory_gib == ram.host_memory_bytes / 2**30
    # the change names a size: the CLI's words in GiB, the page's in its units (133 x 2^30 B = 142.8 GB -> "143 GB")
    assert ram.change == "133 GiB of system RAM" and ram.change_text is not None
    assert ram.change_text.render("GB") == "143 GB of system RAM" and ram.change_text.render("GiB") == ram.change
    assert "change_text" not in ram.model_dump()  # the CLI's result fields: only added ones (host_memory_bytes)
    assert any(o.update.get("weights_format") == "gguf-q4_k_m" for o in options)
    assert all(o.update.get("weights_format", "gguf").startswith("gguf") for o in options)  # llama.cpp runs GGUF files
    assert not any(set(o.update) <= {"data_parallel", "tensor_parallel", "pipeline_parallel"} for o in options)
    assert all(o.usd_per_million_output_tokens_full_load is None or o.usd_per_million_output_tokens_full_load > 0 for o in options)


def test_cli_estimate_carries_help_options():
    """The CLI's result gains help_options (added, nothing renamed): change, memory per device, time and cost."""
    out = estimate(FULL_70B).model_dump(mode="json")
    first = out["help_options"][0]
    assert {"change", "update", "memory_per_device_gib", "hours", "usd", "tokens_per_s", "usd_per_hour"} <= set(first)
    assert first["hours"] > 0 and first["usd"] > 0
    assert out["advice"] and out["fits"] is False  # the old fields stay


def test_less_at_once_keeps_the_workload():
    """Training: a smaller micro-batch keeps the sequences per optimizer step (gradient accumulation); serving: fewer
    concurrent sequences; a context is never cut below a quarter of the one asked for (MIN_CONTEXT_FRACTION)."""
    train = Scenario(model="llama-3.1-8b", mode="training", method="lora", accelerator="rtx-4090", seq_len=4096, batch_size=8, gradient_accumulation_steps=2)
    micro = [o for o in help_options(train) if "batch_size" in o.update]
    assert micro and all(o.update["batch_size"] * o.update["gradient_accumulation_steps"] == 8 * 2 for o in micro)
    serve = Scenario(model="llama-3.1-8b", accelerator="rtx-4090", seq_len=32768, batch_size=8)
    options = help_options(serve)
    fewer = next(o for o in options if o.change == "1 concurrent sequence")
    assert fewer.update == {"batch_size": 1} and estimate_memory(serve.replace(batch_size=2)).fits is False
    for sc in (train, serve, *NOT_FITTING):
        assert all(sc.replace(**o.update).seq_len >= 0.25 * sc.seq_len for o in help_options(sc))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    model=st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen2.5-7b", "mixtral-8x7b"]),
    accelerator=st.sampled_from(["h100-sxm", "a100-sxm-40gb", "rtx-4090", "l4", "mi300x"]),
    mode=st.sampled_from(["training", "inference"]),
    method=st.sampled_from(["full", "lora", "qlora"]),
    seq_len=st.sampled_from([2048, 8192, 32768]),
    batch_size=st.sampled_from([1, 4, 16]),
    stack=st.sampled_from(["hf", "torchtune", "unsloth"]),
)
def test_property_every_option_fits_runs_and_is_ordered(model, accelerator, mode, method, seq_len, batch_size, stack):
    sc = Scenario(model=model, accelerator=accelerator, mode=mode, method=method, seq_len=seq_len, batch_size=batch_size, training_stack=stack)
    options = help_options(sc)
    if estimate_memory(sc).fits:
        assert options == []
        return
    for o in options:
        alt = sc.replace(**o.update)
        assert estimate_memory(alt).fits, o.change
        if mode == "training":
            assert layout_problem(stack, alt.method, alt.zero_stage, alt.tensor_parallel, alt.pipeline_parallel, alt.data_parallel) is None
    keys = [(not o.time_modelled, o.cost is None, o.cost or 0.0) for o in options]
    assert keys == sorted(keys)


def test_estimate_without_help_is_the_same_answer_less_the_search():
    """Pages that do not show what would help (Training, Inference, Compare) ask estimate(with_help=False): the same
    Result but for help_options, which the CLI's estimate and the Memory page still carry."""
    full = estimate(FULL_70B, ROWS)
    bare = estimate(FULL_70B, ROWS, with_help=False)
    assert full.help_options and bare.help_options == []
    assert bare.model_dump(exclude={"help_options"}) == full.model_dump(exclude={"help_options"})


def test_joined_text_keeps_each_parts_arguments_apart():
    """core.text.joined: two parts with an argument of the same name stay two numbers; braces in a string stay text."""
    from core.text import Bytes, Text, joined

    t = joined([Text.of("{x:0} of RAM", x=Bytes(2**31)), "a {brace}", Text.of("{x} per device", x=Bytes(1e9))], " + ")
    assert t.render("GiB") == "2 GiB of RAM + a {brace} + 0.9 GiB per device"
    assert t.render("GB") == "2 GB of RAM + a {brace} + 1.0 GB per device"  # 2^31 B = 2.15 GB
    assert t.render("GiB", escape=str.upper) == "2 GiB of RAM + A {BRACE} + 0.9 GiB per device"  # strings escaped as arguments


def test_a_setup_no_layout_fits_names_the_one_change_that_fits_with_more_devices():
    """The estimate helper's review of stop 48 (M7): an 8B full fine-tune on TPU v5e chips (16 GB) ended its advice at
    "No layout of up to 65,536 devices fits", its activations alone over a chip, where gradient checkpointing on 16
    chips fits; the 405B on Megatron at 8,192 tokens likewise. The advice now names the change; the help options give
    its layout and price (one answer), and applied, it fits."""
    from core.estimate import estimate
    from core.scenario import Scenario

    for kw in (
        {"model": "llama-3.1-8b", "accelerator": "tpu-v5e", "training_stack": "hf-xla"},
        {"model": "llama-3.1-405b", "accelerator": "h100-sxm", "training_stack": "megatron", "seq_len": 8192},
    ):
        sc = Scenario(mode="training", method="full", **kw)
        r = estimate(sc)
        advice = [str(a) for a in r.advice]
        assert r.devices_needed is None and any("No layout of up to" in a for a in advice)
        (said,) = [a for a in advice if a.startswith("With one change it fits on more devices: ")]
        assert "gradient checkpointing" in said, said
        option = next(o for o in r.help_options if o.change.startswith("Gradient checkpointing + "))
        assert estimate(sc.replace(**option.update)).fits


def test_a_weight_format_is_advised_only_as_a_real_step_down():
    """The estimate helper's review of stop 48 (L5): gpt-oss-120b, which ships in MXFP4 (4.25 bits a weight on its
    experts), was advised "weights in AWQ 4-bit" to save 1 GiB of 61. A format is advised at 10% fewer bits a weight or
    more: none from MXFP4 on vLLM; from BF16, FP8 and AWQ."""
    from core.estimate import estimate
    from core.scenario import Scenario

    oss = estimate(Scenario(model="gpt-oss-120b", mode="inference", weights_format="mxfp4", accelerator="h100-sxm", batch_size=64, seq_len=4096))
    assert not oss.fits and not any("weights in" in str(a).lower() for a in oss.advice), oss.advice
    dense = estimate(Scenario(model="llama-3.1-70b", mode="inference", accelerator="h100-sxm"))
    said = " ".join(str(a) for a in dense.advice)
    assert "Weights in FP8" in said and "AWQ" in said
