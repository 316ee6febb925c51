"""Broadcast: a live session published to an RTMP(S) ingest while it plays.

The Playout hands every tick, the picture the viewer sees and its 40 ms of sound, to a
tap; the tap writes it to the publisher process (server/publish/rtmp_publisher.py), which
encodes H.264 (a keyframe every 2 s exactly, constant 25 fps, the codec parameters in
the FLV header) and AAC and writes FLV to the ingest, both stamped from the tick number.
Nothing here waits on the ingest: the event loop only writes to a pipe, at most
BUFFER_TICKS ahead (a stalled ingest loses ticks, never our memory); a publisher that
does not take the stream within OPEN_TIMEOUT_S, or stalls for STALL_S, is killed.
An ingest that drops or cannot be reached is tried again with backoff, each failure a
`broadcast_error` event with a reason code, never the other side's words.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.config import FPS
from server.child import next_message
from server.publish.retry import PublishFailed, keep_publishing, reporter
from server.publish.rtmp_publisher import encode_tick
from server.publish.targets import Target
from server.stream.playout import Playout
from server.stream.video_path import Picture

OPEN_TIMEOUT_S = 10.0  # connect, handshake and stream header
STALL_S = 10.0  # an ingest that takes nothing for this long has gone
END_TIMEOUT_S = 5.0  # the publisher's last packets, then it is killed
BUFFER_TICKS = FPS  # a second of raw ticks in the pipe at most


class Broadcast:
    """Publishes a session to one RTMP(S) ingest through its own process, trying again with
    backoff; `emit(type, **fields)` reports to the session's events."""

    def __init__(self, target: Target, playout: Playout, emit: Callable[..., Any]):
        self.target, self.size, self.playout = target, playout.size, playout
        self._report = reporter(target, emit)
        self.dropped = 0  # ticks lost to a full pipe (the ingest or the encoder too slow)
        self._publisher: asyncio.subprocess.Process | None = None
        self._full_since: float | None = None
        self._limit = BUFFER_TICKS * playout.size[0] * playout.size[1] * 3 // 2
        self._task = asyncio.ensure_future(keep_publishing(target, self._report, self._publish))
        playout.taps.append(self.tap)

    def tap(self, index: int, picture: Picture, pcm: np.ndarray) -> None:
        """One tick as the viewer has it (called by the Playout, on the event loop)."""
        publisher = self._publisher
        if publisher is None or publisher.stdin is None or publisher.stdin.is_closing():
            return  # not publishing now (connecting, or waiting to try again)
        if publisher.stdin.transport.get_write_buffer_size() > self._limit:
            self.dropped += 1
            self._full_since = self._full_since or time.monotonic()
            if time.monotonic() - self._full_since > STALL_S:
                publisher.kill()  # the ingest has stopped taking the stream: try again
            return
        self._full_since = None
        publisher.stdin.write(encode_tick(index, picture, pcm))

    async def stop(self) -> None:
        with contextlib.suppress(ValueError):
            self.playout.taps.remove(self.tap)
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        self._report("broadcast_stopped", dropped_ticks=self.dropped)  # ticks a slow ingest cost

    async def _publish(self) -> None:
        """One connection, until it fails (PublishFailed: why, and whether the ingest took the stream)."""
        publisher = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "server.publish.rtmp_publisher", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        assert publisher.stdin is not None
        publisher.stdin.write(json.dumps({"url": self.target.url, "size": list(self.size)}).encode() + b"\n")
        try:
            try:
                first = await asyncio.wait_for(next_message(publisher), OPEN_TIMEOUT_S)
            except TimeoutError:
                raise PublishFailed("timeout") from None
            if not first.get("started"):
                raise PublishFailed(str(first.get("error", "failed")))
            self._publisher = publisher
            self.playout.path.want_keyframe()  # the publisher decodes from here on (where units come from the engine)
            self._report("broadcast_started")
            ended = await next_message(publisher)
            raise PublishFailed(str(ended.get("error", "timeout" if self._full_since else "dropped")), started=True)
        finally:
            graceful = self._publisher is publisher  # a publisher still connecting has nothing to flush
            self._publisher, self._full_since = None, None
            await _end(publisher, graceful)


async def _end(publisher: asyncio.subprocess.Process, graceful: bool) -> None:
    """Close its input (it flushes and closes the stream), killed if it does not exit in time
    or has nothing to flush; reaped either way, also when the caller is being cancelled."""
    assert publisher.stdin is not None
    publisher.stdin.close()
    if not graceful and publisher.returncode is None:
        publisher.kill()
    try:
        await asyncio.shield(asyncio.wait_for(publisher.wait(), END_TIMEOUT_S))
    except (TimeoutError, asyncio.CancelledError):
        if publisher.returncode is None:
            publisher.kill()
        await asyncio.shield(publisher.wait())
