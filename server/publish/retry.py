"""What both publishers (RTMP and WHIP) share: their events, and trying again with backoff.

A publisher's `attempt` publishes until its connection fails and raises PublishFailed with
the reason code the events carry (never the other side's words), its status where the
ingest answered one, and whether the ingest had taken the stream: a drop after that starts
the backoff again from its first step.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from server.publish.targets import Target

log = logging.getLogger("server.publish.broadcast")
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0)  # then every 15 s until stopped


class PublishFailed(Exception):
    def __init__(self, reason: str, status: int | None = None, started: bool = False):
        super().__init__(reason)
        self.reason, self.status, self.started = reason, status, started


class Publisher(Protocol):
    """A running broadcast of a session (RTMP or WHIP); it ends with `stop`."""

    async def stop(self) -> None: ...


def reporter(target: Target, emit: Callable[..., Any]) -> Callable[..., None]:
    """A publisher's events: each names the target without its secrets (`url`, and `target`, its older name)."""
    def report(kind: str, **fields: Any) -> None:
        emit(kind, url=target.public, target=target.public, **fields)
    return report


async def keep_publishing(target: Target, report: Callable[..., None], attempt: Callable[[], Awaitable[None]]) -> None:
    """Run `attempt` again and again until cancelled, a `broadcast_error` and a wait after each failure."""
    failures = 0
    while True:
        try:
            await attempt()
        except PublishFailed as exc:
            failures = 0 if exc.started else failures + 1
            wait = BACKOFF_S[min(max(failures - 1, 0), len(BACKOFF_S) - 1)]
            log.warning("broadcast to %s failed (%s); trying again in %.0f s", target.public, exc.reason, wait)
            status = {"status": exc.status} if exc.status else {}
            report("broadcast_error", reason=exc.reason, retry_in_s=wait, **status)
            await asyncio.sleep(wait)
