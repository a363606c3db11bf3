"""Test-wide settings. The app's per-session CPU budget (app_pages/shared/guard.py) would make a test process that
reruns the app hundreds of times wait for its budget like a hostile client; tests/test_guard.py tests it directly."""

import os

os.environ.setdefault("LLMGP_FAIR_SHARE", "0")
os.environ.setdefault("LLMGP_MAX_SESSIONS_PER_CLIENT", "0")
