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
import queue
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import av
import numpy as np

from media.clock import SAMPLES_PER_FRAME
from media.frame_size import FrameSize, frame_dims

SILENCE = np.zeros(SAMPLES_PER_FRAME, np.int16)
MUTED_KEPT = 64  # cancelled ids only matter while their audio may still be in flight


def put_dropping_oldest(to: queue.Queue, item: Any) -> bool:
    """Queue `item` for a tap's thread without waiting: when the queue is full its oldest
    item goes (a tap runs on the event loop and must never block it). Whether one went."""
    dropped = False
    while True:
        try:
            to.put_nowait(item)
            return dropped
        except queue.Full:
            try:
                to.get_nowait()
                dropped = True
            except queue.Empty:  # the thread took one meanwhile
                pass


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

    def __init__(self, frame_of: Callable[[int], Any], release: Callable[[int], None],
                 on_marks: Callable[[list, list[str]], None], size: FrameSize, encoded: bool = False,
                 on_gap: Callable[[], None] = lambda: None):
        """`frame_of(slot)`: a raw I420 frame, or with `encoded` an H.264 access unit; an
        encoded frame that is never sent calls `on_gap` (the next one must be a keyframe)."""
        self.clock = MediaClock()
        self.size = frame_dims(size)  # (width, height)
        self.queue: deque[AVFrame] = deque()
        self.consumed = asyncio.Event()
        self.ready = asyncio.Event()  # set by the first rendered frame: the clock starts there
        self.stats = PlayoutStats()
        self.muted: dict[str, None] = {}  # recently cancelled utterances, oldest first (bounded)
        self._frame_of, self._release, self._on_marks = frame_of, release, on_marks
        self._tick = -1
        self._video = av.VideoFrame(*self.size, "yuv420p")
        self._audio: dict[int, np.ndarray] = {}
        self.encoded, self._on_gap = encoded, on_gap
        self._packets: dict[int, bytes] = {}  # tick -> its access unit, until the video track takes it
        # each tick as played, its picture and sound (broadcast, added viewers): the picture is
        # a frame, or when encoded the tick's access unit (empty while the engine is late)
        self.taps: list[Callable[[int, av.VideoFrame | bytes, np.ndarray], None]] = []

    def push(self, frame: AVFrame) -> None:
        self.queue.append(frame)
        self.ready.set()

    @property
    def buffered(self) -> int:
        return len(self.queue)

    def video(self, tick: int) -> av.VideoFrame | av.Packet:
        """Tick k's picture: the latest frame (held while none is fresh), or when encoded
        the access unit made for tick k (empty while none is: aiortc then sends nothing)."""
        self._advance(tick)
        if not self.encoded:
            return self._video
        return av.Packet(self._packets.pop(tick, b""))

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
            picture = self._packets.get(self._tick, b"") if self.encoded else self._video
            for tap in self.taps:
                tap(self._tick, picture, self._audio[self._tick])
            self._audio.pop(self._tick - 3, None)
            if self._packets.pop(self._tick - 3, None) is not None:  # the video track fell behind
                self._on_gap()
            self.consumed.set()

    def _take(self, entry: AVFrame) -> None:
        self.stats.played += 1
        if self.encoded:
            self._packets[self._tick] = self._frame_of(entry.slot)
        else:
            self._video = av.VideoFrame.from_ndarray(self._frame_of(entry.slot), format="yuv420p")
        self._release(entry.slot)
        self._audio[self._tick] = entry.pcm
        if entry.marks or entry.utterances:
            self._on_marks(entry.marks, entry.utterances)

    def trim_silence(self, keep: int) -> int:
        """Drop the latest queued frames beyond `keep` while they carry no speech, so speech
        that starts now does not wait behind idle frames rendered ahead; how many went. The
        picture skips that much idle motion (a few pixels). Encoded frames reference the
        ones before: the next one must be a keyframe."""
        dropped = 0
        while len(self.queue) > keep and not (self.queue[-1].utterances or self.queue[-1].marks):
            self._release(self.queue.pop().slot)
            dropped += 1
        if dropped and self.encoded:
            self._on_gap()
        return dropped

    def drain(self) -> None:
        """Release every queued slot (session end)."""
        while self.queue:
            self._release(self.queue.popleft().slot)
