"""Which 4-bit weight formats vLLM has kernels for on an accelerator.

vLLM's table of quantization kernels by GPU generation ("Supported Hardware", docs.vllm.ai/en/v0.15.1/features/
quantization/, the same since v0.5): AWQ runs on NVIDIA from SM 7.5 (Turing) on, GPTQ from SM 7.0 (Volta) on;
neither on AMD GPUs, TPUs or AWS Neuron. The two store the same bytes (core/model/formats.py), so a part without
AWQ kernels but with GPTQ's serves a 4-bit checkpoint as GPTQ.

vLLM's own builds left Volta in 2026 (data/engine_hardware.csv refuses it there); the Volta rule stays for the engines
the planner still tries on a V100 with these formats (Transformers). Formats whose kernels differ by engine and part
beyond this (MXFP4) are in data/format_kernels.csv.
"""

from __future__ import annotations

from core.catalog.accelerators import Accelerator

# NVIDIA parts in the catalog older than Turing (SM 7.0 Volta, and the Kepler / Maxwell cards below it, which vLLM
# does not run on at all)
VOLTA = frozenset({"v100-16gb", "v100-32gb"})
PRE_VOLTA = frozenset({"k80", "m60"})


def four_bit_format(acc: Accelerator) -> str | None:
    """The 4-bit format vLLM serves on `acc`: AWQ where it has AWQ kernels, GPTQ on Volta, None elsewhere."""
    if acc.vendor != "nvidia" or acc.id in PRE_VOLTA:
        return None
    return "gptq-4bit" if acc.id in VOLTA else "awq-4bit"
