"""Avatar files shipped to Ray actors by content, on the first call that finds one missing."""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from engine.runtime.avatar_cache import AvatarMissing, digest, suffix_of
from engine.runtime.ray_actor import AvatarKey
from server.engines.client import EngineError

KNOWN_AVATARS = 64  # digests remembered by (path, mtime, size): a clip is read once, not per session


class AvatarShipping:
    """Avatars as the actors know them, by content (engine/runtime/avatar_cache.py): the
    file goes to an actor's node the first time an actor there lacks it."""

    def __init__(self) -> None:
        self._keys: OrderedDict[tuple[str, int, int], AvatarKey] = OrderedDict()

    async def key(self, path: str) -> AvatarKey:
        try:
            stat = os.stat(path)
            known = (path, stat.st_mtime_ns, stat.st_size)
            if known not in self._keys:
                self._keys[known] = (digest(await asyncio.to_thread(Path(path).read_bytes)), suffix_of(Path(path).name))
                while len(self._keys) > KNOWN_AVATARS:
                    self._keys.popitem(last=False)
        except OSError as exc:
            raise EngineError("bad_avatar", f"cannot read avatar {Path(path).name}: {exc.strerror}") from None
        self._keys.move_to_end(known)
        return self._keys[known]

    async def call(self, actor: Any, path: str, method: Callable[[AvatarKey], Awaitable[Any]]) -> Any:
        """`method(key)` on the actor; if its node lacks the avatar, the file, then once more."""
        import ray

        key = await self.key(path)
        try:
            return await method(key)
        except ray.exceptions.RayTaskError as exc:
            if not isinstance(exc.cause, AvatarMissing):
                raise
        data = await asyncio.to_thread(Path(path).read_bytes)
        await actor.store_avatar.options(concurrency_group="ship").remote(key, data)
        return await method(key)
