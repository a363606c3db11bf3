"""The fair-share guard (app_pages/shared/guard.py): turns go to the session that used the least CPU, a session over
its own allowance and its client's budget waits, people sharing an address are not throttled as one, a client over
its session cap is refused, and a run always gives its turn back."""

from __future__ import annotations

import heapq
import itertools
import threading
import time

import pytest

from app_pages.shared import guard
from app_pages.shared.cache import shared_cache

COLLECT_IF_IDLE = guard.collect_if_idle


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    # a collector thread started by an earlier AppTest in this process must not take turns during these tests
    monkeypatch.setattr(guard, "collect_if_idle", lambda overdue=False: False)
    monkeypatch.setattr(guard, "_buckets", {})
    monkeypatch.setattr(guard, "_rooms", {})
    monkeypatch.setattr(guard, "_sessions", {})
    monkeypatch.setattr(guard, "_queue", [])
    monkeypatch.setattr(guard, "_holders", set())
    monkeypatch.setattr(guard, "_running", 0)
    monkeypatch.setattr(guard, "RUN_SLOTS", 1)
    # the budgets as deployed (the test suite switches the CPU budget off for the pages: tests/conftest.py)
    monkeypatch.setattr(guard, "FAIR_SHARE", 0.1)
    monkeypatch.setattr(guard, "PERSONAL_SHARE", 0.05)
    monkeypatch.setattr(guard, "BURST_S", 3.0)
    monkeypatch.setattr(guard, "ROOM_SHARE", 0.8)
    yield


def test_the_waiting_session_with_the_most_budget_goes_first():
    order: list[str] = []
    guard._take_turn(0.0)  # someone is running
    started = threading.Event()

    def waiter(name: str, priority: float) -> None:
        started.set()
        guard._take_turn(priority)
        order.append(name)
        guard._end_turn()

    busy = threading.Thread(target=waiter, args=("busy client", 5.0))  # spent its budget: negative tokens -> high number
    busy.start()
    time.sleep(0.1)
    person = threading.Thread(target=waiter, args=("person", -3.0))  # full bucket
    person.start()
    time.sleep(0.1)
    guard._end_turn()
    busy.join(5)
    person.join(5)
    assert order == ["person", "busy client"]
    assert guard._running == 0 and not guard._queue


def test_a_turn_is_given_back_even_when_the_run_fails():
    guard._take_turn(0.0)
    try:
        raise RuntimeError("the page failed")
    except RuntimeError:
        pass
    finally:
        guard._end_turn()
    assert guard._running == 0
    guard._end_turn()  # a second end is harmless
    assert guard._running == 0


def test_a_heavy_session_waits_in_proportion_to_its_clients_overdraft(monkeypatch):
    monkeypatch.setattr(guard.st_private, "session_id", lambda: "s1")
    monkeypatch.setattr(guard, "client_key", lambda: "c1")
    monkeypatch.setattr(guard, "FAIR_SHARE", 1.0)
    monkeypatch.setattr(guard, "BURST_S", 0.5)
    slept: list[float] = []
    monkeypatch.setattr(guard.time, "sleep", lambda s: slept.append(s))
    cpu = guard.before_run()
    guard._sessions["s1"].tokens = -0.5  # its own allowance is spent
    guard._buckets["c1"].tokens = -0.3  # and the run used 0.8 s of the client's 0.5 s budget
    guard._end_turn()
    guard.before_run()
    guard.after_run(cpu)
    assert slept and slept[0] == pytest.approx(0.3, abs=0.05)


def test_a_client_over_its_session_cap_is_refused(monkeypatch):
    monkeypatch.setattr(guard, "client_key", lambda: "one client")
    monkeypatch.setattr(guard, "MAX_SESSIONS_PER_CLIENT", 3)
    stopped = []
    monkeypatch.setattr(guard.st, "error", lambda msg: stopped.append(msg))
    monkeypatch.setattr(guard.st, "stop", lambda: (_ for _ in ()).throw(SystemExit("stopped")))
    for i in range(3):
        monkeypatch.setattr(guard.st_private, "session_id", lambda i=i: f"s{i}")
        guard.after_run(guard.before_run())
    monkeypatch.setattr(guard.st_private, "session_id", lambda: "s-fourth")
    with pytest.raises(SystemExit):
        guard.before_run()
    assert stopped and "Too many open sessions" in stopped[0]
    assert guard._running == 0, "a refused session never takes a turn"


