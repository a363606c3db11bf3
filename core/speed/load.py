"""Serving latency under load: what each user of a continuous-batching engine sees when `concurrency` users each
send a request, wait for its last token and send the next (the closed loop of NIM's / genai-perf's and vLLM's
`--max-concurrency` benchmarks).

The step costs are the roofline's (core/speed/roofline.py `_Roof.mixed_step`); this module only schedules them.

- The engine runs steps. Every running request in its decode phase adds one token to a step; prompts are prefilled
  in chunks that fill the step's token budget left by the decodes (`max_num_batched_tokens`; chunked prefill,
  Sarathi-Serve, Agrawal et al. 2024, arXiv 2403.02310, Sec. 4; vLLM V1 runs it by default, docs.vllm.ai
  "Optimization and Tuning"). Without chunking a whole prompt rides in one step (TensorRT-LLM's in-flight batching
  with chunked context off, its default).
- A step carrying a prefill chunk is longer than a decode-only step: every user in decode waits for it. That is the
  prefill-decode interference of DistServe (Zhong et al. 2024, arXiv 2401.09670, Sec. 2.2). A user's inter-token
  latency is the decode step plus the share of its steps that carry other users' prompts times their extra time.
- Time to first token = the rest of the step under way + waiting for the prompts ahead (an M/D/1 queue on the
  prefill work, with the waiting user's own request left out of the population) + its own chunks' steps. Beyond
  `max_num_seqs` running requests (or the memory's room) users wait for a slot: (users - running) / completions per
  second (Little's law), which is what NIM's Llama 3.3 70B table shows past 100 users.
- The steady state is a fixed point in the requests completed per second; it is found by a damped iteration over
  all concurrencies at once (numpy), so one evaluation of the planner's 2,048 candidate concurrencies costs a few ms
  rather than a discrete-event simulation (Vidur, Agrawal et al. 2024, arXiv 2405.05465, simulates events; its
  under-9% error comes from profiled step costs, which the roofline stands in for here).
- Percentiles. TTFT: the queue's wait is zero with probability 1 - rho and otherwise about exponential with the
  queue's mean (the M/M/1 shape, a known upper envelope for M/D/1). Inter-token latency per request (what genai-perf
  averages over one request's tokens): the number of its steps that carry a prompt chunk is binomial over its
  output tokens; p50 / p90 from the normal approximation.
- Prefix caching: a `prefix_cache_hit_fraction` of each prompt is found in the cache and not prefilled again.

Arrivals (`arrivals`), an input like the scheduler's settings:
- "steady": users' requests arrive independently of one another (production traffic from many people; the model
  above). The planner plans this.
- "synchronised": a benchmark's closed loop (NIM's / genai-perf's and AIPerf's concurrency mode, vLLM's
  `--max-concurrency`): N users start together with identical prompts and output lengths, and each sends its next
  request the moment its last token arrives ("As soon as each user's request receives a complete response, another
  request is sent", docs.nvidia.com/nim/benchmarking/llm/latest/parameters.html, Load Control, read 2026-11-26;
  AIPerf without ramping "jumps to full load immediately", docs.nvidia.com/aiperf tutorials "Gradual Ramping"). Their
  prompts then queue in waves under the per-step token budget: the i-th prompt of a wave gets its first token after
  the steps that prefill the prompts ahead of it. The server takes requests in one after another before the engine's
  scheduler sees them (`request_intake_s`: HTTP, chat template, tokenization, enqueueing), so a wave sent at once
  reaches the scheduler spread over its intake: over several short decode steps it splits, within one long prefill
  step it gathers again. `closed_loop` simulates this step by step (a discrete-event
  simulation, as Vidur does, over the same roofline step costs): identical users move in cohorts, so a run costs
  about as many steps as the waves take; an intake splits the cohorts into what each step takes in, so the cost then
  grows with the users (2,048 users of a 0.5B model: 166 ms, 40 ms without an intake). Figures are over the requests
  after the start-up wave (the loop's own repeating pattern), p50 / p90 over those requests. Measured benchmark runs
  lie between the two (tests/core/test_load.py: NIM's rows).

Engine scheduler defaults (`ENGINE_SCHEDULERS`) are the engines' documented ones; the budget is the engine table's
prefill chunk (core/memory/engines.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple, get_args

import numpy as np

from core.catalog.accelerators import Accelerator
from core.layout import Layout
from core.memory.engines import ENGINES
from core.scenario import Arrivals, Scenario
from core.speed.roofline import _Roof, roofline, roofs_of

# Standard normal quantiles of the percentiles reported.
Z = {50: 0.0, 90: 1.2815515655446004}
_Z = np.array(list(Z.values()))[:, None]
_TAILS = np.array([1.0 - q / 100.0 for q in Z])[:, None]
# Passes of the finite-population correction (a user's own request is not among those it waits for): the second
# pass moves the figures by under 1%, a third by under 0.1% (tests/core/test_load.py's configurations).
PASSES = 2
# Decode steps between a prompt's last prefill step and its first token reaching the user (see `residual` below):
# calibrated on NIM's Llama 3.3 70B fp8 TP2 200/200 row at one user (TTFT 31.2 ms = prefill 16 ms + one 15-18 ms
# step); checked on the other rows of tests/data/load_latency.csv.
FIRST_TOKEN_STEPS = 1.0


ARRIVALS: tuple[Arrivals, ...] = get_args(Arrivals)
# Cycles the synchronised closed loop is simulated for: the first (every user starting at once) is the start-up wave,
# the figures are over the rest. The loop repeats from the second cycle on: five cycles instead of three move the mean
# time to first token of tests/data/load_latency.csv's rows by 0.07% on average, 1.6% at most (measured 2026-11-26).
CYCLES = 3
# Steps closed_loop simulates at most. Identical users move in cohorts, so a run takes about as many steps as its waves'
# prefill and its cohorts' completions: every row of tests/data/load_latency.csv takes under 2,000. Beyond it the steady
# figures stand in; the bound keeps a page's curve of a tiny step budget to seconds.
STEP_BOUND = 5_000


class Scheduler(NamedTuple):
    """A continuous-batching engine's scheduler settings."""

    max_num_seqs: int  # running requests at most (vLLM --max-num-seqs, TensorRT-LLM max_batch_size)
    max_num_batched_tokens: int  # tokens in one step at most (vLLM --max-num-batched-tokens, TRT-LLM max_num_tokens)
    chunked_prefill: bool  # prompts longer than the budget left by decodes are split over steps
    prefix_cache_hit_fraction: float = 0.0  # share of each prompt found in the prefix cache (not prefilled)
    source: str = ""
    request_intake_s: float = 0.0  # the server's time to take in one request (parse, tokenize, enqueue), one at a time


