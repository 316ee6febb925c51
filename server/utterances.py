"""Utterances: the one owner of a session's speech, from its source to its last frame.

Every utterance has one id from its source (text, an LLM's reply, agent audio) to the
playout. Its audio is produced by a task (text and replies) or pushed (agent audio),
queued in the SpeechQueue, rendered, and played; the playout's marks say when it
starts and ends. `interrupt` is the one signal that stops them all: it cancels the
sources, empties the queue, and mutes frames already rendered with that audio.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import numpy as np

from speech.sentences import split_stream
from speech.tts import TextToSpeech, TtsError

from .errors import ApiError
from .events import EventHub
from .playout import Playout
from .speech import Mark, SpeechQueue, new_utterance_id

log = logging.getLogger("server.session")
MIRROR = "mirror"  # the SpeechQueue source id of the user's microphone (never interrupted)


class Utterances:
    """See the module docstring."""

    def __init__(self, session_id: str, speech: SpeechQueue, playout: Playout, hub: EventHub,
                 tts: TextToSpeech, spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task],
                 closed: asyncio.Event, max_queued: int, on_interrupt: Callable[[int], None] | None = None):
        self.session_id, self.speech, self.playout, self.hub, self.tts = session_id, speech, playout, hub, tts
        self.spawn, self.closed, self.max_queued, self.on_interrupt = spawn, closed, max_queued, on_interrupt
        self._speaking: dict[str, int] = {}  # utterance id -> frames played
        self._producers: dict[str, asyncio.Task] = {}  # utterance id -> task feeding its audio
        self._live: set[str] = set()  # utterances fed by pushed audio, still open
        self._texts: dict[str, str] = {}  # utterance id -> text, until it starts playing

    def speak(self, text: str) -> str:
        """Speak `text` sentence by sentence; returns the utterance id."""
        if len(self._producers) >= self.max_queued:
            raise ApiError(429, "speech_queue_full", f"this session already has {self.max_queued} utterances "
                           "waiting (max_queued_utterances); wait for speak_ended or interrupt")
        utterance_id = new_utterance_id()
        self._texts[utterance_id] = text
        self.produce(utterance_id, self.speak_sentences(utterance_id, split_stream(text)))
        return utterance_id

    def produce(self, utterance_id: str, producer: Coroutine[Any, Any, None]) -> None:
        """Run a coroutine that pushes an utterance's audio; it is cancelled by `interrupt`."""
        self._producers[utterance_id] = self.spawn(self._run_producer(utterance_id, producer))

    async def _run_producer(self, utterance_id: str, producer: Coroutine[Any, Any, None]) -> None:
        try:
            await producer
        except TtsError as exc:
            log.warning("session %s: speech synthesis failed: %s", self.session_id, exc)
            self.hub.emit("error", code="tts_failed", message=str(exc))
        finally:
            # interrupt() forgets its producers first: a cancelled one leaves no end mark
            still_ours = self._producers.pop(utterance_id, None) is not None
        if still_ours and not self.closed.is_set():
            self.speech.finish(utterance_id)

    async def speak_sentences(self, utterance_id: str, sentences: AsyncIterator[str]) -> None:
        async for sentence in sentences:
            pcm = await self.tts.synthesize(sentence, owner=self.session_id)
            if not await self.speech.push(utterance_id, pcm):
                return

    def open_live(self) -> str:
        """An utterance fed by pushed audio (the agent socket); `push_audio` and `end_live` follow."""
        utterance_id = new_utterance_id()
        self._live.add(utterance_id)
        return utterance_id

    async def push_audio(self, utterance_id: str, pcm48: np.ndarray) -> bool:
        """Queue pushed audio; False once the utterance was interrupted."""
        if utterance_id not in self._live:
            return False
        return await self.speech.push(utterance_id, pcm48)

    def end_live(self, utterance_id: str) -> None:
        if utterance_id in self._live:
            self._live.discard(utterance_id)
            self.speech.finish(utterance_id)

    @property
    def speaking(self) -> bool:
        return bool(self._speaking or self._producers or self._live or self.speech.buffered)

    def interrupt(self) -> list[str]:
        """Cancel all speech now: its source, queued audio, and audio already rendered."""
        cancelled = set(self._producers) | self._live | set(self.speech.cancel()) | set(self._speaking)
        cancelled.discard(MIRROR)
        self.playout.mute(list(cancelled))  # before the producers' finally blocks: no end marks
        for task in list(self._producers.values()):
            task.cancel()
        self._producers.clear()
        self._live.clear()
        if self.on_interrupt and cancelled:
            self.on_interrupt(len(cancelled))
        for utterance_id in cancelled:
            self._texts.pop(utterance_id, None)
            played = self._speaking.pop(utterance_id, 0)
            self.hub.emit("interrupted", utterance_id=utterance_id, played_ms=played * 40)
        return sorted(cancelled)

    def on_marks(self, marks: list[Mark], utterances: list[str]) -> None:
        """The playout played a frame of `utterances`, with these start and end marks."""
        for utterance_id in utterances:
            if utterance_id in self._speaking:
                self._speaking[utterance_id] += 1
        for mark in marks:
            if mark.kind == "start" and mark.utterance_id not in self.playout.muted:
                self._speaking[mark.utterance_id] = 0
                self.hub.emit("speak_started", utterance_id=mark.utterance_id)
                text = self._texts.pop(mark.utterance_id, None)
                if text:
                    self.hub.emit("transcript", role="avatar", text=text, final=True,
                                  utterance_id=mark.utterance_id)
            elif mark.kind == "end" and self._speaking.pop(mark.utterance_id, None) is not None:
                self.hub.emit("speak_ended", utterance_id=mark.utterance_id)
