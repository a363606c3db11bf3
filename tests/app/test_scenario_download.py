"""The sidebar's "Download scenario (JSON)" gives its file however busy the server is (issue #28).

The button's data is a callable (app.py: built when clicked, since the page may have rerun alone since the sidebar
was drawn), which Streamlit 1.67 keeps in its media file manager under an id the browser holds
(`MediaFileManager.add_deferred`). The manager drops such a callable at any session's end-of-run sweep
(`remove_orphaned_files`, run after every script run of every session) once no session's element references it, and
a whole run of the session clears all its references when it starts (`clear_session_refs`), before its script draws
the button again under a new id. A click that reaches the server in between gets "Failed to generate file for
download" and no file.

What the browser does on a click is Streamlit 1.67's DownloadButton component (static/js/DownloadButton.*.js, read
from the installed package): unless the button ignores reruns (`ignore_rerun` in its message, on_click="ignore"), it
first asks for a rerun (setTriggerValue: a whole run, the button being outside every fragment), then asks for the
file (requestDeferredFile). On the server the rerun starts first and clears the references; the run then waits for
its turn (app_pages/shared/guard.py), and on a loaded server other sessions' runs end meanwhile. That is the
reproduction below, with the real objects: AppTest gives each run a new MediaFileManager, so the test hands it one
manager for all runs, as a server has one; "another session's run ends" is that manager's sweep, called where this
session's run waits for its turn.
"""

from __future__ import annotations

import contextlib
import json

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.media_file_storage import MediaFileStorageError
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import app_test

from app_pages.shared import guard
from app_pages.shared.cache import weight_bytes
from app_pages.shared.scenario_io import LATEST, scenario_file
from app_pages.shared.state import CFG_BLOB, encode_blob
from core.catalog.presets import load_presets
from core.scenario import Scenario

from .conftest import no_exception, open_link, run_app


@pytest.fixture
def manager(monkeypatch) -> MediaFileManager:
    """One media file manager for every run, as a server has (AppTest makes one per run)."""
    shared = MediaFileManager(MemoryMediaFileStorage("/media"))
    monkeypatch.setattr(app_test, "MediaFileManager", lambda storage: shared)
    return shared


def _button(at):
    [button] = [e for e in at.get("download_button") if e.proto.label == "Download scenario (JSON)"]
    return button.proto


def _file_text(manager: MediaFileManager, url: str) -> str:
    found = manager.read_file(url.rsplit("/", 1)[1].split(".")[0])
    assert found is not None, url
    return found.content.decode()


def _file(manager: MediaFileManager, url: str) -> dict:
    return json.loads(_file_text(manager, url))


def _click(at, manager: MediaFileManager, monkeypatch, *, sweep: bool = True, rerun_first: bool | None = None) -> str | None:
    """A click on the download button as the browser sends it; returns the file's URL, None when the server had no
    file for it. With `sweep`, another session's run ends while a run of this session waits for its turn (the sweep
    is all that session does here). `rerun_first` overrides what the button's message says."""
    proto = _button(at)
    file_id = proto.deferred_file_id
    assert file_id, "the button's data is built when clicked"
    got: list[str | None] = []

    def ask_for_the_file() -> None:
        try:
            got.append(manager.execute_deferred(file_id))
        except MediaFileStorageError:
            got.append(None)

    if not (not proto.ignore_rerun if rerun_first is None else rerun_first):
        ask_for_the_file()  # no run starts: nothing is cleared
        return got[0]
    real_turn = guard.turn

    @contextlib.contextmanager
    def turn_after_a_wait():
        if not got:  # the click's run waits for its turn; another session's run ends; the file request arrives
            if sweep:
                manager.remove_orphaned_files()
            ask_for_the_file()
        with real_turn():
            yield

    monkeypatch.setattr(guard, "turn", turn_after_a_wait)
    at.run()  # the rerun the click asks for first
    monkeypatch.setattr(guard, "turn", real_turn)
    no_exception(at)
    return got[0]


def test_a_click_gets_its_file_while_other_sessions_runs_end(manager, monkeypatch):
    at = run_app("memory", {"model": "mistral-7b-v0.1", "seq": "8192"})
    url = _click(at, manager, monkeypatch)
    assert url is not None, "the click's file was dropped by another session's sweep"
    data = _file(manager, url)
    assert data["scenario"]["model"] == "mistral-7b-v0.1" and data["scenario"]["seq_len"] == 8192


def test_the_reproduction_fails_where_a_click_starts_a_run(manager, monkeypatch):
    """The scene above is the mechanism, not a test that cannot fail: with the button asking for a rerun on click
    (Streamlit's default, on_click="rerun"), the same click loses its file."""
    at = run_app("memory", {"model": "mistral-7b-v0.1", "seq": "8192"})
    assert _click(at, manager, monkeypatch, sweep=False, rerun_first=True) is not None, "no sweep in between: the file comes"
    old = _button(at).deferred_file_id  # the click's run drew the button again under a new id
    assert _click(at, manager, monkeypatch, rerun_first=True) is None
    assert _button(at).deferred_file_id != old, "a second click would use the new id"