def cpu_clock(monkeypatch, run_s: float) -> None:
    """Every run uses `run_s` of CPU: the thread clock reads 0 at the start of a run and run_s at its end."""
    reads = itertools.cycle([0.0, run_s])
    monkeypatch.setattr(guard.time, "thread_time", lambda: next(reads))


def run_as(monkeypatch, sid: str) -> float:
    """One whole run of session `sid`; returns the seconds it was made to wait."""
    slept: list[float] = []
    monkeypatch.setattr(guard.time, "sleep", lambda s: slept.append(s))
    monkeypatch.setattr(guard.st_private, "session_id", lambda: sid)
    guard.after_run(guard.before_run())
    return sum(slept)


def test_looping_tabs_of_one_client_share_one_budget(monkeypatch):
    """Four tabs looping from one address get one FAIR_SHARE between them once their own allowances are spent,
    not four."""
    monkeypatch.setattr(guard, "client_key", lambda: "c1")
    monkeypatch.setattr(guard, "FAIR_SHARE", 1.0)
    monkeypatch.setattr(guard, "BURST_S", 0.5)
    monkeypatch.setattr(guard, "PERSONAL_SHARE", 0.01)
    cpu_clock(monkeypatch, 0.4)
    tabs = [f"tab{i}" for i in range(4)]
    for _ in range(3):  # each tab spends its own starting 0.5 s, then goes on
        for tab in tabs:
            run_as(monkeypatch, tab)
    assert all(guard._sessions[t].tokens < 0 for t in tabs), "every tab is heavy"
    # 4 x 3 runs x 0.4 s = 4.8 s used; the tabs' own allowances covered 4 x 0.5 s, the client's bucket the rest
    assert guard._buckets["c1"].tokens == pytest.approx(0.5 - (4.8 - 2.0), abs=0.05)
    assert run_as(monkeypatch, "tab0") > 1.0, "the next run waits for the whole client's overdraft"


def test_a_room_behind_one_address_does_not_wait_for_a_loop_among_them(monkeypatch):
    """A workshop on one venue address: 60 people moving sliders are not throttled as one person, even while a tab
    among them loops and has emptied the address's shared bucket; and they go before the loop."""
    monkeypatch.setattr(guard, "client_key", lambda: "venue wifi")
    cpu_clock(monkeypatch, 0.05)  # a person's run
    for _ in range(3):
        for person in range(60):
            assert run_as(monkeypatch, f"person{person}") == 0.0
    guard._sessions["person7"].tokens = -guard.BURST_S  # one of them loops
    guard._buckets["venue wifi"].tokens = -1.0
    assert run_as(monkeypatch, "person7") > 0, "the loop waits"
    assert run_as(monkeypatch, "person8") == 0.0, "the others do not"
    priorities = {}
    for sid in ("person7", "person9"):
        monkeypatch.setattr(guard.st_private, "session_id", lambda sid=sid: sid)
        monkeypatch.setattr(guard.time, "sleep", lambda s: None)
        guard.before_run()
        priorities[sid] = guard._local.priority
        guard._end_turn()
    assert priorities["person9"] < priorities["person7"], "a person's run goes before the loop's"


def _loops_cpu(n_loops: int, seconds: float, run_s: float = 0.1, idle_s: float = 0.0, light_only: bool = False) -> float:
    """CPU the guard grants `n_loops` tabs of one client over `seconds`: each asks again `idle_s` after its run ends,
    one run at a time (the turns). A discrete-event run of the guard's own admit/charge steps. light_only: count
    only the runs admitted as light."""
    t0 = 1000.0
    asks = [(t0, f"loop{i}") for i in range(n_loops)]
    heapq.heapify(asks)
    cpu_free, used = t0, 0.0
    while cpu_free < t0 + seconds:
        now, sid = heapq.heappop(asks)
        wait, _ = guard._admit(sid, "c1", now)
        cpu_free = max(now + wait, cpu_free) + run_s
        light = guard._sessions[sid].light
        guard._charge(sid, run_s, cpu_free)
        used += run_s if light or not light_only else 0.0
        heapq.heappush(asks, (cpu_free + idle_s, sid))
    return used