# Documented defaults, (max_num_seqs, chunked prefill, source); the token budget is the engine table's prefill chunk.
# vLLM V1's API server: 1,024 sequences and 8,192 tokens per step on GPUs of 70 GiB or more other than the A100, 256
# and 2,048 elsewhere, chunked prefill on (vllm/engine/arg_utils.py get_batch_defaults, read 2026-11-26). SGLang:
# --chunked-prefill-size 8192 on large GPUs, running requests sized from memory (docs.sglang.ai "Server Arguments").
# TensorRT-LLM: max_batch_size 2048, max_num_tokens 8192, chunked context off (nvidia.github.io/TensorRT-LLM,
# "Tuning max batch size and max num tokens"). llama.cpp server: --parallel slots (taken as 4), n_ubatch 512 tokens
# per step (ggml-org/llama.cpp tools/server README). transformers' generate() and DeepSpeed-MII batch what they get.
ENGINE_SCHEDULERS: dict[str, tuple[int, bool, str]] = {
    "vllm": (1024, True, "vllm/engine/arg_utils.py get_batch_defaults: API server on a >= 70 GiB GPU (not A100)"),
    "sglang": (2048, True, "docs.sglang.ai Server Arguments: chunked_prefill_size 8192, running requests from memory"),
    "tensorrt-llm": (2048, False, "TensorRT-LLM tuning guide: max_batch_size 2048, max_num_tokens 8192, chunked context off"),
    "llama.cpp": (4, True, "llama.cpp server README: --parallel slots, n_ubatch 512"),
    "hf-transformers": (2048, False, "transformers generate(): the whole batch of prompts at once"),
    "hf-transformers-compiled": (2048, False, "transformers generate(): the whole batch of prompts at once"),
    "deepspeed-mii": (2048, True, "DeepSpeed-FastGen Dynamic SplitFuse: 768 tokens per forward pass"),
}
# The flag that caps an engine's running requests: the launch writes it from here (core/plan/launch/serve.py; each in
# data/launch_flags.csv, a test checks):
# what the pages call max_num_seqs in each engine's own words (llama.cpp's -np slots share one -c context).
RUNNING_LIMIT_FLAG: dict[str, str] = {"vllm": "--max-num-seqs", "sglang": "--max-running-requests", "tensorrt-llm": "--max_batch_size", "llama.cpp": "-np"}


