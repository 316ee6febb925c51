"""A viewer that keeps only arrival times and timestamps (no pixels): for soak and load runs."""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque

from aiortc.mediastreams import MediaStreamError

from avatar_client import AvatarViewer

KEEP = 30_000  # about 20 minutes of video arrivals


class LightViewer(AvatarViewer):
    def __init__(self, url: str):
        super().__init__(url, keep_frames=1)
        self.video_times: deque[tuple[float, float]] = deque(maxlen=KEEP)  # (arrival, media seconds)
        self.audio_times: deque[tuple[float, float]] = deque(maxlen=KEEP * 2)
        self.fresh_fps = 0.0  # from the server's latest stats event (see watch_stats)

    async def watch_stats(self) -> None:
        """Follow the session's stats events in the background."""
        ws = await self.events()

        async def follow() -> None:
            async for msg in ws:
                event = json.loads(msg.data)
                if event["type"] == "stats":
                    self.fresh_fps = event["fresh_fps"]

        self._tasks.append(asyncio.ensure_future(follow()))

    async def _read(self, track) -> None:
        try:
            while True:
                frame = await track.recv()
                now = time.monotonic()
                media = float(frame.pts * frame.time_base)
                if track.kind == "video":
                    self.video_count += 1
                    self.video_times.append((now, media))
                else:
                    self.audio_times.append((now, media))
        except MediaStreamError:
            pass