def test_throttled_loops_do_not_earn_their_way_back(monkeypatch):
    """Four loops of one client get what they got before sessions had allowances of their own (every run drawing on
    the client's bucket: LLMGP_PERSONAL_SHARE=0) plus their starting allowances, over 10 simulated minutes. Held
    back, a quarter of FAIR_SHARE each is less than PERSONAL_SHARE: were waiting to earn, they would turn light again
    now and then and get more."""
    with_allowances = _loops_cpu(4, 600)
    assert all(guard._sessions[f"loop{i}"].tokens < 0 for i in range(4)), "still heavy"
    monkeypatch.setattr(guard, "_sessions", {})
    monkeypatch.setattr(guard, "_buckets", {})
    monkeypatch.setattr(guard, "_rooms", {})
    monkeypatch.setattr(guard, "PERSONAL_SHARE", 0.0)
    as_one_person = _loops_cpu(4, 600)
    assert with_allowances <= as_one_person + 4 * guard.START_S + 0.5, (with_allowances, as_one_person)


def test_many_tabs_paced_to_stay_light_share_one_room():
    """64 tabs on one address, each idling between runs just long enough for its own refill to keep it light (a run
    of 0.2 s, then 4.5 s idle: 0.042 of a core each, 2.7 cores together): their light runs together get the
    address's ROOM_SHARE, not 64 allowances. (Beyond it they are heavy and wait for the address's budget; a heavy
    run waits at most MAX_WAIT_S, so many heavy tabs still get more than FAIR_SHARE: as before this change.)"""
    seconds = 600
    light = _loops_cpu(64, seconds, run_s=0.2, idle_s=4.5, light_only=True)
    allowed = guard.ROOM_SHARE * seconds + guard.ROOM_BURST_S + 64 * guard.START_S
    assert light <= allowed + 64 * 0.2, (light, allowed)
    assert light >= 0.8 * guard.ROOM_SHARE * seconds, "and the room is used"


def test_a_heavy_session_is_light_again_after_a_quiet_spell(monkeypatch):
    monkeypatch.setattr(guard, "client_key", lambda: "c1")
    clock = [1000.0]
    monkeypatch.setattr(guard.time, "monotonic", lambda: clock[0])
    cpu_clock(monkeypatch, 1.0)
    for _ in range(10):  # a burst of heavy runs: 10 s of CPU
        run_as(monkeypatch, "s1")
    debt = guard._sessions["s1"].tokens
    assert debt == pytest.approx(-guard.BURST_S), "the debt is bounded"
    # quiet long enough for its own refill to pay it back (the last wait, held back, earns nothing)
    clock[0] += guard.MAX_WAIT_S + (-debt) / guard.PERSONAL_SHARE + 1.0
    cpu_clock(monkeypatch, 0.01)
    before = guard._buckets["c1"].tokens
    assert run_as(monkeypatch, "s1") == 0.0
    assert guard._sessions["s1"].tokens > 0 and guard._buckets["c1"].tokens >= before, "light again: its own allowance pays"