def running_limit_words(engine: str, n: int) -> str:
    """The cap on running requests in the engine's own flag: "--max-num-seqs 256", "-np 4 slots"."""
    flag = RUNNING_LIMIT_FLAG.get(engine)
    if flag is None:
        return f"at most {n:,} running"
    return f"{flag} {n:,}" + ((" slot" if n == 1 else " slots") if engine == "llama.cpp" else "")


# The server's time to take in one request before the engine's scheduler sees it (HTTP and JSON, chat template,
# tokenization, enqueueing), requests taken in one after another. Calibrated for NIM's TensorRT-LLM server on
# tests/data/load_latency.csv's Llama 3.1 8B 200/200 row at 50 users (see docs/VALIDATION.md); unknown (none) elsewhere.
REQUEST_INTAKE_S: dict[str, float] = {"tensorrt-llm": 2.1e-3}
VLLM_SMALL_GPU = (256, 2048)  # vLLM V1's API server below 70 GiB, and on the A100
VLLM_LARGE_GPU_BYTES = 70 * 2**30


def default_scheduler(engine: str, prompt_tokens: int = 0, accelerator: Accelerator | None = None) -> Scheduler:
    """The engine's documented scheduler on `accelerator`; an engine that prefills whole prompts gets a budget of
    the prompt."""
    seqs, chunked, source = ENGINE_SCHEDULERS.get(engine, ENGINE_SCHEDULERS["vllm"])
    chunk = ENGINES[engine].prefill_chunk_tokens if engine in ENGINES else None
    budget = chunk if chunk is not None else max(prompt_tokens, 1)
    if engine == "vllm" and accelerator is not None and (accelerator.memory_bytes < VLLM_LARGE_GPU_BYTES or "a100" in accelerator.id):
        seqs, budget = VLLM_SMALL_GPU
        source = "vllm/engine/arg_utils.py get_batch_defaults: API server below 70 GiB or on an A100"
    return Scheduler(seqs, budget, chunked, 0.0, source, REQUEST_INTAKE_S.get(engine, 0.0))


def scenario_scheduler(sc: Scenario, prompt_tokens: int = 0, accelerator: Accelerator | None = None) -> Scheduler:
    """The engine's documented scheduler with the scenario's own settings (max_num_seqs, max_num_batched_tokens,
    prefix-cache hits) where it sets them."""
    s = default_scheduler(sc.serving_engine, prompt_tokens, accelerator)
    return s._replace(
        max_num_seqs=sc.max_num_seqs or s.max_num_seqs,
        max_num_batched_tokens=sc.max_num_batched_tokens or s.max_num_batched_tokens,
        prefix_cache_hit_fraction=sc.prefix_cache_hit_fraction,
    )


def _positive(x: np.ndarray, floor: float = 1e-12) -> np.ndarray:
    return np.maximum(x, floor)


@lru_cache(maxsize=64)
def _decoding_grid(cap: float) -> np.ndarray:
    """Mean numbers of decoding users the steady state is solved at: fine where few users share the engine."""
    low = np.linspace(0.0, min(cap, 16.0), 65)[1:]
    return low if cap <= 16.0 else np.concatenate([low, np.geomspace(16.0, cap, 97)[1:]])


def load_curve(
    sc: Scenario,
    acc: Accelerator,
    layout: Layout,
    concurrency: np.ndarray,
    prompt_tokens: int,
    output_tokens: int,
    scheduler: Scheduler | None = None,
    max_running: int | None = None,
    keys: Iterable[str] | None = None,
    roof: _Roof | None = None,
    within: tuple[float, float] | None = None,
    arrivals: Arrivals = "steady",
) -> dict[str, np.ndarray]:
    """Time to first token, inter-token latency and each user's tokens/s (mean, p50, p90) and one replica's output
    tokens/s, at each number of concurrent users in `concurrency`. `max_running` caps the running requests (the
    memory's room); users beyond it and beyond the scheduler's max_num_seqs wait for a slot. `keys` limits the
    answer to those figures (the planner's search asks for the few it checks). With `within` = (seconds to the first
    token, tokens/s per user), the answer stops at the last concurrency (of an ascending `concurrency`) whose p90
    figures meet both: the planner's search reads no further. `arrivals` picks steady (independent) arrivals or a
    benchmark's synchronised closed loop (module docstring)."""
    s = scheduler or scenario_scheduler(sc, prompt_tokens, acc)
    roof = roof or roofline(sc, acc, layout)
    users = _users(concurrency)
    cap = _cap(s, max_running)
    wanted = _wanted(keys, within)
    if arrivals == "synchronised":
        n = np.minimum(np.round(users), cap)
        return _finish(_synchronised(sc, acc, layout, roof, n, prompt_tokens, output_tokens, s, int(cap)), users, n, output_tokens, wanted, within, keys)
    setup = _steady_setup(s, prompt_tokens, output_tokens)
    grid, running = _steady_grid(*_step_times(roof, setup, prompt_tokens), setup)
    return _read_off(grid, running, users, cap, output_tokens, wanted, within, keys)


