"""Concurrent sessions against one `streamlit run app.py` on 127.0.0.1.

Each of N sessions changes a widget in a loop for a bounded time (the sidebar's sequence-length slider, 4,096 <-> 8,192,
i.e. a full rerun of the page), waits for the rerun to finish, "thinks" for a moment, and repeats. Reported: rerun latency
(p50/p95/p99/max), reruns per second, errors (HTTP errors, timeouts, app exceptions), the server's CPU use, and its
resident memory at start (healthy, then after one warm-up session) and at the end.

Drivers:
  agent    (default) Streamlit 1.67's experimental agent API (`--server.enableAgentApi=true`): one
           `POST /_stcore/agent/interact` = one rerun of a real server session with the given widget state. Cheap on the
           client, so 50 sessions measure the server, not the load generator. Its JSON snapshot costs the server a little
           more than the browser protocol does, so the numbers are slightly pessimistic.
  browser  one headless Chromium, N contexts (real WebSocket sessions): focus the sequence slider, press ArrowRight /
           ArrowLeft, time until the app's script state is notRunning again. Chromium needs CPU too: on a 2-core machine
           use it to cross-check small N.

Run:  python3 bench/load.py --sessions 50 --seconds 60 [--think 1.0] [--driver agent|browser] [--page memory]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve import CHROMIUM, CHROMIUM_ARGS, READY, Server, load_average

SEQ_VALUES = ("8,192", "4,096")  # the agent API takes a select-slider's formatted option
PAGES = {
    "plan": "plan",
    "memory": "memory",
    "training": "training",
    "inference": "inference",
    "train_vs_serve": "train-vs-serve",
    "gpu_vs_tpu": "gpu-vs-tpu",
    "compare": "compare",
    "method": "method",
}


@dataclass
class Stats:
    latencies: list[float] = field(default_factory=list)
    finished_at: list[float] = field(default_factory=list)
    creates: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ok(self, seconds: float) -> None:
        with self.lock:
            self.latencies.append(seconds)
            self.finished_at.append(time.perf_counter())

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


def _app_exception(tree: object) -> str | None:
    """The message of an st.exception element the app rendered (an uncaught error), if any."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "exception":
                return str(node.get("props", {}).get("message") or node.get("props"))[:200]
            stack.extend(node.get("children", []))
    return None


class AgentSession:
    """One agent API session over a keep-alive HTTP connection (reopened when the server has closed an idle one)."""

    def __init__(self, port: int, timeout: float, client: str | None = None):
        """`client`: the address this session claims through X-Forwarded-For, as a reverse proxy would send it (the
        server trusts it with LLMGP_TRUST_PROXY=1), so one machine can play several clients."""
        self.port, self.timeout = port, timeout
        self.source = None
        self.headers = {"Content-Type": "application/json", **({"X-Forwarded-For": client} if client else {})}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=self.source)
        self.session_id: str | None = None

    def _post(self, payload: str) -> tuple[float, http.client.HTTPResponse, bytes]:
        t0 = time.perf_counter()
        self.conn.request("POST", "/_stcore/agent/interact", body=payload, headers=self.headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        return time.perf_counter() - t0, resp, raw

    def interact(self, body: dict) -> tuple[float, dict]:
        if self.session_id:
            body = {"session_id": self.session_id, **body}
        payload = json.dumps(body)
        try:
            elapsed, resp, raw = self._post(payload)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # uvicorn closes a keep-alive connection after 5 s idle: reconnect once (the session lives on the server).
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout, source_address=self.source)
            elapsed, resp, raw = self._post(payload)
        data = json.loads(raw) if raw else {}
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {data.get('error', data)}")
        if data.get("status") != "ready":
            raise RuntimeError(f"status {data.get('status')!r}")
        if msg := _app_exception(data.get("tree")):
            raise RuntimeError(f"app exception: {msg}")
        self.session_id = data.get("session_id", self.session_id)
        return elapsed, data


def agent_worker(
    port: int, page: str, deadline: float, think: float, stats: Stats, start_delay: float, rng: random.Random, session: type[AgentSession] = AgentSession
) -> None:
    time.sleep(start_delay)
    sess = session(port, timeout=120)
    try:
        elapsed, _ = sess.interact({"page": PAGES[page]} if PAGES[page] else {})
        stats.creates.append(elapsed)
    except Exception as exc:
        stats.error(f"create: {exc}")
        return
    i = 0
    while time.perf_counter() < deadline:
        try:
            elapsed, _ = sess.interact({"widget_state": {"seq": SEQ_VALUES[i % 2]}})
            stats.ok(elapsed)
        except Exception as exc:
            stats.error(str(exc)[:200])
        i += 1
        if think:
            time.sleep(rng.uniform(0.5 * think, 1.5 * think))


