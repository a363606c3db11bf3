"""Long texts a session keeps (its price list, its Compare set), compressed and stored once for every session that
holds the same text (issue #25).

A link's blobs arrive compressed and were kept inflated in each session: a hostile link at the budgets is about
330 kB of text a session, and a room of 100 on one link held 100 copies. Each run also compressed them all again
(zlib level 9) to write the link. A Blob keeps the text deflated, once per distinct text in the process (a table
by SHA-256 digest whose entries live as long as some session holds them: weak references, so the table is bounded
by what the live sessions hold and needs no eviction), and its link token is the same bytes, base64url-encoded:
no compression per run.
"""

from __future__ import annotations

import base64
import hashlib
import threading
import weakref
import zlib


class Blob:
    """A text, deflated (zlib level 9, as the link's blobs): `text()` inflates it, `token()` is its link form."""

    __slots__ = ("__weakref__", "digest", "packed")

    def __init__(self, digest: bytes, packed: bytes) -> None:
        self.digest, self.packed = digest, packed

    def text(self) -> str:
        return zlib.decompress(self.packed).decode("utf-8")

    def token(self) -> str:
        return base64.urlsafe_b64encode(self.packed).decode()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Blob) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __reduce__(self):  # a copy (Streamlit may deep-copy session state) is the same stored blob
        return (_restore, (self.digest, self.packed))


_lock = threading.Lock()
_store: weakref.WeakValueDictionary[bytes, Blob] = weakref.WeakValueDictionary()


def _restore(digest: bytes, packed: bytes) -> Blob:
    with _lock:
        found = _store.get(digest)
        if found is None:
            found = _store[digest] = Blob(digest, packed)
        return found


def store(text: str) -> Blob:
    """The Blob of `text`: the one already held by some session for the same text, else a new one."""
    raw = text.encode("utf-8")
    digest = hashlib.sha256(raw).digest()
    with _lock:
        found = _store.get(digest)
    if found is not None:
        return found
    return _restore(digest, zlib.compress(raw, 9))


def stored_count() -> int:
    """How many distinct texts the live sessions hold."""
    return len(_store)