def test_full_collections_wait_for_an_idle_moment_and_hold_the_turn(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(guard.gc, "collect", lambda *a: calls.append(guard._running) or 0)
    guard._take_turn(0.0)  # a run in progress
    assert COLLECT_IF_IDLE() is False and not calls
    assert COLLECT_IF_IDLE(overdue=True) is True and calls == [2], "an overdue collection runs anyway, counted as a run"
    guard._end_turn()
    assert COLLECT_IF_IDLE() is True and calls[-1] == 1, "idle: it runs, and no run starts meanwhile"
    assert guard._running == 0, "the turn is given back"


def test_the_first_run_freezes_long_lived_objects_and_stops_automatic_full_collections(monkeypatch):
    import gc

    started: list[str] = []
    monkeypatch.setattr(guard, "_frozen", threading.Event())
    monkeypatch.setattr(guard.threading, "Thread", lambda target, name, daemon: type("T", (), {"start": lambda self: started.append(name)})())
    before = gc.get_threshold()
    try:
        guard.after_run(time.thread_time())
        assert guard._frozen.is_set() and gc.get_freeze_count() > 0
        assert gc.get_threshold()[2] == guard._NO_AUTO_FULL_GC and started == ["llmgp-gc"]
        guard.after_run(time.thread_time())
        assert started == ["llmgp-gc"], "once per process"
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_no_turn_is_handed_over_inside_a_cached_function(monkeypatch):
    """A room on one link asks for the same cached values. Were a run to hand its turn over while computing one (the
    cache holds that value's lock), the session taking the turn could ask for the same value and wait for the lock
    while holding the turn, and the first run for the turn: both stuck until MAX_TURN_WAIT_S (50 sessions opening
    Memory at once took 20 s each to start, bench/load.py). Two sessions, a real cache (shared_cache, the one every
    cache of the app goes through, over st.cache_resource), the better one already waiting when the first reaches
    the yield inside the cached function."""
    monkeypatch.setattr(guard, "MAX_TURN_WAIT_S", 5.0)
    calls: list[int] = []

    @shared_cache()
    def shared_value(key: int) -> int:
        guard.yield_turn()  # as a figure builder or an estimate once did
        calls.append(key)
        return key * 2

    guard._take_turn(0.0)  # the first session runs
    done: list[float] = []

    def better_session() -> None:
        guard._take_turn(-3.0)
        assert shared_value(21) == 42
        guard._end_turn()
        done.append(time.monotonic())

    started = time.monotonic()
    other = threading.Thread(target=better_session)
    other.start()
    while not guard._queue:  # it waits for the turn
        time.sleep(0.01)
    assert shared_value(21) == 42
    guard._end_turn()
    other.join(10)
    assert done and done[0] - started < 2.0, "no wait for MAX_TURN_WAIT_S"
    assert calls == [21], "computed once, shared"
    assert guard._running == 0 and not guard._queue


def test_outside_a_cached_function_the_turn_is_handed_over():
    """The other half: between cached calls a long run does give way to a better waiting session (were the cache
    check to fail, e.g. Streamlit renaming its internals, no run would ever give way)."""
    order: list[str] = []
    guard._take_turn(5.0)  # a busy client's long run

    def person() -> None:
        guard._take_turn(-3.0)
        order.append("person")
        guard._end_turn()

    waiter = threading.Thread(target=person)
    waiter.start()
    while not guard._queue:
        time.sleep(0.01)
    guard.yield_turn()
    order.append("long run goes on")
    guard._end_turn()
    waiter.join(5)
    assert order == ["person", "long run goes on"]


def test_another_session_runs_while_one_waits_on_the_network_without_its_turn():
    """A run that waits on the network (the Hub fetch, up to its 5 s deadline) does it inside guard.released(): a
    second session takes the turn, runs and finishes meanwhile; the first takes the turn back afterwards. Without the
    release, the second waited for the whole fetch (issue #25: slider moves of 3.8 s against a slow hub)."""
    fetch_waiting, fetch_done, events = threading.Event(), threading.Event(), []

    def fetching_session() -> None:
        guard._take_turn(0.0)
        with guard.released():
            fetch_waiting.set()
            fetch_done.wait(10)  # the network
        events.append(("fetching session has its turn again", threading.get_ident() in guard._holders))
        guard._end_turn()

    first = threading.Thread(target=fetching_session)
    first.start()
    assert fetch_waiting.wait(5)
    started = time.monotonic()
    guard._take_turn(0.0)  # another session's slider move
    events.append(("other session ran", time.monotonic() - started < 1.0))
    guard._end_turn()
    fetch_done.set()
    first.join(10)
    assert events == [("other session ran", True), ("fetching session has its turn again", True)]
    assert guard._running == 0 and not guard._holders


def test_the_turn_is_taken_back_even_when_the_wait_fails():
    guard._take_turn(0.0)
    with pytest.raises(OSError), guard.released():
        assert guard._running == 0
        raise OSError("the network failed")
    assert guard._running == 1 and threading.get_ident() in guard._holders
    guard._end_turn()


def test_an_idle_collection_hands_freed_memory_back_at_most_every_trim_interval(monkeypatch):
    trims: list[int] = []
    monkeypatch.setattr(guard.gc, "collect", lambda *a: 0)
    monkeypatch.setattr(guard, "_malloc_trim", lambda pad: trims.append(pad) or 1)
    monkeypatch.setattr(guard, "_last_trim", [0.0])
    clock = [1000.0]
    monkeypatch.setattr(guard.time, "monotonic", lambda: clock[0])
    assert COLLECT_IF_IDLE() and trims == [0]
    clock[0] += 1.0
    assert COLLECT_IF_IDLE() and trims == [0], "not again within TRIM_EVERY_S"
    clock[0] += guard.TRIM_EVERY_S
    assert COLLECT_IF_IDLE(overdue=True) and trims == [0], "an overdue collection (someone may be waiting) does not trim"
    assert COLLECT_IF_IDLE() and trims == [0, 0]


def test_an_idle_collection_trims_sooner_once_the_process_has_grown(monkeypatch):
    """Between TRIM_SOONEST_S and TRIM_EVERY_S after a trim, the next idle collection trims only if the resident size
    grew more than TRIM_GROWTH_BYTES over what the last trim left."""
    trims: list[int] = []
    rss = [300 * 2**20]
    monkeypatch.setattr(guard.gc, "collect", lambda *a: 0)
    monkeypatch.setattr(guard, "_malloc_trim", lambda pad: trims.append(pad) or 1)
    monkeypatch.setattr(guard, "_last_trim", [0.0])
    monkeypatch.setattr(guard, "_rss_after_trim", [0])
    monkeypatch.setattr(guard, "resident_bytes", lambda: rss[0])
    clock = [1000.0]
    monkeypatch.setattr(guard.time, "monotonic", lambda: clock[0])
    assert COLLECT_IF_IDLE() and trims == [0] and guard._rss_after_trim == [300 * 2**20]
    clock[0] += guard.TRIM_SOONEST_S + 1.0
    rss[0] += guard.TRIM_GROWTH_BYTES // 2
    assert COLLECT_IF_IDLE() and trims == [0], "grown less than TRIM_GROWTH_BYTES: waits for TRIM_EVERY_S"
    rss[0] += guard.TRIM_GROWTH_BYTES
    assert COLLECT_IF_IDLE() and trims == [0, 0], "grown more: trims now"
    rss[0] += 2 * guard.TRIM_GROWTH_BYTES
    clock[0] += guard.TRIM_SOONEST_S / 2
    assert COLLECT_IF_IDLE() and trims == [0, 0], "never twice within TRIM_SOONEST_S"


def test_a_run_that_ends_with_nobody_waiting_wakes_the_collector_once_the_process_has_grown(monkeypatch):
    rss = [300 * 2**20]
    monkeypatch.setattr(guard, "resident_bytes", lambda: rss[0])
    monkeypatch.setattr(guard, "_last_trim", [time.monotonic() - guard.TRIM_SOONEST_S - 1.0])  # not yet TRIM_EVERY_S
    monkeypatch.setattr(guard, "_rss_after_trim", [300 * 2**20])
    monkeypatch.setattr(guard, "_frozen", threading.Event())
    guard._frozen.set()
    guard._idle_now.clear()
    guard._take_turn(0.0)
    guard._end_turn()
    assert not guard._idle_now.is_set(), "not grown: the collector keeps its own pace"
    rss[0] += 2 * guard.TRIM_GROWTH_BYTES
    guard._take_turn(0.0)
    guard._end_turn()
    assert guard._idle_now.is_set(), "grown, and nobody running or waiting: wake the collector"
    guard._idle_now.clear()


def test_the_resident_size_is_read_from_proc():
    import sys

    size = guard.resident_bytes()
    if sys.platform == "linux":
        assert 10 * 2**20 < size < 64 * 2**30
    else:
        assert size == 0


def _heavy_switch_interval_in_a_fresh_process(value: str | None) -> float:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "LLMGP_HEAVY_SWITCH_INTERVAL_S"}
    if value is not None:
        env["LLMGP_HEAVY_SWITCH_INTERVAL_S"] = value
    code = "from app_pages.shared import guard; print(guard.HEAVY_SWITCH_INTERVAL_S)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    return float(out.stdout.strip())