def load_curves(
    sc: Scenario,
    layout: Layout,
    parts: list[PartLoad],
    prompt_tokens: int,
    output_tokens: int,
    keys: Iterable[str] | None = None,
    within: tuple[float, float] | None = None,
) -> list[dict[str, np.ndarray]]:
    """load_curve (steady arrivals) of one scenario and layout on several parts: the parts that share a scheduler are
    solved in one numpy pass (core/speed/roofline._Roofs), each answer the one load_curve gives for that part alone.
    The planner's search asks for a candidate on every part this way (core/money/serving.replica_capacities)."""
    out: dict[int, dict[str, np.ndarray]] = {}
    groups: dict[Scheduler, list[int]] = {}
    for i, p in enumerate(parts):
        if p.roof.ep_ranks > 1:  # an expert-parallel step is per rank (core/speed/ep_step.py): on its own
            out[i] = load_curve(sc, p.acc, layout, p.concurrency, prompt_tokens, output_tokens, max_running=p.max_running, keys=keys, roof=p.roof, within=within)
        else:
            groups.setdefault(scenario_scheduler(sc, prompt_tokens, p.acc), []).append(i)
    wanted = _wanted(keys, within)
    for s, members in groups.items():
        setup = _steady_setup(s, prompt_tokens, output_tokens)
        roofs = [parts[i].roof for i in members]
        grid, running = _steady_grid(*_step_times(roofs_of(roofs), setup, prompt_tokens), setup)
        for row, i in enumerate(members):
            p = parts[i]
            out[i] = _read_off({k: v[row] for k, v in grid.items()}, running[row], _users(p.concurrency), _cap(s, p.max_running), output_tokens, wanted, within, keys)
    return [out[i] for i in range(len(parts))]


class PartLoad(NamedTuple):
    """One part load_curves reads a scenario on: its roof (roofline(sc, acc, layout)), the numbers of concurrent users
    and the running requests' cap (load_curve's `concurrency` and `max_running`)."""

    acc: Accelerator
    roof: _Roof
    concurrency: np.ndarray
    max_running: int | None = None


def _users(concurrency: np.ndarray) -> np.ndarray:
    users = np.asarray(concurrency, dtype=np.float64)
    return np.minimum(np.where(users >= 1.0, users, 1.0), 1e9)  # NaN and below one: one user


def _cap(s: Scheduler, max_running: int | None) -> float:
    return float(max(1, s.max_num_seqs if max_running is None else min(s.max_num_seqs, max_running)))


def _wanted(keys: Iterable[str] | None, within: tuple[float, float] | None) -> frozenset[str]:
    return frozenset(ALL_KEYS if keys is None else keys) | ({"time_to_first_token_p90_s", "tokens_per_s_per_user_p90"} if within else frozenset())


class _Setup(NamedTuple):
    """What the steady state's grid takes from the scheduler and the request (load_curve)."""

    prompt: float  # prompt tokens prefilled (those not found in the prefix cache)
    steps_out: float  # decode steps after the prefill's token
    context: float  # a decoding user's mean context
    intake: float  # the server's intake time of one request
    d: np.ndarray  # mean numbers of decoding users the steady state is solved at
    chunks: np.ndarray  # steps one prompt's prefill takes, at each d


def _steady_setup(s: Scheduler, prompt_tokens: int, output_tokens: int) -> _Setup:
    hit = min(max(float(s.prefix_cache_hit_fraction), 0.0), 0.999)
    prompt = max(1.0, prompt_tokens * (1.0 - hit))
    budget = float(max(1, s.max_num_batched_tokens))
    # The steady state at each mean number d of decoding users (explicit in d, so no iteration over users):
    d = _decoding_grid(float(max(1, s.max_num_seqs)))  # the same grid whatever the memory's room
    room = np.maximum(budget - d, 1.0) if s.chunked_prefill else budget
    return _Setup(
        prompt=prompt,
        steps_out=max(float(output_tokens) - 1.0, 1e-9),
        context=prompt_tokens + output_tokens / 2.0,
        intake=max(float(s.request_intake_s), 0.0),  # the request's own intake (independent arrivals rarely queue for it)
        d=d,
        chunks=np.ceil(prompt / room - 1e-9),
    )


