"""The simple communication model (core/speed/comm.py)."""

import pytest

from core.catalog.accelerators import get_accelerator
from core.layout import Layout
from core.scenario import Scenario
from core.speed.comm import ALLREDUCE_LATENCY_S, allreduce_s, link_gbps, ring_s, training_comm
from core.speed.timing import training_flops_per_token


def test_ring_allreduce_volume():
    assert allreduce_s(1e9, 1, 100) == 0.0
    # 2(r-1)/r of the message per rank (Patarasuk & Yuan 2009)
    assert allreduce_s(1e9, 8, 100) == pytest.approx(ALLREDUCE_LATENCY_S + 2 * 7 / 8 * 1e9 / 100e9)
    assert allreduce_s(1e9, 64, 100) > allreduce_s(1e9, 8, 100)


def test_links_inside_and_across_nodes():
    h100 = get_accelerator("h100-sxm")
    assert link_gbps(h100, 8) == 450  # NVLink inside the 8-GPU node
    assert link_gbps(h100, 16) == 8 * 50  # one ring per NIC across nodes: DGX H100's 400 Gb/s = 50 GB/s per GPU
    assert link_gbps(get_accelerator("a100-sxm-80gb"), 16) == 8 * 25  # DGX A100's 200 Gb/s per GPU
    assert link_gbps(get_accelerator("l4"), 16) == 32  # capped by the PCIe link
    assert link_gbps(get_accelerator("tpu-v5e"), 256) == 200  # ICI within a pod
    assert link_gbps(get_accelerator("apple-m3-max"), 2) == 1.25  # no interconnect: Ethernet


def comm(sc, layout, acc="h100-sxm"):
    a = get_accelerator(acc)
    return training_comm(sc, sc.architecture, a, layout, training_flops_per_token(sc, sc.architecture), a.bf16_tflops * 0.4)


def test_pipeline_bubble_is_p_minus_1_over_m():
    sc = Scenario(model="llama-3.1-70b", mode="training", train_tokens=1e9)
    c = comm(sc, Layout(1, 8, 4))
    assert c.microbatches_per_step == 16
    assert c.pipeline_bubble_fraction == pytest.approx(3 / 16)  # Narayanan et al. 2021, Sec. 2.2.1
    assert c.overhead_fraction >= c.pipeline_bubble_fraction
    assert comm(sc, Layout(1, 1, 1)).overhead_fraction < 1e-5  # one device: only its interruptions (0.0006%)


def test_tensor_parallel_over_pcie_costs_more_than_over_nvlink():
    sc = Scenario(model="llama-3.1-70b", mode="training", train_tokens=1e9)
    nvlink = comm(sc, Layout(1, 8, 1), "h100-sxm").tensor_parallel_s_per_step / comm(sc, Layout(1, 8, 1), "h100-sxm").compute_s_per_step
    pcie = comm(sc, Layout(1, 8, 1), "h100-pcie").tensor_parallel_s_per_step / comm(sc, Layout(1, 8, 1), "h100-pcie").compute_s_per_step
    assert pcie > 3 * nvlink


def test_data_parallel_overlap_and_zero3_volume():
    sc = Scenario(model="llama-3.1-8b", mode="training", train_tokens=1e9, batch_size=8, seq_len=4096)
    c = comm(sc, Layout(16, 1, 1))
    assert c.data_parallel_exposed_s_per_step == 0.0  # hidden behind the backward pass
    z3 = comm(sc.model_copy(update={"zero_stage": 3}), Layout(16, 1, 1))
    # ZeRO-3: the gradients are reduce-scattered (half the all-reduce volume), and in bf16 beside the optimizer's fp32
    # master copy where DDP under autocast all-reduces the fp32 gradients of fp32 parameters (half the bytes again) ...
    assert z3.data_parallel_s_per_step == pytest.approx(0.5 * 0.5 * (c.data_parallel_s_per_step - ALLREDUCE_LATENCY_S) + ALLREDUCE_LATENCY_S)
    # ... and the weights all-gathered twice per micro-batch: 1.5x DDP's bytes in all (ZeRO paper, Sec. 7.2.3).
    assert z3.step_s >= c.step_s
    lora = comm(sc.model_copy(update={"method": "lora"}), Layout(16, 1, 1))
    assert lora.data_parallel_s_per_step < c.data_parallel_s_per_step / 50  # adapters only


def test_zero3_weight_gathers_are_exposed_when_compute_is_short():
    """A 70B LoRA step of one short sequence per rank cannot hide the 2 x 140 GB of bf16 weights it gathers."""
    sc = Scenario(model="llama-3.1-70b", mode="training", method="lora", train_tokens=1e9, batch_size=1, seq_len=512, zero_stage=3, precision="bf16-true")
    small = comm(sc, Layout(8, 1, 1))
    assert small.data_parallel_exposed_s_per_step > 0.25 * small.compute_s_per_step
    long = comm(sc.model_copy(update={"seq_len": 16384, "batch_size": 4}), Layout(8, 1, 1))
    assert long.overhead_fraction < small.overhead_fraction


