"""Clicks on "Download scenario (JSON)" while other sessions' runs keep ending (issue #28): how many give no file.

One real server; --busy agent-API sessions move Memory's context slider in a loop with no pause (each run's end sweeps
Streamlit's orphaned download callables); one Chromium page on Memory clicks the sidebar's download --clicks times,
each waiting up to --wait seconds for the file, and between clicks either waits for the app to be idle (`--during
idle`) or first switches page and clicks while that whole run is in progress (`--during switch`). Reported: files
received, clicks that gave no download (no_file: the server had no callable for the click, and the button showed
"Failed to generate file for download" for 5 s), downloads the browser began and dropped (canceled: the file the
click made was gone when the browser asked for it; media_404 counts the browser's requests answered 404), and error
messages still shown after the wait.
Timing-dependent by nature: tests/app/test_scenario_download.py reproduces the mechanism deterministically.

    python3 bench/download_race.py [--clicks 30] [--busy 2] [--during idle|switch]
    python3 bench/download_race.py --root /path/to/old/checkout     # the same for another version
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import AgentSession
from serve import CHROMIUM, CHROMIUM_ARGS, READY, Server

SEQ = ("4,096", "8,192")


def busy(port: int, stop: threading.Event, runs: list[int]) -> None:
    sess = AgentSession(port, timeout=120)
    sess.interact({})
    i = 0
    while not stop.is_set():
        try:
            sess.interact({"widget_state": {"seq": SEQ[i % 2]}})
            runs[0] += 1
        except Exception as exc:  # a bench: report and go on
            print("busy:", str(exc)[:120], flush=True)
            time.sleep(0.5)
        i += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--clicks", type=int, default=30)
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("--wait", type=float, default=10.0)
    ap.add_argument("--during", choices=("idle", "switch"), default="idle")
    args = ap.parse_args()
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
    from playwright.sync_api import sync_playwright

    got = lost = errors = canceled = 0
    runs = [0]
    with Server("--server.enableAgentApi=true", app=str(args.root.resolve() / "app.py")) as srv:
        stop = threading.Event()
        threads = [threading.Thread(target=busy, args=(srv.port, stop, runs), daemon=True) for _ in range(args.busy)]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1440, "height": 2400}, accept_downloads=True).new_page()
            missing = [0]  # the browser asked for a media file the server no longer had
            page.on("response", lambda r: missing.__setitem__(0, missing[0] + ("/media/" in r.url and r.status == 404)))
            page.goto(f"{srv.url}/memory?model=mistral-7b-v0.1&seq=8192")
            page.wait_for_selector(READY, timeout=120_000)
            page.get_by_text("Save or load this scenario").click()
            button = page.get_by_role("button", name="Download scenario (JSON)")
            button.wait_for(state="visible", timeout=60_000)
            for t in threads:
                t.start()
            nav = page.locator('[data-testid="stSidebarNav"] a')
            for i in range(args.clicks):
                page.wait_for_selector(READY, timeout=120_000)
                time.sleep(0.3)
                if args.during == "switch":  # a whole run in progress: the browser still shows the button it had
                    nav.filter(has_text=("Training" if i % 2 == 0 else "Memory")).first.click()
                    time.sleep(0.05)
                try:
                    with page.expect_download(timeout=args.wait * 1000) as info:
                        button.click()
                    json.loads(Path(info.value.path()).read_text())
                    got += 1
                except PlaywrightTimeoutError:
                    lost += 1
                except PlaywrightError as exc:  # the browser began a download and dropped it
                    print(f"click {i}: {exc}", flush=True)
                    canceled += 1
                errors += page.locator('[data-testid="stDownloadButtonError"]').count()
            browser.close()
        stop.set()
        for t in threads:
            t.join(timeout=30)
    result = {"root": str(args.root), "during": args.during, "clicks": args.clicks, "files": got, "no_file": lost}
    print(json.dumps(result | {"canceled": canceled, "error_shown": errors, "media_404": missing[0], "busy_runs": runs[0]}))


if __name__ == "__main__":
    main()
