"""Sharing one server fairly (hosting): a session that keeps the CPU busy
waits its turn, and one client cannot open an unbounded number of sessions.

- Turns: scripts run one at a time (RUN_SLOTS; Python's GIL runs one at a
  time anyway, and sharing it by time slices makes every run as slow as the
  sum of all), and the waiting session that used the least CPU lately goes
  first. A person moving a slider waits at most for the one run in progress,
  not for every run a busy client queued, and a long run hands the turn over
  at a few points (yield_turn: before drawing each chart it built, between
  pieces of the GPU vs TPU comparison), never inside a cached function
  (cache.computing).
- CPU: a person moving sliders uses a few per cent of a core; a loop uses all
  it can get. Each session has an allowance of its own (START_S of CPU for
  its first page loads, refilled by PERSONAL_SHARE core-seconds per second up
  to BURST_S): while it lasts, the session's runs never wait, whoever else
  shares its address. A session that spends beyond it (a loop, or a person
  clicking through the heaviest pages at speed) is heavy until its refill has
  paid the excess back (at most BURST_S of debt). The refill runs only while
  the session is idle between runs, so a loop, never idle, stays heavy. Heavy
  sessions draw on one bucket per client (refill FAIR_SHARE, up to BURST_S),
  sleep before their next run while it is overdrawn (sleeping releases the
  GIL, so everybody else runs meanwhile) and queue behind every light
  session. All light sessions of one address together may use ROOM_SHARE
  (core-seconds per second, bursts of ROOM_BURST_S); beyond it every session
  of that address is heavy. So a room of people behind one address (a
  workshop on venue Wi-Fi, an office NAT) is not throttled as one person,
  tabs opened to loop get no more than before sessions had allowances (their
  client's budget) beyond their small starting allowances, and many tabs
  paced to stay light get ROOM_SHARE together (tests/test_guard.py).
- Garbage collection: Python's full collections scan every tracked object and
  land on whichever run happens to allocate at the time; with the catalogs,
  plotly's validators and pydantic's schemas tracked they took 60-160 ms on
  this machine, about one person's run in twenty under load. So after the
  first run has imported the pages and loaded the catalogs, those long-lived
  objects (about 160,000) are frozen out of the collector's reach (gc.freeze:
  a full collection then takes about 10 ms), and full collections no longer
  start on their own: a background thread runs one when no script is running
  and nobody waits (or after FULL_GC_MAX_INTERVAL_S regardless), taking the
  turn like a run so none starts meanwhile.
- The interpreter lock: CPython hands its lock from a thread that computes to
  one that asks for it only after the switch interval (5 ms by default). A
  move's way through the server (the event loop reading the WebSocket, the
  run's thread starting, its messages and script_finished going out) takes
  the lock dozens of times; behind a loop's run that holds the turn and
  computes, each take waited up to 5 ms, so a person's 22 ms move took 70-80
  ms at p95 (bench/abuse.py adversarial --log: the time went before and
  after the person's run, not in the turn queue). While a heavy session's
  run holds the turn the interval is HEAVY_SWITCH_INTERVAL_S (0.2 ms), so
  everyone else's threads get the lock within that; while a light one's
  does, Python's 5 ms stays: at 0.2 ms for every run, a room of 100 light
  sessions switched so often that its p95 grew from 150-180 to 250-440 ms
  (docs/SERVER.md section 7).
- Waits: a run that waits on the network gives its turn up meanwhile
  (released(): the Hub fetch), so one slow far end holds up only its own
  session.
- Sessions: a client (its address, or behind LLMGP_TRUST_PROXY=N trusted
  proxies the N-th X-Forwarded-For hop from the right: docs/DEPLOY.md) may have
  at most MAX_SESSIONS_PER_CLIENT sessions active in the last
  ACTIVE_WINDOW_S seconds; a session beyond that gets one line and no work.

Settings come from the environment so that a deployment can tune them:
LLMGP_HEAVY_SWITCH_INTERVAL_S (the interpreter's switch interval while a heavy
run holds the turn), LLMGP_TURN_LOG (a file: one JSON line per run, what it
waited for and where it handed the turn over; for bench/abuse.py --log),
LLMGP_FAIR_SHARE (0 = no CPU budget), LLMGP_BURST_S, LLMGP_ROOM_SHARE, LLMGP_PERSONAL_SHARE (0 =
no allowance of a session's own: every run draws on its client's bucket, as
one person behind each address), LLMGP_RUN_SLOTS
(0 = no turns), LLMGP_MAX_SESSIONS_PER_CLIENT (0 = no cap), LLMGP_GC_FREEZE
(0 = no freeze).
"""