def run_agent(srv: Server, n: int, seconds: float, think: float, page: str, stats: Stats) -> None:
    ramp = ramp_seconds(seconds, think)
    deadline = time.perf_counter() + seconds
    threads = [
        threading.Thread(target=agent_worker, args=(srv.port, page, deadline, think, stats, ramp * i / max(n, 1), random.Random(i)), daemon=True) for i in range(n)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 180)


def run_browser(srv: Server, n: int, seconds: float, think: float, page: str, stats: Stats) -> None:
    import asyncio

    from playwright.async_api import async_playwright

    slider = '[data-testid="stSidebar"] [data-testid="stSlider"] >> nth=1 >> role=slider'
    # Counts finished runs: the script state attribute going back to notRunning after a run.
    observer = """() => {
        window.__runs = 0;
        const app = document.querySelector('[data-testid="stApp"]');
        let last = app.getAttribute('data-test-script-state');
        new MutationObserver(() => {
            const now = app.getAttribute('data-test-script-state');
            if (now === 'notRunning' && last !== 'notRunning') window.__runs += 1;
            last = now;
        }).observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
    }"""

    async def session(browser, i: int, deadline: float) -> None:
        await asyncio.sleep(ramp_seconds(seconds, think) * i / max(n, 1))
        ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
        try:
            pg = await ctx.new_page()
            t0 = time.perf_counter()
            await pg.goto(f"{srv.url}/{PAGES[page]}")
            await pg.wait_for_selector(READY, timeout=120_000)
            await pg.wait_for_selector('[data-testid="stMetricValue"], [data-testid="stTable"], [data-testid="stDataFrame"]', timeout=120_000)
            stats.creates.append(time.perf_counter() - t0)
            await pg.evaluate(observer)
            handle = pg.locator(slider)
            rng = random.Random(i)
            k = 0
            while time.perf_counter() < deadline:
                before = await pg.evaluate("window.__runs")
                t0 = time.perf_counter()
                try:
                    await handle.press("ArrowRight" if k % 2 == 0 else "ArrowLeft")
                    await pg.wait_for_function(f"window.__runs > {before}", timeout=60_000, polling=10)
                    if await pg.locator('[data-testid="stException"]').count():
                        stats.error("app exception: " + (await pg.locator('[data-testid="stException"]').first.inner_text())[:200])
                    else:
                        stats.ok(time.perf_counter() - t0)
                except Exception as exc:
                    stats.error(str(exc).splitlines()[0][:200])
                k += 1
                if think:
                    await asyncio.sleep(rng.uniform(0.5 * think, 1.5 * think))
        except Exception as exc:
            stats.error(f"session: {str(exc).splitlines()[0][:200]}")
        finally:
            await ctx.close()

    async def main() -> None:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            deadline = time.perf_counter() + seconds
            await asyncio.gather(*(session(browser, i, deadline) for i in range(n)))
            await browser.close()

    asyncio.run(main())


