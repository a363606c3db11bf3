"""A hostile client against one `streamlit run app.py` on 127.0.0.1 (issue #8).

adversarial  One victim session moves the context slider on Memory about once a second, first alone (its quiet
             latency), then while 4 attacker sessions of another client (X-Forwarded-For 203.0.113.7) loop, with no
             pause, the most expensive page (GPU vs TPU) on a different uncached model and context every time. Reported: the victim's p50/p95 quiet and under attack,
             and how many reruns the attackers got. The victim's first moves (--warmup, default 2) are not timed: a
             session's first move also redraws the page's lower section and the second context is not cached yet, which
             made the quiet p95 of 30 moves read 25 ms in one run and 55 ms in the next. --driver ws: over the
             browser's protocol, one victim session quiet then attacked; --log PREFIX: the server's turn log and the
             victim's moves, to see where a slow move's time went (before its run, waiting for the turn, after it).
slowhub      One victim session moves the context slider on Memory about once a second, first alone, then while
             another session clicks "Fetch" in a loop against a loopback Hub that trickles its answer's headers one
             byte every 100 ms (`--hub trickle`) or answers after 4 s (`--hub slow`); the fetch's deadline is 5 s
             (core/model/hub.py). Reported: the victim's p50/p95 quiet and during the fetches.
memory       One client opens N sessions (default 130) on the worst link we can build: a config.json blob at the link
             budget (unique per session, so no cache shares it) plus a Compare set of four scenarios with configs
             (and with --prices a price list at its budget, unique too), on the Compare page (--pages: several in
             turn). Then the sessions stop; the server's resident memory is sampled every second until
             a minute after they expired (agent sessions expire `--ttl` seconds after their last call, like a closed
             tab after server.disconnectedSessionTTL).

Both drive real server sessions through Streamlit 1.67's agent API (one POST = one rerun). Server settings for a
run come from the environment (LLMGP_FAIR_SHARE, LLMGP_MAX_SESSIONS_PER_CLIENT; app_pages/shared/guard.py), so a
run with the defence off is the "before" number:

    python3 bench/abuse.py adversarial --seconds 45                  # defaults (fair share on)
    python3 bench/abuse.py adversarial --seconds 30 --settle 40      # the attackers past their starting allowances
    python3 bench/abuse.py adversarial --driver ws --seconds 30 --log /tmp/adv   # the browser's protocol, with the turn log
    LLMGP_HEAVY_SWITCH_INTERVAL_S=0 python3 bench/abuse.py adversarial --driver ws --seconds 30   # Python's 5 ms switch
    LLMGP_FAIR_SHARE=0 python3 bench/abuse.py adversarial --seconds 45
    python3 bench/abuse.py slowhub --seconds 20 --hub trickle
    python3 bench/abuse.py memory --sessions 130
    LLMGP_MAX_SESSIONS_PER_CLIENT=0 python3 bench/abuse.py memory --sessions 130
    LLMGP_MAX_SESSIONS_PER_CLIENT=0 python3 bench/abuse.py memory --sessions 240 --prices --pages compare,inference,training
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import random
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import AgentSession, pct
from serve import Server
from ws_session import WsSession

from app_pages.shared.fields import fields
from app_pages.shared.prices import MAX_PRICE_CHARS
from app_pages.shared.state import MAX_LINK_CONFIG_CHARS
from core.catalog.accelerators import load_accelerators
from core.catalog.presets import load_presets
from core.catalog.prices import COLUMNS


def token(text: str) -> str:
    return base64.urlsafe_b64encode(zlib.compress(text.encode(), 9)).decode()


def worst_config(i: int) -> str:
    """A config.json at the link budget: a real model's fields plus unique junk (defeats every cache)."""
    base = dict(load_presets()["deepseek-v3"].config or {})
    rng = random.Random(i)
    junk = {f"x{k}_{rng.random()}": "y" * 40 for k in range(600)}
    text = json.dumps({**base, "junk": junk})
    return text[: MAX_LINK_CONFIG_CHARS - 10] if len(text) > MAX_LINK_CONFIG_CHARS else text


