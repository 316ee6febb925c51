"""Utterances: the one owner of a session's speech, from its source to its last frame.

Every utterance has one id from its source (text, an LLM's reply, agent audio) to the
playout, and one record (Utterance) while it matters: its text, the task producing its
audio or whether it is pushed live, and the frames played since its start mark. Its
audio is queued in the SpeechQueue, rendered, and played; the playout's marks say when
it starts and ends. `interrupt` is the one signal that stops them all: it cancels the
sources, empties the queue, and mutes frames already rendered with that audio.

Every utterance id given out has one sequence of events (docs/api.md, "Utterances"):
`speak_started` and `playback_started` once its first frame plays (never for one cut
before it played), `interrupted {played_ms}` if it is cut (by an interrupt or by its
session's end), then always `speak_ended {interrupted}` and `playback_finished
{position_ms, interrupted}` (LiveKit's avatar protocol's meaning), once each.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from media.clock import FRAME_MS, SAMPLE_RATE
from server.errors import ApiError
from server.events import EventHub
from server.stream.playout import Playout
from server.stream.speech_queue import MIRROR, Mark, SpeechQueue, new_utterance_id
from speech.sentences import split_stream
from speech.tts import TextToSpeech, TtsError

log = logging.getLogger("server.session")
MIRROR_BACKLOG = SAMPLE_RATE * 3 // 10  # 300 ms: older microphone audio is dropped, not queued
HEAD_START_S = 0.15
"""An utterance's second piece is read once its first begins to play, or this long after
the first was queued: piper would otherwise read it on the cores rendering the first frames.
Short, because on a loaded server the second piece then waits in piper's queue behind other
sessions' sentences (measured: docs/conversation.md, "The head start")."""


@dataclass
class Utterance:
    """What is known of one utterance while it is still anybody's business."""

    text: str | None = None  # its text, reported as a transcript once it starts playing
    producer: asyncio.Task | None = None  # the task feeding its audio, while that runs
    live: bool = False  # fed by pushed audio, and not yet ended by its source
    played: int | None = None  # frames played since its start mark; None before or after
    playing: asyncio.Event = field(default_factory=asyncio.Event)  # set at its start mark


