"""CUDA cores and Tensor Cores of NVIDIA GPUs (data/gpu_cores.csv, one sourced row per part): a seed-note topic
("Tesla K80 ... 2496 CUDA cores", "A100: 6,912 CUDA cores, 432 Tensor Cores").

A CUDA core does one fused multiply-add (2 FLOPs) a clock in FP32, so a part's FP32 rate is 2 x cores x boost clock
(each datasheet's FP32 figure is exactly that: tests/core/test_gpu_cores.py checks every row against
data/accelerators.csv). Tensor Cores run the matrix multiplies LLMs spend their time in, at many times that rate in
16-bit (the BF16/FP16 tensor figure the speed models use): why a count of CUDA cores does not rank GPUs for LLMs."""

from __future__ import annotations

import datetime as dt
import functools

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.catalog.accelerators import DATA_DIR, read_catalog_rows

CORES_CSV = DATA_DIR / "gpu_cores.csv"


class GpuCores(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    accelerator: str = Field(min_length=1)
    architecture: str = Field(min_length=3)
    streaming_multiprocessors: int = Field(gt=0)
    cuda_cores: int = Field(gt=0)
    tensor_cores: int = Field(ge=0)  # 0: before Volta, no Tensor Cores
    boost_clock_mhz: float = Field(gt=0, allow_inf_nan=False)
    source: str = Field(min_length=10)
    as_of: str

    @field_validator("as_of")
    @classmethod
    def _month(cls, value: str) -> str:
        dt.datetime.strptime(value, "%Y-%m")
        return value

    @property
    def fp32_tflops(self) -> float:
        """2 FLOPs (one fused multiply-add) per CUDA core per clock at the boost clock."""
        return 2.0 * self.cuda_cores * self.boost_clock_mhz * 1e6 / 1e12


@functools.cache
def load_gpu_cores() -> dict[str, GpuCores]:
    from core.catalog.accelerators import load_accelerators

    known = {a.id for a in load_accelerators()}
    rows = {r.accelerator: r for r in read_catalog_rows(CORES_CSV, GpuCores)}
    unknown = sorted(set(rows) - known)
    if unknown:
        raise ValueError(f"data/gpu_cores.csv names accelerators not in data/accelerators.csv: {unknown}")
    return rows