def worst_prices(i: int) -> str:
    """A price list at the link budget (MAX_PRICE_CHARS), unique per session: rows for every accelerator of the
    catalog at 1, 2, 4 and 8 a node, from many providers (the serving and training options grow with the rows)."""
    rng = random.Random(i)
    ids = [a.id for a in load_accelerators()]
    lines = [",".join(COLUMNS)]
    k = 0
    while True:
        row = f"p{i}-{k % 50},i{k},{ids[k % len(ids)]},{(1, 2, 4, 8)[k % 4]},{rng.uniform(0.5, 40):.2f},,r{k % 7},false,2026-11-01,bench,"
        if sum(len(line) + 1 for line in lines) + len(row) + 1 > MAX_PRICE_CHARS:
            return "\n".join(lines) + "\n"
        lines.append(row)
        k += 1


def worst_link(i: int, prices: bool = False) -> dict[str, list[str]]:
    """The worst link: a config.json at its budget and a Compare set of four scenarios, each with a config; with
    `prices`, also a price list at its budget."""
    base = load_presets()["deepseek-v3"].config or {}
    saved = [{"name": f"s{k}", "scenario": {"model": {"hf_config": {**base, "pad": "z" * 50_000 + str(i)}}, "seq_len": 2048 * (k + 1)}} for k in range(4)]
    link = {"src": ["config"], "cfg": [token(worst_config(i))], "cmp": [token(json.dumps(saved, separators=(",", ":")))]}
    return {**link, "prc": [token(worst_prices(i))]} if prices else link


WARMUP = [2]  # the victim's untimed moves before its timed ones (--warmup)
_VICTIM_VALUES = [fields()["seq"].fmt(4096), fields()["seq"].fmt(8192)]


def victim(port: int, seconds: float, out: list[float], stop: threading.Event) -> None:
    sess = AgentSession(port, timeout=120, client=VICTIM_ADDRESS)
    sess.interact({})
    seq = fields()["seq"]
    values = [seq.fmt(4096), seq.fmt(8192)]
    for i in range(WARMUP[0]):  # untimed: a session's first move also redraws the lower section, the second value is cold
        sess.interact({"widget_state": {"seq": values[i % 2]}})
    i, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline and not stop.is_set():
        elapsed, _ = sess.interact({"widget_state": {"seq": values[i % 2]}})
        out.append(elapsed)
        i += 1
        time.sleep(random.uniform(0.5, 1.5))


# The agent API carries no peer address: clients are told apart as behind the reverse proxy of docs/DEPLOY.md, by
# X-Forwarded-For (the server runs with LLMGP_TRUST_PROXY=1). Documentation addresses (RFC 5737).
ATTACKER_ADDRESS = "203.0.113.7"
VICTIM_ADDRESS = "198.51.100.1"


def attacker(port: int, stop: threading.Event, counter: list[int], k: int) -> None:
    sess = AgentSession(port, timeout=300, client=ATTACKER_ADDRESS)  # one hostile client, several sessions
    sess.interact({"page": "gpu-vs-tpu"})
    model, seq = fields()["model"], fields()["seq"]
    rng = random.Random(k)
    while not stop.is_set():
        widget_state = {"model": model.fmt(rng.choice(model.options)), "seq": seq.fmt(rng.choice(seq.options))}
        try:
            sess.interact({"widget_state": widget_state})
            counter[0] += 1
        except Exception as exc:
            print("attacker:", str(exc)[:120], flush=True)
            time.sleep(0.5)


def p50_p95_ms(**latencies_s: list[float]) -> dict[str, float]:
    """{name_p50_ms, name_p95_ms} for each named list of latencies in seconds."""
    return {f"{name}_p{q}_ms": pct(values, q / 100) * 1e3 for name, values in latencies_s.items() for q in (50, 95)}


async def _ws_victim(port: int, proxy: bool = False) -> WsSession:
    """The victim over the browser's protocol, on Memory, past its untimed warm-up moves (as in victim())."""
    sess = WsSession(port, client=VICTIM_ADDRESS, cookie_from_proxy=proxy, source=VICTIM_SOURCE if proxy else None)
    await sess.open("memory")
    for i in range(WARMUP[0]):
        await sess.move("seq", _VICTIM_VALUES[i % 2])
        await asyncio.sleep(0.3)
    return sess