class Utterances:
    """A session's speech by utterance id: speak, push live audio, interrupt, and the events
    of each utterance's one sequence as the playout's marks play."""

    def __init__(self, session_id: str, speech: SpeechQueue, playout: Playout, hub: EventHub,
                 tts: TextToSpeech, spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task],
                 closed: asyncio.Event, max_queued: int, on_interrupt: Callable[[int], None] | None = None):
        self.session_id, self.speech, self.playout, self.hub, self.tts = session_id, speech, playout, hub, tts
        self.spawn, self.closed, self.max_queued, self.on_interrupt = spawn, closed, max_queued, on_interrupt
        self._all: dict[str, Utterance] = {}  # by id, from its id to its speak_ended
        self._heard: deque[str] = deque(maxlen=8)  # the latest utterances whose audio began to play

    def speak(self, text: str) -> str:
        """Speak `text` sentence by sentence; returns the utterance id."""
        if sum(u.producer is not None for u in self._all.values()) >= self.max_queued:
            raise ApiError(429, "speech_queue_full", f"this session already has {self.max_queued} utterances "
                           "waiting (max_queued_utterances); wait for speak_ended or interrupt")
        utterance_id = new_utterance_id()
        self._all[utterance_id] = Utterance(text=text)
        self.produce(utterance_id, self.speak_sentences(utterance_id, split_stream(text)))
        return utterance_id

    def produce(self, utterance_id: str, producer: Coroutine[Any, Any, None]) -> None:
        """Run a coroutine that pushes an utterance's audio; it is cancelled by `interrupt`."""
        task = self.spawn(self._run_producer(utterance_id, producer))
        self._all.setdefault(utterance_id, Utterance()).producer = task

    async def _run_producer(self, utterance_id: str, producer: Coroutine[Any, Any, None]) -> None:
        try:
            await producer
        except TtsError as exc:
            log.warning("session %s: speech synthesis failed: %s", self.session_id, exc)
            self.hub.emit("error", code="tts_failed", message=str(exc))
        finally:
            # interrupt() forgets its producers first: a cancelled one leaves no end mark
            u = self._all.get(utterance_id)
            still_ours = u is not None and u.producer is not None
            if u is not None:
                u.producer = None
        if still_ours and not self.closed.is_set():
            self.speech.finish(utterance_id)

    async def speak_sentences(self, utterance_id: str, sentences: AsyncIterator[str]) -> None:
        first = True
        async for sentence in sentences:
            pcm = await self.tts.synthesize(sentence, owner=self.session_id)
            if not await self.speech.push(utterance_id, pcm):
                return
            if first:
                first = False
                await self._until_playing(utterance_id)

    async def _until_playing(self, utterance_id: str) -> None:
        """Until the utterance's first frame plays, at most HEAD_START_S."""
        if (u := self._all.get(utterance_id)) is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(u.playing.wait(), HEAD_START_S)

    def open_live(self) -> str:
        """An utterance fed by pushed audio (the agent socket); `push_audio` and `end_live` follow."""
        utterance_id = new_utterance_id()
        self._all[utterance_id] = Utterance(live=True)
        return utterance_id

    def mirror(self, pcm48: np.ndarray) -> None:
        """Mirror mode's source: the user's voice, as it arrives, one endless live stream that
        no interrupt stops and that never lags more than MIRROR_BACKLOG behind."""
        self.speech.push_live(MIRROR, pcm48, MIRROR_BACKLOG)

    async def push_audio(self, utterance_id: str, pcm48: np.ndarray) -> bool:
        """Queue pushed audio; False once the utterance was interrupted."""
        u = self._all.get(utterance_id)
        if u is None or not u.live:
            return False
        return await self.speech.push(utterance_id, pcm48)

    def end_live(self, utterance_id: str) -> None:
        u = self._all.get(utterance_id)
        if u is not None and u.live:
            u.live = False
            self.speech.finish(utterance_id)

    def heard(self, utterance_id: str) -> bool:
        """Whether the utterance's audio began to play (of the latest few)."""
        return utterance_id in self._heard

    def played_ms(self, utterance_id: str) -> int | None:
        """How much of the utterance has played, while it plays; None before and after."""
        u = self._all.get(utterance_id)
        return None if u is None or u.played is None else u.played * FRAME_MS

    @property
    def speaking(self) -> bool:
        return bool(self._all) or bool(self.speech.buffered)

    def interrupt(self) -> list[str]:
        """Cancel all speech now: its source, queued audio, and audio already rendered."""
        cancelled = self._cut()
        if self.on_interrupt and cancelled:
            self.on_interrupt(len(cancelled))
        return cancelled

    def end(self) -> None:
        """The session ends: what is still to be spoken is cut, and every sequence finished."""
        self._cut()

    def _cut(self) -> list[str]:
        cancelled = sorted((set(self._all) | set(self.speech.cancel())) - {MIRROR})
        self.playout.mute(cancelled)  # before the producers' finally blocks: no end marks
        for u in self._all.values():
            if u.producer:
                u.producer.cancel()
            u.producer, u.live = None, False
        for utterance_id in cancelled:
            self._finished(utterance_id, self._all.pop(utterance_id, Utterance()).played or 0, cut=True)
        return cancelled

    def _finished(self, utterance_id: str, played: int, cut: bool) -> None:
        """The end of every utterance's sequence: played through, or cut after `played` frames."""
        played_ms = played * FRAME_MS
        if cut:
            self.hub.emit("interrupted", utterance_id=utterance_id, played_ms=played_ms)
        self.hub.emit("speak_ended", utterance_id=utterance_id, interrupted=cut)
        self.hub.emit("playback_finished", utterance_id=utterance_id, position_ms=played_ms, interrupted=cut)

    def on_marks(self, marks: list[Mark], utterances: list[str]) -> None:
        """The playout played a frame of `utterances`, with these start and end marks."""
        for utterance_id in utterances:
            if (u := self._all.get(utterance_id)) is not None and u.played is not None:
                u.played += 1
        for mark in marks:
            u = self._all.get(mark.utterance_id)
            if u is None:
                continue  # cut (and muted): its sequence is finished already
            if mark.kind == "start":
                u.played, text, u.text = 0, u.text, None
                u.playing.set()
                self._heard.append(mark.utterance_id)
                self.hub.emit("speak_started", utterance_id=mark.utterance_id)
                self.hub.emit("playback_started", utterance_id=mark.utterance_id)
                if text:
                    self.hub.emit("transcript", role="avatar", text=text, final=True,
                                  utterance_id=mark.utterance_id)
            elif mark.kind == "end" and u.played is not None:
                del self._all[mark.utterance_id]
                self._finished(mark.utterance_id, u.played, cut=False)
