"""CUDA cores and Tensor Cores (data/gpu_cores.csv, a seed-note topic): the seed's own figures, and every row's
FP32 rate (2 FLOPs a core a clock at the boost clock) against the datasheet FP32 figure in data/accelerators.csv."""

import pytest

from core.catalog.accelerators import get_accelerator
from core.catalog.gpu_cores import load_gpu_cores

CORES = load_gpu_cores()


def test_the_seed_notes_figures():
    """Seed notes: "Tesla K80 ... 12GB memory and 2496 CUDA Cores", "Tesla T4 ... 16 GB of memory and 2560 CUDA
    cores", "Tesla V100 GPU - 32 GB of memory, 5120 cores", "A100 ... 6,912 CUDA Cores, 432 Tensor Cores"."""
    assert (CORES["k80"].cuda_cores, get_accelerator("k80").memory_gib) == (2496, 12)
    assert (CORES["t4"].cuda_cores, get_accelerator("t4").memory_gib) == (2560, 16)
    assert (CORES["v100-32gb"].cuda_cores, get_accelerator("v100-32gb").memory_gib) == (5120, 32)
    assert (CORES["a100-sxm-80gb"].cuda_cores, CORES["a100-sxm-80gb"].tensor_cores) == (6912, 432)


@pytest.mark.parametrize("aid", sorted(CORES))
def test_fp32_is_two_flops_a_core_a_clock(aid):
    """Each datasheet's FP32 TFLOP/s is 2 x CUDA cores x boost clock, within 0.5% or the datasheet's rounding to a
    tenth (the T4's 8.14 is printed 8.1)."""
    row = CORES[aid]
    assert row.fp32_tflops == pytest.approx(get_accelerator(aid).fp32_tflops, rel=0.005, abs=0.05)


@pytest.mark.parametrize("aid", sorted(CORES))
def test_cores_come_in_whole_streaming_multiprocessors(aid):
    """An SM holds 192 cores (Kepler SMX), 128 (Maxwell, GA102, Ada, Hopper) or 64 (Volta, Turing, GA100), and 8 Tensor
    Cores (Volta, Turing), 4 (Ampere and later) or none (before Volta)."""
    row = CORES[aid]
    assert row.cuda_cores / row.streaming_multiprocessors in (64, 128, 192)
    assert row.tensor_cores / row.streaming_multiprocessors in (0, 4, 8)


def test_tensor_cores_not_cuda_cores_set_the_llm_rate():
    """Why a core count does not rank GPUs for LLMs: a T4 has half a V100's CUDA cores and about half its BF16/FP16
    tensor rate, but an RTX 4090 has as many CUDA cores as an H100 SXM (within 4%: 16,384 and 16,896) and more FP32 FLOP/s, and a sixth
    of its tensor rate (the 4090's 165 TFLOP/s counts FP16 with FP32 accumulate; an H100's 989 is dense BF16)."""
    assert CORES["rtx-4090"].cuda_cores == pytest.approx(CORES["h100-sxm"].cuda_cores, rel=0.04)
    assert CORES["rtx-4090"].fp32_tflops > CORES["h100-sxm"].fp32_tflops
    assert get_accelerator("rtx-4090").bf16_tflops * 5 < get_accelerator("h100-sxm").bf16_tflops
