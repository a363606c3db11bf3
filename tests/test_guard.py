"""The fair-share guard (app_pages/shared/guard.py): turns go to the session that used the least CPU, a session over
its budget waits, a client over its session cap is refused, and a run always gives its turn back."""

from __future__ import annotations

import threading
import time

import pytest

from app_pages.shared import guard


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
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
