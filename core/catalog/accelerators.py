"""Accelerator catalog: one typed, validated row per GPU/TPU/NPU from data/accelerators.csv.

Units are in the field names. Memory is binary GiB (2**30 bytes): vendors' "80 GB" on
HBM/GDDR parts are GiB, and PyTorch/nvidia-smi report MiB/GiB. Bandwidth is decimal GB/s
(1e9 bytes/s) as on datasheets. Throughput is dense (no 2:4 sparsity), in TFLOP/s or TOP/s.
Each row names its source and as-of date; see the notes column for per-row caveats.
"""

from __future__ import annotations

import csv
import datetime as dt
import difflib
import functools
import io
import re
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from core.text import described_pattern, pattern_problem

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "data"
ACCELERATORS_CSV = DATA_DIR / "accelerators.csv"
BYTES_PER_GIB = 2**30
BYTES_PER_GB = 10**9
ID_PATTERN = described_pattern(r"^[a-z0-9][a-z0-9-]*$", "lower-case letters, digits and '-' only (no spaces or line breaks), starting with a letter or digit")

Vendor = Literal["nvidia", "amd", "google", "aws", "apple", "intel", "groq", "cerebras", "other"]
# unified: a CPU and GPU sharing one memory (DGX Spark, Strix Halo); custom: hardware a user typed in;
# lpu / wafer: inference chips whose model lives in on-chip SRAM (Groq's LPU, Cerebras' wafer-scale engine)
Kind = Literal["gpu", "tpu", "npu", "apple", "unified", "custom", "lpu", "wafer"]
# Kinds with no off-chip memory for the model: the weights and the KV cache are spread over the chips' SRAM, and a
# compiler places every tensor ahead of time (no CUDA context, no allocator, no engine reservation).
SRAM_KINDS = frozenset({"lpu", "wafer"})

_Positive = Field(default=None, gt=0, allow_inf_nan=False)
# No shipping node gives a device more than 1.6 Tb/s of network (DGX B300's ConnectX-8: 800 Gb/s per GPU); a value
# above this is almost surely Gb/s typed into the GB/s column.
MAX_SCALE_OUT_GBPS_PER_DEVICE = 200.0


class CatalogError(ValueError):
    """A catalog file or look-up is wrong; the message names file, row, field and problem."""

    def __init__(self, problem: str, *, file: str | None = None, row: int | None = None, field: str | None = None) -> None:
        self.problem, self.file, self.row, self.field = problem, file, row, field
        where = [file, None if row is None else f"row {row}", field]
        super().__init__(": ".join([w for w in where if w] + [problem]))

    def __str__(self) -> str:  # keep the plain message even when mixed with KeyError
        return str(self.args[0]) if self.args else ""


class UnknownAcceleratorError(CatalogError, KeyError):
    """Raised by get_accelerator for an id not in the catalog (also a KeyError)."""


# The share of its datasheet's dense peak the reference part's longest GEMMs reach (the maximum achievable matmul
# FLOPS, stas00/ml-engineering compute/accelerator/README.md@744d01e MAMF table): an H100 SXM at 794.5 of 989 TFLOP/s
# in BF16 and 1,402.6 of 1,979 in FP8. The speed models' efficiencies (MATMUL_EFFICIENCY, COMPUTE_EFF) were fitted on
# H100s; Accelerator.tensor_flops_per_s scales them to a part whose own ceiling is lower.
REFERENCE_CEILING = {"16-bit": 794.5 / 989.0, "fp8": 1402.6 / 1979.0}