async def _ws_moves(sess: WsSession, seconds: float, out: list[float]) -> None:
    """The victim's timed moves: the context slider about once a second."""
    i, deadline = 0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        at = time.monotonic()
        out.append(await sess.move("seq", _VICTIM_VALUES[i % 2]))
        MOVES.append((round(at, 4), round(out[-1], 4)))
        i += 1
        await asyncio.sleep(random.uniform(0.5, 1.5))


async def _ws_attacker(port: int, stop: asyncio.Event, counter: list[int], k: int, proxy: bool = False, drawn: list[str] | None = None) -> None:
    """A loop over the browser's protocol: GPU vs TPU on another model and context the moment each run ends (no
    agent API pacing it)."""
    sess = WsSession(port, client=ATTACKER_ADDRESS, timeout=300, cookie_from_proxy=proxy, source=ATTACKER_SOURCE if proxy else None)
    await sess.open("gpu-vs-tpu")
    if drawn is not None:
        drawn.append(sess.cookie)
    model, seq = fields()["model"], fields()["seq"]
    rng = random.Random(k)
    while not stop.is_set():
        await sess.move("model", model.fmt(rng.choice(model.options)))
        counter[0] += 1
        await sess.move("seq", seq.fmt(rng.choice(seq.options)))
        counter[0] += 1
    await sess.close()


async def _ws_adversarial(port: int, servers: list[Server], args: argparse.Namespace) -> dict:
    """`port`: the app's, or the proxy's in front of `servers` (--proxy: the shipped recipe, each session drawn to a
    process by the proxy's cookie, clients told apart by their loopback source address)."""
    quiet: list[float] = []
    victim = await _ws_victim(port, args.proxy)  # one person: quiet first, then the attackers arrive
    await _ws_moves(victim, args.seconds, quiet)
    stop, counter, drawn = asyncio.Event(), [0], []
    attackers = [asyncio.create_task(_ws_attacker(port, stop, counter, k, args.proxy, drawn)) for k in range(args.attackers)]
    await asyncio.sleep(args.settle)
    cpu0 = sum(s.cpu_seconds() for s in servers)
    attacked: list[float] = []
    await _ws_moves(victim, args.seconds, attacked)
    cpu = sum(s.cpu_seconds() for s in servers) - cpu0
    await victim.close()
    victim_drawn = victim.cookie  # behind the proxy: the process it was drawn to
    stop.set()
    await asyncio.wait(attackers, timeout=60)
    return {"quiet": quiet, "attacked": attacked, "attacker_reruns": counter[0], "server_cpu_s": cpu, "attackers_drawn": drawn, "victim_drawn": victim_drawn}


MOVES: list[tuple[float, float]] = []  # the victim's moves over the WebSocket: (monotonic start, seconds), for --log

VICTIM_SOURCE, ATTACKER_SOURCE = "127.0.0.2", "127.0.0.3"  # behind the proxy: the peer address is the client


def _through_recipe(args: argparse.Namespace) -> dict:
    """The adversarial run through deploy/nginx.conf in front of its two app processes."""
    from room import behind_recipe

    with behind_recipe(2) as (port, servers):
        return asyncio.run(_ws_adversarial(port, servers, args))


