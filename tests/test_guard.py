"""The fair-share guard (app_pages/shared/guard.py): turns go to the session that used the least CPU, a session over
its budget waits, a client over its session cap is refused, and a run always gives its turn back."""

from __future__ import annotations

import threading
import time

import pytest

from app_pages.shared import guard

COLLECT_IF_IDLE = guard.collect_if_idle


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    # a collector thread started by an earlier AppTest in this process must not take turns during these tests
    monkeypatch.setattr(guard, "collect_if_idle", lambda overdue=False: False)
    monkeypatch.setattr(guard, "_buckets", {})
    monkeypatch.setattr(guard, "_sessions", {})
    monkeypatch.setattr(guard, "_queue", [])
    monkeypatch.setattr(guard, "_holders", set())
    monkeypatch.setattr(guard, "_running", 0)
    monkeypatch.setattr(guard, "RUN_SLOTS", 1)
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


def test_an_empty_bucket_waits_in_proportion_to_the_overdraft(monkeypatch):
    monkeypatch.setattr(guard, "_session_id", lambda: "s1")
    monkeypatch.setattr(guard, "client_key", lambda: "c1")
    monkeypatch.setattr(guard, "FAIR_SHARE", 1.0)
    monkeypatch.setattr(guard, "BURST_S", 0.5)
    slept: list[float] = []
    monkeypatch.setattr(guard.time, "sleep", lambda s: slept.append(s))
    cpu = guard.before_run()
    guard._buckets["c1"].tokens = -0.3  # the run used 0.8 s of a 0.5 s budget
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
        monkeypatch.setattr(guard, "_session_id", lambda i=i: f"s{i}")
        guard.after_run(guard.before_run())
    monkeypatch.setattr(guard, "_session_id", lambda: "s-fourth")
    with pytest.raises(SystemExit):
        guard.before_run()
    assert stopped and "Too many open sessions" in stopped[0]
    assert guard._running == 0, "a refused session never takes a turn"


def test_a_clients_sessions_share_one_budget(monkeypatch):
    """Four tabs of one client get one share of the CPU, not four."""
    monkeypatch.setattr(guard, "client_key", lambda: "c1")
    monkeypatch.setattr(guard, "FAIR_SHARE", 1.0)
    monkeypatch.setattr(guard, "BURST_S", 0.5)
    monkeypatch.setattr(guard.time, "thread_time", iter([0.0, 0.4, 0.0, 0.4]).__next__)  # each run uses 0.4 s
    slept: list[float] = []
    monkeypatch.setattr(guard.time, "sleep", lambda s: slept.append(s))
    for sid in ("tab1", "tab2"):
        monkeypatch.setattr(guard, "_session_id", lambda sid=sid: sid)
        guard.after_run(guard.before_run())
    assert guard._buckets["c1"].tokens == pytest.approx(0.5 - 0.8, abs=0.05)
    monkeypatch.setattr(guard, "_session_id", lambda: "tab3")
    monkeypatch.setattr(guard.time, "thread_time", lambda: 0.0)
    guard.before_run()
    guard._end_turn()
    assert slept and slept[0] > 0.2  # the third tab waits for the first two's overdraft


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
