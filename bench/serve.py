"""Start and stop `streamlit run app.py` on 127.0.0.1 for the UI benchmarks,
and read a process's resident memory."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
READY = '[data-testid="stApp"][data-test-script-state="notRunning"]'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`streamlit run app.py` on a free loopback port; `with Server() as srv:` stops it on exit."""

    def __init__(self, *extra: str, app: str = "app.py"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            app,
            "--server.headless",
            "true",
            "--server.port",
            str(self.port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
            *extra,
        ]
        self.proc: subprocess.Popen | None = None
        self.launched_at = 0.0
        self.log = ROOT / "artifacts" / f"streamlit-{self.port}.log"

    def start(self) -> Server:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.launched_at = time.perf_counter()
        self._log_fh = self.log.open("w")
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, stdout=self._log_fh, stderr=subprocess.STDOUT)
        return self

    def wait_healthy(self, timeout: float = 90) -> float:
        """Seconds from launch until /_stcore/health answers ok."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited ({self.proc.returncode}); see {self.log}")
            try:
                if urllib.request.urlopen(self.url + "/_stcore/health", timeout=2).read() == b"ok":
                    return time.perf_counter() - self.launched_at
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"streamlit not healthy after {timeout} s; see {self.log}")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "_log_fh", None):
            self._log_fh.close()

    def rss_bytes(self) -> int:
        return rss_bytes(self.proc.pid)

    def cpu_seconds(self) -> float:
        """User + system CPU time the server process has used."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> Server:
        self.start()
        self.wait_healthy()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def rss_bytes(pid: int) -> int:
    """Resident memory of a process (psutil when installed, else /proc/<pid>/status VmRSS)."""
    try:
        import psutil
    except ImportError:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmRSS for pid {pid}") from None
    return psutil.Process(pid).memory_info().rss


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])
