"""A Streamlit session driven over the browser's own protocol (issue #25): one WebSocket to `/_stcore/stream`,
BackMsg `rerun_script` out, ForwardMsg deltas back until the run's `script_finished`, as the browser's frontend does.

Why beside the agent API driver (bench/load.py): the shipped recipe (deploy/nginx.conf) refuses the agent API, so a
real room and a real attacker reach the app this way only. The agent API also costs the server a JSON snapshot per
run and answers only after the page has settled, which paces a looping client; over the WebSocket a loop sends its
next move the moment a run ends. The client is cheap (protobuf parsing in C, one asyncio loop for every session), so
on a 2-core box the server gets the cores.

Only the widget moved is sent in each rerun; the runtime merges it into the session's widget state, as it does for a
browser. Widgets are found by their key (Streamlit's element id for a keyed widget ends with `-<key>`). The client
offers no cached messages, so every element is sent in full (the browser offers what it has cached: the server then
sends a reference instead): slightly pessimistic for the server.
"""

from __future__ import annotations

import asyncio
import http.client
import random
import socket
import time
from collections.abc import Callable

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ContextInfo
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

# ForwardMsg.script_finished: a run that ends the interaction (not FINISHED_EARLY_FOR_RERUN, after which one follows)
_DONE = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR, ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY}


class WsSession:
    """One browser tab: `await open(page)`, then `await move(key, value)`; each returns the seconds until the run
    finished. `client` is sent as X-Forwarded-For (the app trusts it with LLMGP_TRUST_PROXY=1, as behind the proxy),
    so one machine can play several clients; `cookie_from_proxy` first loads the page over HTTP and keeps the proxy's
    cookie, as a browser does (the recipe keeps a browser on one app process by that cookie)."""

    def __init__(self, port: int, *, client: str | None = None, timeout: float = 120, cookie_from_proxy: bool = False, source: str | None = None):
        """`source`: the loopback address to connect from (127.0.0.x), so that behind the proxy, which replaces
        X-Forwarded-For with the peer's address, one machine can still play several clients."""
        self.port, self.client, self.timeout, self.cookie_from_proxy = port, client, timeout, cookie_from_proxy
        self.source = source
        self.headers: dict[str, str] = {"X-Forwarded-For": client} if client else {}
        self.ws: websockets.ClientConnection | None = None
        self.widget_ids: dict[str, str] = {}  # key -> element id
        self.widget_kinds: dict[str, str] = {}  # key -> element type (selectbox, select_slider, ...)
        self.page = ""
        self.query = ""  # the link's query string, sent with every rerun as the browser does
        self.exceptions = 0  # st.exception elements seen (an app error shown on the page)
        self.refused = False  # the app refused the session (its address over the session cap)
        self.cookie = ""

    def _http_cookie(self, path: str) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout, source_address=(self.source, 0) if self.source else None)
        try:
            conn.request("GET", path, headers=self.headers)
            resp = conn.getresponse()
            resp.read()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status} for {path}")
            if cookie := resp.getheader("Set-Cookie"):
                self.cookie = cookie.split(";")[0]
                self.headers["Cookie"] = self.cookie
        finally:
            conn.close()

    async def open(self, page: str, query: str = "") -> float:
        """Load `page` with the link's query string `query` (without the "?"), as a browser opening a shared link."""
        self.page, self.query = page, query
        t0 = time.perf_counter()
        if self.cookie_from_proxy:
            await asyncio.get_running_loop().run_in_executor(None, self._http_cookie, f"/{page}")
        origin = f"http://127.0.0.1:{self.port}"
        self.ws = await websockets.connect(
            f"ws://127.0.0.1:{self.port}/_stcore/stream",
            subprotocols=["streamlit"],  # type: ignore[list-item]
            origin=origin,  # type: ignore[arg-type]
            additional_headers=self.headers,
            max_size=None,
            open_timeout=self.timeout,
            **({"local_addr": (self.source, 0)} if self.source else {}),
        )
        sock = self.ws.transport.get_extra_info("socket")
        if sock is not None:  # as a browser does: no Nagle delay on small frames
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await self._rerun(None)
        return time.perf_counter() - t0

    async def move(self, key: str, value: str) -> float:
        """Set a widget by its key to a formatted option (a select-slider's or a selectbox's, as the app shows it)
        and wait for the rerun."""
        t0 = time.perf_counter()
        await self._rerun((key, value))
        return time.perf_counter() - t0

    async def _rerun(self, change: tuple[str, str] | None) -> None:
        msg = BackMsg()
        state = msg.rerun_script
        state.page_name = self.page
        state.query_string = self.query
        url = f"http://127.0.0.1:{self.port}/{self.page}" + (f"?{self.query}" if self.query else "")
        state.context_info.CopyFrom(ContextInfo(url=url, timezone="UTC", locale="en-US"))
        if change is not None:
            key, value = change
            if key not in self.widget_ids:
                raise KeyError(f"no widget with key {key!r} on {self.page!r} (seen: {sorted(self.widget_ids)})")
            widget = state.widget_states.widgets.add()
            widget.id = self.widget_ids[key]
            if self.widget_kinds[key] == "selectbox":  # Streamlit 1.67: selectbox string_value, select_slider string_array_value
                widget.string_value = value
            else:
                widget.string_array_value.data.append(value)
        assert self.ws is not None
        await self.ws.send(msg.SerializeToString())
        await asyncio.wait_for(self._until_finished(), self.timeout)

    async def _until_finished(self) -> None:
        assert self.ws is not None
        while True:
            raw = await self.ws.recv()
            fwd = ForwardMsg()
            fwd.ParseFromString(raw if isinstance(raw, bytes) else raw.encode())
            kind = fwd.WhichOneof("type")
            if kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                self._note_element(fwd.delta.new_element)
            elif kind == "script_finished" and fwd.script_finished in _DONE:
                return

    def _note_element(self, element) -> None:
        kind = element.WhichOneof("type")
        if kind == "exception":
            self.exceptions += 1
            return
        if kind == "alert" and "Too many open sessions" in element.alert.body:
            self.refused = True  # the guard's session cap (app_pages/shared/guard.py)
            return
        widget = getattr(element, kind, None)
        element_id = getattr(widget, "id", "") if widget is not None else ""
        if isinstance(element_id, str) and element_id.startswith("$$ID-") and "-" in element_id[5:]:
            key = element_id[5:].split("-", 1)[1]
            if key and key != "None":
                self.widget_ids[key] = element_id
                self.widget_kinds[key] = kind

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


