"""Per-session event fan-out to WebSocket subscribers, with bounded queues."""

from __future__ import annotations

import asyncio
import time
from typing import Any

QUEUE_LIMIT = 256  # a subscriber that stops reading loses its oldest events, never our memory


def event(session_id: str, type_: str, **fields: Any) -> dict:
    """One docs/api.md event: its type, the session, server wall time, then its own fields."""
    return {"type": type_, "session_id": session_id, "t": time.time(), **fields}


class EventHub:
    """Publishes docs/api.md events for one session."""

    def __init__(self, session_id: str):
        self.session_id = session_id
        self._subscribers: set[asyncio.Queue] = set()

    def subscribe(self) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue(QUEUE_LIMIT)
        self._subscribers.add(queue)
        return queue

    def unsubscribe(self, queue: asyncio.Queue) -> None:
        self._subscribers.discard(queue)

    def emit(self, type_: str, **fields: Any) -> dict:
        message = event(self.session_id, type_, **fields)
        for queue in self._subscribers:
            if queue.full():
                queue.get_nowait()  # drop oldest
            queue.put_nowait(message)
        return message

    def close(self) -> None:
        for queue in self._subscribers:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(None)  # end of stream
