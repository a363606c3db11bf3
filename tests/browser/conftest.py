"""A real Streamlit server on loopback and the system Chromium (Playwright)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: F401  (re-exported; the browser fixture lives there too)

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
READY = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def server():
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "streamlit",
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
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).read() == b"ok":
                break
        except OSError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("streamlit did not become healthy: " + (proc.stdout.read() if proc.stdout else ""))
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture
def open_page(browser, server):
    contexts = []

    def _open(path: str = "/", width: int = 1500, height: int = 2400, downloads: bool = False):
        ctx = browser.new_context(viewport={"width": width, "height": height}, accept_downloads=downloads)
        contexts.append(ctx)
        page = ctx.new_page()
        page.goto(server + path)
        wait_ready(page)
        return page

    yield _open
    for ctx in contexts:
        ctx.close()


def wait_ready(page, settle: float = 1.0) -> None:
    page.wait_for_selector(READY, timeout=60_000)
    time.sleep(settle)
    page.wait_for_selector(READY, timeout=60_000)


CHARTS_DRAWN = """([print, least]) => {
  if (print) window.dispatchEvent(new Event('beforeprint'));  // chart.js draws every chart still waiting to be seen
  const main = document.querySelector('[data-testid=stMain]');
  if (!main) return false;
  // a chart's element (its key starts with chart_) is on the page before its component is: Streamlit loads the
  // component's code once per browser, and until then the page's text is there but no chart (a fresh context on a
  // busy machine read an empty list of charts)
  const slots = [...main.querySelectorAll('[data-testid=stElementContainer][class*="st-key-chart_"]')];
  if (slots.some((slot) => !slot.querySelector('[data-testid=stBidiComponentRegular], .js-plotly-plot'))) return false;
  const hosts = [...main.querySelectorAll('[data-testid=stBidiComponentRegular]')];
  if (hosts.length < least) return false;  // the charts' elements are not there yet (every() of none is true)
  return hosts.every((host) => {
    const div = host.querySelector('div.llmgp-chart');
    if (!div || !div.llmgpLatest) return false;  // the chart's module has not run yet
    if (div.textContent.startsWith('This chart could not be drawn')) return true;
    if (div._fullLayout && div.dataset.digest === div.llmgpLatest.digest) return true;  // its latest figure is drawn
    if (print) return false;
    const box = div.getBoundingClientRect();
    return !(box.width > 0 && box.bottom > 0 && box.top < window.innerHeight);  // out of view: drawn when seen
  });
}"""


def charts_drawn(page, every: bool = False, timeout_ms: int = 60_000, least: int = 1) -> None:
    """Wait until at least `least` charts are on the page and each shows its latest figure (chart.js marks the digest
    it drew), those in view or, with `every`, all of them (drawn as for printing); a chart that says it could not be
    drawn counts. A read of chart titles or traces waits on this, not on time: on a busy machine a chart is drawn
    well after the run ends, and its element may not even be there when the script state first reads idle (a
    70B training Plan at 390 px once read no chart at all)."""
    page.wait_for_selector(READY, timeout=timeout_ms)
    page.wait_for_function(CHARTS_DRAWN, arg=[every, least], polling=100, timeout=timeout_ms)


def metrics(page, expected: int = 5) -> list[str]:
    """The metric values once all `expected` of them are rendered and the app is idle."""
    page.wait_for_function(f"document.querySelectorAll('[data-testid=\"stMetricValue\"]').length >= {expected}", timeout=60_000)
    wait_ready(page, settle=0.3)
    return [e.inner_text() for e in page.query_selector_all('[data-testid="stMetricValue"]')]