def test_a_heavy_run_hands_the_interpreter_lock_over_within_a_fifth_of_a_millisecond(monkeypatch):
    """While a heavy session's run holds the turn, any other thread (the event loop, a person's run starting) gets the
    interpreter lock within 0.2 ms; while a light run holds it, or nobody, Python's 5 ms stays. At 5 ms for the heavy
    run a person's move behind a loop took 70-80 ms at p95 against 22 ms quiet, at 0.2 ms 27-41 ms; at 0.2 ms for
    every run a room of 100 light sessions lost its p95 (bench/abuse.py adversarial, bench/room.py; docs/SERVER.md
    section 7)."""
    import sys

    assert guard.SWITCH_INTERVAL_S == pytest.approx(0.005)
    assert guard.HEAVY_SWITCH_INTERVAL_S == pytest.approx(0.0002)
    monkeypatch.setattr(guard.st_private, "session_id", lambda: "loop")
    now = time.monotonic()
    guard._sessions["loop"] = guard._Session(-1.0, now, "203.0.113.7", now)  # its own allowance spent
    started = guard.before_run()
    assert not guard._sessions["loop"].light
    assert sys.getswitchinterval() == pytest.approx(0.0002)
    guard.yield_turn()  # nobody waits; it keeps the turn and the short interval
    assert sys.getswitchinterval() == pytest.approx(0.0002)
    guard.after_run(started)
    assert sys.getswitchinterval() == pytest.approx(0.005)
    guard._take_turn(-1.0)  # a light run
    assert sys.getswitchinterval() == pytest.approx(0.005)
    guard._end_turn()