async def mover(
    port: int,
    page: str,
    key: str,
    values: list[str],
    *,
    deadline: float,
    think_s: float,
    start_delay_s: float,
    rng: random.Random,
    on_move: Callable[[float], None],
    on_error: Callable[[str], None],
    on_open: Callable[[float, str], None] | None = None,
    client: str | None = None,
    cookie_from_proxy: bool = False,
) -> None:
    """One person: open `page` after `start_delay_s`, then set widget `key` to the next of `values` (in turn) every
    `think_s` seconds (uniform 0.5x..1.5x) until `deadline` (perf_counter); `on_move(seconds)` for each finished run,
    `on_error(text)` for each failure (an app exception shown on the page counts as one); `on_open(seconds, cookie)`
    once the first load has finished."""
    await asyncio.sleep(start_delay_s)
    sess = WsSession(port, client=client, cookie_from_proxy=cookie_from_proxy)
    try:
        opened_s = await sess.open(page)
        if on_open is not None:
            on_open(opened_s, sess.cookie)
    except Exception as exc:
        on_error(f"open: {type(exc).__name__}: {exc}"[:200])
        return
    i = 0
    try:
        while time.perf_counter() < deadline:
            seen = sess.exceptions
            try:
                on_move(await sess.move(key, values[i % len(values)]))
            except Exception as exc:
                on_error(f"{type(exc).__name__}: {exc}"[:200])
                return
            if sess.exceptions > seen:
                on_error("app exception shown on the page")
            i += 1
            if think_s:
                await asyncio.sleep(rng.uniform(0.5 * think_s, 1.5 * think_s))
    finally:
        await sess.close()
