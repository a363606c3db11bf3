"""Fetch a model's `config.json` (and its exact parameter count) from the Hugging Face Hub.

Two public Hub endpoints are read (https://huggingface.co/docs/hub/api):

- `GET https://huggingface.co/{owner}/{name}/resolve/{revision}/config.json`: the file as committed. config.json is a
  small regular (non-LFS) file, served by huggingface.co itself.
- `GET https://huggingface.co/api/models/{owner}/{name}?expand=safetensors` (or `.../revision/{revision}` for another
  revision): the model's metadata, of which only `safetensors` is asked for and read, e.g.
  `{"safetensors": {"parameters": {"BF16": 8190735360}, "total": 8190735360}}` for Qwen/Qwen3-8B; `total` is the
  exact parameter count of the checkpoint (the shape `huggingface_hub.hf_api.SafeTensorsInfo` documents). A failed or
  odd answer here only leaves `params` and `dtype` unknown; the config is still returned. (A sharded checkpoint's
  `model.safetensors.index.json` gives `metadata.total_size` in bytes, i.e. ~2 bytes a parameter in bf16; it is not
  read.)

The id comes from a person typing into a web page, so the fetch is fenced:

- Host allow-list: the only host contacted is the one in `base_url`, which must be https://huggingface.co (a loopback
  `http://127.0.0.1:port` or `http://localhost:port` is allowed for tests). A redirect is followed only to the same
  scheme, host and port (the Hub answers 307 with a relative Location for a renamed repo); one to any other host is
  refused without contacting it. No cookies, no tokens: only `User-Agent: llm-gpu-planner` is sent.
- Id check: `REPO_ID_RE` accepts `owner/name` only (letters, digits, `-`, `_`, `.`; 1-96 characters each; not starting
  with `.` or `-`; no `..`), never a URL, a path or extra slashes, so the id cannot change which URL is requested.
  A bad id is refused before any request.
- Size cap: at most `MAX_HUB_CONFIG_BYTES` (256 kB, far above any config.json) are read; a larger `Content-Length` is
  refused before reading and a body streamed past the cap is cut off.
- Deadline: `timeout_s` is a hard wall-clock bound on the whole fetch (both requests run at once, sharing one
  `_Deadline`): connecting, the status line and headers, and the body. A per-socket timeout alone does not give that:
  it bounds each read, and a server that trickles one byte at a time (headers, or a chunk-size line) keeps every read
  inside it for as long as it likes (issue #25: more than 40 s). So the requests run in worker threads that the caller
  waits for until the deadline only, and at the deadline a timer shuts down every socket the fetch opened, which ends
  a read blocked on it at once (the worker then exits instead of reading on).

Failures raise `HubError` with a `kind` the app can act on and a one-line message that says what to do next.
Successes are cached in-process (32 entries, one hour): the text only, at most 256 kB each, parsed again for each caller.
"""

from __future__ import annotations

import functools
import http.client
import json
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from core.jsontext import MAX_CONFIG_DEPTH, JSONProblem, loads

HUB_HOST: Final = "huggingface.co"
HUB_BASE_URL: Final = "https://huggingface.co"
LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost")  # for tests only
USER_AGENT: Final = "llm-gpu-planner"
MAX_HUB_CONFIG_BYTES: Final = 256_000
MAX_HUB_API_BYTES: Final = 256_000
MAX_REDIRECTS: Final = 5
CACHE_MAXSIZE: Final = 32
# fetches in flight at once, every session together: each makes two requests to the Hub, and 128 sessions clicking
# Fetch would otherwise send 256 at once from the server's one address (stop 50's hosting review)
MAX_CONCURRENT_FETCHES: Final = 4
CACHE_TTL_S: Final = 3600.0
MAX_PARAMS: Final = 10**15