from __future__ import annotations

import ctypes
import gc
import heapq
import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import streamlit as st

from app_pages.shared import cache, st_private


def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= 0 else default


FAIR_SHARE = _env_float("LLMGP_FAIR_SHARE", 0.1)  # core-seconds per second a client's heavy sessions share (0 = off)
# a session's own allowance: a person moving a slider every few seconds uses 0.01-0.03 (runs of 30-60 ms)
PERSONAL_SHARE = _env_float("LLMGP_PERSONAL_SHARE", 0.05)
START_S = 0.5  # a new session's own allowance: a first page load and a few moves
# what all light sessions of one address may use together: a room of 30 people used 0.4-0.6 (bench/load.py)
ROOM_SHARE = _env_float("LLMGP_ROOM_SHARE", 0.8)
ROOM_BURST_S = 10.0
BURST_S = _env_float("LLMGP_BURST_S", 3.0)  # core-seconds spent at once, in each bucket (a minute of slider moving)
RUN_SLOTS = int(_env_float("LLMGP_RUN_SLOTS", 1))  # scripts running at once (0 = no turns)
MAX_TURN_WAIT_S = 20.0  # a run waits at most this long for its turn
MAX_WAIT_S = 3.0  # longest wait before one run
MAX_SESSIONS_PER_CLIENT = int(_env_float("LLMGP_MAX_SESSIONS_PER_CLIENT", 128))  # a workshop room of 100 behind one address
ACTIVE_WINDOW_S = 120.0
# Proxies in front of the app, each adding the address it saw to X-Forwarded-For (0: none, trust no header). The
# client is the address the outermost trusted proxy added: the TRUSTED_PROXIES-th from the right. The shipped nginx
# replaces the header with the one address it saw (1); Google's HTTPS load balancer appends the client's and its own
# (2). The first hop, which this took before stop 50, is whatever the client sent where a proxy appends (a fresh fake
# address, a fresh budget: stop 50's hosting review).
TRUSTED_PROXIES = int(min(_env_float("LLMGP_TRUST_PROXY", 0), 16))  # an absurd or non-numeric value: as set or none
TRUST_PROXY = TRUSTED_PROXIES > 0
FREEZE_AFTER_FIRST_RUN = os.environ.get("LLMGP_GC_FREEZE", "1") != "0"  # 0 = leave the collector as Python has it
_MAX_TRACKED = 10_000
TURN_LOG = os.environ.get("LLMGP_TURN_LOG", "")
SWITCH_INTERVAL_S = sys.getswitchinterval()  # Python's own (5 ms): while nobody or a light run holds the turn
HEAVY_SWITCH_INTERVAL_S = _env_float("LLMGP_HEAVY_SWITCH_INTERVAL_S", 0.0002) or SWITCH_INTERVAL_S  # 0: Python's own


@dataclass
class _Bucket:
    """A token bucket of CPU seconds: a client's heavy budget or its room (all its sessions share each)."""

    tokens: float
    updated: float

    def refill(self, now: float, rate: float, cap: float) -> None:
        self.tokens = min(cap, self.tokens + (now - self.updated) * rate)
        self.updated = now


@dataclass
class _Session(_Bucket):
    """One browser tab: its own CPU allowance (tokens <= 0: heavy, drawing on the client's bucket) and its client."""

    client: str = ""
    last_run: float = 0.0
    light: bool = True  # as admitted for the run in progress


_lock = threading.Lock()
_buckets: dict[str, _Bucket] = {}  # by client: what its heavy sessions share
_rooms: dict[str, _Bucket] = {}  # by client: what its light sessions use together
_sessions: dict[str, _Session] = {}  # by session id
_turns = threading.Condition()
_running = 0
_queue: list[tuple[float, int]] = []  # (priority, ticket): lower goes first
_tickets = itertools.count()
_holders: set[int] = set()  # thread ids holding a slot


def _take_turn(priority: float, heavy: bool = False) -> None:
    """Wait until no more than RUN_SLOTS - 1 scripts run and no waiting session has a better priority. A heavy run
    holds the turn with the short switch interval (the module's docstring)."""
    global _running
    if not RUN_SLOTS:
        return
    _local.priority, _local.heavy = priority, heavy
    ticket = next(_tickets)
    entry = (priority, ticket)
    asked = time.monotonic()
    deadline = asked + MAX_TURN_WAIT_S
    with _turns:
        heapq.heappush(_queue, entry)
        while (_running >= RUN_SLOTS or _queue[0] != entry) and time.monotonic() < deadline:
            _turns.wait(timeout=0.25)
        _queue.remove(entry)
        heapq.heapify(_queue)
        _running += 1
        _holders.add(threading.get_ident())
        sys.setswitchinterval(HEAVY_SWITCH_INTERVAL_S if heavy else SWITCH_INTERVAL_S)
        _turns.notify_all()
    _log_event("turn", asked)


