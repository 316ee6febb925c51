"""FrameLog: the media times a receiving track saw, so a test measures frame rates in
media time (RTP timestamps) instead of against a wall-clock sleep.

A receiver in a busy test process on a loaded 2-core machine gets its frames late and in
bursts; counting them over a fixed sleep measures that process, not the sender. The media
time of what arrived says what the sender sent: a skipped tick (the sender's own drop
policy under load) leaves a gap in it, a late receiver does not.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

KEPT = 2048  # frames remembered: over a minute of video
RTP_WRAP = 2**32  # a receiver's pts is the RTP timestamp, which starts anywhere and wraps


class FrameLog:
    def __init__(self) -> None:
        self.count = 0
        self._pts: deque[int] = deque(maxlen=KEPT)  # in arrival order
        self._time_base = 0.0

    def add(self, frame) -> None:
        self.count += 1
        self._pts.append(frame.pts)
        self._time_base = float(frame.time_base)

    def rate_since(self, count: int) -> float:
        """Frames per second of media time over the frames received after the first `count`."""
        pts = list(self._pts)[-(self.count - count):] if self.count > count else []
        span = ((pts[-1] - pts[0]) % RTP_WRAP) * self._time_base if len(pts) > 1 else 0.0
        return (len(pts) - 1) / span if span > 0 else 0.0

    async def rate(self, frames: int, timeout: float = 20) -> float:
        """The media-time rate over the next `frames` frames to arrive."""
        start, deadline = self.count, time.monotonic() + timeout
        while self.count < start + frames:
            if time.monotonic() > deadline:
                raise TimeoutError(f"received {self.count - start} of {frames} frames in {timeout} s")
            await asyncio.sleep(0.02)
        return self.rate_since(start)
