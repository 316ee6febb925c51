"""One helper process for blocking work, started when first needed, ended after `idle_s`
without work (None: kept), and replaced after it dies: the next call gets a fresh one."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")


class HelperProcess:
    def __init__(self, idle_s: float | None = None):
        self.idle_s = idle_s
        self._pool: ProcessPoolExecutor | None = None
        self._idle: asyncio.TimerHandle | None = None

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in the helper. Raises BrokenProcessPool if it died doing so."""
        if self._idle is not None:
            self._idle.cancel()
        if self._pool is None:
            self._pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"))
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool, fn, *args)
        except BrokenProcessPool:
            self._pool = None
            raise
        finally:
            if self.idle_s is not None:
                self._idle = loop.call_later(self.idle_s, self._end)

    def close(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        self._end(wait=True)

    def _end(self, wait: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=wait, cancel_futures=True)
            self._pool = None
