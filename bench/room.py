"""A room of people behind one address, through the nginx recipe (issue #25): deploy/nginx.conf in front of its app
processes, all on loopback.

N sessions (default 100) each open the Memory page through the proxy and move the context slider (4,096 <-> 8,192)
about every `--think` seconds (uniform 0.5x..1.5x), for `--seconds`. Each session keeps the proxy's planner_node
cookie, as a browser does, so it stays on one process. All sessions come from one address (LLMGP_TRUST_PROXY=1,
X-Forwarded-For set by the proxy to 127.0.0.1), as a room on venue Wi-Fi; the per-address session cap is raised to the
room's size.

Drivers:
  ws     (default) the browser's own protocol through the shipped recipe as it is (bench/ws_session.py): the page over
         HTTP for the proxy's cookie, then the WebSocket; a move is timed until the run's script_finished arrives.
  agent  Streamlit's agent API (one POST = one rerun, bench/load.py), which the shipped recipe refuses: the bench runs a
         copy of the recipe without that one block, and the app processes with the API on. Its JSON snapshot costs
         the server more than the browser protocol, and it answers before the run's last message is sent.

    python3 bench/room.py --sessions 100 --seconds 60 --think 2 [--processes 2] [--driver ws|agent]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import AgentSession, Stats, agent_worker, pct
from serve import Server, load_average
from ws_session import WsSession, mover

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


@contextmanager
def behind_recipe(processes: int, *extra: str, without_agent_block: bool = False) -> Iterator[tuple[int, list[Server]]]:
    """`processes` app servers (`extra`: their options) behind a real nginx running deploy/nginx.conf on loopback
    (tests/test_proxy.py's harness): the proxy's port and the servers, all stopped on exit. `without_agent_block`: a
    copy of the recipe less its block refusing the agent API, for the agent driver."""
    servers = [Server(*extra).start() for _ in range(processes)]
    tmp = Path(tempfile.mkdtemp(prefix="recipe-nginx-"))
    proc = None
    try:
        for srv in servers:
            srv.wait_healthy()
        if without_agent_block:
            import tests.test_proxy as recipe_test

            text = recipe_test.RECIPE.read_text()
            start = text.index("    location ^~ /_stcore/agent/")
            end = text.index("}", start) + 2
            recipe_test.RECIPE = tmp / "recipe.conf"
            recipe_test.RECIPE.write_text(text[:start] + text[end:])
        (tmp / "nginx").mkdir()
        proc, port = _nginx(tmp / "nginx", [s.port for s in servers])
        _wait(f"http://127.0.0.1:{port}/_stcore/health")
        yield port, servers
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
        for srv in servers:
            srv.stop()


async def _ws_room(port: int, args: argparse.Namespace, stats: Stats, ramp: float) -> None:
    """Every person of the room on one asyncio loop, over the browser's protocol through the proxy, after one warm-up
    first load; first loads are recorded apart (stats.creates), moves as reruns (stats.ok)."""
    from load import SEQ_VALUES

    warm = WsSession(port, cookie_from_proxy=True)
    await warm.open("memory")
    await warm.close()
    deadline = time.perf_counter() + args.seconds

    def opened(seconds: float, cookie: str) -> None:
        stats.creates.append(seconds)
        CookieSession.drawn.append(cookie)

    await asyncio.gather(
        *(
            mover(
                port,
                "memory",
                "seq",
                list(SEQ_VALUES),
                deadline=deadline,
                think_s=args.think,
                start_delay_s=ramp * i / args.sessions,
                rng=random.Random(i),
                on_open=opened,
                on_move=stats.ok,
                on_error=stats.error,
                cookie_from_proxy=True,
            )
            for i in range(args.sessions)
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--think", type=float, default=2.0)
    ap.add_argument("--processes", type=int, default=2, help="app processes (the recipe has 2; more need more upstreams)")
    ap.add_argument("--driver", choices=("ws", "agent"), default="ws")
    ap.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    os.environ["LLMGP_TRUST_PROXY"] = "1"
    if args.sessions > 128:  # the app's own cap per address (guard.MAX_SESSIONS_PER_CLIENT), as the recipe's limit_conn
        os.environ["LLMGP_MAX_SESSIONS_PER_CLIENT"] = str(args.sessions)
    extra = ("--server.enableAgentApi=true", f"--server.agentMaxSessions={args.sessions + 20}") if args.driver == "agent" else ()
    with behind_recipe(args.processes, *extra, without_agent_block=args.driver == "agent") as (port, servers):
        client_cpu0 = time.process_time()
        stats = Stats()
        ramp = min(args.think, args.seconds / 4)
        if args.driver == "agent":
            CookieSession(port, timeout=120).interact({})  # warm-up: one first load
            CookieSession.drawn.clear()
            deadline = time.perf_counter() + args.seconds
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
        else:
            cpu0 = [s.cpu_seconds() for s in servers]
            asyncio.run(_ws_room(port, args, stats, ramp))
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
            "driver": args.driver,
            "sessions_per_process": {n: CookieSession.drawn.count(n) for n in sorted(set(CookieSession.drawn))},
            "first_loads": len(stats.creates),
            "first_load_p95_ms": pct(sorted(stats.creates), 0.95) * 1e3 if stats.creates else None,
            "load_generator_cpu_s": time.process_time() - client_cpu0,
            "server_cpu_s": cpu,
            "load_average": load_average(),
        }
        print(json.dumps(result, indent=2))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