def test_the_heavy_switch_interval_comes_from_the_environment_or_a_known_value():
    assert _heavy_switch_interval_in_a_fresh_process("0.001") == pytest.approx(0.001)
    assert _heavy_switch_interval_in_a_fresh_process("0") == pytest.approx(0.005)  # off: Python's own
    assert _heavy_switch_interval_in_a_fresh_process("fast") == pytest.approx(0.0002)  # not a number: the default


def test_the_turn_log_records_each_run_and_where_it_gave_way(monkeypatch, tmp_path):
    """LLMGP_TURN_LOG (bench/abuse.py --log): one JSON line per run, with when it asked for its turn and got it and
    each hand-over point; nothing is written without it."""
    import json

    log = tmp_path / "turns.jsonl"
    monkeypatch.setattr(guard, "TURN_LOG", str(log))
    monkeypatch.setattr(guard.st_private, "session_id", lambda: "session-a")
    guard._sessions["session-a"] = guard._Session(1.0, time.monotonic(), "198.51.100.1")
    started = guard.before_run()
    guard.yield_turn()  # nobody waits: a point, not a hand-over
    guard.after_run(started)
    (line,) = log.read_text().splitlines()
    record = json.loads(line)
    assert record["client"] == "198.51.100.1" and record["sid"] == "session-"
    assert [e[0] for e in record["events"]] == ["turn", "point"]
    assert record["ended"] >= record["started"] and record["cpu_s"] >= 0
    monkeypatch.setattr(guard, "TURN_LOG", "")
    started = guard.before_run()
    guard.after_run(started)
    assert len(log.read_text().splitlines()) == 1


def test_the_client_is_the_address_the_outermost_trusted_proxy_saw():
    """LLMGP_TRUST_PROXY=N: the N-th X-Forwarded-For hop from the right. The first hop, taken before stop 50, is
    whatever the client sent where a proxy appends (Google's load balancer appends the client's address and its own):
    a fresh fake address each request was a fresh budget and session cap (stop 50's hosting review). The shipped nginx
    replaces the header with one address, so 1 reads it as before."""
    from app_pages.shared.guard import forwarded_client

    assert forwarded_client("203.0.113.7", 1) == "203.0.113.7"  # nginx: one address, replaced
    assert forwarded_client("6.6.6.6, 203.0.113.7", 1) == "203.0.113.7"  # a forged hop before it is ignored
    assert forwarded_client("6.6.6.6, 203.0.113.7, 130.211.0.1", 2) == "203.0.113.7"  # appended: client, then the LB
    assert forwarded_client("203.0.113.7", 2) == "203.0.113.7"  # fewer hops than proxies: the leftmost
    assert forwarded_client("", 1) is None and forwarded_client(" , ", 1) is None and forwarded_client("1.2.3.4", 0) is None
