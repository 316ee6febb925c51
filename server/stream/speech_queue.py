"""SpeechQueue: the session's pending speech audio, 48 kHz mono int16, per utterance.

Every source (TTS today; microphone and agent audio later) pushes here. The media
pump reads fixed-size pieces; silence fills the gaps. Marks tell the playout where
each utterance starts and ends so events fire when the audio is actually played.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from media.clock import SAMPLE_RATE

MAX_BUFFERED_S = 20.0  # producers wait beyond this; memory stays bounded
MIRROR = "mirror"  # the source id of the user's microphone (mirror mode): live, never interrupted


def new_utterance_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass
class Mark:
    offset: int  # sample offset inside the piece read
    kind: str  # "start" | "end"
    utterance_id: str


@dataclass
class Piece:
    pcm: np.ndarray
    marks: list[Mark] = field(default_factory=list)
    utterances: list[str] = field(default_factory=list)  # whose audio is in this piece


@dataclass
class _Segment:
    utterance_id: str
    pcm: np.ndarray  # may be empty: a bare end marker
    first: bool
    last: bool


class SpeechQueue:
    """Bounded FIFO of utterance audio; see the module docstring."""

    def __init__(self, max_seconds: float = MAX_BUFFERED_S):
        self._segments: deque[_Segment] = deque()
        self._offset = 0  # samples already read from the head segment
        self._started: set[str] = set()
        self._limit = int(max_seconds * SAMPLE_RATE)
        self._space = asyncio.Event()
        self._space.set()
        self._epoch = 0  # bumped by cancel: pushes waiting across it are dropped
        self.closed = False
        self.arrived = asyncio.Event()  # set when an utterance's first audio is queued

    @property
    def starting(self) -> bool:
        """An utterance's first audio is next to be read."""
        return bool(self._segments) and self._segments[0].first and self._offset == 0

    @property
    def buffered(self) -> int:
        return sum(len(s.pcm) for s in self._segments) - self._offset

    async def push(self, utterance_id: str, pcm: np.ndarray) -> bool:
        """Queue audio, waiting while more than the limit is buffered. False (nothing
        queued) when the queue was cancelled or closed while waiting: that audio belongs
        to speech that was interrupted."""
        epoch = self._epoch
        while self.buffered > self._limit and not self.closed:
            self._space.clear()
            await self._space.wait()
        if epoch != self._epoch or self.closed:
            return False
        first = utterance_id not in self._started
        self._started.add(utterance_id)
        self._segments.append(_Segment(utterance_id, pcm.astype(np.int16), first, False))
        if first:
            self.arrived.set()
        return True

    def push_live(self, source: str, pcm: np.ndarray, max_backlog: int) -> None:
        """Append a live stream (a microphone): no start/end marks, and never more than
        `max_backlog` samples behind, so clock drift between peers cannot build latency."""
        self._segments.append(_Segment(source, pcm.astype(np.int16), False, False))
        backlog = sum(len(seg.pcm) for seg in self._segments if seg.utterance_id == source)
        while backlog > max_backlog:
            oldest = next(seg for seg in self._segments if seg.utterance_id == source)
            if oldest is self._segments[0]:
                self._offset = 0
            self._segments.remove(oldest)
            backlog -= len(oldest.pcm)

    def finish(self, utterance_id: str) -> None:
        """No more audio for this utterance: its end mark follows its last sample."""
        first = utterance_id not in self._started
        self._started.discard(utterance_id)
        self._segments.append(_Segment(utterance_id, np.zeros(0, np.int16), first, True))

    def cancel(self) -> list[str]:
        """Drop everything queued; the utterance ids that had audio pending."""
        ids = list(dict.fromkeys(s.utterance_id for s in self._segments))
        self._segments.clear()
        self._offset = 0
        self._started.clear()
        self._epoch += 1
        self._space.set()
        return ids

    def close(self) -> None:
        """Drop everything and release every waiting producer (the session ended)."""
        self.closed = True
        self.cancel()

    def read(self, n: int) -> Piece:
        """Exactly n samples: queued speech first, then silence."""
        piece = Piece(np.zeros(n, np.int16))
        filled = 0
        while self._segments and filled <= n:
            seg = self._segments[0]
            if seg.first and self._offset == 0:
                piece.marks.append(Mark(filled, "start", seg.utterance_id))
            take = min(n - filled, len(seg.pcm) - self._offset)
            if take > 0:
                piece.pcm[filled : filled + take] = seg.pcm[self._offset : self._offset + take]
                if seg.utterance_id not in piece.utterances:
                    piece.utterances.append(seg.utterance_id)
            filled += take
            self._offset += take
            if self._offset < len(seg.pcm):
                break
            if seg.last:
                piece.marks.append(Mark(filled, "end", seg.utterance_id))
            self._segments.popleft()
            self._offset = 0
            if filled == n and self._segments and len(self._segments[0].pcm) > 0:
                break
        if self.buffered <= self._limit:
            self._space.set()
        return piece
