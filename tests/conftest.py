"""Test-wide settings. The app's per-session CPU budget (app_pages/shared/guard.py) would make a test process that
reruns the app hundreds of times wait for its budget like a hostile client; tests/test_guard.py tests it directly."""

import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("LLMGP_FAIR_SHARE", "0")
os.environ.setdefault("LLMGP_MAX_SESSIONS_PER_CLIENT", "0")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="session")
def browser():
    """The system Chromium through Playwright, one per test session (a second sync Playwright cannot start while one
    runs, so the browser tests and tests/test_proxy.py share this one)."""
    if not Path(CHROMIUM).exists() or shutil.which("chromium") is None:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing: .ci/run installs Debian's chromium")
        pytest.skip("system Chromium not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