class Accelerator(BaseModel):
    """One accelerator device as a framework sees it (e.g. one GK210 of a K80 board)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=ID_PATTERN, max_length=64)
    name: str = Field(min_length=1)
    vendor: Vendor
    kind: Kind
    memory_gib: float = Field(gt=0, allow_inf_nan=False)
    usable_memory_gib: float = Field(gt=0, allow_inf_nan=False)
    memory_bandwidth_gbps: float = Field(gt=0, allow_inf_nan=False)
    bf16_tflops: float | None = _Positive
    fp8_tflops: float | None = _Positive
    fp4_tflops: float | None = _Positive  # dense FP4 (NVFP4/MXFP4) where the part has FP4 tensor cores
    int8_tops: float | None = _Positive
    fp32_tflops: float | None = _Positive
    tdp_w: float | None = _Positive
    interconnect: str = ""
    interconnect_gbps: float | None = _Positive
    # GB/s per direction of network (scale-out: InfiniBand, RoCE, EFA) per device between nodes, from the part's
    # reference node design (e.g. DGX H100: 8x ConnectX-7 400 Gb/s for 8 GPUs = 50 GB/s), named in the row's source
    # and notes; blank where no reference design is published: core/speed/comm.py then uses its per-kind default.
    scale_out_gbps_per_device: float | None = _Positive
    # The dense 16-bit tensor rate a long GEMM sustains where the part's power cap holds its clocks well under the
    # datasheet's peak (bf16_tflops), measured and named in the row's notes; blank elsewhere (the datasheet's peak times
    # the speed models' efficiencies). Sets the matmul rate of training (core/speed/timing.py) and of serving's compute
    # (core/speed/roofline.py) in its place: tensor_flops_per_s. A T4 at 70 W (24 of 65); AMD's MI300X and MI325X, whose GEMMs
    # run near 1.2 GHz of the 2.1 GHz the peak assumes (668.4 and 784.9 of 1,307: the maximum achievable matmul FLOPS
    # PyTorch measures, tests/core/test_amd_matmul_ceiling.py).
    sustained_tensor_tflops: float | None = _Positive
    # The same for the FP8 peak (fp8_tflops): the FP8 GEMM rate the part's own library measures at most, where it is
    # well under the datasheet's (MI300X 1,273 of 2,615); blank elsewhere.
    sustained_fp8_tflops: float | None = _Positive
    # The instruction set kernels are compiled for: NVIDIA's compute capability as sm_XY (sm_90: Hopper), AMD's LLVM
    # gfx target (gfx942: MI300X / MI325X). The engines' floors and kernels (data/engine_hardware.csv,
    # data/format_kernels.csv) are per target; blank for TPUs, NPUs, Apple and the SRAM chips. Sources: NVIDIA's CUDA
    # GPU Compute Capability list (developer.nvidia.com/cuda-gpus), the ROCm docs' GPU hardware specifications
    # (rocm.docs.amd.com/en/latest/reference/gpu-arch-specs.html: LLVM target per GPU).
    kernel_target: str | None = Field(
        default=None, pattern=described_pattern(r"^(sm_\d{2,3}|gfx[0-9a-f]{3,4})$", "an NVIDIA sm_ followed by 2 or 3 digits, or an AMD gfx target")
    )
    launch_year: int = Field(ge=2010, le=2035)
    purchase_usd: float | None = _Positive
    supports_bf16: bool
    supports_fp8: bool
    source: str = Field(min_length=3)
    as_of: dt.date
    notes: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> Accelerator:
        if self.usable_memory_gib > self.memory_gib:
            raise ValueError("usable_memory_gib must be <= memory_gib")
        # supports_fp8 is the one "has FP8 matmuls" (FP8 weights W8A8, an FP8 KV cache read without decoding it); its
        # rate is fp8_tflops, so each comes with the other
        if (self.fp8_tflops is not None) != self.supports_fp8:
            raise ValueError("fp8_tflops is set but supports_fp8 is false" if self.fp8_tflops is not None else "supports_fp8 is true but fp8_tflops is not set")
        if not self.source.strip():
            raise ValueError("source must not be blank")
        if self.scale_out_gbps_per_device is not None and self.scale_out_gbps_per_device > MAX_SCALE_OUT_GBPS_PER_DEVICE:
            raise ValueError(f"scale_out_gbps_per_device must be <= {MAX_SCALE_OUT_GBPS_PER_DEVICE:g} GB/s (1.6 Tb/s per device); it is in GB/s per direction, not Gb/s")
        return self

    def tensor_flops_per_s(self, peak_tflops: float, efficiency: float) -> float:
        """The rate matmuls run at: `efficiency` of `peak_tflops`. The speed models' efficiencies were fitted on parts
        whose longest GEMMs reach REFERENCE_CEILING of their peak (the H100's); on a part whose measured ceiling is
        lower (sustained_tensor_tflops for the 16-bit peak, sustained_fp8_tflops for the FP8 one) the efficiency
        applies to the ceiling scaled by that reference instead: a power-capped T4 trains at 0.78 x 24 / 0.80 = 23 of
        its 65 TFLOP/s, an MI300X at 0.78 x 668 / 0.80 = 646 of its 1,307 (tests/core/test_amd_matmul_ceiling.py)."""
        rate = peak_tflops * 1e12 * efficiency
        for ceiling, precision in self.measured_ceilings(peak_tflops):
            rate = min(rate, ceiling * 1e12 * efficiency / REFERENCE_CEILING[precision])
        return rate

    def measured_ceilings(self, peak_tflops: float) -> list[tuple[float, str]]:
        """(measured ceiling in TFLOP/s, its precision) of this peak: sustained_tensor_tflops for the 16-bit peak,
        sustained_fp8_tflops for the FP8 one; none where the catalog has no measurement. Which peak it is goes by
        value: no capped part has two peaks of one value (a part whose FP8 and 16-bit peaks are equal, as Gaudi 3's
        and Trainium's, would take both ceilings here: give it one)."""
        pairs = ((self.sustained_tensor_tflops, self.bf16_tflops, "16-bit"), (self.sustained_fp8_tflops, self.fp8_tflops, "fp8"))
        return [(ceiling, precision) for ceiling, peak, precision in pairs if ceiling is not None and peak_tflops == peak]

    @property
    def runs_flash_attention_2(self) -> bool:
        """FlashAttention-2 runs here: it needs Ampere or newer, which on NVIDIA parts are the ones with bf16 (a T4 or
        V100 falls back to SDPA); the rest of the catalog follows the same column (Dao, FlashAttention-2 README:
        "Ampere, Ada, or Hopper GPUs"; ROCm's port for MI200/MI300)."""
        return self.supports_bf16

    @property
    def weights_in_sram(self) -> bool:
        """The model lives in on-chip SRAM (SRAM_KINDS): chips are counted to hold the weights."""
        return self.kind in SRAM_KINDS

    @property
    def memory_bytes(self) -> int:
        return round(self.memory_gib * BYTES_PER_GIB)

    @property
    def usable_memory_bytes(self) -> int:
        # rounded, not truncated: 79.15 GiB is 84,986,784,972.8 bytes, which int() made 79.1499... (79.1 on one
        # page beside 79.2 on another, the stop-49 consistency review)
        return round(self.usable_memory_gib * BYTES_PER_GIB)

    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_gbps * BYTES_PER_GB


def validation_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """(field, short problem) pairs from a pydantic error, phrased for people."""
    out = []
    for err in exc.errors(include_url=False):
        field = ".".join(str(p) for p in err["loc"]) or "row"
        kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
        if kind in ("greater_than", "greater_than_equal", "less_than_equal"):
            op = {"greater_than": ">", "greater_than_equal": ">=", "less_than_equal": "<="}[kind]
            bound = next(iter(ctx.values()), "?")
            problem = f"must be {op} {bound}"
        elif kind in ("float_parsing", "int_parsing", "int_from_float", "finite_number"):
            problem = f"not a number: {str(value)[:40]!r}"
        elif kind == "missing":
            problem = "required but empty"
        elif kind == "string_pattern_mismatch":
            problem = pattern_problem(ctx.get("pattern"), value)
        elif kind == "literal_error":
            problem = f"{str(value)[:40]!r} is not one of {ctx.get('expected', '?')}"
        elif kind == "extra_forbidden":
            problem = "unexpected column"
        else:
            problem = err["msg"].removeprefix("Value error, ")
        out.append((field, problem))
    return out


def _nonempty(record: dict[str, str | None]) -> dict[str, str]:
    """Drop blank cells so optional fields fall back to their defaults."""
    return {k: v.strip() for k, v in record.items() if k is not None and v and v.strip()}


def _read_rows(path: Path) -> tuple[tuple[Accelerator, ...], str]:
    name = path.name
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"cannot read: {exc}", file=name) from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns = list(Accelerator.model_fields)
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in columns if c not in header]
    extra = [h for h in header if h not in columns]
    if missing or extra:
        raise CatalogError(f"missing {missing}, unexpected {extra}", file=name, field="header")
    reader.fieldnames = header
    out: list[Accelerator] = []
    seen: set[str] = set()
    for row_no, record in enumerate(reader, start=1):
        if None in record:
            raise CatalogError("more cells than columns", file=name, row=row_no)
        try:
            acc = Accelerator(**_nonempty(record))
        except ValidationError as exc:
            field, problem = validation_problems(exc)[0]
            raise CatalogError(problem, file=name, row=row_no, field=field) from None
        if acc.id in seen:
            raise CatalogError(f"duplicate id {acc.id!r}", file=name, row=row_no, field="id")
        seen.add(acc.id)
        out.append(acc)
    if not out:
        raise CatalogError("no rows", file=name)
    return tuple(out), name