def adversarial(args: argparse.Namespace) -> dict:
    os.environ["LLMGP_TRUST_PROXY"] = "1"  # clients told apart by X-Forwarded-For (the server inherits the environment)
    WARMUP[0] = args.warmup
    if args.log:
        Path(args.log + ".turns.jsonl").unlink(missing_ok=True)
        os.environ["LLMGP_TURN_LOG"] = str(Path(args.log + ".turns.jsonl").resolve())
    if args.driver == "ws":
        if args.proxy:
            out = _through_recipe(args)
        else:
            with Server() as srv:
                out = asyncio.run(_ws_adversarial(srv.port, [srv], args))
        if args.log:
            Path(args.log + ".moves.json").write_text(json.dumps(MOVES))
        return {
            "driver": "ws",
            "proxy": args.proxy,
            "attackers_drawn": out.get("attackers_drawn"),
            "victim_drawn": out.get("victim_drawn"),
            "fair_share": os.environ.get("LLMGP_FAIR_SHARE", "default (0.1)"),
            "attackers": args.attackers,
            "settle_s": args.settle,
            "seconds": args.seconds,
            **p50_p95_ms(quiet=out["quiet"], attack=out["attacked"]),
            "p95_ratio": pct(out["attacked"], 0.95) / pct(out["quiet"], 0.95),
            "attacker_reruns": out["attacker_reruns"],
            "server_cpu_s": out["server_cpu_s"],
        }
    with Server("--server.enableAgentApi=true", "--server.agentMaxSessions=200") as srv:
        warm = AgentSession(srv.port, timeout=120)
        warm.interact({})
        quiet: list[float] = []
        victim(srv.port, args.seconds, quiet, threading.Event())
        attacked: list[float] = []
        stop, counter = threading.Event(), [0]
        threads = [threading.Thread(target=attacker, args=(srv.port, stop, counter, k), daemon=True) for k in range(args.attackers)]
        for t in threads:
            t.start()
        time.sleep(args.settle)  # attackers past their first run (--settle 40: past their starting allowances too)
        cpu0 = srv.cpu_seconds()
        victim(srv.port, args.seconds, attacked, threading.Event())
        cpu = srv.cpu_seconds() - cpu0
        stop.set()
        for t in threads:
            t.join(timeout=60)
    return {
        "fair_share": os.environ.get("LLMGP_FAIR_SHARE", "default (0.1)"),
        "attackers": args.attackers,
        "settle_s": args.settle,
        "seconds": args.seconds,
        **p50_p95_ms(quiet=quiet, attack=attacked),
        "p95_ratio": pct(attacked, 0.95) / pct(quiet, 0.95),
        "attacker_reruns": counter[0],
        "server_cpu_s": cpu,
    }


class _SlowHub(BaseHTTPRequestHandler):
    """A Hub that never helps: `trickle` sends its status line and headers one byte every 100 ms, `slow` answers 404
    after 4 s."""

    mode = "trickle"

    def log_message(self, format, *args):  # quiet
        pass

    def do_GET(self) -> None:
        try:
            if self.mode == "slow":
                time.sleep(4)
                self.send_error(404)
                return
            for byte in b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 100_000:
                self.wfile.write(bytes([byte]))
                time.sleep(0.1)
        except OSError:
            pass  # the fetch hung up at its deadline


def slowhub(args: argparse.Namespace) -> dict:
    handler = type("Hub", (_SlowHub,), {"mode": args.hub})
    hub = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=hub.serve_forever, daemon=True).start()
    os.environ["LLMGP_HUB_URL"] = f"http://127.0.0.1:{hub.server_address[1]}"  # the server inherits the environment
    try:
        with Server("--server.enableAgentApi=true") as srv:
            AgentSession(srv.port, timeout=120).interact({})
            quiet: list[float] = []
            victim(srv.port, args.seconds, quiet, threading.Event())
            stop, fetches = threading.Event(), [0]

            def fetcher() -> None:
                sess = AgentSession(srv.port, timeout=120)
                sess.interact({"query_params": {"src": ["config"]}})
                sess.interact({"widget_state": {"hub_repo": "slow/model"}})  # enables the button
                while not stop.is_set():
                    sess.interact({"trigger": {"key": "hub_fetch"}})
                    fetches[0] += 1

            thread = threading.Thread(target=fetcher, daemon=True)
            thread.start()
            time.sleep(2)
            during: list[float] = []
            victim(srv.port, args.seconds, during, threading.Event())
            stop.set()
            thread.join(timeout=60)
    finally:
        hub.shutdown()
    return {
        "hub": args.hub,
        "seconds": args.seconds,
        **p50_p95_ms(quiet=quiet, during_fetches=during),
        "victim_moves": len(during),
        "fetches": fetches[0],
    }


