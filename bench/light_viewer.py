"""A viewer that keeps only arrival times and timestamps (no pixels): for soak and load runs."""

from __future__ import annotations

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
