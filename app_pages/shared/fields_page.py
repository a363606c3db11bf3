"""The inputs pages draw (the cost and serving pages' settings, the Inference page's scheduler and box of cards, the
Plan page's goal), rows of the one table of inputs (app_pages/shared/fields.py); in links too."""

from __future__ import annotations

from functools import cache

from app_pages.shared.field import Field, inference
from app_pages.shared.fields_sidebar import SEQ_OPTIONS
from app_pages.shared.text import provider_name
from core.catalog.accelerators import load_accelerators
from core.catalog.price_trust import billable_prices

API_HELP = (
    "0 in and out: the cheapest offer of the same model in data/api_prices.csv, or of the model nearest in size where "
    "no API serves it; a price typed here (or set by a link) is used instead"
)


@cache
def catalog_providers() -> tuple[str, ...]:
    """The providers a plan can rent from (the catalog's billable rows: not a flagged or stale one), by name (the Plan
    page's cloud filter: Colab, whose rows are compute units, and providers with only stale rows are not offered)."""
    return tuple(sorted({r.provider for r in billable_prices()}, key=lambda p: provider_name(p).lower()))


@cache
def _gpu_ids() -> frozenset[str]:
    return frozenset(a.id for a in load_accelerators() if a.kind == "gpu")


def page_fields(accs: dict[str, str]) -> list[Field]:
    """The pages' rows: `accs` the accelerator picker's labels (the box of cards offers the GPUs among them)."""
    return [
        # --- page inputs (drawn by the cost and serving pages; in the URL too) -----------------------------------
        Field("sweep", "Sweep", "choice", "context", ("context", "batch"), widget="segmented", labels={"context": "Context length", "batch": "Batch size"}),
        Field(
            "price",
            "Price",
            "choice",
            "on-demand",
            ("on-demand", "spot"),
            widget="segmented",
            labels={"on-demand": "On-demand", "spot": "Spot"},  # "Spot / preemptible" was cut off in the Plan page's column
            help="Spot (preemptible) instances cost less but the cloud can take them back; on-demand ones stay yours",
        ),
        Field(
            "cloud",
            "Cloud or provider",
            "choice",
            "any",
            ("any", *catalog_providers()),
            labels={"any": "Any provider", **{p: provider_name(p) for p in catalog_providers()}},
            help="Plan only on one provider's prices (the cloud you have an account or credits with); the market a price is called cheap against stays every provider's",
        ),
        Field("rpd", "Requests per day", "int", 10_000, lo=1, hi=1_000_000_000, widget="number"),
        Field("tin", "Input tokens per request", "int", 1_000, lo=1, hi=2_000_000, widget="number"),
        Field("tout", "Output tokens per request", "int", 300, lo=1, hi=200_000, widget="number"),
        # util: a link key from before the busiest hour (peak) sized every fleet; a link with util and no peak opens
        # with peak = 100 / util, the same replicas (app_pages/shared/state.py, load_link_once)
        Field("util", "Highest utilisation to plan for (%)", "float", 70.0, lo=1.0, hi=100.0, widget="number"),
        # the Inference page's engine scheduler (core/speed/load.py): 0 = the engine's own default, so a link from
        # before these inputs shows what it showed
        Field(
            "mns",
            "Most running requests (max_num_seqs, 0 = the engine's default)",
            "int",
            0,
            lo=0,
            hi=65_536,
            widget="number",
            scenario="max_num_seqs",
            zero_is_unset=True,
            applies=inference,
            help=(
                "vLLM --max-num-seqs, SGLang --max-running-requests, TensorRT-LLM --max_batch_size, llama.cpp -np (its slots share one -c "
                "context): users beyond it wait for a slot"
            ),
        ),
        Field(
            "mnbt",
            "Tokens per engine step (max_num_batched_tokens, 0 = the engine's default)",
            "int",
            0,
            lo=0,
            hi=2_097_152,
            widget="number",
            scenario="max_num_batched_tokens",
            zero_is_unset=True,
            lo_set=16,  # the Scenario's bound (core/scenario.py max_num_batched_tokens ge=16)
            applies=inference,
            help="vLLM --max-num-batched-tokens: each step's decodes plus the chunk of prompts prefilled in it (16 at least). "
            "Smaller: steadier tokens for those decoding, a slower first token",
        ),
        Field(
            "pcache",
            "Prompt found in the prefix cache (%, 0 = caching off)",
            "float",
            0.0,
            lo=0.0,
            hi=99.0,
            widget="number",
            scenario="prefix_cache_hit_fraction",
            scale=0.01,
            applies=inference,
            help="the share of each prompt the engine has cached from earlier requests (a shared system prompt, a chat's history) and does not prefill again",
        ),
        Field(
            "arrive",
            "How users arrive",
            "choice",
            "steady",
            ("steady", "synchronised"),
            widget="segmented",
            labels={"steady": "Independently (production)", "synchronised": "All at once (a benchmark)"},
            scenario="arrivals",
            applies=inference,
            help="Independently: users come and go at random, as in production (what the serving plan assumes). All at once: a "
            "benchmark's users start together with identical requests and their prompts queue in waves (NIM's, genai-perf's runs)",
        ),
        # the Inference page's box of different cards (core/speed/mixed.py)
        Field("box1", "Cards of the sidebar's type", "int", 1, lo=1, hi=8, widget="number"),
        Field(
            "box2",
            "Plus cards of another type",
            "choice",
            "none",
            ("none", *(a for a in accs if a in _gpu_ids())),
            labels={"none": "None", **accs},
            help="Type to search: a second kind of GPU in the same box (e.g. a 3090 next to a 4090)",
        ),
        Field("box2n", "How many of those", "int", 1, lo=1, hi=7, widget="number"),
        Field(
            "api_in",
            "Per-token API price, input (USD per million, 0 = the catalog's)",
            "float",
            0.0,
            lo=0.0,
            hi=1_000.0,
            widget="number",
            help=API_HELP,
        ),
        Field("api_out", "Per-token API price, output (USD per million)", "float", 0.0, lo=0.0, hi=1_000.0, widget="number", help=API_HELP),
        Field("months", "Horizon (months)", "int", 24, lo=1, hi=120, widget="number"),
        Field("kwh", "Electricity (USD per kWh)", "float", 0.15, lo=0.0, hi=5.0, widget="number"),
        Field("busy", "Utilisation of owned hardware (%)", "float", 60.0, lo=1.0, hi=100.0, widget="number"),
        Field("buy_usd", "Purchase price per device (USD, 0 = catalog)", "float", 0.0, lo=0.0, hi=10_000_000.0, widget="number"),
        Field(
            "pue",
            "PUE (facility power / IT power)",
            "float",
            1.58,
            lo=1.0,
            hi=5.0,
            widget="number",
            help="cooling and power delivery on top of the servers: 1.58 is the industry average (Uptime Institute, 2023), 1.1 a hyperscaler",
        ),
        Field(
            "pmode",
            "Your prices",
            "choice",
            "replace",
            ("replace", "only"),
            widget="segmented",
            labels={"replace": "Mine + catalog", "only": "Only mine"},
            help="replace: your rows replace the catalog's rows for the accelerators they price, the rest of the catalog still answers; "
            "only: every page prices from your rows alone",
        ),
        Field(
            "pflag",
            "Also price from the catalog's flagged rows",
            "bool",
            False,
            widget="toggle",
            help="left out of every bill unless this is on: rows the catalog flags as placeholders, auction floors or a GPU without its host "
            "(data/price_flags.csv, with why) and rows older than six months",
        ),
        # --- the Plan page's goal (core/plan/goal.py) ------------------------------------------------------------
        Field(
            "goal",
            "Goal",
            "choice",
            "fine-tune",
            ("fine-tune", "pretrain", "serve"),
            widget="segmented",
            labels={"fine-tune": "Fine-tune", "pretrain": "Pretrain", "serve": "Serve"},
        ),
        Field("ptok", "Dataset (million tokens per epoch)", "float", 20.0, lo=0.001, hi=1e10, widget="number", help="examples x tokens per example"),
        Field("epochs", "Epochs", "float", 1.0, lo=0.01, hi=1_000.0, widget="number"),
        Field(
            "pseq",
            "Tokens per example",
            "choice",
            2048,
            SEQ_OPTIONS[:10],
            labels={v: f"{v:,}" for v in SEQ_OPTIONS},
            help="the packed sequence length; for DPO, each answer of a pair (with its prompt): a pair is two such sequences",
        ),
        Field("peak", "Busiest hour / average", "float", 2.0, lo=1.0, hi=100.0, widget="number", help="replicas are sized for the busiest hour"),
        Field("ttft", "Time to first token at most (s)", "float", 2.0, lo=0.01, hi=600.0, widget="number"),
        Field("tps", "Tokens/s each user sees at least", "float", 20.0, lo=0.1, hi=10_000.0, widget="number"),
        Field("deadline", "Deadline (hours, 0 = none)", "float", 0.0, lo=0.0, hi=1e6, widget="number"),
        Field("budget", "Budget (USD, 0 = none; serving: per month)", "float", 0.0, lo=0.0, hi=1e12, widget="number"),
        Field(
            "pbf16",
            "Require BF16 (Ampere or newer)",
            "bool",
            False,
            widget="toggle",
            help="training plans only on parts with BF16 and FlashAttention-2; off, a V100 or T4 may be planned in FP16 with loss scaling when it is cheapest",
        ),
        Field(
            "pep",
            "Try expert-parallel replicas (MoE)",
            "bool",
            False,
            widget="toggle",
            help=(
                "serving a mixture-of-experts model on vLLM, SGLang or TensorRT-LLM: also plan replicas whose devices each hold a share of "
                "the experts. Off by default: that speed model is 1.05-2.0x over published peaks of serving with prefill on the same GPUs"
            ),
        ),
    ]
