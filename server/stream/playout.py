"""Playout: the one media clock of a session and the frames it releases.

Ticks are 40 ms video frames counted from t0, the wall-clock instant the first
track asked for media. Tick k carries video frame k and audio samples
[k*1920, (k+1)*1920): both tracks ask the Playout for their tick and get pieces of
the same entry, so the audio heard is exactly the audio that drove the face seen.
If the engine is late, the last picture is held with silence (counted); the
timeline then resumes where it was, so lateness never accumulates into a queue.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import av
import numpy as np

from media.clock import SAMPLES_PER_FRAME
from media.frame_size import FrameSize, frame_dims
from server.stream.video_path import Picture, VideoPath

SILENCE = np.zeros(SAMPLES_PER_FRAME, np.int16)
MUTED_KEPT = 64  # cancelled ids only matter while their audio may still be in flight


@dataclass
class AVFrame:
    """One rendered frame (a ring slot) and the 40 ms of audio that drove it."""

    slot: int
    pcm: np.ndarray
    marks: list = field(default_factory=list)
    utterances: list[str] = field(default_factory=list)


class MediaClock:
    """Wall-clock times of ticks, shared by the audio and video tracks."""

    def __init__(self) -> None:
        self.t0: float | None = None

    def start(self) -> float:
        if self.t0 is None:
            self.t0 = time.monotonic()
        return self.t0

    async def wait_for(self, seconds: float) -> float:
        """Sleep until `seconds` after t0; return how late we woke (seconds)."""
        due = self.start() + seconds
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        return time.monotonic() - due


@dataclass
class PlayoutStats:
    played: int = 0
    held: int = 0  # ticks with no fresh frame: picture held, audio silent
    skipped: int = 0  # frames consumed unseen because a track fell behind the clock


class Playout:
    """Hands out tick k to both tracks; see the module docstring."""

    def __init__(self, path: VideoPath, release: Callable[[int], None],
                 on_marks: Callable[[list, list[str]], None], size: FrameSize):
        """`path` turns the engine's slots into what the tracks send (server/stream/video_path.py)."""
        self.clock = MediaClock()
        self.size = frame_dims(size)  # (width, height)
        self.queue: deque[AVFrame] = deque()
        self.consumed = asyncio.Event()
        self.ready = asyncio.Event()  # set by the first rendered frame: the clock starts there
        self.stats = PlayoutStats()
        self.muted: dict[str, None] = {}  # recently cancelled utterances, oldest first (bounded)
        self.path, self._release, self._on_marks = path, release, on_marks
        self._tick = -1
        self._audio: dict[int, np.ndarray] = {}
        # each tick as played, its picture and sound (broadcast, added viewers)
        self.taps: list[Callable[[int, Picture, np.ndarray], None]] = []

    def push(self, frame: AVFrame) -> None:
        self.queue.append(frame)
        self.ready.set()

    @property
    def buffered(self) -> int:
        return len(self.queue)

    def video(self, tick: int) -> av.VideoFrame | av.Packet:
        """Tick k's picture, as its path sends it."""
        self._advance(tick)
        return self.path.sent(tick)

    def audio(self, tick: int, half: int) -> np.ndarray:
        self._advance(tick)
        pcm = self._audio.get(tick, SILENCE)
        n = SAMPLES_PER_FRAME // 2
        return pcm[half * n : (half + 1) * n]

    def mute(self, utterances: list[str]) -> None:
        """Silence queued frames of cancelled utterances (their pictures still play out), and
        frames of theirs rendered later (`silenced`)."""
        self.muted.update(dict.fromkeys(utterances))
        while len(self.muted) > MUTED_KEPT:
            del self.muted[next(iter(self.muted))]
        for entry in self.queue:
            if self.silenced(entry.utterances):
                entry.pcm = SILENCE
                entry.marks = []

    def silenced(self, utterances: list[str]) -> bool:
        """Whether audio of these utterances was cancelled: the one test of muting."""
        return bool(self.muted.keys() & set(utterances))

    def _advance(self, tick: int) -> None:
        while self._tick < tick:
            self._tick += 1
            entry = self.queue.popleft() if self.queue else None
            if entry is None:
                self.stats.held += 1
                self._audio[self._tick] = SILENCE
            else:
                if self._tick < tick:
                    self.stats.skipped += 1
                self._take(entry)
            if self.taps:
                picture = self.path.tapped(self._tick)
                for tap in self.taps:
                    tap(self._tick, picture, self._audio[self._tick])
            self._audio.pop(self._tick - 3, None)
            self.path.passed(self._tick - 3)
            self.consumed.set()

    def _take(self, entry: AVFrame) -> None:
        self.stats.played += 1
        self.path.take(self._tick, entry.slot)
        self._release(entry.slot)
        self._audio[self._tick] = entry.pcm
        if entry.marks or entry.utterances:
            self._on_marks(entry.marks, entry.utterances)

    def trim_silence(self, keep: int) -> int:
        """Drop the latest queued frames beyond `keep` while they carry no speech, so speech
        that starts now does not wait behind idle frames rendered ahead; how many went. The
        picture skips that much idle motion (a few pixels)."""
        dropped = 0
        while len(self.queue) > keep and not (self.queue[-1].utterances or self.queue[-1].marks):
            self._release(self.queue.pop().slot)
            dropped += 1
        if dropped:
            self.path.frames_dropped()
        return dropped

    def drain(self) -> None:
        """Release every queued slot (session end)."""
        while self.queue:
            self._release(self.queue.popleft().slot)