@functools.lru_cache(maxsize=1)
def _load_default() -> tuple[Accelerator, ...]:
    return _read_rows(ACCELERATORS_CSV)[0]


def load_accelerators(path: Path | None = None) -> tuple[Accelerator, ...]:
    """All catalog rows in file order; the built-in file is read once and cached."""
    if path is None:
        return _load_default()
    return _read_rows(Path(path))[0]


# "Any hardware I own": the id carries what the user typed, so a link reproduces it, e.g.
# custom-24gib-936gbps-71tflops (a decimal point is written p: custom-7p5gib-...). Bounds keep it a real device.
# \A...\Z: Python's $ also matches before a final line break, which the catalog's id pattern (checked by pydantic's
# regex engine) refuses; an id with one is then an unknown accelerator, named with the rules below.
CUSTOM_ID = re.compile(r"\Acustom-(\d{1,5}(?:p\d{1,3})?)gib-(\d{1,6}(?:p\d{1,3})?)gbps-(\d{1,5}(?:p\d{1,3})?)tflops\Z")
CUSTOM_LIMITS = {"memory_gib": (0.5, 16384.0), "memory_bandwidth_gbps": (1.0, 100000.0), "bf16_tflops": (0.01, 50000.0)}
CUSTOM_ID_HELP = (
    "custom-<GiB>gib-<GB/s>gbps-<TFLOPS>tflops (e.g. custom-24gib-936gbps-71tflops; p for a decimal point), with 0.5-16384 GiB, 1-100000 GB/s and 0.01-50000 TFLOPS"
)


