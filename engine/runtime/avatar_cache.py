"""AvatarCache: a node's copies of the avatars its Ray engine actors serve.

A front end and an engine actor may be on different machines, so an avatar crosses
by content, never by path: the front end names it by digest, an actor that has no
copy says AvatarMissing, and the front end sends the file once per node. The actors
of one node share the copies (written whole, then renamed into place); the oldest
ones not in use go when the copies pass their byte limit, so the disk stays bounded.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

DIGEST_CHARS = 32
LIMIT_BYTES = 2 << 30  # a few hundred photos and a dozen long video avatars


class AvatarMissing(Exception):
    """This node has no copy of the avatar yet: the front end sends it (`store`)."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]


def suffix_of(name: str) -> str:
    """Everything after the first dot: a video avatar's ".clip.npz" stays whole."""
    return name[name.index("."):] if "." in name else ""


class AvatarCache:
    def __init__(self, root: Path | None = None, limit: int = LIMIT_BYTES):
        self.root = root or Path(tempfile.gettempdir()) / "avatar-server-avatars"
        self.limit = limit
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, key: str, suffix: str) -> Path:
        """The local copy of avatar `key`, marked as just used; AvatarMissing if there is none."""
        path = self.root / f"{key}{suffix}"
        try:
            os.utime(path)
        except FileNotFoundError:
            raise AvatarMissing(key) from None
        return path

    def store(self, key: str, suffix: str, data: bytes, keep: Iterable[str] = ()) -> None:
        if digest(data) != key:
            raise ValueError(f"avatar {key} arrived damaged")
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".incoming-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, self.root / f"{key}{suffix}")
        self.evict({*keep, key})

    def evict(self, keep: set[str]) -> None:
        """Oldest first, until the copies fit `limit`; never those in `keep` (in use here).
        Half-written files of an actor that died while writing go after an hour."""
        for stale in self.root.glob(".incoming-*"):
            if time.time() - _mtime(stale) > 3600:
                stale.unlink(missing_ok=True)
        files = sorted((p for p in self.root.iterdir() if not p.name.startswith(".")), key=_mtime)
        total = sum(_size(p) for p in files)
        for path in files:
            if total <= self.limit:
                break
            if path.name.split(".")[0] not in keep:
                total -= _size(path)
                path.unlink(missing_ok=True)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:  # another actor of this node evicted it
        return 0.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