def ramp_seconds(seconds: float, think: float) -> float:
    """Sessions arrive spread over one think period (at least 2 s), as users do, not all at once."""
    return min(max(2.0, think), seconds / 4)


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=60, help="how long the sessions keep interacting")
    ap.add_argument("--think", type=float, default=1.0, help="mean pause between a session's interactions, s (uniform 0.5x..1.5x; 0 = none)")
    ap.add_argument("--driver", choices=["agent", "browser"], default="agent")
    ap.add_argument("--page", choices=sorted(PAGES), default="memory")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument(
        "--server-arg", action="append", default=[], metavar="ARG", help="extra `streamlit run` option, e.g. --server-arg=--runner.postScriptGC=false (repeatable)"
    )
    args = ap.parse_args()

    extra = ["--server.enableAgentApi=true", f"--server.agentMaxSessions={max(100, 2 * args.sessions)}"] if args.driver == "agent" else []
    extra += args.server_arg
    stats = Stats()
    samples: list[tuple[float, float]] = []
    with Server(*extra) as srv:
        rss_start = srv.rss_bytes()
        # One warm-up session (imports, caches), not counted.
        if args.driver == "agent":
            warm = AgentSession(srv.port, timeout=120)
            warm.interact({})
            warm.interact({"widget_state": {"seq": SEQ_VALUES[0]}})
        else:
            run_browser(srv, 1, 3, 0, args.page, Stats())
        rss_warm = srv.rss_bytes()
        cpu0, t0 = srv.cpu_seconds(), time.perf_counter()
        sampler_stop = threading.Event()

        def sample() -> None:
            while not sampler_stop.wait(2.0):
                samples.append((time.perf_counter() - t0, srv.rss_bytes() / 2**20))

        threading.Thread(target=sample, daemon=True).start()
        print(
            f"{args.driver} driver: {args.sessions} sessions x {args.seconds:g} s on {args.page}, think {args.think:g} s; "
            f"server options {' '.join(args.server_arg) or '(config.toml)'}; load average {load_average()}",
            flush=True,
        )
        (run_agent if args.driver == "agent" else run_browser)(srv, args.sessions, args.seconds, args.think, args.page, stats)
        wall = time.perf_counter() - t0
        cpu = srv.cpu_seconds() - cpu0
        sampler_stop.set()
        rss_end = srv.rss_bytes()

    lat = stats.latencies
    # Steady state: interactions finished after every session has arrived and had one think period.
    settle = t0 + ramp_seconds(args.seconds, args.think) + args.think
    steady = [x for x, at in zip(stats.latencies, stats.finished_at, strict=True) if at >= settle]
    result = {
        "driver": args.driver,
        "server_args": args.server_arg,
        "sessions": args.sessions,
        "seconds": args.seconds,
        "think_s": args.think,
        "page": args.page,
        "reruns": len(lat),
        "reruns_per_s": len(lat) / wall,
        "errors": len(stats.errors),
        "p50_ms": pct(lat, 0.50) * 1e3,
        "p95_ms": pct(lat, 0.95) * 1e3,
        "p99_ms": pct(lat, 0.99) * 1e3,
        "max_ms": max(lat, default=float("nan")) * 1e3,
        "mean_ms": statistics.fmean(lat) * 1e3 if lat else float("nan"),
        "steady_reruns": len(steady),
        "steady_p50_ms": pct(steady, 0.50) * 1e3,
        "steady_p95_ms": pct(steady, 0.95) * 1e3,
        "steady_max_ms": max(steady, default=float("nan")) * 1e3,
        "session_start_p50_ms": pct(stats.creates, 0.5) * 1e3,
        "session_start_max_ms": max(stats.creates, default=float("nan")) * 1e3,
        "server_cpu_pct": 100 * cpu / wall,
        "server_cpu_ms_per_rerun": 1e3 * cpu / max(1, len(lat) + len(stats.creates)),
        "rss_start_mb": rss_start / 2**20,
        "rss_warm_mb": rss_warm / 2**20,
        "rss_end_mb": rss_end / 2**20,
        "rss_growth_mb": (rss_end - rss_warm) / 2**20,
        "rss_peak_mb": max((m for _, m in samples), default=rss_end / 2**20),
        "load_average_end": load_average(),
        "rss_samples_mb": [(round(t, 1), round(m, 1)) for t, m in samples],
    }
    print(f"reruns {result['reruns']} ({result['reruns_per_s']:.1f}/s), errors {result['errors']}")
    print(
        f"rerun latency ms: p50 {result['p50_ms']:.0f}  p95 {result['p95_ms']:.0f}  p99 {result['p99_ms']:.0f}  max {result['max_ms']:.0f}"
        f"  (session start p50 {result['session_start_p50_ms']:.0f}, max {result['session_start_max_ms']:.0f})"
    )
    print(
        f"steady state (after arrivals + one think period): {len(steady)} reruns, p50 {result['steady_p50_ms']:.0f}  "
        f"p95 {result['steady_p95_ms']:.0f}  max {result['steady_max_ms']:.0f}"
    )
    print(f"server CPU {result['server_cpu_pct']:.0f}% of one core, {result['server_cpu_ms_per_rerun']:.0f} ms per rerun")
    print(
        f"server RSS MB: start {result['rss_start_mb']:.0f}, after warm-up {result['rss_warm_mb']:.0f}, end {result['rss_end_mb']:.0f} "
        f"(growth {result['rss_growth_mb']:+.0f}, peak {result['rss_peak_mb']:.0f}); load average {result['load_average_end']}"
    )
    for err in sorted(set(stats.errors))[:5]:
        print(f"  error x{stats.errors.count(err)}: {err}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
