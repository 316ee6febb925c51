"""The session's outgoing WebRTC tracks, paced by the Playout's media clock."""

from __future__ import annotations

import fractions
import time
from collections.abc import Callable

import av
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from media.clock import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME, VIDEO_CLOCK
from server.bitrate import BitrateControl
from server.stream.playout import Playout

AUDIO_PTIME = 0.020
AUDIO_SAMPLES = SAMPLES_PER_FRAME // 2  # 20 ms at 48 kHz


class _PacedTrack(MediaStreamTrack):
    """Releases unit n at t0 + n * period; skips ahead instead of queueing when late."""

    period = 1.0

    def __init__(self, playout: Playout):
        super().__init__()
        self.playout = playout
        self._next = 0
        self.sent = 0
        self.last_late = 0.0  # seconds the latest unit left after its media time

    async def _wait_unit(self) -> int:
        if self.readyState != "live":
            raise MediaStreamError
        if self._next == 0:
            await self.playout.ready.wait()  # a viewer's first picture is a real frame
        late = await self.playout.clock.wait_for(self._next * self.period)
        skip = int(late / self.period) if late > 2 * self.period else 0
        # A stalled sender rejoins the clock instead of building a backlog.
        unit = self._next + skip
        self._next = unit + 1
        self.sent += 1
        self.last_late = late - skip * self.period
        return unit


class AvatarVideoTrack(_PacedTrack):
    kind = "video"
    period = 1 / FPS

    def __init__(self, playout: Playout, ceiling: int, on_first_frame: Callable[[], None] | None = None):
        super().__init__(playout)
        self.first_frame_at: float | None = None
        self._on_first_frame = on_first_frame
        self.bitrate = BitrateControl(ceiling)  # this viewer's link, up to the configured video_bitrate
        self.keyframe_wanted: Callable[[], None] = lambda: None  # an engine that encodes is told of PLIs

    async def recv(self) -> av.VideoFrame | av.Packet:
        tick = await self._wait_unit()
        frame = self.playout.video(tick)  # a Packet when the engine compresses on its own node
        frame.pts = tick * (VIDEO_CLOCK // FPS)
        frame.time_base = fractions.Fraction(1, VIDEO_CLOCK)
        if self.first_frame_at is None:
            self.first_frame_at = time.monotonic()
            if self._on_first_frame:
                self._on_first_frame()
        return frame


class AvatarAudioTrack(_PacedTrack):
    kind = "audio"
    period = AUDIO_PTIME

    async def recv(self) -> av.AudioFrame:
        unit = await self._wait_unit()
        pcm = self.playout.audio(unit // 2, unit % 2)
        frame = av.AudioFrame.from_ndarray(pcm.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = SAMPLE_RATE
        frame.pts = unit * AUDIO_SAMPLES
        frame.time_base = fractions.Fraction(1, SAMPLE_RATE)
        return frame
