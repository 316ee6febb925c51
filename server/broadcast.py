"""Broadcast: a live session published to an RTMP(S) ingest while it plays.

The Playout hands every tick, the picture the viewer sees and its 40 ms of sound, to a
tap; the tap queues them (at most QUEUE_TICKS: a stalled ingest loses the oldest, never
our memory) for a thread of this broadcast's own that encodes H.264 (a keyframe every
2 s exactly, constant 25 fps, the codec parameters in the FLV header) and AAC, and
writes FLV to the ingest. Both streams are stamped from the tick number: one media
clock, as the WebRTC tracks have. An ingest that drops or cannot be reached is tried
again with backoff; each try that fails is a `broadcast_error` event with its reason.
Nothing here runs on the event loop but the tap, which only queues.
"""

from __future__ import annotations

import asyncio
import fractions
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import av
import numpy as np

from engine.config import FPS, SAMPLE_RATE, SAMPLES_PER_FRAME
from engine.runtime.h264 import add_live_streams

from .errors import ApiError
from .playout import Playout, hand_on

log = logging.getLogger("server.broadcast")
SCHEMES = ("rtmp", "rtmps", "https", "http")  # http(s): a WHIP ingest (server/whip.py)
QUEUE_TICKS = 2 * FPS
BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 15.0)  # then every 15 s until stopped
OPEN_TIMEOUT_S = 5.0


def parse_target(url: object) -> str:
    """The ingest URL, or the API's 400 saying what is accepted."""
    if not isinstance(url, str) or urlsplit(url).scheme not in SCHEMES or not urlsplit(url).hostname:
        raise ApiError(400, "bad_url", "'url' must be an RTMP(S) ingest (rtmp://host/app/stream-key) or a "
                       "WHIP endpoint (https://host/whip)")
    return url


def public(url: str) -> str:
    """The ingest without its stream key (an RTMP URL's last path part) or query, fit for events and logs."""
    parts = urlsplit(url)
    app = parts.path.rsplit("/", 1)[0] if parts.scheme.startswith("rtmp") else parts.path
    return f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{app}"


@dataclass
class Tick:
    index: int
    video: av.VideoFrame | bytes  # bytes: an access unit encoded on a Ray engine's node
    pcm: np.ndarray


class Broadcast:
    """See the module docstring. `emit(type, **fields)` reports to the session's events."""

    def __init__(self, url: str, playout: Playout, emit: Callable[..., Any]):
        self.url, self.size, self.playout = url, playout.size, playout
        self._loop = asyncio.get_running_loop()
        self._emit = emit
        self._ticks: queue.Queue[Tick] = queue.Queue(QUEUE_TICKS)
        self._stop = threading.Event()
        self.dropped = 0  # ticks lost to a full queue (the ingest or the encoder too slow)
        self._pictures = _Pictures(self.size)
        self._thread = threading.Thread(target=self._run, name="broadcast", daemon=True)
        self._thread.start()
        playout.taps.append(self.tap)

    def tap(self, index: int, video: av.VideoFrame | bytes, pcm: np.ndarray) -> None:
        """One tick as the viewer has it (called by the Playout, on the event loop)."""
        if hand_on(self._ticks, Tick(index, video, pcm)):
            self.dropped += 1

    async def stop(self) -> None:
        self.playout.taps.remove(self.tap)
        self._stop.set()
        await asyncio.to_thread(self._thread.join, 10)

    def _report(self, kind: str, **fields: Any) -> None:
        self._loop.call_soon_threadsafe(lambda: self._emit(kind, target=public(self.url), **fields))

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._publish()
                break
            except (av.FFmpegError, OSError) as exc:
                wait = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
                failures += 1
                log.warning("broadcast to %s failed: %s; trying again in %.0f s", public(self.url), exc, wait)
                self._report("broadcast_error", reason=str(exc), retry_in_s=wait)
                self._stop.wait(wait)
        self._report("broadcast_stopped", dropped_ticks=self.dropped)  # ticks a slow ingest cost

    def _publish(self) -> None:
        out = av.open(self.url, "w", format="flv", timeout=OPEN_TIMEOUT_S)
        try:
            video, audio = add_live_streams(out, self.size)
            self._report("broadcast_started")
            first: int | None = None
            while not self._stop.is_set():
                try:
                    tick = self._ticks.get(timeout=0.5)
                except queue.Empty:
                    continue
                first = tick.index if first is None else first
                self._write(out, video, audio, tick, tick.index - first)
            for stream in (video, audio):
                for packet in stream.encode(None):
                    out.mux(packet)
        finally:
            out.close()

    def _write(self, out: Any, video: Any, audio: Any, tick: Tick, n: int) -> None:
        picture = self._pictures.of(tick.video)
        picture.pts, picture.time_base = n, fractions.Fraction(1, FPS)
        for packet in video.encode(picture):
            out.mux(packet)
        sound = av.AudioFrame.from_ndarray(tick.pcm.reshape(1, -1), format="s16", layout="mono")
        sound.sample_rate, sound.pts = SAMPLE_RATE, n * SAMPLES_PER_FRAME
        sound.time_base = fractions.Fraction(1, SAMPLE_RATE)
        for packet in audio.encode(sound):
            out.mux(packet)


class _Pictures:
    """Each tick's picture as a frame of our own: a copy of the playout's (its video track
    stamps its own pts on that one), or the Ray engine's access unit decoded. A tick the
    engine was late for repeats the last picture: the stream stays at a constant rate."""

    def __init__(self, size: int):
        self._decoder: av.VideoCodecContext | None = None
        self._last: np.ndarray = np.zeros((size * 3 // 2, size), np.uint8)

    def of(self, video: av.VideoFrame | bytes) -> av.VideoFrame:
        if isinstance(video, av.VideoFrame):
            self._last = video.to_ndarray()
        elif video:
            self._decoder = self._decoder or av.CodecContext.create("h264", "r")
            try:
                for frame in self._decoder.decode(av.Packet(video)):
                    self._last = frame.to_ndarray(format="yuv420p")
            except av.FFmpegError:  # units before the first keyframe (asked for at the start) do not decode
                pass
        return av.VideoFrame.from_ndarray(self._last, format="yuv420p")