def memory(args: argparse.Namespace) -> dict:
    ttl = args.ttl
    with Server("--server.enableAgentApi=true", f"--server.agentMaxSessions={args.sessions + 20}", f"--server.agentSessionTTL={ttl}") as srv:
        warm = AgentSession(srv.port, timeout=120)
        warm.interact({})
        idle = srv.rss_bytes()
        pages = args.pages.split(",")
        for page in pages:  # each page the sessions open, once, on a plain link: its modules and the catalogs loaded
            warm.interact({"page": page})
        warm_pages = srv.rss_bytes()
        samples: list[tuple[float, float]] = []
        stop = threading.Event()
        t0 = time.perf_counter()

        def sample() -> None:
            while not stop.wait(1.0):
                samples.append((time.perf_counter() - t0, srv.rss_bytes() / 2**20))

        threading.Thread(target=sample, daemon=True).start()
        refused = errors = 0
        for i in range(args.sessions):
            page = pages[i % len(pages)]
            try:
                _, data = AgentSession(srv.port, timeout=120).interact({"page": page, "query_params": worst_link(i, prices=args.prices)})
                if "Too many open sessions" in json.dumps(data.get("tree"))[:100_000]:
                    refused += 1
            except Exception as exc:
                errors += 1
                print("open:", str(exc)[:160], flush=True)
            time.sleep(args.open_seconds / args.sessions)
        opened_at = time.perf_counter() - t0
        peak_open = max(m for _, m in samples) if samples else srv.rss_bytes() / 2**20
        time.sleep(ttl + 60)
        stop.set()
        end = srv.rss_bytes()
    return {
        "sessions": args.sessions,
        "pages": pages,
        "prices": args.prices,
        "cap": os.environ.get("LLMGP_MAX_SESSIONS_PER_CLIENT", "default (64)"),
        "refused": refused,
        "errors": errors,
        "idle_mb": idle / 2**20,
        "warm_pages_mb": warm_pages / 2**20,
        "cache_budget_mb": os.environ.get("LLMGP_CACHE_MB", "default"),
        "peak_mb": max(m for _, m in samples),
        "peak_while_opening_mb": peak_open,
        "opened_in_s": opened_at,
        "mb_one_minute_after_expiry": end / 2**20,
        "expiry_ttl_s": ttl,
        "samples": samples[:: max(1, len(samples) // 40)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    a = sub.add_parser("adversarial")
    a.add_argument("--seconds", type=float, default=45)
    a.add_argument("--attackers", type=int, default=4)
    a.add_argument("--settle", type=float, default=3, help="seconds the attackers loop before the victim's timed moves")
    a.add_argument("--driver", choices=("agent", "ws"), default="agent", help="ws: the browser's protocol (bench/ws_session.py), loops unpaced")
    a.add_argument("--proxy", action="store_true", help="with --driver ws: through deploy/nginx.conf and its two app processes")
    a.add_argument("--warmup", type=int, default=2, help="the victim's untimed moves first (its first move also redraws the lower section; the second context is cold)")
    a.add_argument("--log", metavar="PREFIX", help="with --driver ws: PREFIX.turns.jsonl (the server's turn log, LLMGP_TURN_LOG), PREFIX.moves.json (the victim's)")
    h = sub.add_parser("slowhub")
    h.add_argument("--seconds", type=float, default=20)
    h.add_argument("--hub", choices=("trickle", "slow"), default="trickle")
    m = sub.add_parser("memory")
    m.add_argument("--sessions", type=int, default=130)
    m.add_argument("--open-seconds", type=float, default=40)
    m.add_argument("--ttl", type=float, default=30)
    m.add_argument("--pages", default="compare", help="pages the sessions open, in turn (comma-separated url paths)")
    m.add_argument("--prices", action="store_true", help="links also carry a price list at its budget, unique per session")
    for p in (a, h, m):
        p.add_argument("--json", metavar="FILE")
    args = ap.parse_args()
    result = {"adversarial": adversarial, "slowhub": slowhub, "memory": memory}[args.mode](args)
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
