"""Browser latency: how long a person waits after moving a slider, in headless Chromium against a real server.

For each case (every page on the default scenario, then each workshop preset on its page) the page is opened and
the sidebar's context-length slider is moved one stop (arrow key) `--moves` times, alternating right and left, after
two untimed moves. A move is timed from the key press until the app wrote the new value into the link, is idle again
(data-test-script-state="notRunning") and the browser painted twice more (the charts' redraw). The same is measured
on a bare page holding one slider and one small Plotly chart (what Streamlit and Plotly cost at least), open in the
same browser beside the case: its moves alternate with the case's, one for one, so both are taken under the same
load of this machine (measured once at the start, the bare page's median drifted by 126-172 ms from run to run and
the ratio with it). Medians and p95s per case are printed with their ratio to the bare page's moves taken beside
that case, and JSON on the last line.

    python3 bench/latency.py                       # this checkout
    python3 bench/latency.py --root /path/to/old   # another checkout (e.g. a git worktree of an older commit)
    python3 bench/latency.py --only serve-70b     # one case (the label holds the text), e.g. to compare two versions
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from serve import CHROMIUM, CHROMIUM_ARGS, READY, free_port

PAGES = ["plan", "memory", "training", "inference", "train-vs-serve", "gpu-vs-tpu", "compare", "method"]
BARE_APP = """import plotly.graph_objects as go
import streamlit as st