def _step_times(roof: _Roof, setup: _Setup, prompt_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """(decode-only step, step carrying one chunk) at each d, in one pass over the roofline (a row per part of _Roofs)."""
    d, n = setup.d, len(setup.d)
    both = roof.mixed_step(np.concatenate([d, d]), setup.context, np.concatenate([np.zeros_like(d), setup.prompt / setup.chunks * np.ones_like(d)]), prompt_tokens)[0]
    both = np.maximum(both, 1e-12)
    return both[..., :n], both[..., n:]


def _steady_grid(t0: np.ndarray, t1: np.ndarray, setup: _Setup) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The steady state's figures and running users at each d (module docstring): elementwise, so `t0` and `t1` may
    hold a row per part."""
    d, chunks, steps_out, intake = setup.d, setup.chunks, setup.steps_out, setup.intake
    extra, service = np.maximum(t1 - t0, 0.0), chunks * t1
    load = chunks * extra  # extra seconds a decoding user waits per prompt that arrives while it decodes
    others: float | np.ndarray = 1.0  # share of the running users that are not the one looked at: 1 - 1/running
    for _ in range(PASSES):
        # a decoding user's step carries another's chunk with probability rate x others x chunks x itl, so
        # itl = t0 / (1 - rate x others x chunks x extra); with d = rate x steps_out x itl (Little's law):
        rate = d / (steps_out * t0 + d * others * load)
        itl = t0 / (1.0 - rate * others * load)
        rho = np.minimum(rate * others * service, 0.999)
        # the step under way when a request arrives, and the step after the prefill's: engines hand a step's tokens
        # to the server while the next step runs (vLLM's async output processing, TensorRT-LLM's executor), so the
        # first token reaches the user about one decode step after its prefill; before all that the server takes the
        # request in (`request_intake_s`)
        residual = (0.5 * others + FIRST_TOKEN_STEPS) * t0 + intake
        queue = others * rho * service / (2.0 * (1.0 - rho))  # M/D/1 mean wait (Pollaczek-Khinchine)
        ttft = residual + queue + service
        running = rate * ttft + d  # Little's law over a whole request
        others = 1.0 - 1.0 / np.maximum(running, 1.0)
    running = np.maximum.accumulate(running, axis=-1)
    share = np.minimum(rate * others * chunks * itl, 1.0)  # a decoding user's steps that carry a chunk
    grid: dict[str, np.ndarray] = {
        "time_to_first_token_mean_s": ttft,
        "inter_token_latency_mean_s": itl,
        "requests_per_s": rate,
        "prefill_busy_fraction": rho,
    }
    spread = np.sqrt(share * (1.0 - share) / steps_out)
    scale = queue / np.maximum(rho, 1e-9)  # the wait, when there is one, about exponential with this mean
    # p50 and p90 at once (the leading axis): no wait while the queue is empty more than 1 - q of the time
    z, tails = (a.reshape((len(Z),) + (1,) * t0.ndim) for a in (_Z, _TAILS))
    q_wait = scale * np.log(np.maximum(rho / tails, 1.0))
    ttft_q = residual + q_wait + service
    itl_q = t0 + np.minimum(share + z * spread, 1.0) * extra
    for row, q in enumerate(Z):
        grid[f"time_to_first_token_p{q}_s"] = ttft_q[row]
        grid[f"inter_token_latency_p{q}_s"] = itl_q[row]
    return grid, running


def _read_off(
    grid: dict[str, np.ndarray],
    running: np.ndarray,
    users: np.ndarray,
    cap: float,
    output_tokens: int,
    wanted: frozenset[str],
    within: tuple[float, float] | None,
    keys: Iterable[str] | None,
) -> dict[str, np.ndarray]:
    """One part's figures at its numbers of users, from its steady-state grid (load_curve)."""
    if within is not None:  # the grid's first miss bounds the users worth interpolating (the figures grow with users)
        ttft_max, speed_min = within
        miss = (grid["time_to_first_token_p90_s"] > ttft_max) | (grid["inter_token_latency_p90_s"] * speed_min > 1.0)
        if miss.any():
            users = users[: int(np.searchsorted(users, running[int(np.argmax(miss))], side="right"))]
    # users -> the steady state: running users below the cap, the cap's state (and a wait for a slot) above it
    n = np.minimum(users, cap)
    out: dict[str, np.ndarray] = {}
    for k, speed in _grid_reads(tuple(grid), wanted):
        out[k] = np.interp(n, running, grid[k])
        if speed:
            out[speed] = 1.0 / _positive(out[k])
    if (users > n).any() and "requests_per_s" not in out:
        out["requests_per_s"] = np.interp(n, running, grid["requests_per_s"])
    return _finish(out, users, n, output_tokens, wanted, within, keys)


@lru_cache(maxsize=64)
def _grid_reads(grid: tuple[str, ...], wanted: frozenset[str]) -> tuple[tuple[str, str], ...]:
    """The grid's figures _read_off interpolates for `wanted`, in the grid's order, each with the tokens/s per user
    it also gives ("" for none): an inter-token latency for its own sake or for that speed, requests/s for the output
    tokens/s."""
    reads = []
    for k in grid:
        speed = k.replace("inter_token_latency", "tokens_per_s_per_user").removesuffix("_s") if k.startswith("inter_token") else ""
        if k in wanted or speed in wanted or (k == "requests_per_s" and "output_tokens_per_s" in wanted):
            reads.append((k, speed if speed in wanted else ""))
    return tuple(reads)


def _finish(
    out: dict[str, np.ndarray],
    users: np.ndarray,
    n: np.ndarray,
    output_tokens: int,
    wanted: frozenset[str],
    within: tuple[float, float] | None,
    keys: Iterable[str] | None,
) -> dict[str, np.ndarray]:
    """What both arrival patterns add to their running users' figures: the wait for a slot of the users beyond the
    running cap, the replica's output tokens/s, and the `within` and `keys` cuts (load_curve)."""
    if (users > n).any():
        slot_wait = (users - n) / _positive(out["requests_per_s"])  # Little's law for the users waiting for a slot
        for k in [k for k in out if k.startswith("time_to_first_token")]:
            out[k] = out[k] + slot_wait
    if "output_tokens_per_s" in wanted:
        out["output_tokens_per_s"] = out["requests_per_s"] * output_tokens
    if within is not None:
        ok = np.flatnonzero((out["time_to_first_token_p90_s"] <= within[0]) & (out["tokens_per_s_per_user_p90"] >= within[1]))
        top = int(ok[-1]) + 1 if ok.size else 0
        out = {k: v[:top] for k, v in out.items()}
    return {k: v for k, v in out.items() if keys is None or k in keys}


ALL_KEYS = tuple(
    [f"{m}_{q}_s" for m in ("time_to_first_token", "inter_token_latency") for q in ("mean", "p50", "p90")]
    + [f"tokens_per_s_per_user_{q}" for q in ("mean", "p50", "p90")]
    + ["output_tokens_per_s", "requests_per_s", "prefill_busy_fraction"]
)


class _Cohort:
    """Users in the same state of the synchronised closed loop (they started together and stay together until a
    step's budget splits them)."""

    __slots__ = ("admitted", "arrived_s", "cycle", "decode_left", "first_s", "intake_s", "prefill_left", "users")

    def __init__(self, users: int, arrived_s: float, prefill_left: float, cycle: int, intake_s: float = 0.0) -> None:
        self.users, self.arrived_s, self.prefill_left, self.cycle = users, arrived_s, prefill_left, cycle
        self.decode_left, self.first_s, self.admitted = 0, 0.0, False
        self.intake_s = intake_s  # when the server starts taking in this cohort's first request (sent at arrived_s)

    def split(self, users: int) -> _Cohort:
        """Take `users` of this cohort out as a cohort of their own (the rest stay here)."""
        other = _Cohort(users, self.arrived_s, self.prefill_left, self.cycle, self.intake_s)
        other.decode_left, other.first_s, other.admitted = self.decode_left, self.first_s, self.admitted
        self.users -= users
        return other

    def ready(self, t: float, intake: float) -> int:
        """How many of its requests the server has taken in by time t (one every `intake` seconds)."""
        if intake <= 0.0:
            return self.users if self.arrived_s <= t else 0
        return min(self.users, max(0, int((t - self.intake_s) / intake + 1e-9)))

    def next_ready_s(self, intake: float) -> float:
        """When its next request is taken in."""
        return self.intake_s + intake if intake > 0.0 else self.arrived_s


def closed_loop(roof: _Roof, users: int, prompt_tokens: int, output_tokens: int, s: Scheduler, cap: int) -> dict[str, float] | None:
    """The synchronised closed loop (module docstring): `users` identical users start at once; each step carries every
    running decode and, first come first served, the prompts that fit the step's token budget (chunks of them with
    chunked prefill, whole prompts without); at most `cap` requests run. Returns the time to first token and the
    inter-token latency (mean, p50, p90 over the requests after the start-up wave), requests/s, the share of time
    spent in steps that carry a prompt and the start-up wave's own mean time to first token; None when no request
    after the start-up wave finishes within STEP_BOUND steps (a token budget far below the prompt)."""
    hit = min(max(float(s.prefix_cache_hit_fraction), 0.0), 0.999)
    prompt = max(1.0, prompt_tokens * (1.0 - hit))
    out = max(int(output_tokens), 1)
    context = prompt_tokens + output_tokens / 2.0
    budget = float(max(1, s.max_num_batched_tokens))
    steps: dict[tuple[int, int], float] = {}

    def step_s(decodes: int, tokens: float) -> float:
        key = (decodes, round(tokens))
        if key not in steps:
            steps[key] = max(float(roof.mixed_step(float(decodes), context, float(key[1]), prompt_tokens)[0]), 1e-12)
        return steps[key]

    intake = max(float(s.request_intake_s), 0.0)
    # requests reach the scheduler one intake apart: a wave sent at once is spread over the steps its intake spans
    queue = [_Cohort(users, 0.0, prompt, 0)]  # first come first served
    intake_free = users * intake  # when the server has taken in every request sent so far
    t = 0.0
    seen: list[tuple[float, float, int]] = []  # (ttft, itl, users) of the requests after the start-up wave
    startup: list[tuple[float, int]] = []  # (ttft, users) of the start-up wave's requests
    busy, window_start = 0.0, -1.0
    for _ in range(STEP_BOUND):
        if all(c.cycle >= CYCLES for c in queue):
            break
        running = sum(c.users for c in queue if c.admitted)
        for c in list(queue):  # admit the requests taken in so far, up to the cap
            take = min(c.ready(t, intake), cap - running) if not c.admitted else 0
            if take > 0:
                if take < c.users:
                    rest = c.split(c.users - take)
                    rest.intake_s = c.intake_s + take * intake
                    queue.insert(queue.index(c) + 1, rest)
                c.admitted, running = True, running + c.users
        decoding = [c for c in queue if c.admitted and c.prefill_left <= 0]
        d = sum(c.users for c in decoding)
        room = max(budget - d, 1.0)  # the step's token budget counts the decodes (vLLM and TensorRT-LLM alike)
        taken: list[tuple[_Cohort, float]] = []
        tokens = 0.0
        for c in [c for c in queue if c.admitted and c.prefill_left > 0]:
            whole = int(room // c.prefill_left)
            if whole == 0 and not taken and not s.chunked_prefill and c.prefill_left > budget:
                whole = 1  # a prompt over an unchunked budget runs alone
            if whole >= c.users:
                taken.append((c, c.prefill_left))
                room -= c.users * c.prefill_left
                tokens += c.users * c.prefill_left
                continue
            if whole > 0:
                part = c.split(whole)
                queue.insert(queue.index(c), part)
                taken.append((part, part.prefill_left))
                room -= whole * part.prefill_left
                tokens += whole * part.prefill_left
            if s.chunked_prefill and room >= 1.0:  # the next user's prompt is chunked into what is left
                one = c.split(1) if c.users > 1 else c
                if one is not c:
                    queue.insert(queue.index(c), one)
                taken.append((one, room))
                tokens += room
            break
        later = [r for r in (c.next_ready_s(intake) for c in queue if not c.admitted) if r > t]
        if not taken and d == 0:  # nothing runs: on to the next arrival
            if not later:
                break
            t = min(later)
            continue
        if taken:
            dt, k = step_s(d, tokens), 1
            busy += dt if window_start >= 0.0 else 0.0
        else:  # decode-only steps until a request completes or another arrives
            dt, k = step_s(d, 0.0), min(c.decode_left for c in decoding)
            if later:
                k = min(k, int(np.ceil((min(later) - t) / dt)))
            k = max(k, 1) if any(c.decode_left > 0 for c in decoding) else 0
        t += k * dt
        for c in decoding:
            c.decode_left -= k
        handover = FIRST_TOKEN_STEPS * step_s(d, 0.0)  # a step's tokens reach the user a step later (see above)
        for c, chunk in taken:
            c.prefill_left -= chunk
            if c.prefill_left <= 1e-9:
                c.prefill_left, c.decode_left, c.first_s = 0.0, out - 1, t + handover
        for c in [c for c in decoding if c.decode_left <= 0]:
            last = max(t + handover, c.first_s)  # its last token reaches the user, who sends the next request
            if c.cycle >= 1:
                seen.append((c.first_s - c.arrived_s, (last - c.first_s) / max(out - 1, 1), c.users))
            else:
                startup.append((c.first_s - c.arrived_s, c.users))
                if window_start < 0.0:
                    window_start = t
            queue.remove(c)
            nxt = _Cohort(c.users, last, prompt, c.cycle + 1, max(last, intake_free))
            intake_free = nxt.intake_s + c.users * intake
            same = queue and queue[-1].cycle == nxt.cycle and queue[-1].arrived_s == last and not queue[-1].admitted
            if same and abs(queue[-1].intake_s + queue[-1].users * intake - nxt.intake_s) <= 1e-12:
                queue[-1].users += nxt.users  # the same state, taken in right after it: one cohort
            else:
                queue.append(nxt)
    if not seen:
        return None
    ttft, itl, n = (np.array(v, dtype=np.float64) for v in zip(*seen, strict=True))
    figures = {"time_to_first_token": ttft, "inter_token_latency": itl}
    res: dict[str, float] = {}
    for name, v in figures.items():
        order = np.argsort(v)
        cum = np.cumsum(n[order]) / n.sum()
        res[f"{name}_mean_s"] = float(np.average(v, weights=n))
        for q in Z:
            res[f"{name}_p{q}_s"] = float(v[order][min(int(np.searchsorted(cum, q / 100.0)), len(v) - 1)])
    cycle_s = res["time_to_first_token_mean_s"] + (out - 1) * res["inter_token_latency_mean_s"]
    res["requests_per_s"] = min(users, cap) / max(cycle_s, 1e-12)  # Little's law over the running requests
    res["prefill_busy_fraction"] = min(busy / max(t - window_start, 1e-12), 1.0) if window_start >= 0.0 else 0.0
    # the start-up wave's mean (every user's prompt queued at once): not among the figures above, a diagnostic of how
    # much a benchmark's average moves when its first wave is counted (docs/VALIDATION.md, latency under load)
    ttft0, n0 = zip(*startup, strict=True)
    res["time_to_first_token_startup_mean_s"] = float(np.average(ttft0, weights=n0))
    return res


_LOOPS: dict[tuple, dict[str, float] | None] = {}  # closed_loop's answers: the same scenario's curve is asked for again
_LOOPS_MAX = 4096


def _synchronised(
    sc: Scenario, acc: Accelerator, layout: Layout, roof: _Roof, running: np.ndarray, prompt_tokens: int, output_tokens: int, s: Scheduler, cap: int
) -> dict[str, np.ndarray]:
    """closed_loop at each number of running users, as load_curve's figures (each user's tokens/s from its inter-token
    latency)."""
    rows: list[dict[str, float] | None] = []
    what = (sc.model_dump_json(), acc.model_dump_json(), tuple(layout), int(prompt_tokens), int(output_tokens), s, cap)  # a config.json's dict is unhashable
    for n in running.astype(int):
        key = (*what, int(n))
        if key not in _LOOPS:
            if len(_LOOPS) >= _LOOPS_MAX:
                _LOOPS.clear()
            _LOOPS[key] = closed_loop(roof, int(n), prompt_tokens, output_tokens, s, cap)
        rows.append(_LOOPS[key])
    missing = [i for i, r in enumerate(rows) if r is None]
    if missing:  # past the step bound: the steady figures stand in (a lower bound of the loop's)
        steady = load_curve(sc, acc, layout, running[missing], prompt_tokens, output_tokens, scheduler=s, max_running=cap, keys=_LOOP_KEYS, roof=roof)
        for j, i in enumerate(missing):
            rows[i] = {k: float(v[j]) for k, v in steady.items()}
    out = {k: np.array([r[k] for r in rows if r is not None], dtype=np.float64) for k in _LOOP_KEYS}
    for q in ("mean", "p50", "p90"):
        out[f"tokens_per_s_per_user_{q}"] = 1.0 / _positive(out[f"inter_token_latency_{q}_s"])
    return out


_LOOP_KEYS = tuple([f"{m}_{q}_s" for m in ("time_to_first_token", "inter_token_latency") for q in ("mean", "p50", "p90")] + ["requests_per_s", "prefill_busy_fraction"])