_local = threading.local()


def _inside_cached_function() -> bool:
    """Whether this thread is computing a cached value (every cache is a shared_cache, which marks its computations:
    cache.computing). Streamlit then holds that value's lock, and the session a turn would go to may ask for the
    same value (a room on one link asks for the same ones): it would wait for the lock while holding the turn, and
    this run for the turn, until MAX_TURN_WAIT_S."""
    return cache.computing()


def yield_turn() -> None:
    """A point in a long run where a waiting session with a better priority (a person, not a loop) may go first:
    the turn is handed over and taken back. Keeps a busy client's long runs from holding everybody else up.
    Does nothing inside a cached function (see _inside_cached_function): call it between cached calls."""
    if not RUN_SLOTS or threading.get_ident() not in _holders or _inside_cached_function():
        return
    with _turns:
        waiting_better = bool(_queue) and _queue[0][0] < getattr(_local, "priority", 0.0)
    if waiting_better:
        _end_turn()
        _log_event("handed", time.monotonic())
        _take_turn_again()
    elif TURN_LOG:
        _log_event("point", time.monotonic())


@contextmanager
def released() -> Iterator[None]:
    """Run the block without the turn: around a wait on the network (the Hub fetch, whose deadline is 5 s), which
    uses no CPU and would otherwise stop every other session for as long as the far end takes. The turn is taken
    back afterwards with the run's priority (the run goes on as before); the block must not touch what turns protect
    beyond its own session. Inside a cached function the turn is kept (see _inside_cached_function)."""
    if not RUN_SLOTS or threading.get_ident() not in _holders or _inside_cached_function():
        yield
        return
    _end_turn()
    try:
        yield
    finally:
        _take_turn_again()


def _take_turn_again() -> None:
    """Take the turn back with the priority and weight this run was admitted with (after a hand-over or a wait)."""
    _take_turn(getattr(_local, "priority", 0.0), getattr(_local, "heavy", False))


def _log_event(kind: str, at: float) -> None:
    """With LLMGP_TURN_LOG: note a moment of this run (turn: asked for the turn at `at`, got it now; handed: gave it
    over at a point; point: a hand-over point where nobody better waited)."""
    events = getattr(_local, "events", None) if TURN_LOG else None
    if events is not None:
        events.append((kind, round(at, 4), round(time.monotonic(), 4)))


def _write_log(sid: str | None, used_s: float) -> None:
    events = getattr(_local, "events", None)
    if not TURN_LOG or events is None:
        return
    rec = _sessions.get(sid or "")
    line = {"sid": (sid or "")[:8], "client": rec.client if rec else "", "light": rec.light if rec else None}
    line |= {"started": _local.started, "ended": round(time.monotonic(), 4), "cpu_s": round(used_s, 4), "events": events}
    _local.events = None
    _append_log(line)


