"""Security guard rails: no raw HTML, no code execution or unpickling in the app
and the core, and hosting settings that fit a public deployment."""

from __future__ import annotations

import io
import re
import tokenize
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([ROOT / "app.py", *(ROOT / "app_pages").rglob("*.py"), *(ROOT / "core").rglob("*.py")])

# pattern -> why it is banned. Checked on code with comments removed (strings are kept: a banned keyword passed
# as a dict key or a keyword-argument string must still be caught).
BANNED = {
    r"unsafe_allow_html\s*=\s*(?!False\b)": "raw HTML from st.markdown & co. (XSS through user-controlled text)",
    r"\bst\.html\s*\(": "st.html renders raw HTML",
    r"\bcomponents(\.v1)?\.html\s*\(": "components.html renders raw HTML and script in an iframe",
    r"\bcomponents(\.v1)?\.iframe\s*\(": "embeds an arbitrary page",
    r"\bpickle\b|\bcPickle\b|\bdill\b|\bshelve\b|\bmarshal\b": "unpickling runs code; scenarios and configs are JSON",
    r"(?<![\w.])eval\s*\(": "eval runs code",
    r"(?<![\w.])exec\s*\(": "exec runs code",
    r"trust_remote_code": "downloads and runs a model repository's Python",
    r"\b__import__\s*\(": "dynamic import",
    r"\byaml\.load\s*\((?![^)]*SafeLoader)": "yaml.load without SafeLoader constructs arbitrary objects",
    r"\bos\.system\s*\(|\bsubprocess\b": "the app and the core have no reason to run programs",
}


def code_without_comments(path: Path) -> str:
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline) if t.type != tokenize.COMMENT]
    return tokenize.untokenize(tokens)


def test_the_scan_covers_the_app():
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    assert {"app.py", "app_pages/memory.py", "app_pages/shared/sidebar.py", "core/cli.py", "core/scenario.py"} <= names


# The one exception, line for line: rerun.exec_page runs the app's own page files (a path from app.py's page table,
# checked to be a .py file directly in app_pages/), as Streamlit's Page.run() does; it cannot use Page.run(), which
# runs once a run of the app (issue 28). tests/app/test_st_private.py checks that it refuses any other path.
ALLOWED = {("app_pages/shared/rerun.py", r"(?<![\w.])exec\s*\("): "exec(_page_code(file, version), module.__dict__)"}


@pytest.mark.parametrize("pattern", sorted(BANNED))
def test_no_banned_construct(pattern):
    hits = []
    for path in SOURCES:
        for n, line in enumerate(code_without_comments(path).splitlines(), 1):
            if re.search(pattern, line) and ALLOWED.get((path.relative_to(ROOT).as_posix(), pattern)) != line.strip():
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, f"{BANNED[pattern]}:\n" + "\n".join(hits)


@pytest.mark.parametrize(
    ("snippet", "banned"),
    [
        ("st.markdown(x, unsafe_allow_html=True)", True),
        ("st.markdown(x, unsafe_allow_html = flag)", True),
        ("st.markdown(x, unsafe_allow_html=False)", False),
        ('st.html("<b>")', True),
        ("components.v1.html(s)", True),
        ("import pickle", True),
        ("model.eval()", False),
        ("x = eval(s)", True),
        ("exec(code)", True),
        ("self.executor(x)", False),
        ('AutoConfig.from_pretrained(r, **{"trust_remote_code": True})', True),
        ("retrieval(x)", False),
    ],
)
def test_the_patterns_catch_what_they_should(snippet, banned):
    assert any(re.search(p, snippet) for p in BANNED) == banned


@pytest.fixture(scope="module")
def config() -> dict:
    with (ROOT / ".streamlit" / "config.toml").open("rb") as fh:
        return tomllib.load(fh)


def test_xsrf_and_cors_protection(config):
    assert config["server"]["enableXsrfProtection"] is True
    assert config["server"]["enableCORS"] is True


def test_error_details_are_not_shown_to_visitors(config):
    assert config["client"]["showErrorDetails"] in ("none", "type")


def test_toolbar_is_viewer_only(config):
    assert config["client"]["toolbarMode"] == "viewer"


def test_uploads_are_small(config):
    assert 0 < config["server"]["maxUploadSize"] <= 5  # MB; a scenario or config.json is a few kB


def test_no_usage_statistics(config):
    assert config["browser"]["gatherUsageStats"] is False


def test_no_file_watcher(config):
    assert config["server"]["fileWatcherType"] == "none"


def test_experimental_and_unsafe_server_features_stay_off(config):
    server = config.get("server", {})
    assert server.get("enableAgentApi", False) is False, "the agent API lets any HTTP client drive sessions"
    assert not server.get("unsafeMetricsUserAttributes"), "would publish user attributes on the unauthenticated /_stcore/metrics"
    assert server.get("enableStaticServing", False) is False
    assert not server.get("cookieSecret"), "the cookie secret comes from the environment (STREAMLIT_SERVER_COOKIE_SECRET), not the repo"


def test_no_secrets_file_in_the_repo():
    assert not (ROOT / ".streamlit" / "secrets.toml").exists()