def test_zero3_reduce_scatters_every_micro_batch_on_the_backward_link():
    """FSDP and ZeRO-3 free the gathered weights after each pass and shard the gradients as the backward pass makes
    them, so with gradient accumulation every micro-batch pays its gathers and a gradient reduce-scatter, and the
    backward's link carries both. Worked by hand for an 8B full fine-tune, 4 micro-batches of one 512-token sequence
    per GPU on 16 H100s across two nodes: each pass hides its gathers under its own share of the FLOPs (forward 2N,
    backward 4N of 6N), which exposes 4 x (g - c/3) + 4 x (g + rs - 2c/3)."""
    from core.speed.comm import collective_gbps

    acc = get_accelerator("h100-sxm")
    sc = Scenario(model="llama-3.1-8b", mode="training", train_tokens=1e9, batch_size=1, seq_len=512, zero_stage=3, precision="bf16", gradient_accumulation_steps=4)
    c = comm(sc, Layout(16, 1, 1))
    gather = ring_s(2 * sc.architecture.total_params, 16, collective_gbps(acc, 16), None, all_reduce=False)  # bf16 weights
    assert gather == pytest.approx(0.0407, abs=0.0005)
    assert c.microbatches_per_step == 4 and c.data_parallel_s_per_step == pytest.approx(4 * gather)  # bf16 gradients
    micro = c.compute_s_per_step / 4
    by_hand = 4 * (max(0.0, gather - micro / 3) + max(0.0, 2 * gather - 2 * micro / 3))
    assert c.data_parallel_exposed_s_per_step == pytest.approx(by_hand) and by_hand > 0.1 * c.compute_s_per_step
    # with recomputation (8N: forward 2N, then the recomputed forward and the backward, 6N, inside the backward pass)
    # FSDP unshards once for the recomputation and the backward together; DeepSpeed's ZeRO-3 gathers again for it
    quarter = None
    for stack, regathers in (("hf", False), ("torchtune", False), ("deepspeed", True)):
        gc = comm(sc.model_copy(update={"gradient_checkpointing": True, "training_stack": stack}), Layout(16, 1, 1))
        quarter = gc.compute_s_per_step / 16  # a forward pass of one micro-batch
        if regathers:
            expected = 4 * (2 * max(0.0, gather - quarter) + max(0.0, 2 * gather - 2 * quarter))
        else:
            expected = 4 * (max(0.0, gather - quarter) + max(0.0, 2 * gather - 3 * quarter))
        assert gc.data_parallel_exposed_s_per_step == pytest.approx(expected), stack
    assert quarter is not None and gather > quarter  # a forward's compute does not hide one gather here


def test_interruptions_grow_with_devices_from_llama_3s_counts():
    """Llama 3 Herd (arXiv 2407.21783) Sec. 3.3.4: 466 interruptions in 54 days on 16,384 H100s, >90% effective training
    time. The loss is linear in devices: 10% at 16,384 GPUs (that run), 1.25% at 2,048, capped at half the wall time."""
    from core.speed.comm import MAX_INTERRUPTION_LOSS, interruption_loss_fraction, interruption_overhead

    assert interruption_loss_fraction(16384) == pytest.approx(0.10)
    assert interruption_loss_fraction(2048) == pytest.approx(0.0125)
    assert interruption_loss_fraction(0) == 0.0 and interruption_loss_fraction(8) < 1e-4
    assert interruption_loss_fraction(10**7) == MAX_INTERRUPTION_LOSS
    assert interruption_overhead(16384) == pytest.approx(1 / 0.9 - 1)
    sc = Scenario(model="llama-3.1-8b", mode="training", train_tokens=1e9, batch_size=8, seq_len=4096)
    c = comm(sc, Layout(2048, 1, 1))
    # the step's communication is hidden here, so the overhead is the interruptions alone
    assert c.step_s == pytest.approx(c.compute_s_per_step) and c.overhead_fraction == pytest.approx(interruption_overhead(2048))


def test_collectives_run_at_the_bus_bandwidth_nccl_reaches_not_the_line_rate():
    """Tensor-parallel all-reduces of a training step over 8 H100s: 4 per layer of b x s x h bf16 activations at 370 GB/s
    (data/collective_bandwidth.csv, nccl-tests #212), not NVLink 4's 450; decode's one-token all-reduces likewise."""
    from core.speed.comm import collective_gbps, decode_tp_s

    h100 = get_accelerator("h100-sxm")
    assert collective_gbps(h100, 8) == pytest.approx(370) and link_gbps(h100, 8) == 450
    sc = Scenario(model="llama-3.1-70b", mode="training", train_tokens=1e9, batch_size=1, seq_len=4096)
    a = sc.architecture
    c = comm(sc, Layout(1, 8, 1))
    # a 64 MiB all-reduce inside the node, at NCCL's Simple protocol (tests/core/test_message_size.py): 8.4 us + 14 ring
    # steps x 3.4 us + 2 x 7/8 x 67.1 MB / 370 GB/s = 56 + 317.4 = 373.4 us (at a fixed 10 us it was 327.4 us)
    per_allreduce = ring_s(4096 * a.hidden_size * 2, 8, 370, "nvlink")
    assert per_allreduce == pytest.approx(56e-6 + 1.75 * 4096 * 8192 * 2 / 370e9)
    assert c.tensor_parallel_s_per_step == pytest.approx(c.microbatches_per_step * a.num_layers * 4 * per_allreduce)
    assert decode_tp_s(a, h100, 8, 1, 1.0) == pytest.approx(a.num_layers * 2 * allreduce_s(a.hidden_size * 2, 8, 370))