@pytest.mark.parametrize("page", ["memory", "inference"])
def test_no_download_button_asks_for_a_run_when_clicked(page):
    """The family: a run that a click starts draws its page's buttons again, so any download's callable (or, after
    two sweeps, its stored file) can be gone when the click's own request is served. A download changes nothing the
    app shows, so none needs a run (Memory: the sidebar's, the template's and the report's; Inference: the serving
    offers' too)."""
    at = run_app(page, {"model": "mistral-7b-v0.1"})
    no_exception(at)
    buttons = {e.proto.label: e.proto.ignore_rerun for e in at.get("download_button")}
    assert {"Download scenario (JSON)", "Template (CSV)"} <= set(buttons)
    assert page != "memory" or {"Results (CSV)", "One-page report (Markdown)"} <= set(buttons)
    assert page != "inference" or any(label.startswith("Every priced instance") for label in buttons)
    assert all(buttons.values()), [label for label, ignores in buttons.items() if not ignores]


def _served(manager: MediaFileManager, file_id: str) -> str:
    return _file_text(manager, manager.execute_deferred(file_id))


def test_a_click_while_a_whole_run_waits_for_its_turn_gets_its_file(manager, monkeypatch):
    """A whole run the session started otherwise (here a page switch) clears its references at once too; the browser
    shows the button it had until the run sends it again. The run sends it before it waits for its turn (app.py), so
    a click during the wait, with the button the browser has by then, survives another session's sweep. Before, the
    button came after the wait: the click carried the old id, which the sweep had dropped."""
    at = run_app("memory", {"model": "mistral-7b-v0.1", "seq": "8192"})
    sent: list[str] = []
    real_add = manager.add_deferred
    monkeypatch.setattr(manager, "add_deferred", lambda *a, **k: sent.append(real_add(*a, **k)) or sent[-1])
    sent.append(_button(at).deferred_file_id)  # what the browser holds
    got: list[str | None] = []
    real_turn = guard.turn

    @contextlib.contextmanager
    def turn_after_a_wait():
        if not got:
            manager.remove_orphaned_files()  # another session's run ends while this one waits
            try:
                got.append(manager.execute_deferred(sent[-1]))  # the latest button the browser was sent
            except MediaFileStorageError:
                got.append(None)
        with real_turn():
            yield

    monkeypatch.setattr(guard, "turn", turn_after_a_wait)
    at.switch_page("app_pages/training.py").run()
    no_exception(at)
    assert got[0] is not None, "the click during the wait lost its file"
    assert json.loads(_file_text(manager, got[0]))["scenario"]["model"] == "mistral-7b-v0.1"


@pytest.mark.xfail(
    strict=True,
    reason="issue #28, not fixed: Streamlit 1.67 stores a deferred download's file unreferenced (execute_deferred), so "
    "the second end of run by any session deletes it, before a browser on a busy server fetches it "
    "(bench/download_race.py: 2-5 of 30 clicks; docs/SERVER.md section 10)",
)
def test_the_file_a_click_made_outlives_two_other_runs(manager):
    """The file a click made is served over HTTP once the browser has its URL (a second request). Every end of run
    sweeps the media files no session references: a file a deferred download made is marked at the first and deleted
    at the second, and a busy server ends a run every few tens of milliseconds."""
    at = run_app("memory", {"model": "mistral-7b-v0.1", "seq": "8192"})
    url = manager.execute_deferred(_button(at).deferred_file_id)
    manager.remove_orphaned_files()  # two other sessions' runs end before the browser asks for the file
    manager.remove_orphaned_files()
    assert manager.read_file(url.rsplit("/", 1)[1].split(".")[0]) is not None


def _big_config() -> dict:
    """A real model's config.json plus 600 fields of junk: about the link's budget, as bench/abuse.py's worst link."""
    return {**(load_presets()["deepseek-v3"].config or {}), "junk": {f"x{k}": f"{k:03d}" + "y" * 40 for k in range(600)}}


@pytest.mark.parametrize(
    "link",
    [
        {"model": "qwen2.5-7b", "mode": "training", "method": "lora", "seq": "4096"},
        {"src": "params", "params": "13", "batch": "4", "seq": "8192"},
        {"src": "config", "cfg": encode_blob(json.dumps(_big_config())), "seq": "16384"},
    ],
    ids=["preset", "params", "config"],
)
def test_the_file_is_the_scenarios_file_and_the_session_keeps_no_parsed_config(manager, link):
    """The session notes the drawn scenario for the download in a small form (issue #25): a pasted config.json as
    the blob of its text the session already keeps for its link, the same object, not the parsed config."""
    at = open_link("memory", link)
    no_exception(at)
    text = _served(manager, _button(at).deferred_file_id)
    written = json.loads(text)["scenario"]
    assert text == scenario_file(Scenario.model_validate(written)), "what scenario_file writes for that scenario"
    assert written["seq_len"] == int(link["seq"])
    _, model, problem = at.session_state[LATEST]["latest"]
    assert problem is None
    if link.get("src") == "config":
        assert written["model"] == {"hf_config": _big_config()}
        assert model["hf_config"] is at.session_state[CFG_BLOB], "the link's blob, not a copy"
        assert weight_bytes(_big_config()) > 50_000, "a parsed config this size is what the session kept before"
        assert weight_bytes(at.session_state[LATEST]) - weight_bytes(model["hf_config"]) < 2_000
    else:
        assert weight_bytes(at.session_state[LATEST]) < 2_000
