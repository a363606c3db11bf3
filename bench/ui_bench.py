"""How fast the dashboard is.

1. Cold start: from launching `streamlit run app.py` (127.0.0.1, free port) to the first rendered page in headless
   Chromium (the Memory page's metrics on screen, script state notRunning). Chromium is started beforehand, so its own
   start-up is not counted. The Python files are in the OS cache after the first start, as on a server.
2. Server-side rerun cost of each page: streamlit.testing.v1.AppTest in this process runs app.py, switches to the
   page, then reruns it with a widget change (the `seq` select-slider toggled between 4096 and 8192). The same is done
   for a one-line app holding only that slider: the ratio is the page's cost over Streamlit's own.

Run:  python3 bench/ui_bench.py [--starts 3] [--reruns 20] [--skip-browser] [--profile memory]
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("LLMGP_FAIR_SHARE", "0")  # AppTest reruns in this process: no CPU budget (app_pages/shared/guard.py)

from serve import CHROMIUM, CHROMIUM_ARGS, READY, ROOT, Server, load_average

PAGES = ["memory", "training", "inference", "train_vs_serve", "gpu_vs_tpu", "compare", "method"]
EMPTY_APP = 'import streamlit as st; st.select_slider("seq", options=[4096, 8192], value=4096, key="seq")\n'
FIRST_CONTENT = f"document.querySelector('{READY}') && document.querySelector('[data-testid=\"stMetricValue\"]')"


def compare_token() -> str:
    """A `cmp` link parameter holding four saved scenarios (the Compare page with something to compare)."""
    rows = [
        {"name": n, "scenario": s}
        for n, s in [
            ("8B serve", {"model": "llama-3.1-8b"}),
            ("70B fp8", {"model": "llama-3.1-70b", "weights_format": "fp8"}),
            ("8B QLoRA", {"model": "llama-3.1-8b", "mode": "training", "method": "qlora", "accelerator": "rtx-4090"}),
            ("Mixtral 4-bit", {"model": "mixtral-8x7b", "weights_format": "awq-4bit", "accelerator": "a100-sxm-80gb"}),
        ]
    ]
    return base64.urlsafe_b64encode(zlib.compress(json.dumps(rows, separators=(",", ":")).encode(), 9)).decode()


def cold_starts(n: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        warm = browser.new_page()
        warm.goto("about:blank")
        warm.close()
        for _ in range(n):
            srv = Server().start()
            try:
                healthy = srv.wait_healthy()
                ctx = browser.new_context(viewport={"width": 1500, "height": 1200})
                page = ctx.new_page()
                t_goto = time.perf_counter()
                page.goto(srv.url + "/")
                page.wait_for_function(FIRST_CONTENT, timeout=120_000, polling=20)
                done = time.perf_counter()
                out.append({"healthy_s": healthy, "first_page_s": done - srv.launched_at, "page_only_s": done - t_goto, "rss_mb": srv.rss_bytes() / 2**20})
                ctx.close()
            finally:
                srv.stop()
        browser.close()
    return out


def rerun_times(app: str, page: str | None, reruns: int, params: dict | None = None) -> list[float]:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(app, default_timeout=120)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    at.run()
    if page:
        at.switch_page(str(ROOT / "app_pages" / f"{page}.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    slider = lambda: at.select_slider(key="seq")  # noqa: E731 (re-found after every run)
    slider().set_value(8192).run()  # warm-up: first use of each code path
    times = []
    for i in range(reruns):
        value = 4096 if i % 2 == 0 else 8192
        t0 = time.perf_counter()
        slider().set_value(value).run()
        times.append(time.perf_counter() - t0)
        assert not at.exception, [e.value for e in at.exception]
    return times


def profile_page(page: str, reruns: int) -> None:
    """cProfile the script runs themselves: AppTest runs the script in its own thread, so the profiler is switched on
    inside Streamlit's exec wrapper (the main thread only waits)."""
    from streamlit.runtime.scriptrunner import script_runner

    prof = cProfile.Profile()
    original = script_runner.exec_func_with_error_handling

    def profiled(func, ctx):
        prof.enable()
        try:
            return original(func, ctx)
        finally:
            prof.disable()

    script_runner.exec_func_with_error_handling = profiled
    try:
        rerun_times(str(ROOT / "app.py"), None if page == "memory" else page, reruns)
    finally:
        script_runner.exec_func_with_error_handling = original
    print(f"\ncProfile of the script runs of {page} ({reruns + 3} runs; top 35 by cumulative time)")
    pstats.Stats(prof).sort_stats("cumulative").print_stats(35)


def p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10)[-1] if len(xs) >= 2 else xs[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--starts", type=int, default=3, help="cold starts to time (median reported)")
    ap.add_argument("--reruns", type=int, default=20, help="timed reruns per page")
    ap.add_argument("--skip-browser", action="store_true", help="only the AppTest rerun table")
    ap.add_argument("--profile", metavar="PAGE", help="cProfile the reruns of one page and print the top functions")
    args = ap.parse_args()
    print(f"load average at start: {load_average()}  (2-core machine shared with others: compare ratios, not absolutes)")

    if not args.skip_browser:
        runs = cold_starts(args.starts)
        print("\nCold start: `streamlit run app.py` launched -> first page rendered in headless Chromium")
        print(f"{'run':>4} {'healthy (s)':>12} {'first page (s)':>15} {'of which page load (s)':>23} {'server RSS (MB)':>16}")
        for i, r in enumerate(runs, 1):
            print(f"{i:>4} {r['healthy_s']:>12.2f} {r['first_page_s']:>15.2f} {r['page_only_s']:>23.2f} {r['rss_mb']:>16.0f}")
        print(
            f"{'med':>4} {statistics.median(r['healthy_s'] for r in runs):>12.2f} {statistics.median(r['first_page_s'] for r in runs):>15.2f}"
            f" {statistics.median(r['page_only_s'] for r in runs):>23.2f} {statistics.median(r['rss_mb'] for r in runs):>16.0f}"
        )

    import streamlit as st

    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty_app.py"
        empty.write_text(EMPTY_APP)
        cases = [("(empty page, 1 slider)", str(empty), None, None)]
        cases += [(p, str(ROOT / "app.py"), None if p == "memory" else p, None) for p in PAGES]
        cases.append(("compare (4 saved)", str(ROOT / "app.py"), "compare", {"cmp": compare_token()}))
        rows = []
        for label, app, page, params in cases:
            st.cache_data.clear()
            times = rerun_times(app, page, args.reruns, params)
            rows.append((label, statistics.median(times), p90(times)))
        base = rows[0][1]
        print(f"\nServer-side rerun (AppTest, seq slider 4096 <-> 8192, {args.reruns} reruns after a warm-up)")
        print(f"{'page':<24} {'median ms':>10} {'p90 ms':>8} {'x empty':>8}")
        for label, med, p in rows:
            print(f"{label:<24} {med * 1e3:>10.1f} {p * 1e3:>8.1f} {med / base:>8.1f}")

        if args.profile:
            profile_page(args.profile, args.reruns)
    print(f"load average at end: {load_average()}")


if __name__ == "__main__":
    main()
