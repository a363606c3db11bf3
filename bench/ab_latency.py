"""Two versions of the app side by side: the same link opened on a server of each checkout in one headless
Chromium, the sidebar's context slider moved on one and then the other, in turn (so both are measured under the
same load of this machine), timed as bench/latency.py times a move. Medians and p95s per version.

    python3 bench/ab_latency.py --before /path/to/old/checkout
    python3 bench/ab_latency.py --before /tmp/old --link "inference?batch=32&seq=8192&fmt=fp8&kv=fp8&tp=2&model=llama-3.1-70b"
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from latency import SEQ_NOW, open_case, paired_moves, serve, summary
from serve import CHROMIUM, CHROMIUM_ARGS

HERE = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="the other checkout (e.g. a git worktree of an older commit)")
    ap.add_argument("--after", type=Path, default=HERE, help="default: this checkout")
    ap.add_argument("--link", default="inference?model=llama-3.1-8b", help="path and query opened on both")
    ap.add_argument("--moves", type=int, default=40)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    procs = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            cases = []
            for root in (args.before, args.after):
                proc, url = serve(root, "app.py")
                procs.append(proc)
                cases.append((*open_case(browser, url, args.link), SEQ_NOW))
            # the "bare" side of latency's pairs is the older version here: its move first, then this one's
            after, before = paired_moves(cases[1], (*cases[0], [0]), args.moves)
        finally:
            for proc in procs:
                proc.terminate()
        browser.close()
    for name, root, ts in (("before", args.before, before), ("after", args.after, after)):
        r = summary(ts)
        print(f"{name:7s} {root}  median {r['median_ms']:.0f} ms  p95 {r['p95_ms']:.0f} ms  ({len(ts)} moves)")


if __name__ == "__main__":
    main()