def custom_accelerator_id(memory_gib: float, memory_bandwidth_gbps: float, bf16_tflops: float) -> str:
    """The id of a typed-in device (values rounded to 3 decimals)."""

    def part(x: float) -> str:
        return f"{round(x, 3):g}".replace(".", "p")

    return f"custom-{part(memory_gib)}gib-{part(memory_bandwidth_gbps)}gbps-{part(bf16_tflops)}tflops"


@functools.lru_cache(maxsize=256)
def custom_accelerator(accelerator_id: str) -> Accelerator | None:
    """The Accelerator a custom-... id describes, or None when the id is not one (or out of range)."""
    m = CUSTOM_ID.match(accelerator_id)
    if m is None:
        return None
    mem, bw, tf = (float(g.replace("p", ".")) for g in m.groups())
    for value, (lo, hi) in zip((mem, bw, tf), CUSTOM_LIMITS.values(), strict=True):
        if not lo <= value <= hi:
            return None
    return Accelerator(
        id=accelerator_id,
        name=f"Your hardware ({mem:g} GiB, {bw:g} GB/s, {tf:g} TFLOPS)",
        vendor="other",
        kind="custom",
        memory_gib=mem,
        usable_memory_gib=mem,
        memory_bandwidth_gbps=bw,
        bf16_tflops=tf,
        fp32_tflops=tf,
        # cards in one box talk over PCIe 4.0 x16, no NVLink assumed: 16 GT/s x 16 lanes = 31.5 GB/s per direction (PCI-SIG)
        interconnect="PCIe 4.0 x16 (assumed)",
        interconnect_gbps=31.5,
        launch_year=dt.date.today().year,
        supports_bf16=True,
        supports_fp8=False,
        source="typed in by the user",
        as_of=dt.date.today(),
        notes="memory as typed is taken as all usable; the bandwidth and TFLOPS are what the device reaches at its best",
    )


@functools.lru_cache(maxsize=1)
def _by_id() -> dict[str, Accelerator]:
    return {a.id: a for a in load_accelerators()}


def get_accelerator(accelerator_id: str) -> Accelerator:
    """Look up one accelerator by id (or a custom-... id); unknown ids raise UnknownAcceleratorError with suggestions."""
    by_id = _by_id()
    if accelerator_id in by_id:
        return by_id[accelerator_id]
    if (custom := custom_accelerator(accelerator_id)) is not None:
        return custom
    close = difflib.get_close_matches(str(accelerator_id).lower(), list(by_id), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownAcceleratorError(f"unknown accelerator {accelerator_id!r}{hint}", file=ACCELERATORS_CSV.name, field="id")


def _partial_date(value: str) -> str:
    if not re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", value):
        raise ValueError("as_of must be YYYY, YYYY-MM or YYYY-MM-DD")
    return value


PartialDate = Annotated[str, AfterValidator(_partial_date)]  # a catalog row's as-of: a year, a month or a day

RowT = TypeVar("RowT", bound=BaseModel)


def read_catalog_rows(path: Path, model: type[RowT]) -> tuple[RowT, ...]:
    """Every row of a catalog CSV as `model` (empty cells left out, so defaults apply); the first problem is raised as
    a CatalogError naming file, row and field; an empty file is one too."""
    out: list[RowT] = []
    with path.open(encoding="utf-8", newline="") as fh:
        for i, record in enumerate(csv.DictReader(fh), start=1):
            if None in record:  # csv.DictReader files a row's cells past the header under None: an unquoted comma
                raise CatalogError(f"{len(record[None])} more cells than columns (an unquoted comma?)", file=path.name, row=i)
            cells: dict[str, Any] = {k: v for k, v in record.items() if v != ""}
            try:
                out.append(model(**cells))
            except ValidationError as exc:
                field, problem = validation_problems(exc)[0]
                raise CatalogError(problem, file=path.name, row=i, field=field) from None
    if not out:
        raise CatalogError("no rows", file=path.name)
    return tuple(out)
