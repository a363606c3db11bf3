"""Where a real server spends a rerun: `streamlit run app.py` in this process with cProfile in every thread (the event
loop, the script threads, the agent API), driven through the agent API by a thread that is not profiled.

Run:  python3 bench/profile_server.py [--page memory] [--reruns 40] [--top 40]
(cProfile roughly doubles the time of Python-heavy code: read the shares, not the absolute times.)
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import PAGES, SEQ_VALUES, AgentSession
from serve import ROOT, free_port

PROFILES: list[cProfile.Profile] = []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--page", choices=sorted(PAGES), default="memory")
    ap.add_argument("--reruns", type=int, default=40)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--dump", metavar="FILE", help="also write the merged profile (pstats) to FILE, e.g. to compare callers")
    args = ap.parse_args()
    port = free_port()

    def on_loop(fn) -> None:
        """Run fn on the server's event-loop thread (a profiler switches on and off in its own thread only)."""
        from streamlit.runtime import Runtime

        done = threading.Event()
        Runtime.instance()._get_async_objs().eventloop.call_soon_threadsafe(lambda: (fn(), done.set()))
        done.wait(10)

    def drive() -> None:
        import urllib.request

        while True:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                time.sleep(0.1)
        sess = AgentSession(port, timeout=120)
        sess.interact({"page": PAGES[args.page]} if PAGES[args.page] else {})
        sess.interact({"widget_state": {"seq": SEQ_VALUES[0]}})  # warm-up
        loop_prof = cProfile.Profile()
        first = len(PROFILES)  # script threads started from here on are the timed reruns
        on_loop(loop_prof.enable)
        t0 = time.perf_counter()
        for i in range(args.reruns):
            sess.interact({"widget_state": {"seq": SEQ_VALUES[(i + 1) % 2]}})
        wall = time.perf_counter() - t0
        on_loop(loop_prof.disable)
        time.sleep(0.5)
        threads = PROFILES[first:]
        stats = pstats.Stats(loop_prof)
        for p in threads:
            stats.add(p)
        print(
            f"\n{args.reruns} reruns of {args.page} through the agent API: {1e3 * wall / args.reruns:.0f} ms each (profiled); "
            f"event-loop thread + {len(threads)} script threads"
        )
        if args.dump:
            stats.dump_stats(args.dump)
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)
        print("The project's own code (app.py, app_pages/, core/):")
        stats.sort_stats("cumulative").print_stats(str(ROOT), args.top)
        sys.stdout.flush()
        os._exit(0)

    threading.Thread(target=drive, daemon=True).start()  # started before the patch: not profiled

    original_run = threading.Thread.run

    def profiled_run(self):
        prof = cProfile.Profile()
        PROFILES.append(prof)
        prof.enable()
        try:
            original_run(self)
        finally:
            prof.disable()

    threading.Thread.run = profiled_run

    from streamlit.web import cli

    os.chdir(ROOT)
    cli.main(
        [
            "run",
            "app.py",
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
            "--server.enableAgentApi=true",
        ],
        standalone_mode=False,
    )


if __name__ == "__main__":
    main()
