"""A page-alone rerun's CPU on the script thread: what one sidebar move costs the server, without a browser.

AppTest opens the page on a link, then moves the sidebar's context-length slider back and forth; each move reruns the
page fragment alone, as a browser's move does (the callback is told its run is a fragment's, as Streamlit tells it in
a server: app_pages/shared/st_private.py). The CPU of each run is the script thread's (time.thread_time), taken over
the fair-share guard's turn (app_pages/shared/guard.py: the run itself, not AppTest's reading of the result), so it
is the server's script-thread CPU less the event loop's sending. Prints the median and quartiles of --moves runs after
--warm untimed ones; --profile adds cProfile over the timed runs, in the script thread only.

    python3 bench/rerun_cpu.py [--page memory] [--moves 40] [--profile 30]
    python3 bench/rerun_cpu.py --root /path/to/old/checkout     # the same for another version (alternate the two)
    python3 bench/rerun_cpu.py --config    # the model from a pasted config.json at the link's budget (bench/abuse.py)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path

LINKS = {
    "memory": "model=llama-3.1-8b",
    "inference": "model=llama-3.1-8b",
    "training": "model=llama-3.1-8b&mode=training",
    "gpu-vs-tpu": "model=llama-3.1-8b",
    "plan": "model=llama-3.1-8b",
    "method": "model=llama-3.1-8b",
}
SEQ = (4096, 8192)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--page", choices=sorted(LINKS), default="memory")
    ap.add_argument("--moves", type=int, default=40)
    ap.add_argument("--warm", type=int, default=6)
    ap.add_argument("--whole", action="store_true", help="whole runs (the sidebar drawn too), as a link or the agent API asks")
    ap.add_argument("--config", action="store_true", help="the model from bench/abuse.py's config.json at the link budget")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print cProfile's top N functions")
    args = ap.parse_args()
    root = args.root.resolve()
    os.chdir(root)
    sys.path.insert(0, str(root))

    from streamlit.testing.v1 import AppTest

    from app_pages.shared import guard, st_private

    if not args.whole:
        st_private.fragment_only_run = lambda: True  # the browser's move: a run of the inputs' fragment (rerun.py)
    used: list[float] = []
    profile = cProfile.Profile(time.thread_time) if args.profile else None  # CPU, not wall: waits for the GIL left out
    timing = [False]
    real_before, real_after = guard.before_run, guard.after_run

    def before_run() -> float:
        started = real_before()
        if timing[0] and profile is not None:
            profile.enable()
        return started

    def after_run(started: float) -> None:
        if timing[0]:
            if profile is not None:
                profile.disable()
            used.append(time.thread_time() - started)
        real_after(started)

    guard.before_run, guard.after_run = before_run, after_run
    at = AppTest.from_file(str(root / "app.py"), default_timeout=120)
    at.context = {"url": f"http://localhost:8501/{args.page}"}
    for pair in LINKS[args.page].split("&"):
        key, value = pair.split("=")
        at.query_params[key] = value
    if args.config:  # made by this checkout's bench/abuse.py in a process of its own: --root's modules stay --root's
        made = "import sys; sys.path.insert(0, 'bench'); from abuse import token, worst_config; print(token(worst_config(0)))"
        here = Path(__file__).resolve().parent.parent
        at.query_params["src"], at.query_params["cfg"] = "config", subprocess.check_output([sys.executable, "-c", made], cwd=here, text=True).strip()
    at.run()
    if args.page != "memory":
        at.switch_page(str(root / "app_pages" / f"{args.page.replace('-', '_')}.py")).run()
    slider = at.select_slider(key="seq")  # from the whole run: a page-alone run sends no sidebar (the browser keeps it)
    for i in range(args.warm + args.moves):
        timing[0] = i >= args.warm
        if args.whole:
            slider = at.select_slider(key="seq")  # a whole run draws it again
        slider.set_value(SEQ[i % 2])
        last = slider.run()  # the widget states of the page as the browser holds it
        assert not last.exception, [e.value for e in last.exception]
    sidebar_sent = len(last.sidebar.children)
    ms = sorted(1000 * u for u in used)
    q = statistics.quantiles(ms, n=4)
    print(f"{args.page}: {len(ms)} {'whole' if args.whole else 'page-alone'} reruns, script-thread CPU median {statistics.median(ms):.1f} ms", end=" ")
    print(f"(quartiles {q[0]:.1f}-{q[2]:.1f}); sidebar elements sent by the last: {sidebar_sent}")
    if profile is not None:
        out = io.StringIO()
        stats = pstats.Stats(profile, stream=out)
        stats.sort_stats("cumulative").print_stats(args.profile)
        print(out.getvalue())
    result = {"page": args.page, "config": args.config, "whole": args.whole, "root": str(root), "median_ms": round(statistics.median(ms), 2)}
    print(json.dumps(result | {"q1_ms": round(q[0], 2), "q3_ms": round(q[2], 2)}))


if __name__ == "__main__":
    main()