# owner/name: each part 1-96 of letters, digits, '-', '_', '.', not starting with '.' or '-', and no '..' anywhere.
REPO_ID_RE: Final = re.compile(r"\A(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9_][A-Za-z0-9_.-]{0,95}\Z")
# A branch, tag or commit: one path segment of the same characters (a '/' in a branch name is not accepted).
REVISION_RE: Final = re.compile(r"\A(?!.*\.\.)[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
_DTYPE_RE: Final = re.compile(r"\A[A-Za-z0-9_]{1,16}\Z")

HubErrorKind = Literal["bad-id", "unreachable", "timeout", "not-found", "gated", "too-large", "not-json", "not-config"]
HUB_ERROR_KINDS: Final[tuple[HubErrorKind, ...]] = ("bad-id", "unreachable", "timeout", "not-found", "gated", "too-large", "not-json", "not-config")


class HubError(Exception):
    """A fetch that did not give a usable config.json. `kind` is one of HUB_ERROR_KINDS; the message is one plain
    sentence for the person, ending with what to do."""

    def __init__(self, kind: HubErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: HubErrorKind = kind
        self.message = message


@dataclass(frozen=True)
class HubModel:
    repo_id: str
    config_text: str  # config.json as served (decoded as UTF-8, a BOM dropped)
    config: dict[str, Any] = field(repr=False)  # the parsed object (a fresh copy for every caller)
    params: int | None  # safetensors.total from the Hub API: the checkpoint's exact parameter count
    dtype: str | None  # the dtype holding most parameters in safetensors.parameters, e.g. "BF16"
    source_url: str  # the config.json URL


# ------------------------------------------------------------------ cache
_cache: OrderedDict[tuple[str, str, str], tuple[float, HubModel]] = OrderedDict()
_cache_lock = threading.Lock()


def clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


def _cache_get(key: tuple[str, str, str]) -> HubModel | None:
    now = time.monotonic()
    with _cache_lock:
        hit = _cache.get(key)
        if hit is None:
            return None
        stamp, model = hit
        if now - stamp > CACHE_TTL_S:
            del _cache[key]
            return None
        _cache.move_to_end(key)
        return model


def _cache_put(key: tuple[str, str, str], model: HubModel) -> None:
    with _cache_lock:
        _cache[key] = (time.monotonic(), model)
        _cache.move_to_end(key)
        while len(_cache) > CACHE_MAXSIZE:
            _cache.popitem(last=False)


def _copy(model: HubModel) -> HubModel:
    """A caller's own HubModel: its config parsed again from the cached text (the cache keeps the text alone: a
    256 kB config of nested empty lists parses to about 6 MB of objects, 64 of them 420 MB for an hour)."""
    return replace(model, config=json.loads(model.config_text))


_fetch_slots = threading.BoundedSemaphore(MAX_CONCURRENT_FETCHES)


# ------------------------------------------------------------------ checks
@dataclass(frozen=True)
class _Origin:
    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        default = 443 if self.scheme == "https" else 80
        return f"{self.scheme}://{self.host}" + ("" if self.port == default else f":{self.port}")


def _origin(url: str) -> _Origin | None:
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return _Origin(parts.scheme, parts.hostname.lower(), port or (443 if parts.scheme == "https" else 80))


def _check_base_url(base_url: str) -> _Origin:
    """The allow-list: https://huggingface.co in production, a loopback server in tests. Anything else is a
    programming error (ValueError), never something a user can reach."""
    origin = _origin(base_url)
    parts = urllib.parse.urlsplit(base_url)
    if origin is None or parts.username or parts.password or parts.path.strip("/") or parts.query or parts.fragment:
        raise ValueError(f"base_url must be {HUB_BASE_URL}")
    if origin.host == HUB_HOST:
        if origin.scheme != "https" or origin.port != 443:
            raise ValueError(f"base_url must be {HUB_BASE_URL}")
    elif origin.host not in LOOPBACK_HOSTS:
        raise ValueError(f"base_url must be {HUB_BASE_URL} (or a loopback server in tests), not {origin.host}")
    return origin


def _check_repo_id(repo_id: object) -> str:
    text = repo_id.strip() if isinstance(repo_id, str) else ""
    if not REPO_ID_RE.match(text):
        raise HubError(
            "bad-id",
            "That is not a Hugging Face model id; type it as owner/name (e.g. Qwen/Qwen3-8B), not a link, or paste the config.json instead.",
        )
    return text


def _check_revision(revision: object) -> str:
    if not isinstance(revision, str) or not REVISION_RE.match(revision):
        raise HubError("bad-id", "That is not a branch, tag or commit name; leave the revision at main or paste the config.json instead.")
    return revision


# ------------------------------------------------------------------ HTTP
class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to the origin of the first request (the Hub's 307 for a renamed repo is relative);
    refuse any other host before contacting it."""

    max_redirections = MAX_REDIRECTS

    def __init__(self, origin: _Origin) -> None:
        super().__init__()
        self.origin = origin

    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> urllib.request.Request | None:
        if _origin(newurl) != self.origin:
            fp.close()  # the 3xx answer, which urllib would have closed on following it
            raise HubError(
                "unreachable",
                f"{HUB_HOST} sent the request on to another site, which the planner does not follow; paste the config.json instead.",
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class _TooLarge(Exception):
    pass


class _Deadline:
    """One wall-clock deadline for every connection of a fetch. At the deadline a timer shuts down the socket of each
    connection watched (and of any watched later), so a read blocked on it ends then, however the server paces its
    bytes."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._watched: list[socket.socket] = []
        self._expired = False
        self._timer = threading.Timer(seconds, self.expire)
        self._timer.daemon = True
        self._timer.start()

    def left_s(self) -> float:
        return self.at - time.monotonic()

    def watch(self, sock: socket.socket) -> None:
        """Shut `sock` at the deadline (now, if it has passed). The socket itself is kept: urllib drops the
        connection's reference to it once the headers are in, and the body is read through the response."""
        with self._lock:
            if not self._expired:
                self._watched.append(sock)
                return
        _shut(sock)

    def expire(self) -> None:
        with self._lock:
            self._expired = True
            watched, self._watched = self._watched, []
        for sock in watched:
            _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    """Shut the socket down (both ways) from another thread: a recv blocked on it returns at once. The plain socket's
    shutdown is called, also on a TLS socket, so the TLS object is left to the reading thread."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass  # already closed


class _WatchedHTTP(http.client.HTTPConnection):
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline

    def connect(self) -> None:
        super().connect()
        self.deadline.watch(self.sock)


class _WatchedHTTPS(http.client.HTTPSConnection):
    def __init__(self, *args: Any, deadline: _Deadline, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = deadline

    def connect(self) -> None:
        super().connect()  # the TLS handshake's reads are bounded by the socket timeout, and the caller's wait by the deadline
        self.deadline.watch(self.sock)


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_WatchedHTTP, deadline=self.deadline), req)


class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        self.tls = ssl.create_default_context()
        super().__init__(context=self.tls)
        self.deadline = deadline

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(functools.partial(_WatchedHTTPS, deadline=self.deadline), req, context=self.tls)


def _opener(origin: _Origin, deadline: _Deadline) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [_SameOriginRedirects(origin), _DeadlineHTTPHandler(deadline), _DeadlineHTTPSHandler(deadline)]
    if origin.host in LOOPBACK_HOSTS:
        handlers.append(urllib.request.ProxyHandler({}))  # a test server is never reached through a proxy
    return urllib.request.build_opener(*handlers)  # no cookie processor: build_opener adds none


def _get(origin: _Origin, url: str, deadline: _Deadline, cap: int) -> bytes:
    """GET url, reading at most cap bytes before the deadline. Raises urllib/socket errors, TimeoutError, _TooLarge
    and HubError (a refused redirect) for the caller to translate."""
    left = deadline.left_s()
    if left <= 0:
        raise TimeoutError
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, "Accept": "application/json, text/plain, */*"})
    with _opener(origin, deadline).open(req, timeout=left) as resp:
        length = resp.headers.get("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > cap:
            raise _TooLarge
        chunks: list[bytes] = []
        size = 0
        while True:
            if deadline.left_s() <= 0:
                raise TimeoutError
            chunk = resp.read1(min(65_536, cap + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                raise _TooLarge
        if deadline.left_s() <= 0:  # a body cut short by the deadline's shutdown reads as a short one
            raise TimeoutError
        return b"".join(chunks)


class _Request(threading.Thread):
    """One GET in a worker thread, so that the caller's wait ends at the deadline whatever the socket does (a name
    lookup or a TLS handshake that hangs included); the deadline's timer then ends the worker's read."""

    def __init__(self, origin: _Origin, url: str, deadline: _Deadline, cap: int) -> None:
        super().__init__(name="hub-fetch", daemon=True)
        self.origin, self.url, self.deadline, self.cap = origin, url, deadline, cap
        self.body: bytes | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.body = _get(self.origin, self.url, self.deadline, self.cap)
        except BaseException as exc:  # handed to the caller, which translates it
            self.error = exc

    def wait(self) -> bytes:
        """The body, or the request's error; TimeoutError when the deadline passes first (or cut the request short)."""
        self.join(max(self.deadline.left_s(), 0.0))
        if self.is_alive():
            raise TimeoutError
        if self.error is not None:
            if isinstance(self.error, urllib.error.HTTPError):
                raise self.error
            if self.deadline.left_s() <= 0 and not isinstance(self.error, HubError | _TooLarge):
                raise TimeoutError from self.error  # a read ended by the deadline's shutdown
            raise self.error
        assert self.body is not None
        return self.body


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or (isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, TimeoutError))


def _fetch_config(request: _Request, repo_id: str, timeout_s: float) -> str:
    try:
        body = request.wait()
    except HubError:
        raise
    except _TooLarge:
        raise HubError(
            "too-large",
            f"{repo_id}'s config.json is larger than {MAX_HUB_CONFIG_BYTES // 1000} kB, far more than any model config; paste the config.json instead.",
        ) from None
    except urllib.error.HTTPError as exc:
        code = exc.code
        error_code = (exc.headers.get("X-Error-Code") or "") if exc.headers is not None else ""
        exc.close()
        if error_code == "RepoNotFound" or (code == 404 and error_code != "EntryNotFound" and error_code != "RevisionNotFound"):
            raise HubError("not-found", f"There is no model {repo_id} on {HUB_HOST} (or it is private); check the id or paste the config.json instead.") from None
        if error_code in ("EntryNotFound", "RevisionNotFound"):
            raise HubError("not-found", f"{repo_id} has no config.json at that revision on {HUB_HOST}; paste the config.json instead.") from None
        if code in (401, 403):
            raise HubError(
                "gated",
                f"{repo_id} is gated or private on {HUB_HOST}; accept its licence on {HUB_HOST}, then paste its config.json instead.",
            ) from None
        raise HubError("unreachable", f"{HUB_HOST} answered HTTP {code}; try again later or paste the config.json instead.") from None
    except Exception as exc:  # URLError, ConnectionError, http.client.HTTPException, ssl and other OSErrors
        if _is_timeout(exc):
            raise HubError("timeout", f"{HUB_HOST} did not answer within {timeout_s:g} s; try again or paste the config.json instead.") from None
        if isinstance(exc, OSError | http.client.HTTPException | ValueError):  # URLError is an OSError
            raise HubError("unreachable", f"Could not reach {HUB_HOST}; check the connection or paste the config.json instead.") from None
        raise
    try:
        return body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise HubError("not-json", f"{repo_id}'s config.json is not UTF-8 text; paste the config.json instead.") from None


def _parse_config(text: str, repo_id: str) -> dict[str, Any]:
    try:
        cfg = loads(text, max_depth=MAX_CONFIG_DEPTH)
    except JSONProblem as exc:
        if "levels deep" in str(exc):  # parsed, but deeper than any model config (what recurses over it would break)
            raise HubError("not-config", f"{repo_id}'s config.json {exc}, where a model config nests 2-4; paste the model's config.json instead.") from None
        cfg = None
    if not isinstance(cfg, dict):
        raise HubError("not-json", f"{repo_id}'s config.json is not a JSON object; paste the config.json instead.")
    if "model_type" not in cfg and "architectures" not in cfg:
        raise HubError(
            "not-config",
            f"{repo_id}'s config.json has neither model_type nor architectures, so it is not a model config; paste the model's config.json instead.",
        )
    return cfg


def _read_safetensors(body: bytes) -> tuple[int | None, str | None]:
    try:
        info = json.loads(body.decode("utf-8-sig"))
    except (ValueError, RecursionError):
        return None, None
    st = info.get("safetensors") if isinstance(info, dict) else None
    if not isinstance(st, dict):
        return None, None
    total = st.get("total")
    params = total if isinstance(total, int) and not isinstance(total, bool) and 0 < total <= MAX_PARAMS else None
    counts = st.get("parameters")
    dtype = None
    if isinstance(counts, dict):
        valid = {k: v for k, v in counts.items() if _DTYPE_RE.match(k) and isinstance(v, int) and not isinstance(v, bool) and v > 0}
        if valid:
            dtype = max(valid, key=lambda k: valid[k])
    return params, dtype


def _api_result(request: _Request) -> tuple[int | None, str | None] | None:
    """The parameter count and dtype from the Hub API request; (None, None) when it failed (HubError for a refused
    redirect, HTTP, network, size), None when it did not end in time."""
    try:
        return _read_safetensors(request.wait())
    except TimeoutError:
        return None
    except Exception as exc:
        if isinstance(exc, urllib.error.HTTPError):
            exc.close()
        return None, None


def fetch_hub_model(repo_id: str, *, base_url: str = HUB_BASE_URL, timeout_s: float = 5.0, revision: str = "main") -> HubModel:
    """config.json of `repo_id` at `revision`, with the exact parameter count and main dtype when the Hub API gives
    them. Raises HubError (see module docstring); ValueError for a base_url off the allow-list."""
    origin = _check_base_url(base_url)
    repo_id = _check_repo_id(repo_id)
    revision = _check_revision(revision)
    key = (origin.url, repo_id, revision)
    cached = _cache_get(key)
    if cached is not None:
        return _copy(cached)

    if not _fetch_slots.acquire(timeout=max(float(timeout_s), 0.01)):
        raise HubError("timeout", "The server is fetching other models' configs right now; try again in a moment, or paste the config.json.")
    try:
        return _fetch(origin, repo_id, revision, key, timeout_s)
    finally:
        _fetch_slots.release()


def _fetch(origin: _Origin, repo_id: str, revision: str, key: tuple[str, str, str], timeout_s: float) -> HubModel:
    base = origin.url
    config_url = f"{base}/{repo_id}/resolve/{revision}/config.json"
    api_url = f"{base}/api/models/{repo_id}" + ("" if revision == "main" else f"/revision/{revision}") + "?expand=safetensors"
    deadline = _Deadline(max(float(timeout_s), 0.01))
    try:
        config_request = _Request(origin, config_url, deadline, MAX_HUB_CONFIG_BYTES)
        api_request = _Request(origin, api_url, deadline, MAX_HUB_API_BYTES)
        config_request.start()
        api_request.start()
        text = _fetch_config(config_request, repo_id, timeout_s)
        cfg = _parse_config(text, repo_id)
        api = _api_result(api_request)
    finally:
        if config_request.is_alive() or api_request.is_alive():
            deadline.expire()  # a failed config request leaves nothing to wait for: end the other one now
        deadline.cancel()
    params, dtype = api if api is not None else (None, None)
    model = HubModel(repo_id=repo_id, config_text=text, config=cfg, params=params, dtype=dtype, source_url=config_url)
    if api is not None:  # an API answer that did not come in time is asked for again next time
        _cache_put(key, replace(model, config={}))  # the text alone (_copy parses it again)
    return model