def _append_log(line: dict) -> None:
    try:
        with open(TURN_LOG, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
    except OSError:
        pass


def _end_turn() -> None:
    global _running
    idle = False
    with _turns:
        if threading.get_ident() in _holders:
            _holders.discard(threading.get_ident())
            _running -= 1
            sys.setswitchinterval(SWITCH_INTERVAL_S)
            _turns.notify_all()
            idle = _running == 0 and not _queue
    if idle and _frozen.is_set() and _trim_due(time.monotonic()):
        _idle_now.set()  # the collector's chance to trim now, not at its next tick (which may find a run in progress)


def forwarded_client(header: str, proxies: int) -> str | None:
    """The client's address in an X-Forwarded-For header behind `proxies` trusted proxies that each add the address
    they saw: the proxies-th hop from the right (the leftmost where fewer are listed); None for an empty header."""
    hops = [h.strip() for h in header.split(",") if h.strip()]
    if not hops or proxies < 1:
        return None
    return hops[max(0, len(hops) - proxies)][:64]


def client_key() -> str:
    """Who is asking: the address the outermost trusted proxy saw (forwarded_client), else the peer address."""
    try:
        if TRUST_PROXY:
            if (hop := forwarded_client(st.context.headers.get("X-Forwarded-For", ""), TRUSTED_PROXIES)) is not None:
                return hop
        return str(st.context.ip_address or "unknown")[:64]
    except Exception:  # no request context (AppTest, bare mode)
        return "unknown"


def _prune(now: float) -> None:
    if len(_sessions) > _MAX_TRACKED:
        for sid in [s for s, rec in _sessions.items() if now - rec.last_run > ACTIVE_WINDOW_S]:
            del _sessions[sid]
        live = {rec.client for rec in _sessions.values()}
        for client in [c for c in _buckets if c not in live]:
            del _buckets[client]
            _rooms.pop(client, None)


def _admit(sid: str, client: str, now: float) -> tuple[float, float] | None:
    """A run of session `sid` asks to start at `now`: (seconds it waits first, its priority in the turn queue), or
    None when its client is over the session cap. A session's own allowance refills only over the time it was idle
    since its last run (not while it waits or runs): a loop held back by its client's empty bucket earns nothing
    back, so it stays heavy."""
    with _lock:
        _prune(now)
        rec = _sessions.get(sid)
        if rec is None:
            active = sum(1 for r in _sessions.values() if r.client == client and now - r.last_run < ACTIVE_WINDOW_S)
            if MAX_SESSIONS_PER_CLIENT and active >= MAX_SESSIONS_PER_CLIENT:
                return None
            rec = _sessions[sid] = _Session(min(START_S, BURST_S) if PERSONAL_SHARE else 0.0, now, client, now)
        rec.last_run = now
        rec.refill(now, PERSONAL_SHARE, BURST_S)
        bucket = _buckets.setdefault(rec.client, _Bucket(BURST_S, now))
        bucket.refill(now, FAIR_SHARE, BURST_S)
        room = _rooms.setdefault(rec.client, _Bucket(ROOM_BURST_S, now))
        room.refill(now, ROOM_SHARE, ROOM_BURST_S)
        rec.light = (rec.tokens > 0 and room.tokens > 0) or not FAIR_SHARE
        if rec.light:  # never waits; the least spent goes first, and a busy address after a quiet one
            return 0.0, -rec.tokens - room.tokens / ROOM_BURST_S
        # heavy: after every light session (the client with the most budget left first), and waits while the
        # client's bucket is overdrawn
        wait = min(MAX_WAIT_S, -bucket.tokens / FAIR_SHARE) if bucket.tokens < 0 else 0.0
        return wait, BURST_S - bucket.tokens


def _charge(sid: str, used_s: float, now: float) -> None:
    """A run of `sid` ended at `now` having used `used_s` of CPU: a light run's own allowance pays what it can (also
    counted against its address's room), the client's bucket the rest; the session's debt is bounded by BURST_S;
    idle time counts from here."""
    with _lock:
        rec = _sessions.get(sid)
        bucket = _buckets.get(rec.client) if rec is not None else None
        room = _rooms.get(rec.client) if rec is not None else None
        if rec is None or bucket is None or room is None:
            return
        own = max(0.0, min(used_s, rec.tokens)) if rec.light else 0.0
        room.tokens -= own
        rec.tokens = max(-BURST_S, rec.tokens - used_s)
        rec.updated = now
        bucket.tokens -= used_s - own


def before_run() -> float:
    """Call at the top of every run: stops a session over the client cap; a heavy session (its own allowance spent)
    waits while its client's shared bucket is empty, and queues behind light ones. Returns the thread CPU clock to
    hand to after_run()."""
    sid = st_private.session_id()
    priority, heavy = 0.0, False
    if TURN_LOG:
        _local.events, _local.started = [], round(time.monotonic(), 4)
    if sid is not None:
        client = _sessions[sid].client if sid in _sessions else client_key()
        admitted = _admit(sid, client, time.monotonic())
        if admitted is None:
            st.error(f"Too many open sessions from your address (more than {MAX_SESSIONS_PER_CLIENT}). Close some tabs and reload.")
            st.stop()
            return time.thread_time()  # not reached (st.stop raises); keeps the types plain
        wait, priority = admitted
        heavy = not _sessions[sid].light
        if wait > 0:
            time.sleep(wait)
    _take_turn(priority, heavy)
    return time.thread_time()


_frozen = threading.Event()
FULL_GC_EVERY_S = 5.0  # an idle moment is used for a full collection at most this often
FULL_GC_MAX_INTERVAL_S = 60.0  # and one runs at least this often, idle or not
_NO_AUTO_FULL_GC = 1_000_000  # gc threshold2: young collections as usual, full ones only from _collector


def _freeze_long_lived() -> None:
    """Once per process, after the first run: collect, freeze what survives (modules, catalogs, validators), and
    hand full collections to the background collector."""
    with _lock:
        if _frozen.is_set():
            return
        _frozen.set()
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, _NO_AUTO_FULL_GC)
    threading.Thread(target=_collector, name="llmgp-gc", daemon=True).start()


