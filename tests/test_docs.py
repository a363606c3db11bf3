"""The README is a front door (at most 12 KB; the rest lives in docs/), and every relative link in the README and
docs/ resolves: to a file or folder of the repository, and to a heading of a Markdown file when it names one."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[1]
README_LIMIT_BYTES = 12 * 1024
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but hyphens and spaces dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", text, re.M)}


def relative_links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]  # no http:, mailto: ...


def broken(path: Path, root: Path = ROOT) -> list[str]:
    bad = []
    for target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / unquote(file_part)).resolve() if file_part else path
        if not dest.exists() or root not in (dest, *dest.parents):
            bad.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target} (no such heading)")
    return bad


def test_readme_is_a_front_door():
    size = (ROOT / "README.md").stat().st_size
    assert size <= README_LIMIT_BYTES, f"README.md is {size:,} bytes; move detail to docs/ (limit {README_LIMIT_BYTES:,})"


def test_the_readme_links_the_docs():
    links = set(relative_links(ROOT / "README.md"))
    assert {"docs/ARCHITECTURE.md", "docs/PERFORMANCE.md", "docs/DEPLOY.md"} <= links


def test_every_relative_link_resolves():
    assert len(documents()) >= 4
    bad = {str(p.relative_to(ROOT)): b for p in documents() if (b := broken(p))}
    assert not bad, bad


def test_the_link_check_can_fail(tmp_path):
    (tmp_path / "a.md").write_text("# Top part\n[ok](#top-part) [gone](missing.md) [no heading](#nowhere) [web](https://x.org)\n")
    found = broken(tmp_path / "a.md", root=tmp_path)
    assert found == ["missing.md (no such file)", "#nowhere (no such heading)"]
