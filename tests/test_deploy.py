"""The container image runs what the README runs, as a non-root user, with a
health check; the build context leaves out what the image must not carry."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    logical = ""
    for line in text.splitlines():
        if not logical and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            logical += line.rstrip()[:-1] + " "
            continue
        logical += line
        word, _, args = logical.strip().partition(" ")
        out.append((word.upper(), args.strip()))
        logical = ""
    return out


def argv(args: str) -> list[str]:
    """A CMD/ENTRYPOINT in exec (JSON) or shell form as a word list."""
    return json.loads(args) if args.startswith("[") else shlex.split(args)


def streamlit_target(words: list[str]) -> str:
    i = words.index("run")
    assert words[i - 1].endswith("streamlit"), words
    return words[i + 1]


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return instructions((ROOT / "Dockerfile").read_text())


def readme_run_command() -> list[str]:
    """The `streamlit run ...` part of the README's 'Run the app' command."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Run the app", 1)[1].split("\n## ", 1)[0]
    command = re.search(r"```(?:bash|sh)?\n(.*?)```", section, re.S).group(1)
    part = next(p for p in re.split(r"&&|;|\n", command) if "streamlit run" in p)
    return shlex.split(part)


def test_cmd_runs_the_readme_app(dockerfile):
    cmds = [args for word, args in dockerfile if word == "CMD"]
    assert cmds, "the Dockerfile has no CMD"
    words = argv(cmds[-1])
    assert streamlit_target(words) == streamlit_target(readme_run_command()) == "app.py"
    assert (ROOT / streamlit_target(words)).is_file()
    assert "--server.port=8501" in words and "--server.address=0.0.0.0" in words
    assert not [args for word, args in dockerfile if word == "ENTRYPOINT"], "an ENTRYPOINT would change what CMD runs"


def test_runs_as_a_non_root_user(dockerfile):
    users = [args for word, args in dockerfile if word == "USER"]
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users[-1]
    last_user = max(i for i, (word, _) in enumerate(dockerfile) if word == "USER")
    assert last_user > max(i for i, (word, _) in enumerate(dockerfile) if word in ("RUN", "COPY", "ADD")), "USER comes after the build steps"


def test_healthcheck_on_the_streamlit_health_endpoint(dockerfile):
    checks = [args for word, args in dockerfile if word == "HEALTHCHECK"]
    assert len(checks) == 1
    assert "/_stcore/health" in checks[0] and "8501" in checks[0]
    assert "curl" not in checks[0] and "wget" not in checks[0], "python:3.11-slim has neither"


def test_base_port_and_requirements(dockerfile):
    assert dockerfile[0] == ("FROM", "python:3.11-slim")
    assert ("EXPOSE", "8501") in dockerfile
    assert any(word == "RUN" and "pip install" in args and "-r requirements.txt" in args for word, args in dockerfile)


def test_no_secret_baked_into_the_image(dockerfile):
    env = " ".join(args for word, args in dockerfile if word in ("ENV", "ARG"))
    assert "COOKIE_SECRET" not in env.upper()


def test_build_context_keeps_the_app_and_drops_the_rest(dockerfile):
    ignored = {line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line.strip() and not line.startswith("#")}
    assert {".git", "tests", ".streamlit/secrets.toml"} <= ignored
    copied = [args.split()[0] for word, args in dockerfile if word == "COPY"]
    for path in copied:
        assert path not in ignored and (ROOT / path).exists(), f"COPY {path}: missing or excluded by .dockerignore"
    assert {"app.py", "app_pages", "core", "data", ".streamlit/config.toml", "requirements.txt"} <= set(copied)


def test_no_pages_folder_beside_app_py():
    """A `pages/` folder next to app.py makes a fresh server's first run use legacy multipage mode (broken deep links)."""
    assert not (ROOT / "pages").exists()


def test_deploy_guide_covers_replicas():
    guide = (ROOT / "docs" / "DEPLOY.md").read_text()
    for needle in ("STREAMLIT_SERVER_COOKIE_SECRET", "/_stcore/health", "/_stcore/metrics", "maxUploadSize", "Community Cloud", "session-affinity", "affinity"):
        assert needle in guide, needle
