"""MediaPump: keeps `lead` frames rendered ahead of the clock.

Each chunk takes the next 80 ms of speech (or silence) from the SpeechQueue, renders it
on the engine worker, and queues the frames with that very audio for the Playout. A
motion model that listens ahead (`delay_frames`, its lookahead) returns the motion of
frames that much earlier, so the audio passes through a delay line of as many frames first.
Speech that starts while only idle frames are queued does not wait behind them: all but
one frame of them are dropped and its first chunk is rendered at once. One frame covers the
next tick while the speech renders (two chunks take about 45 ms here, less than a tick
plus its phase): speech is heard at the second tick, not behind a whole chunk of idle frames
(40 ms sooner). Nor does it wait for the lookahead: the first frames of that chunk
would show the idle moments before the speech with their silence, so they are dropped too
(`delay_frames`, 80 ms sooner). The picture skips that much idle motion; the mouth's lead
into the first sound goes with it. Those dropped frames are rendered in the same request as
the first speech chunk, not in one of their own (measured: docs/conversation.md, "The
first chunk of speech").
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

import numpy as np

from engine.config import SAMPLES_PER_FRAME
from server.engines.client import EngineError, RenderSession
from server.stream.playout import AVFrame, Playout
from server.stream.speech_queue import MIRROR, Mark, Piece, SpeechQueue

Sound = tuple[np.ndarray, list[Mark], list[str]]  # one frame's audio, its marks, its utterances


class MediaPump:
    """Renders the next chunk of speech or silence on the engine, `lead` frames ahead of the clock."""

    def __init__(self, engine: RenderSession, speech: SpeechQueue, playout: Playout, closed: asyncio.Event,
                 chunk_frames: int, lead_frames: int, delay_frames: int, echo: bool):
        self.engine, self.speech, self.playout, self.closed = engine, speech, playout, closed
        self.chunk_frames, self.lead, self.echo = chunk_frames, max(lead_frames, chunk_frames), echo
        silent: Sound = (np.zeros(SAMPLES_PER_FRAME, np.int16), [], [])
        self._sound: deque[Sound] = deque([silent] * delay_frames)

    async def run(self, fail: Callable[[str, str], None]) -> None:
        try:
            await self.engine.wait_open()
            chunk_id, first = 0, 0
            while not self.closed.is_set():
                await self._until_a_chunk_fits()
                skip = self._lookahead_to_skip()
                frames = self._frames_to_render(skip)
                piece = self.speech.read(frames * SAMPLES_PER_FRAME)
                rendered = await self.engine.render(chunk_id, first, piece.pcm, frames)
                self._queue_frames(piece, rendered.slots, skip)
                chunk_id, first = chunk_id + 1, first + frames
        except EngineError as exc:
            fail(exc.code, str(exc))
        except asyncio.CancelledError:
            pass

    async def _until_a_chunk_fits(self) -> None:
        """Until a chunk fits within the lead, or speech starts (see the module docstring)."""
        while self.playout.buffered + self.chunk_frames > self.lead:
            if self.speech.starting and self.playout.trim_silence(keep=1):
                continue
            self.playout.consumed.clear()
            self.speech.arrived.clear()
            waits = [asyncio.ensure_future(e.wait()) for e in (self.playout.consumed, self.speech.arrived)]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()

    def _lookahead_to_skip(self) -> int:
        """How many of the next chunk's first frames to drop: those that would play the
        silence still in the delay line before an utterance's first sound (see the module
        docstring). None within speech, and none where the frames after them depend on them
        (H.264 made by the engine)."""
        if not self.speech.starting or not self.playout.path.frames_stand_alone:
            return 0
        if any(pcm.any() or marks for pcm, marks, _ in self._sound):
            return 0
        return min(len(self._sound), self.chunk_frames)

    def _frames_to_render(self, skip: int) -> int:
        """A chunk; at an onset, the lookahead frames it drops ride along in the same render
        when that much speech is queued: one request instead of two, each of which waits
        behind the other sessions' chunks on a busy worker."""
        frames = self.chunk_frames + skip
        return frames if skip and self.speech.buffered >= frames * SAMPLES_PER_FRAME else self.chunk_frames

    def _queue_frames(self, piece: Piece, slots: list[int], skip: int = 0) -> None:
        if self.closed.is_set():
            for slot in slots:
                self.engine.release(slot)
            return
        for i, slot in enumerate(slots):
            lo, hi = i * SAMPLES_PER_FRAME, (i + 1) * SAMPLES_PER_FRAME
            marks = [m for m in piece.marks if lo <= m.offset < hi or (m.offset == hi and i == len(slots) - 1)]
            self._sound.append((piece.pcm[lo:hi], marks, piece.utterances))
            pcm, marks, owners = self._sound.popleft()  # the audio of this frame's moment
            if i < skip:
                self.engine.release(slot)
                continue
            utterances = owners if pcm.any() else []
            if self.playout.silenced(owners) or (not self.echo and MIRROR in utterances):
                pcm, marks, utterances = np.zeros_like(pcm), [], []
            self.playout.push(AVFrame(slot, pcm, marks, list(utterances)))
