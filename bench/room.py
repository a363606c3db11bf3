"""A room of people behind one address, through the nginx recipe (issue #25): deploy/nginx.conf in front of its app
processes, all on loopback.

N sessions (default 100) each open the Memory page through the proxy and move the context slider (4,096 <-> 8,192)
about every `--think` seconds (uniform 0.5x..1.5x), for `--seconds`. Each session keeps the proxy's planner_node
cookie, as a browser does, so it stays on one process. Driven through Streamlit's agent API (one POST = one rerun,
bench/load.py), which the shipped recipe refuses: the bench runs a copy of the recipe without that one block, and the
app processes with the API on. All sessions come from one address (LLMGP_TRUST_PROXY=1, X-Forwarded-For set by the
proxy to 127.0.0.1), as a room on venue Wi-Fi; the per-address session cap is raised to the room's size.

    python3 bench/room.py --sessions 100 --seconds 60 --think 2 [--processes 2]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import AgentSession, Stats, agent_worker, pct
from serve import Server, load_average

from tests.test_proxy import _nginx, _wait


class CookieSession(AgentSession):
    """An agent session that keeps the proxy's cookie (its process), as a browser does."""

    drawn: ClassVar[list[str]] = []  # the cookie each session was given: how the sessions spread over the processes

    def _post(self, payload: str):
        elapsed, resp, raw = super()._post(payload)
        cookie = resp.getheader("Set-Cookie")
        if cookie:
            self.headers["Cookie"] = cookie.split(";")[0]
            CookieSession.drawn.append(self.headers["Cookie"])
        return elapsed, resp, raw


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--think", type=float, default=2.0)
    ap.add_argument("--processes", type=int, default=2, help="app processes (the recipe has 2; more need more upstreams)")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    os.environ.update(LLMGP_TRUST_PROXY="1", LLMGP_MAX_SESSIONS_PER_CLIENT=str(max(64, args.sessions)))
    extra = ("--server.enableAgentApi=true", f"--server.agentMaxSessions={args.sessions + 20}")
    servers = [Server(*extra).start() for _ in range(args.processes)]
    tmp = Path(tempfile.mkdtemp(prefix="room-nginx-"))
    proc = None
    try:
        for srv in servers:
            srv.wait_healthy()
        recipe = Path(__file__).resolve().parent.parent / "deploy" / "nginx.conf"
        text = recipe.read_text()
        start = text.index("    location ^~ /_stcore/agent/")
        end = text.index("}", start) + 2
        import tests.test_proxy as recipe_test

        recipe_test.RECIPE = tmp / "recipe.conf"  # the recipe less its agent API block
        recipe_test.RECIPE.write_text(text[:start] + text[end:])
        (tmp / "nginx").mkdir()
        proc, port = _nginx(tmp / "nginx", [s.port for s in servers])
        _wait(f"http://127.0.0.1:{port}/_stcore/health")
        CookieSession(port, timeout=120).interact({})  # warm-up: one first load
        CookieSession.drawn.clear()
        stats = Stats()
        deadline = time.perf_counter() + args.seconds
        ramp = min(args.think, args.seconds / 4)
        cpu0 = [s.cpu_seconds() for s in servers]
        threads = [
            threading.Thread(
                target=agent_worker, args=(port, "memory", deadline, args.think, stats, ramp * i / args.sessions, random.Random(i), CookieSession), daemon=True
            )
            for i in range(args.sessions)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=args.seconds + 180)
        cpu = [s.cpu_seconds() - c for s, c in zip(servers, cpu0, strict=True)]
        lat = sorted(stats.latencies)
        result = {
            "sessions": args.sessions,
            "processes": args.processes,
            "seconds": args.seconds,
            "think_s": args.think,
            "reruns": len(lat),
            "errors": len(stats.errors),
            "first_errors": stats.errors[:5],
            "p50_ms": pct(lat, 0.5) * 1e3,
            "p95_ms": pct(lat, 0.95) * 1e3,
            "p99_ms": pct(lat, 0.99) * 1e3,
            "max_ms": lat[-1] * 1e3 if lat else None,
            "sessions_per_process": {n: CookieSession.drawn.count(n) for n in sorted(set(CookieSession.drawn))},
            "server_cpu_s": cpu,
            "load_average": load_average(),
        }
        print(json.dumps(result, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        for srv in servers:
            srv.stop()


if __name__ == "__main__":
    main()