seq = st.select_slider("Sequence length", options=[2048, 4096, 8192, 16384], value=4096, key="seq")
st.write(seq)
st.plotly_chart(go.Figure(go.Bar(x=["weights", "KV cache"], y=[16, seq / 1024])), key="chart")
"""
PAINTED = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"
BARE_NOW = "(document.querySelector('[data-testid=stMarkdown]') || {innerText: null}).innerText"  # the value it printed
BARE_LABEL = "(bare: slider + one Plotly chart)"
# the link's seq parameter (written when a run ends) and the main pane's text (numbers that depend on the context
# length): either changes once the app has taken the new value, in this version or an older one
SEQ_NOW = "(m => m && new URLSearchParams(location.search).get('seq') + '|' + m.innerText)(document.querySelector('[data-testid=stMain]'))"


def serve(root: Path, app: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", app, "--server.headless", "true", "--server.port", str(port)]
    cmd += ["--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("server did not start")


def settle(page) -> None:
    page.wait_for_selector(READY, timeout=60_000)
    page.evaluate(PAINTED)


WARM_UP_MOVES = 2  # untimed: the first redraw loads the chart library and fills the server's caches


def timed_move(page, slider, i: int, state: str) -> float:
    """Seconds for one move (right on even i, left on odd); `state` is a JS expression that changes once the app has
    taken the new value (the link's seq parameter on the app, the printed value on the bare page)."""
    prev = page.evaluate(state)
    slider.focus()
    t0 = time.perf_counter()
    page.keyboard.press("ArrowRight" if i % 2 == 0 else "ArrowLeft")
    page.wait_for_function(f"prev => {{ const now = ({state}); return now !== null && now !== prev; }}", arg=prev, timeout=30_000, polling=5)
    settle(page)
    elapsed = time.perf_counter() - t0
    time.sleep(0.2)
    return elapsed


def paired_moves(case: tuple, bare: tuple, n: int) -> tuple[list[float], list[float]]:
    """(case seconds, bare seconds): n timed moves each, alternating one for one, after WARM_UP_MOVES untimed ones;
    each of `case` and `bare` is (page, slider, state, moves made so far: a list of one count, kept across cases, so
    the bare page's slider goes right and left in turn whatever a case did)."""
    mine, floor = [], []
    for i in range(n + WARM_UP_MOVES):
        b = timed_move(*bare[:2], bare[3][0], bare[2])
        bare[3][0] += 1
        c = timed_move(*case[:2], i, case[2])
        if i >= WARM_UP_MOVES:
            floor.append(b)
            mine.append(c)
    return mine, floor


def open_case(browser, url: str, path: str) -> tuple:
    """A page of the app at `path` (path?query), settled, and its sidebar's context slider."""
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(f"{url}/{path}")
    settle(page)
    time.sleep(1.0)
    page.keyboard.press("Escape")  # an older version opened deep links under a "Page not found" dialog
    settle(page)
    return page, page.locator('[data-testid="stSidebar"] [data-testid="stSlider"]').filter(has_text="Sequence length").get_by_role("slider")


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": statistics.median(times) * 1e3, "p95_ms": ordered[round(0.95 * (len(ordered) - 1))] * 1e3}


def workshop_cases() -> list[tuple[str, str]]:
    """(label, path?query) of each workshop preset, built with this checkout's field table (as a preset click does);
    URL keys are kept from version to version, so an older checkout opens the same scenarios."""
    from app_pages.shared.fields import fields
    from app_pages.shared.scenario_io import scenario_values
    from app_pages.shared.state import CFG_PARAM, CFG_TEXT, encode_blob
    from app_pages.shared.workshop import load_workshop_presets

    table, out = fields(), []
    for preset in load_workshop_presets():
        values = scenario_values(preset.scenario)
        query = {k: table[k].serialize(v) for k, v in values.items() if k in table and v != table[k].default}
        if values.get(CFG_TEXT):
            query[CFG_PARAM] = encode_blob(values[CFG_TEXT])
        out.append((f"workshop: {preset.id}", f"{preset.page.replace('_', '-')}?{urllib.parse.urlencode(query)}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--moves", type=int, default=20)
    ap.add_argument("--no-workshop", action="store_true", help="pages only")
    ap.add_argument("--pages", default=",".join(PAGES), help="comma-separated url paths to measure (default: every page)")
    ap.add_argument("--only", default="", help="measure only the cases whose label holds this text (e.g. serve-70b)")
    args = ap.parse_args()
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    results: dict[str, dict[str, float]] = {}
    floors: dict[str, dict[str, float]] = {}
    every_floor: list[float] = []
    cases = [(name, f"{name}?model=llama-3.1-8b") for name in args.pages.split(",") if name]
    if not args.no_workshop:
        cases += workshop_cases()
    cases = [c for c in cases if args.only in c[0]]
    with sync_playwright() as p, tempfile.TemporaryDirectory() as tmp:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        (Path(tmp) / "bare.py").write_text(BARE_APP)
        bare_proc, bare_url = serve(Path(tmp), "bare.py")
        proc, url = serve(args.root, "app.py")
        try:
            bare_page = browser.new_page(viewport={"width": 1440, "height": 900})
            bare_page.goto(bare_url)
            settle(bare_page)
            bare = (bare_page, bare_page.locator('[data-testid="stSlider"]').first.get_by_role("slider"), BARE_NOW, [0])
            for label, path in cases:
                page, slider = open_case(browser, url, path)
                try:
                    mine, floor = paired_moves((page, slider, SEQ_NOW), bare, args.moves)
                    results[label], floors[label] = summary(mine), summary(floor)
                    every_floor += floor
                except PlaywrightError as exc:  # a page an older checkout does not have
                    print(f"{label}: not measured ({str(exc).splitlines()[0]})", file=sys.stderr)
                page.close()
        finally:
            proc.terminate()
            bare_proc.terminate()
        browser.close()
    if not results:
        sys.exit("no case was measured")
    print(f"{'case':40s} {'median ms':>10s} {'p95 ms':>8s} {'bare beside':>12s} {'x bare median':>14s} {'x bare p95':>11s}")
    print(f"{BARE_LABEL:40s} {summary(every_floor)['median_ms']:10.0f} {summary(every_floor)['p95_ms']:8.0f} {'(all)':>12s} {1:14.2f} {1:11.2f}")
    for name, r in results.items():
        f = floors[name]
        print(
            f"{name:40s} {r['median_ms']:10.0f} {r['p95_ms']:8.0f} {f['median_ms']:6.0f} / {f['p95_ms']:3.0f} "
            f"{r['median_ms'] / f['median_ms']:14.2f} {r['p95_ms'] / f['p95_ms']:11.2f}"
        )
    out = {BARE_LABEL: {m: round(v) for m, v in summary(every_floor).items()}}
    out |= {k: {m: round(v) for m, v in r.items()} | {"bare_" + m: round(v) for m, v in floors[k].items()} for k, r in results.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