def _find_malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim (https://man7.org/linux/man-pages/man3/malloc_trim.3.html), or None on another C library."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_malloc_trim = _find_malloc_trim()
TRIM_EVERY_S = 30.0  # freed memory is handed back to the system at least this often when idle (~30 ms at 300 MB)
# and sooner, but at most every TRIM_SOONEST_S, once the resident size has grown TRIM_GROWTH_BYTES over what the last
# trim left: sessions opened back to back otherwise saw the resident size climb ~190 MB between two trims 100 s apart
# (bench/abuse.py memory, docs/SERVER.md section 4, round 6)
TRIM_SOONEST_S = 5.0
TRIM_GROWTH_BYTES = 32 * 2**20
_last_trim = [0.0]
_rss_after_trim = [0]


def resident_bytes() -> int:
    """This process's resident size from /proc/self/statm (Linux), 0 where there is none."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _trim_due(now: float) -> bool:
    """TRIM_EVERY_S since the last trim, or TRIM_SOONEST_S and grown TRIM_GROWTH_BYTES (reads /proc only then)."""
    since = now - _last_trim[0]
    return since > TRIM_EVERY_S or (since > TRIM_SOONEST_S and resident_bytes() - _rss_after_trim[0] > TRIM_GROWTH_BYTES)


def collect_if_idle(overdue: bool = False) -> bool:
    """One full collection when no script runs and nobody waits (or when overdue), holding the turn meanwhile. When
    idle, every TRIM_EVERY_S or sooner once the process has grown (_trim_due), glibc is also asked to hand freed memory
    back to the system (malloc_trim):
    the objects of expired sessions are freed, but glibc keeps the pages of its heap that still hold a live object
    here and there, so the resident memory stayed where the sessions took it (issue #25). Waiting for a quieter
    moment (0.25 s after the last run's end, whose messages are still going out) was tried and left out: no p95 change
    was found for it, and sessions opened back to back would go a minute between collections (docs/SERVER.md
    section 7, round 5)."""
    global _running
    with _turns:
        if not overdue and (_running or _queue):
            return False
        _running += 1  # no run starts during the collection
    began = time.monotonic()
    try:
        gc.collect()
        if not overdue and _malloc_trim is not None and _trim_due(time.monotonic()):
            _malloc_trim(0)
            _last_trim[0] = time.monotonic()
            _rss_after_trim[0] = resident_bytes()
    finally:
        with _turns:
            _running -= 1
            _turns.notify_all()
        if TURN_LOG:
            _append_log({"gc": True, "started": round(began, 4), "ended": round(time.monotonic(), 4), "overdue": overdue})
    return True


_idle_now = threading.Event()  # set by a run's end when the process has grown enough to trim (_trim_due)


def _collector() -> None:
    last = time.monotonic()
    while True:
        _idle_now.wait(FULL_GC_EVERY_S)
        _idle_now.clear()
        if collect_if_idle(overdue=time.monotonic() - last > FULL_GC_MAX_INTERVAL_S):
            last = time.monotonic()


def after_run(started_cpu: float) -> None:
    """Call when the run ends (also after st.stop / st.rerun): charge the CPU the run used to the session's own
    allowance, and what that does not cover to its client's bucket."""
    _end_turn()
    if not _frozen.is_set() and FREEZE_AFTER_FIRST_RUN:
        _freeze_long_lived()
    sid = st_private.session_id()
    used_s = max(0.0, time.thread_time() - started_cpu)
    _write_log(sid, used_s)
    if sid is None or not FAIR_SHARE:
        return
    _charge(sid, used_s, time.monotonic())


@contextmanager
def turn() -> Iterator[None]:
    """before_run() ... after_run() around a run. Re-entrant in a thread: the app wraps its whole run and the page's
    fragment wraps itself (app.py), so a full run is charged once and a fragment-only run, which skips the app's
    top level, is charged too."""
    if getattr(_local, "in_turn", False):
        yield
        return
    _local.in_turn = True
    try:
        started = before_run()
        try:
            yield
        finally:
            after_run(started)
    finally:
        _local.in_turn = False
